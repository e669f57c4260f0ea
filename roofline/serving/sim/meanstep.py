"""The compiled step model with numpy: mean steps over arrays (the screening tier, :meth:`StepModel.mean_step_s`)
and the prefill chunks of a step with many (:func:`prefill_arrays`).

Kept apart from :mod:`roofline.serving.sim.steptime` (the simulator's step-by-step path) so that module reads alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from roofline.engine.config import step_seconds
from roofline.ops.attention import causal_pairs

if TYPE_CHECKING:
    from roofline.serving.sim.steptime import StepModel


def mean_step_s(
    sm: StepModel, rows: np.ndarray, ctx: float, chunk: np.ndarray | None = None, chunk_past: np.ndarray | None = None
) -> np.ndarray:
    """Seconds of a step of ``rows`` decode rows, each attending ``ctx`` tokens (its new one included), and,
    when ``chunk`` is given, one prefill chunk of ``chunk`` new tokens after ``chunk_past`` cached ones;
    vectorised over arrays of the same shape, with real-valued rows (a mean population: the screening tier).

    The same terms as :meth:`StepModel.gpu_time` (tables, MLA span terms, recurrent state, attention with the prefill
    compute ceilings per row, the host's run-ahead launch floor) and the engine's CPU part by
    :meth:`StepModel.finish`'s rule, so at whole rows and tokens it is :meth:`StepModel.step_time` itself
    (tests/test_serving_screening.py); between whole counts the token and row tables are interpolated linearly.
    """
    n = np.asarray(rows, dtype=np.float64)
    mixed = chunk is not None
    pm = sm.prefill if mixed else sm.decode
    new = np.broadcast_to(np.asarray(chunk if mixed else 0.0, dtype=np.float64), n.shape)
    past = np.broadcast_to(np.asarray(chunk_past if chunk_past is not None else 0.0, dtype=np.float64), n.shape)
    m = n + new
    all_rows = n + (1.0 if mixed else 0.0)
    gpu = pm.overhead_s + pm.table_s(m, all_rows)
    if pm.span and mixed:
        widest = max(sm.windows) if sm.windows else math.inf
        total = past + new + n * min(ctx, widest)
        gpu = gpu + sum(s.time_s(total) for s in pm.span)
    if pm.state:
        gpu = gpu + pm.state_s(m, all_rows, n + (past > 0) if mixed else n)
    for term in pm.attn:
        s = n * min(ctx, term.window)
        pairs, span, compute = s, s, None
        if mixed:
            pre_pairs = causal_pairs(past, new, term.window)
            pre_span = np.minimum(past + new, term.window + new - 1)
            pairs, span = s + pre_pairs, s + pre_span
            if term.prefill_curve is not None:
                dec = np.where(n > 0, term.flops_per_pair * s / term.compute_ceiling(min(ctx, term.window)), 0.0)
                compute = term.flops_per_pair * pre_pairs / term.compute_ceiling(pre_span) + dec
        gpu = gpu + term.time_s(m, pairs, span, compute)
    if pm.has_host:  # the host's run-ahead launches floor the GPU time (roofline.costs.with_launch_floor)
        gpu = np.maximum(gpu, pm.overhead_s + pm.host_s(m, all_rows))
    return step_seconds(np.asarray(gpu, dtype=np.float64), sm.cpu_overhead_s, sm.async_cpu)


def prefill_arrays(
    sm: StepModel,
    decode_rows: int,
    decode_span: tuple[float, ...],
    new_s: Sequence[float] | np.ndarray,
    past_s: Sequence[float] | np.ndarray,
) -> tuple[float, float, float, list[float], list[float], list[float | None]]:
    """:meth:`StepModel.gpu_time`'s prefill terms of many chunks in one step, with numpy over the chunks (the same
    values as its float loops, :meth:`StepModel._prefill_scalar`, for few)."""
    new = np.asarray(new_s, dtype=np.float64)
    past = np.asarray(past_s, dtype=np.float64)
    m = float(decode_rows) + float(new.sum())
    rows_past = float(decode_rows) + float(np.count_nonzero(past))
    total = float(np.sum(past + new)) if sm.prefill.span else 0.0
    nt = len(sm.windows)
    pre_pairs, pre_span = [0.0] * nt, [0.0] * nt
    pre_compute: list[float | None] = [None] * nt
    for a, w in enumerate(sm.windows):
        term = sm.prefill.attn[a]
        pairs_r = causal_pairs(past, new, w)
        span_r = np.minimum(past + new, w + new - 1)
        pre_pairs[a] = float(pairs_r.sum())
        pre_span[a] = float(span_r.sum())
        if term.prefill_curve is not None:  # per-row ceiling; decode rows at their mean span
            flops = term.flops_per_pair * pairs_r / term.compute_ceiling(span_r)
            s = decode_span[a] if decode_rows else 0.0
            dec = term.flops_per_pair * s / float(term.compute_ceiling(s / decode_rows)) if s else 0.0
            pre_compute[a] = float(flops.sum()) + dec
    return m, rows_past, total, pre_pairs, pre_span, pre_compute
