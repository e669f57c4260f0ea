"""Phase totals from op lists: the sums that predict, sweep and plan all use.

GPU time of a step = Σ_ops count × time(op) + the profile's per-step overhead; with a run-ahead eager launch
(``overheads.eager_launch``) the step takes max(Σ_ops count × time(op), H) beyond its per-step overhead, H =
Σ_ops count × host launch seconds (:func:`roofline.evaluate.step_host_launch_s`, :func:`with_launch_floor`).
Decode steps j = 1 … O−1 attend contexts P + j; their summed time is computed in closed form (see
``evaluate.op_time_summed_over_context``), so no Python loop per token.

The engine's CPU part c = ``step_overhead_s`` joins every step by the simulator's rule,
:func:`roofline.engine.config.step_seconds`: step = GPU + c, or max(GPU, c) under asynchronous
scheduling (:func:`with_cpu_step`, :func:`with_cpu_decode`). The prefill of a static batch is one step; what the
client sees of these costs is :func:`roofline.latency.latencies`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import cast

import numpy as np

from roofline.bound_split import BoundBuckets, add_in_place
from roofline.engine.config import step_seconds
from roofline.evaluate import BOUNDS, OpTiming, bound_codes, op_time, op_time_summed_over_context, step_host_launch_s
from roofline.ops import decode_ops, prefill_ops
from roofline.ops.expert_parallel import hide_in_split, step_hidden_s
from roofline.ops.records import Op
from roofline.pipeline import lane_batch, laned_costs, pipeline_lanes
from roofline.profile import CalibrationProfile
from roofline.specs.hardware import HardwareSpec
from roofline.specs.model import ModelSpec
from roofline.specs.scenario import Scenario


@dataclass(frozen=True)
class PhaseCost:
    """Totals of one phase (per forward pass, or summed over decode steps).

    ``time_s`` includes ``cpu_s``, the seconds the engine's per-step CPU part adds to the GPU time
    (counted in the ``overhead`` share of ``bound_time_s``).
    """

    time_s: np.ndarray
    flops: np.ndarray
    memory_bytes: np.ndarray
    bound_time_s: dict[str, np.ndarray]
    steps: np.ndarray
    cpu_s: float | np.ndarray = 0.0
    hidden_s: float | np.ndarray = 0.0  # seconds the two-batch overlap hides (already out of time_s)
    launch_s: float | np.ndarray = 0.0  # host launch seconds beyond the GPU work (in time_s and overhead)

    @property
    def bound(self) -> np.ndarray:
        """Label of the largest share of time: compute, memory, communication or overhead."""
        return BOUNDS[bound_codes(*(self.bound_time_s[b] for b in BOUNDS))]


Timings = dict[int, tuple[Op, OpTiming]]
"""op_time of ops already timed on one (hardware, profile), by op object (its id, the op kept with it)."""


def _timed(op: Op, hw: HardwareSpec, prof: CalibrationProfile, memo: Timings | None) -> OpTiming:
    """``op_time(op, hw, prof)``, taken from ``memo`` when this very op object was timed before: a decode
    op that does not grow with the context is the same object in the first step, the closed-form sum
    and the last step. ``memo`` must only ever see one ``hw`` and ``prof``."""
    if memo is None:
        return op_time(op, hw, prof)
    hit = memo.get(id(op))
    if hit is not None and hit[0] is op:
        return hit[1]
    t = op_time(op, hw, prof)
    memo[id(op)] = (op, t)
    return t


def step_cost(
    ops: list[Op], hw: HardwareSpec, prof: CalibrationProfile, memo: Timings | None = None, launch: bool = True
) -> PhaseCost:
    """One forward step (a prefill pass or one decode step): Σ count × op time + one per-step overhead, less what
    a two-batch overlap hides (:func:`_overlapped`), at least the host's run-ahead launches (:func:`with_launch_floor`;
    ``launch`` False: the GPU work alone).

    ``memo`` (:data:`Timings`, for this ``hw`` and ``prof`` only) reuses the timing of ops timed before."""
    timings = [_timed(op, hw, prof, memo) for op in ops]
    cost = _scalar_step_cost(ops, timings, prof.overheads.per_step_s) if ops else None
    if cost is None:
        time = np.asarray(prof.overheads.per_step_s, dtype=np.float64)
        flops = np.asarray(0.0)
        mem = np.asarray(0.0)
        by = BoundBuckets(prof.overheads.per_step_s)
        for op, t in zip(ops, timings, strict=True):
            share = op.count * t.time_s
            time = time + share
            flops = flops + op.count * op.flops
            mem = mem + op.count * op.memory_bytes
            by.add(t.bound_code, share)
        cost = PhaseCost(time, flops, mem, by.done(), np.asarray(1.0))
    if any(op.overlap for op in ops):
        cost = _overlapped(cost, ops, [op.count * t.time_s for op, t in zip(ops, timings, strict=True)])
    return with_launch_floor(cost, prof, step_host_launch_s(ops, prof)) if launch else cost


def with_launch_floor(cost: PhaseCost, prof: CalibrationProfile, host_s: float | np.ndarray) -> PhaseCost:
    """One step's ``cost`` with the host's run-ahead launches H = ``host_s``: the host enqueues the step's kernels
    ahead of the GPU, so the step takes per_step + max(GPU work, H) and max(0, per_step + H − time) is exposed
    (counted as overhead and in ``launch_s``)."""
    if not np.any(np.asarray(host_s) > 0):
        return cost
    exposed = np.maximum(0.0, prof.overheads.per_step_s + host_s - np.asarray(cost.time_s, dtype=np.float64))
    return _add_overhead(cost, exposed, "launch_s") if np.any(exposed > 0) else cost


def _overlapped(cost: PhaseCost, ops: list[Op], shares: list[float | np.ndarray]) -> PhaseCost:
    """``cost`` less the seconds the two-batch overlap hides (:func:`roofline.ops.expert_parallel.step_hidden_s`),
    out of its communication share (:func:`roofline.ops.expert_parallel.hide_in_split`)."""
    hidden = step_hidden_s(ops, shares)
    if hidden is None:
        return cost
    by = hide_in_split(cost.bound_time_s, hidden)
    return replace(cost, time_s=cost.time_s - hidden, bound_time_s=by, hidden_s=hidden)


def _scalar_step_cost(ops: list[Op], timings: list[OpTiming], per_step_s: float) -> PhaseCost | None:
    """:func:`step_cost` of a one-point scenario summed in Python floats (None when an op is an array).

    The same binary64 sums in the same order as the numpy ones, typed as those give them: np.float64
    totals, a bound bucket no op lands in the 0-d array it starts as."""
    time, flops, mem = float(np.asarray(per_step_s, dtype=np.float64)), 0.0, 0.0
    by, hit = [0.0, 0.0, 0.0, 0.0 + per_step_s], [False, False, False, True]
    for op, t in zip(ops, timings, strict=True):
        mb = op.memory_bytes
        if t.time_s.ndim or t.bound_code.ndim or op.flops.ndim or mb.ndim:
            return None
        share = op.count * float(t.time_s)
        time += share
        flops += op.count * float(op.flops)
        mem += op.count * float(mb)
        i = int(t.bound_code)
        by[i] += share
        hit[i] = True
    split = dict(zip(BOUNDS, (_f64(v) if h else np.asarray(0.0) for v, h in zip(by, hit, strict=True)), strict=True))
    return PhaseCost(_f64(time), _f64(flops), _f64(mem), split, np.asarray(1.0))


def _f64(v: float) -> np.ndarray:
    """``v`` as the np.float64 a numpy sum of 0-d arrays gives (typed as the array it stands for)."""
    return cast(np.ndarray, np.float64(v))


def decode_cost(
    ops: list[Op],
    hw: HardwareSpec,
    prof: CalibrationProfile,
    ctx_lo: np.ndarray,
    ctx_hi: np.ndarray,
    memo: Timings | None = None,
    totals: bool = True,
) -> PhaseCost:
    """Decode steps at contexts ctx_lo … ctx_hi (inclusive), summed in closed form.

    FLOPs and bytes are summed exactly too (affine in the span); the bound split uses
    each op's bound at the middle context. ``memo`` as in :func:`step_cost`. ``totals`` False leaves the
    FLOPs and bytes unsummed (NaN) for callers that read only the time and its split (a sweep's grid).
    """
    lo, hi = np.asarray(ctx_lo, dtype=np.float64), np.asarray(ctx_hi, dtype=np.float64)
    steps = np.maximum(hi - lo + 1, 0)
    mid = (lo + np.maximum(hi, lo)) / 2
    time = steps * prof.overheads.per_step_s
    flops = np.asarray(0.0)
    mem = np.asarray(0.0)
    by = BoundBuckets(time)
    shares: list[float | np.ndarray] | None = [] if any(op.overlap for op in ops) else None
    for op in ops:
        at_mid, summed, code = _over_steps(op, hw, prof, lo, hi, mid, steps, memo)
        if shares is not None:
            shares.append(summed)
        time = add_in_place(time, summed)
        if totals:
            flops = add_in_place(flops, op.count * at_mid.flops * steps)
            mem = add_in_place(mem, op.count * at_mid.memory_bytes * steps)
        by.add(code, summed)
    if not totals:
        flops = mem = np.asarray(np.nan)
    cost = PhaseCost(time, flops, mem, by.done(), steps)
    return cost if shares is None else _overlapped(cost, ops, shares)


def _over_steps(
    op: Op,
    hw: HardwareSpec,
    prof: CalibrationProfile,
    lo: np.ndarray,
    hi: np.ndarray,
    mid: np.ndarray,
    steps: np.ndarray,
    memo: Timings | None,
) -> tuple[Op, np.ndarray, np.ndarray]:
    """(``op`` at the middle context, count × its time summed over contexts lo … hi, its bound code there).

    An op whose cost does not grow with the context is the same op at every step: one timing gives
    both its sum (time × steps, as :func:`op_time_summed_over_context`) and its bound. A power-of-two
    count scales the small timing array before it meets the grid: scaling by 2^k only moves the
    exponent, so the product is the same float (op times are far from overflow and the subnormals)."""
    if not op.context_dependent:
        t = _timed(op, hw, prof, memo)
        c = op.count
        if isinstance(c, int) and c > 0 and c & (c - 1) == 0:  # c = 2^k: c·(t·steps) = (c·t)·steps exactly,
            return op, (c * t.time_s) * steps, t.bound_code  # one grid-sized product fewer
        return op, c * (t.time_s * steps), t.bound_code
    at_mid = op.at_context(mid)
    summed = op.count * op_time_summed_over_context(op, hw, prof, lo, hi)
    return at_mid, summed, op_time(at_mid, hw, prof).bound_code


def with_cpu_step(cost: PhaseCost, cpu_s: float, overlapped: bool) -> PhaseCost:
    """``cost`` of one step (a prefill pass, one decode step) with the engine's CPU part c:
    time = step_seconds(GPU, c, overlapped) = GPU + c, or max(GPU, c) when overlapped."""
    if cpu_s == 0:
        return cost
    gpu = np.asarray(cost.time_s, dtype=np.float64)
    return _add_cpu(cost, step_seconds(gpu, cpu_s, overlapped) - gpu)


def with_launch_decode(
    cost: PhaseCost,
    ops: list[Op],
    hw: HardwareSpec,
    prof: CalibrationProfile,
    ctx_lo: np.ndarray,
    ctx_hi: np.ndarray,
    memo: Timings | None = None,
) -> PhaseCost:
    """Decode steps at contexts ctx_lo … ctx_hi (``cost``, from :func:`decode_cost`) with the host's run-ahead
    launches H (:func:`with_launch_floor` step by step): Σ_j max(g_j, per_step + H) (:func:`_floored_sum`)."""
    host = step_host_launch_s(ops, prof)
    if not np.any(np.asarray(host) > 0):
        return cost
    floored = _floored_sum(cost, ops, hw, prof, ctx_lo, ctx_hi, prof.overheads.per_step_s + host, memo)
    return _add_overhead(cost, floored - cost.time_s, "launch_s")


def _floored_sum(
    cost: PhaseCost,
    ops: list[Op],
    hw: HardwareSpec,
    prof: CalibrationProfile,
    ctx_lo: np.ndarray,
    ctx_hi: np.ndarray,
    floor_s: float | np.ndarray,
    memo: Timings | None,
) -> np.ndarray:
    """Σ_j max(g_j, f) over the decode steps of ``cost`` (g_j their GPU seconds, f = ``floor_s``) = n*·f +
    Σ_{j ≥ n*} g_j, n* the leading steps whose GPU time is at most f (GPU time grows with the context), found by
    bisection as the simulator's decode stretches do (:meth:`roofline.serving.sim.stretch.DecodeStretch.total`); the
    rest is summed in closed form. Exact where the step time never falls as the context grows; chunked-attention
    layers (Llama 4), whose span restarts every chunk, break that, and the sum is then within 0.1 % of the
    step-by-step one (measured at f between the 30th and 70th percentile of the steps)."""
    n = np.asarray(cost.steps, dtype=np.float64)
    lo = np.asarray(ctx_lo, dtype=np.float64)
    k = _steps_within(ops, hw, prof, lo, n, floor_s, memo)
    if not np.any(k > 0):
        return np.asarray(cost.time_s, dtype=np.float64)
    rest = decode_cost(ops, hw, prof, lo + k, ctx_hi, memo, totals=False).time_s
    return np.where(k > 0, k * floor_s + rest, cost.time_s)


def with_cpu_decode(
    cost: PhaseCost,
    ops: list[Op],
    hw: HardwareSpec,
    prof: CalibrationProfile,
    ctx_lo: np.ndarray,
    ctx_hi: np.ndarray,
    cpu_s: float,
    overlapped: bool,
    memo: Timings | None = None,
) -> PhaseCost:
    """Decode steps at contexts ctx_lo … ctx_hi (``cost``, from :func:`decode_cost` and :func:`with_launch_decode`)
    with the engine's CPU part c: Σ_j step_seconds(s_j, c) over the n steps (s_j their seconds: GPU g_j, at least
    per_step + H under a run-ahead launch): not overlapped, Σ s_j + n·c; overlapped, Σ max(s_j, c) =
    Σ max(g_j, max(c, per_step + H)) (:func:`_floored_sum`), which only c above the launch floor changes.
    """
    if cpu_s == 0:
        return cost
    n = np.asarray(cost.steps, dtype=np.float64)
    if not overlapped:
        return _add_cpu(cost, n * cpu_s)
    launch = prof.overheads.per_step_s + step_host_launch_s(ops, prof)
    floor = np.maximum(cpu_s, launch)
    if not np.any(floor > launch):
        return cost
    total = _floored_sum(cost, ops, hw, prof, ctx_lo, ctx_hi, floor, memo)
    return _add_cpu(cost, total - cost.time_s)


def _steps_within(
    ops: list[Op],
    hw: HardwareSpec,
    prof: CalibrationProfile,
    lo: np.ndarray,
    n: np.ndarray,
    floor_s: float | np.ndarray,
    memo: Timings | None,
) -> np.ndarray:
    """Per grid point, the first step j in 0 … n whose GPU time (context lo + j) exceeds ``floor_s`` (n if none)."""
    first = np.asarray(step_cost([op.at_context(lo) for op in ops], hw, prof, memo, launch=False).time_s)
    shape = np.broadcast_shapes(lo.shape, n.shape, first.shape, np.shape(floor_s))
    a, b = np.zeros(shape), np.broadcast_to(n, shape).copy()
    if np.all(first > floor_s):
        return a
    while np.any(a < b):  # invariant: steps before a fit within the floor, step b (or the end) exceeds it
        mid = np.floor((a + b) / 2)
        at = step_cost([op.at_context(lo + mid) for op in ops], hw, prof, memo, launch=False).time_s
        over = np.broadcast_to(at > floor_s, shape)
        active = a < b
        a, b = np.where(active & ~over, mid + 1, a), np.where(active & over, mid, b)
    return a


def _add_cpu(cost: PhaseCost, extra: np.ndarray) -> PhaseCost:
    """``cost`` with ``extra`` CPU seconds in its time, its overhead share and ``cpu_s``."""
    return _add_overhead(cost, extra, "cpu_s")


def _add_overhead(cost: PhaseCost, extra: np.ndarray, part: str) -> PhaseCost:
    """``cost`` with ``extra`` seconds in its time, its overhead share and its field ``part`` (cpu_s, launch_s)."""
    by = dict(cost.bound_time_s)
    by["overhead"] = by["overhead"] + extra
    return replace(cost, time_s=cost.time_s + extra, bound_time_s=by, **{part: getattr(cost, part) + extra})


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
    timings: Timings = field(default_factory=dict, repr=False, compare=False)  # of decode_ops on this hw, prof


def engine_cpu(sc: Scenario) -> tuple[float, bool]:
    """(the engine's CPU seconds per step, whether they overlap the GPU) of ``sc`` ((0, False) without an engine)."""
    eng = sc.engine
    return (0.0, False) if eng is None else (eng.step_overhead_s, eng.async_scheduling)


def scenario_costs(
    model: ModelSpec,
    sc: Scenario,
    hw: HardwareSpec,
    prof: CalibrationProfile,
    *,
    decode_totals: bool = True,
    lanes: int | None = None,
) -> ScenarioCosts:
    """Prefill ops and cost, decode ops at context P + 1, the first decode step, all decode steps;
    every step with the engine's CPU part (:func:`with_cpu_step`, :func:`with_cpu_decode`).

    ``decode_totals`` False leaves the decode phase's summed FLOPs and bytes NaN (:func:`decode_cost`): a sweep
    shows neither, and on its grid they are two grid-sized sums per op. ``lanes``: pipeline micro-batches in flight
    (None: the engine's; 1: one pass of the batch as given), :func:`roofline.pipeline.laned_costs` beyond one."""
    lanes = pipeline_lanes(sc) if lanes is None else lanes
    if lanes > 1:
        m, b = lane_batch(sc.batch, lanes)
        one = scenario_costs(model, sc.with_shape(batch=b), hw, prof, decode_totals=decode_totals, lanes=1)
        return laned_costs(one, m, sc.pp)
    p = np.asarray(sc.prompt_len, dtype=np.float64)
    o = np.asarray(sc.output_len, dtype=np.float64)
    pre_ops = prefill_ops(model, sc, hw)
    dec_ops = decode_ops(model, sc, hw, p + 1)
    c, overlapped = engine_cpu(sc)
    memo: Timings = {}
    first = with_cpu_step(step_cost(dec_ops, hw, prof, memo), c, overlapped)
    dec = decode_cost(dec_ops, hw, prof, p + 1, p + o - 1, memo, decode_totals)
    dec = with_launch_decode(dec, dec_ops, hw, prof, p + 1, p + o - 1, memo)
    return ScenarioCosts(
        pre_ops,
        with_cpu_step(step_cost(pre_ops, hw, prof), c, overlapped),
        dec_ops,
        first,
        with_cpu_decode(dec, dec_ops, hw, prof, p + 1, p + o - 1, c, overlapped, memo),
        memo,
    )
