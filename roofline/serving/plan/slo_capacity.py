"""SLO capacity: the highest sustained rate at which a sized deployment still meets its SLOs.

Read off the finalist's latency-vs-load curve (one seeded run per load, ``finalists.CURVE_LOADS`` × the
replica's sustainable rate): with r(x) = max(TTFT_p(x) / TTFT threshold, TPOT_p(x) / TPOT threshold) at the SLO
percentiles p, thresholds = SLO ÷ the model-error factor (what the deciding check held the plan to), the walk
starts at the planned per-replica rate (r from the deciding check, ≤ 1 when the plan meets its SLOs) and goes up
the curve to the first point with r > 1 or a saturated run; the capacity is where r crosses 1, linear between that
point and the last one under it (the last one under it for a saturated run). When no point of the curve breaks the
SLOs the capacity is the curve's last rate and is a lower bound (``bounded`` False). Its resolution is the curve's
grid (steps of 6–15 % of the sustainable rate near the top) and one run per point; the deciding check at the
planned load is the replicated one (:mod:`roofline.serving.plan.sampling`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from roofline.serving.plan.finalists import Finalist


def slo_capacity(f: Finalist) -> tuple[float, bool]:
    """(per-replica SLO capacity in requests/s, whether a curve point bounds it); (NaN, False) without a curve or
    when the plan does not meet its SLOs."""
    thr = (f.ttft_threshold_s, f.tpot_threshold_s)
    if not f.curve or not f.meets_slo or not all(math.isfinite(t) and t > 0 for t in thr):
        return math.nan, False
    x0, r0 = f.replica_rate, max(f.ttft_s / thr[0], f.tpot_s / thr[1])
    for p in sorted(f.curve, key=lambda q: q.rate):
        if p.rate <= x0:
            continue
        r = max(p.ttft_slo_s / thr[0], p.tpot_slo_s / thr[1])
        if p.saturated or not math.isfinite(r):
            return x0, True
        if r > 1.0:
            frac = (1.0 - r0) / (r - r0) if r > r0 else 0.0
            return x0 + max(0.0, min(1.0, frac)) * (p.rate - x0), True
        x0, r0 = p.rate, r
    return x0, False
