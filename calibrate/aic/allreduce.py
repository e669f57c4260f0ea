"""The engine's all-reduce against message size and GPU count, fitted from its own table (``custom_allreduce``).

AIConfigurator's collector times each engine's all-reduce entry point (vLLM ``tensor_model_parallel_all_reduce``,
SGLang's, TensorRT-LLM ``AllReduce`` with strategy AUTO) in a replayed CUDA graph, and for vLLM and SGLang eagerly
too, at message sizes 256 B … 1 GiB over 2, 4 and 8 GPUs of one node. What runs is the engine's own dispatch: its
one-shot or two-shot custom kernel up to its cap, its fallback (NCCL, symmetric memory) above. roofline prices an
all-reduce as wire bytes / (path bandwidth × efficiency) + latency, with the wire of the algorithm it plans at that
size (:func:`roofline.ops.comm.all_reduce_plan`); the default profile's efficiency is one assumed constant
(``comm.link_efficiency`` 0.8). The tables show it is not one number: on H100 vLLM at 8 GPUs the engine reaches
0.29 of the path bandwidth just past the one-shot → two-shot switch (512 KiB), 0.71 at the 8 MiB cap and 0.99 at
512 MiB.

``comm.allreduce_efficiency[launch][p]`` is therefore a curve against the message size, per launch and GPU count:

* at each measured size whose wire time at the full path bandwidth is at least :data:`BANDWIDTH_SHARE` of the
  measured time (below it the row measures latency: the custom latency fit's rows), the efficiency that prices the
  row exactly, e = wire / (path bandwidth × (measured − fixed)), fixed = the per-kernel cost of the launch + the
  all-reduce's latency as the profile prices it (the fitted custom latency up to the cap, NCCL's base + hops above);
* a knot one byte below the first size of each new algorithm (two-shot, the ring beyond the cap) repeats the last
  knot of the one before, so that no size is priced with another algorithm's efficiency;
* within one algorithm a knot may rise at most by the factor 1 + ln 2 · log2(x_k / x_(k−1)) over the one before,
  which keeps the time (∝ size / e, e linear in log2 size between knots) non-decreasing in the message size.

Sizes below the first knot and above the last take the end knots (the curves clamp). The curve applies to every
all-reduce of that launch inside one node (:func:`roofline.evaluate.comm_bandwidth_bytes_per_s`); across nodes the
link efficiency stays. Eager rows give the ``eager`` curves (prefill steps launched eagerly pay the engine's copy
into its registered buffer); TensorRT-LLM's tables hold graph rows only, so its eager all-reduces use the graph
curves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from calibrate.aic.compare import allreduce_op
from calibrate.aic.latency import residual
from roofline.evaluate import op_time
from roofline.ops.comm import all_reduce_plan
from roofline.ops.records import Launch, Op
from roofline.profile import CalibrationProfile, Curve
from roofline.specs.hardware import HardwareSpec
from roofline.specs.topology import comm_path

BANDWIDTH_SHARE = 0.1  # a row measures bandwidth where its wire time at the full path bandwidth is ≥ this share
MAX_EFFICIENCY = 1.5  # the profile curves' bound
MIN_KNOTS = 2  # fewer bandwidth-bound sizes at a GPU count: no curve there


@dataclass(frozen=True)
class CurveFit:
    """One all-reduce efficiency curve: its launch, GPU count, knots, rows used and residual of predicted /
    measured over those rows, re-timed with the curve."""

    launch: str
    gpus: int
    curve: Curve
    rows_used: int
    residual: tuple[float, float, float]  # p10, median, p90 of predicted / measured over the rows used
    table: str

    def record(self) -> dict[str, float | int | str]:
        """The provenance record of this fit."""
        p10, med, p90 = self.residual
        return {
            "table": self.table,
            "rows_used": self.rows_used,
            "knots": len(self.curve.x),
            "residual_ratio_p10": p10,
            "residual_ratio_median": med,
            "residual_ratio_p90": p90,
        }


def _fixed_s(op: Op, hw: HardwareSpec, base: CalibrationProfile) -> np.ndarray:
    """The op's seconds beyond its wire under ``base`` without measured curves: latency + launch cost."""
    plain = with_allreduce_efficiency(base, {}, "") if base.comm.allreduce_efficiency else base
    return np.asarray(op_time(op, hw, plain).time_s - op.comm_bytes / plain.link_bytes_per_s(hw, op.group_size))


def _algorithms(hw: HardwareSpec, s: np.ndarray, p: int) -> np.ndarray:
    """Per size, the algorithm roofline plans as its wire bytes per message byte (one-shot p − 1, two-shot and ring
    2(p − 1)/p) plus 10 for the ring beyond the custom cap: equal values = one algorithm."""
    wire, _, custom = all_reduce_plan(hw, s, p)
    return np.round(wire / s, 9) + 10.0 * (1.0 - custom)


def efficiency_knots(
    sizes: np.ndarray, eff: np.ndarray, algo: np.ndarray, starts: dict[float, float]
) -> tuple[list[float], list[float]]:
    """Knots (x = message bytes, y = efficiency) from per-size efficiencies in ascending size (``algo``: each size's
    algorithm code, :func:`_algorithms`; ``starts``: algorithm code → the smallest message size it runs at): where
    the algorithm changes, a knot one byte below the new one's first size repeats the last knot and one at that size
    takes the new algorithm's first efficiency; within one algorithm each rise is capped at
    1 + ln 2 · log2(x_k / x_(k−1)) (module docstring)."""
    xs: list[float] = []
    ys: list[float] = []
    for i, (x, e, a) in enumerate(zip(sizes, eff, algo, strict=True)):
        y = float(min(max(e, 1e-3), MAX_EFFICIENCY))
        if xs and algo[i - 1] != a:
            first = starts.get(float(a), float(x))
            if xs[-1] < first - 1.0:
                xs.append(first - 1.0)
                ys.append(ys[-1])
            if xs[-1] < first < x:
                xs.append(first)
                ys.append(y)
        elif xs:
            y = min(y, ys[-1] * (1.0 + math.log(2.0) * math.log2(x / xs[-1])))
        xs.append(float(x))
        ys.append(y)
    return xs, ys


def _starts(hw: HardwareSpec, s: np.ndarray, p: int) -> dict[float, float]:
    """Algorithm code (:func:`_algorithms`) → the smallest message size (bytes) it runs at: bisected between the
    sizes ``s`` around each change, so a curve's step sits where roofline's plan switches."""
    order = np.sort(s)
    codes = _algorithms(hw, order, p)
    out: dict[float, float] = {float(codes[0]): float(order[0])}
    for i in np.flatnonzero(codes[1:] != codes[:-1]):
        lo, hi = float(order[i]), float(order[i + 1])  # lo runs the old algorithm, hi the new one
        while hi - lo > 1.0:
            mid = math.floor((lo + hi) / 2.0)
            if _algorithms(hw, np.array([mid]), p)[0] == codes[i + 1]:
                hi = mid
            else:
                lo = mid
        out.setdefault(float(codes[i + 1]), float(hi))
    return out


def _fit_one(
    rows: pd.DataFrame, hw: HardwareSpec, base: CalibrationProfile, launch: Launch
) -> tuple[Curve, int, np.ndarray, np.ndarray] | None:
    """(curve, rows used, their sizes, measured s) for one launch and GPU count; None if too few bandwidth rows."""
    rows = rows.sort_values("message_bytes")
    p = int(rows["gpus"].iloc[0])
    s = rows["message_bytes"].to_numpy(np.float64)
    measured = rows["time_s"].to_numpy(np.float64)
    op = allreduce_op(hw, s, p, launch)
    bw = comm_path(hw, p).bandwidth_bytes_per_s
    wire_s = op.comm_bytes / bw
    rest = measured - _fixed_s(op, hw, base)
    used = (wire_s >= BANDWIDTH_SHARE * measured) & (rest > 0) & (measured > 0)
    if int(used.sum()) < MIN_KNOTS:
        return None
    eff = wire_s[used] / rest[used]
    xs, ys = efficiency_knots(s[used], eff, _algorithms(hw, s[used], p), _starts(hw, s, p))
    return Curve(x=tuple(xs), y=tuple(ys)), int(used.sum()), s[used], measured[used]


def fit_allreduce_efficiency(
    ar: pd.DataFrame, hw: HardwareSpec, base: CalibrationProfile, table: str
) -> list[CurveFit]:
    """Every (launch, GPU count) curve of a normalised custom all-reduce table (module docstring); ``base`` prices
    the fixed part (its per-kernel costs and fitted custom latency: fit those first)."""
    out: list[CurveFit] = []
    keep = (ar["collective"] == "all_reduce") & (ar["dtype"].isin(["bfloat16", "half"])) & (ar["gpus"] >= 2)
    for (launch, _), rows in ar[keep].groupby(["launch", "gpus"], sort=True):
        lk: Launch = "graph" if launch == "graph" else "eager"
        p = int(rows["gpus"].iloc[0])
        got = _fit_one(rows, hw, base, lk)
        if got is None:
            continue
        curve, n, s, measured = got
        trial = with_allreduce_efficiency(base, {lk: {p: curve}}, "trial")
        res = residual(op_time(allreduce_op(hw, s, p, lk), hw, trial).time_s, measured)
        out.append(CurveFit(lk, p, curve, n, res, table))
    return out


def with_allreduce_efficiency(
    profile: CalibrationProfile, curves: dict[str, dict[int, Curve]], source: str
) -> CalibrationProfile:
    """``profile`` with ``comm.allreduce_efficiency`` = ``curves`` and ``source`` appended (if any)."""
    c = profile.comm
    update = {"allreduce_efficiency": curves, "sources": (*c.sources, source) if source else c.sources}
    return profile.model_copy(update={"comm": c.model_copy(update=update)})
