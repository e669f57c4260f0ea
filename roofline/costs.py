"""Phase totals from op lists: the sums that predict, sweep and plan all use.

TTFT = Σ_ops count × time(op) + per-step overhead over the prefill ops.
Decode steps j = 1 … O−1 attend contexts P + j; their summed time is computed in
closed form (see ``evaluate.op_time_summed_over_context``), so no Python loop per token.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline.evaluate import BOUNDS, bound_codes, op_time, op_time_summed_over_context
from roofline.ops import decode_ops, prefill_ops
from roofline.ops.records import Op
from roofline.profile import CalibrationProfile
from roofline.specs.hardware import HardwareSpec
from roofline.specs.model import ModelSpec
from roofline.specs.scenario import Scenario


@dataclass(frozen=True)
class PhaseCost:
    """Totals of one phase (per forward pass, or summed over decode steps)."""

    time_s: np.ndarray
    flops: np.ndarray
    memory_bytes: np.ndarray
    bound_time_s: dict[str, np.ndarray]
    steps: np.ndarray

    @property
    def bound(self) -> np.ndarray:
        """Label of the largest share of time: compute, memory, communication or overhead."""
        return BOUNDS[bound_codes(*(self.bound_time_s[b] for b in BOUNDS))]


def step_cost(ops: list[Op], hw: HardwareSpec, prof: CalibrationProfile) -> PhaseCost:
    """One forward step (a prefill pass or one decode step): Σ count × op time + one per-step overhead."""
    time = np.asarray(prof.overheads.per_step_s, dtype=np.float64)
    flops = np.asarray(0.0)
    mem = np.asarray(0.0)
    by = [np.asarray(0.0) for _ in BOUNDS]
    by[3] = by[3] + prof.overheads.per_step_s
    for op in ops:
        t = op_time(op, hw, prof)
        share = op.count * t.time_s
        time = time + share
        flops = flops + op.count * op.flops
        mem = mem + op.count * op.memory_bytes
        _split(by, t.bound_code, share)
    return PhaseCost(time, flops, mem, dict(zip(BOUNDS, by, strict=True)), np.asarray(1.0))


def _split(by: list[np.ndarray], code: np.ndarray, share: np.ndarray) -> None:
    """Add ``share`` to the bucket of its bound code (scalar fast path)."""
    if code.ndim == 0:
        by[int(code)] = by[int(code)] + share
        return
    for i in range(len(by)):
        by[i] = by[i] + np.where(code == i, share, 0.0)


def decode_cost(
    ops: list[Op], hw: HardwareSpec, prof: CalibrationProfile, ctx_lo: np.ndarray, ctx_hi: np.ndarray
) -> PhaseCost:
    """Decode steps at contexts ctx_lo … ctx_hi (inclusive), summed in closed form.

    FLOPs and bytes are summed exactly too (affine in the span); the bound split uses
    each op's bound at the middle context.
    """
    lo, hi = np.asarray(ctx_lo, dtype=np.float64), np.asarray(ctx_hi, dtype=np.float64)
    steps = np.maximum(hi - lo + 1, 0)
    mid = (lo + np.maximum(hi, lo)) / 2
    time = steps * prof.overheads.per_step_s
    flops = np.asarray(0.0)
    mem = np.asarray(0.0)
    by = [np.asarray(0.0) for _ in BOUNDS]
    by[3] = by[3] + time
    for op in ops:
        summed = op.count * op_time_summed_over_context(op, hw, prof, lo, hi)
        time = time + summed
        at_mid = op.at_context(mid)
        flops = flops + op.count * at_mid.flops * steps
        mem = mem + op.count * at_mid.memory_bytes * steps
        _split(by, op_time(at_mid, hw, prof).bound_code, summed)
    return PhaseCost(time, flops, mem, dict(zip(BOUNDS, by, strict=True)), steps)


@dataclass(frozen=True)
class ScenarioCosts:
    """Ops and phase totals of one scenario (arrays broadcast over the scenario grid).

    O output tokens: the first comes from prefill, the other O − 1 from decode steps at
    contexts P + 1 … P + O − 1.
    """

    prefill_ops: list[Op]
    prefill: PhaseCost
    decode_ops: list[Op]
    first_step: PhaseCost
    decode: PhaseCost


@dataclass(frozen=True)
class Latencies:
    """Headline figures of a static batch, assembled once for ``predict`` and ``sweep``.

    ttft = prefill time; decode = Σ decode steps; tpot = decode / (O − 1) (the first step's
    time when O = 1); e2e = ttft + decode; output tok/s = B·O / e2e × replicas; total tok/s
    = B·(P + O) / e2e × replicas; per GPU = output tok/s / GPUs.
    """

    ttft_s: np.ndarray
    tpot_s: np.ndarray
    decode_s: np.ndarray
    e2e_s: np.ndarray
    throughput_tok_s: np.ndarray
    total_throughput_tok_s: np.ndarray
    throughput_tok_s_per_gpu: np.ndarray


def scenario_costs(model: ModelSpec, sc: Scenario, hw: HardwareSpec, prof: CalibrationProfile) -> ScenarioCosts:
    """Prefill ops and cost, decode ops at context P + 1, the first decode step, all decode steps."""
    p = np.asarray(sc.prompt_len, dtype=np.float64)
    o = np.asarray(sc.output_len, dtype=np.float64)
    pre_ops = prefill_ops(model, sc, hw)
    dec_ops = decode_ops(model, sc, hw, p + 1)
    return ScenarioCosts(
        pre_ops, step_cost(pre_ops, hw, prof), dec_ops, step_cost(dec_ops, hw, prof),
        decode_cost(dec_ops, hw, prof, p + 1, p + o - 1),
    )  # fmt: skip


def latencies(costs: ScenarioCosts, sc: Scenario) -> Latencies:
    """The headline figures of :class:`Latencies` from the phase costs (formulas there)."""
    b, p, o = (np.asarray(x, dtype=np.float64) for x in (sc.batch, sc.prompt_len, sc.output_len))
    ttft = np.asarray(costs.prefill.time_s, dtype=np.float64)
    dec = np.asarray(costs.decode.time_s, dtype=np.float64)
    tpot = np.where(o > 1, dec / np.maximum(o - 1, 1), costs.first_step.time_s)
    e2e = ttft + dec
    out = b * o / e2e * sc.replicas
    return Latencies(ttft, tpot, dec, e2e, out, b * (p + o) / e2e * sc.replicas, out / sc.num_gpus)
