"""Step models of replicas that run several batches at once: pipeline lanes and attention data-parallel ranks.

Both keep R batches in one step of the simulator's running set, each with its own token budget, and the step
lasts as long as its busiest one:

* **Pipeline lanes** (:class:`LanedStepModel`, R = micro-batches in flight, :mod:`roofline.pipeline`): the
  running rows spread over min(R, rows) lanes; every lane is one pass through every stage, and the lanes follow
  each other through the stages, so every row gets its next token one busiest-lane pass later.
* **Attention data parallelism** (:class:`DPStepModel`, R = dp ranks of tp GPUs, ``Scenario.dp``): each rank runs
  the attention, dense and shared-expert layers, the router and the expert exchange on its own requests; the
  routed experts run on every rank's tokens (wide EP), and every MoE layer waits for the slowest rank (SGLang
  ``dp_attention.py`` pads the ranks to the largest; TensorRT-LLM runs a dummy request on an idle rank). A step
  costs the busiest rank's own ops (:func:`rank_ops`) plus the experts' at all ranks' tokens
  (:func:`expert_ops`): ``predict``'s rule (:mod:`roofline.ops.expert_parallel`), so a decode batch alone, or one
  request, gets the same step in both.

The busiest batch: ⌈d / min(R, d)⌉ of the d decode rows, and the step's largest prefill chunk (each request's
chunk runs in one batch; the engine gives each batch its own budget, so the simulator's step admits R budgets of
new tokens, at most one budget per request: ``EngineSim.max_chunk``). A batch's own decode rows ride on top of
its chunk (each rank's budget covers its rows too in the engines: at most max_num_seqs / R more tokens a step).
The attended-token sums of the busiest batch are its share of the running set's. Requests are not pinned to a
batch: the running set is one pool (one KV pool, for DP ranks the sum of theirs), which leaves out the
fragmentation of R separate pools.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from roofline.ops.builder import build_ops
from roofline.ops.records import Op, Phase
from roofline.pipeline import lane_rows
from roofline.profile import CalibrationProfile
from roofline.serving.sim.phase import compile_phase
from roofline.serving.sim.steptime import StepModel
from roofline.serving.sim.stretch import Stretch
from roofline.specs.hardware import HardwareSpec
from roofline.specs.model import ModelSpec
from roofline.specs.scenario import Scenario

#: Ops that run on every DP rank's tokens (all else runs on one rank's): the routed experts and, with the experts
#: tensor-parallel over all ranks' GPUs (ep = 1), the gather and scatter of the ranks' tokens around them.
EXPERT_PREFIX = ("moe.experts", "comm.moe_gather", "comm.moe_scatter")


def rank_ops(
    model: ModelSpec, sc: Scenario, hw: HardwareSpec, phase: Phase, batch: object, new: object, past: object
) -> list[Op]:
    """One DP rank's own ops for ``batch`` sequences on that rank: the pass of dp × batch sequences (whose busiest
    rank holds ⌈dp·batch/dp⌉ = batch) without the routed experts."""
    ops = build_ops(model, sc, hw, phase, np.asarray(batch, dtype=np.float64) * sc.dp, new, past)
    return [op for op in ops if not op.name.startswith(EXPERT_PREFIX)]


def expert_ops(
    model: ModelSpec, sc: Scenario, hw: HardwareSpec, phase: Phase, batch: object, new: object, past: object
) -> list[Op]:
    """The routed experts' ops of a pass of ``batch`` sequences over all DP ranks (all their tokens), built as one
    row of that many tokens: their cost follows the tokens alone, and their launch (captured graph or eager) the
    rank's step, which the rank's own ops carry."""
    tokens = np.asarray(batch, dtype=np.float64) * np.asarray(new, dtype=np.float64)
    return [op for op in build_ops(model, sc, hw, phase, 1.0, tokens, past) if op.name.startswith(EXPERT_PREFIX)]


class _Ranked(StepModel):
    """Shared rule of :class:`LanedStepModel` and :class:`DPStepModel`: price the busiest of ``ranks`` batches
    (module docstring), plus :meth:`_shared_s` for the work all batches share. One-line decode stretches are off
    (:attr:`line_ok`): every stretch goes through :meth:`decode_affine`, which prices the busiest batch too."""

    ranks: int = 1
    own_pools: bool = False  # each batch holds its own KV pool and max_num_seqs (DP ranks), or they share one

    def _busiest(self, rows: int, spans: Sequence[float]) -> tuple[int, tuple[float, ...]]:
        r = lane_rows(rows, self.ranks)
        f = r / rows if rows else 0.0
        return r, tuple(float(s) * f for s in spans)

    def _shared_s(self, tokens: int, prefill: bool) -> float:
        return 0.0

    def gpu_time(
        self,
        decode_rows: int,
        decode_span: tuple[float, ...],
        prefill_new: Sequence[float] | np.ndarray | None = None,
        prefill_past: Sequence[float] | np.ndarray | None = None,
    ) -> float:
        """GPU seconds of the busiest batch (its decode rows and the step's largest chunk) and the shared work."""
        r, spans = self._busiest(decode_rows, decode_span)
        n = 0 if prefill_new is None else len(prefill_new)
        if not n:
            return super().gpu_time(r, spans) + self._shared_s(decode_rows, False)
        assert prefill_new is not None and prefill_past is not None
        i = max(range(n), key=lambda j: float(prefill_new[j]))
        tokens = decode_rows + int(sum(float(x) for x in prefill_new))
        own = super().gpu_time(r, spans, [float(prefill_new[i])], [float(prefill_past[i])])
        return own + self._shared_s(tokens, True)

    def chunk_step_s(
        self, decode_rows: int, decode_span: tuple[float, ...], chunks: Sequence[tuple[float, float]]
    ) -> float:
        """:meth:`step_time` of the step (chunks as (cached, new) tokens)."""
        return self.step_time(decode_rows, decode_span, [n for _, n in chunks], [p for p, _ in chunks])

    def decode_affine(
        self,
        rows: int,
        span0: tuple[float, ...],
        slope: tuple[float, ...],
        *,
        tokens_per_row: int = 1,
        kv_span0: tuple[float, ...] | None = None,
        kv_slope: tuple[float, ...] | None = None,
        extra_s: float = 0.0,
    ) -> Stretch:
        """The stretch of decode-only steps of the busiest batch, the shared work added to every step."""
        r, s0 = self._busiest(rows, span0)
        s1 = self._busiest(rows, slope)[1]
        k0 = None if kv_span0 is None else self._busiest(rows, kv_span0)[1]
        k1 = None if kv_slope is None else self._busiest(rows, kv_slope)[1]
        extra = extra_s + self._shared_s(rows * tokens_per_row, False)
        return super().decode_affine(r, s0, s1, tokens_per_row=tokens_per_row, kv_span0=k0, kv_slope=k1, extra_s=extra)

    def mean_step_s(
        self, rows: np.ndarray, ctx: float, chunk: np.ndarray | None = None, chunk_past: np.ndarray | None = None
    ) -> np.ndarray:
        """The screening tier's mean step at the busiest batch of a mean population (real-valued rows)."""
        n = np.asarray(rows, dtype=np.float64)
        busiest = np.where(n > 0, n / np.minimum(float(self.ranks), np.maximum(n, 1.0)), n)
        own = super().mean_step_s(busiest, ctx, chunk, chunk_past)
        return own + self._shared_mean_s(n + (0.0 if chunk is None else np.asarray(chunk)), chunk is not None)

    def _shared_mean_s(self, tokens: np.ndarray, prefill: bool) -> np.ndarray:
        return 0.0 * tokens


class LanedStepModel(_Ranked):
    """:class:`StepModel` of a pipeline with ``lanes`` micro-batches in flight (module docstring)."""

    def __init__(self, *args: Any, lanes: int, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.ranks = int(lanes)
        self.line_ok = False


class DPStepModel(_Ranked):
    """:class:`StepModel` of an attention data-parallel replica of ``sc.dp`` ranks (module docstring): the base
    tables are one rank's (:func:`rank_ops`, up to ``max_tokens`` tokens and ``max_rows`` rows of a rank), the
    experts' a table over all ranks' tokens."""

    own_pools = True

    def __init__(
        self,
        model: ModelSpec,
        sc: Scenario,
        hw: HardwareSpec,
        prof: CalibrationProfile,
        max_tokens: int,
        max_rows: int,
        cpu_overhead_s: float = 0.0,
        async_cpu: bool = False,
    ) -> None:
        super().__init__(model, sc, hw, prof, max_tokens, max_rows, cpu_overhead_s, async_cpu, builder=rank_ops)
        self.ranks = int(sc.dp)
        self.line_ok = False
        total = int(max_tokens) * self.ranks
        compile_all = partial(compile_phase, model, sc, hw, prof, max_tokens=total, max_rows=1, overhead_s=0.0)
        self._experts = tuple(compile_all(phase=ph, builder=expert_ops).token_s for ph in ("decode", "prefill"))
        self._experts_l = tuple(t.tolist() for t in self._experts)

    def _shared_s(self, tokens: int, prefill: bool) -> float:
        table = self._experts_l[prefill]
        if tokens >= len(table):
            raise ValueError(f"step of {tokens} tokens over {self.ranks} ranks exceeds the compiled {len(table) - 1}")
        return table[tokens]

    def _shared_mean_s(self, tokens: np.ndarray, prefill: bool) -> np.ndarray:
        t = self._experts[prefill]
        return np.interp(tokens, np.arange(len(t), dtype=np.float64), t)


def ranked_step(
    model: ModelSpec,
    sc: Scenario,
    hw: HardwareSpec,
    prof: CalibrationProfile,
    max_tokens: int,
    max_seqs: int,
    cpu_overhead_s: float,
    async_cpu: bool,
    lanes: int,
) -> StepModel:
    """The step model of a replica: :class:`DPStepModel` with attention DP, :class:`LanedStepModel` with pipeline
    lanes, else :class:`StepModel`. A batch's tables hold its rows on top of a full budget of new tokens."""
    if sc.dp > 1:  # max_seqs and max_tokens are each rank's (the engine's limits hold per rank)
        return DPStepModel(model, sc, hw, prof, max_tokens + max_seqs, max_seqs, cpu_overhead_s, async_cpu)
    if lanes > 1:
        args = (model, sc, hw, prof, max_tokens + max_seqs, max_seqs, cpu_overhead_s, async_cpu)
        return LanedStepModel(*args, lanes=lanes)
    return StepModel(model, sc, hw, prof, max_tokens, max_seqs, cpu_overhead_s, async_cpu)
