"""SLO capacity: where the simulated SLO percentiles cross their deciding thresholds on the latency-vs-load curve.

r(x) = max(TTFT_p(x) / TTFT threshold, TPOT_p(x) / TPOT threshold); walking up the curve from the planned per-replica
rate, the capacity is where r crosses 1 (linear between the last point under 1 and the first over it), the last
point under 1 when the next one saturates, and a lower bound (the curve's last rate) when no point breaks the SLOs.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from roofline.serving.plan.mixcurve import LoadPoint
from roofline.serving.plan.slo_capacity import slo_capacity


def _pt(rate: float, ttft: float, tpot: float, saturated: bool = False) -> LoadPoint:
    return LoadPoint(rate, ttft, ttft, tpot, tpot, saturated, ttft, tpot)


def _finalist(*curve: LoadPoint, meets: bool = True) -> SimpleNamespace:
    """Thresholds 200 ms / 40 ms; planned 5 req/s per replica at TTFT 160 ms, TPOT 20 ms: r0 = max(0.8, 0.5)."""
    return SimpleNamespace(
        ttft_threshold_s=0.2, tpot_threshold_s=0.04, curve=curve, meets_slo=meets, replica_rate=5.0,
        ttft_s=0.16, tpot_s=0.02,
    )  # fmt: skip


def test_capacity_is_where_r_crosses_one_by_hand() -> None:
    """Points below the planned rate are skipped; 6 req/s at r = 0.9, 8 req/s at r = 1.1: r = 1 at 7 req/s."""
    f = _finalist(_pt(4.0, 0.5, 0.01), _pt(6.0, 0.18, 0.02), _pt(8.0, 0.22, 0.02), _pt(9.0, 0.5, 0.5))
    assert slo_capacity(f) == (pytest.approx(7.0), True)  # type: ignore[arg-type]


def test_tpot_can_be_the_figure_that_breaks() -> None:
    """6 req/s: TTFT r 0.9, TPOT r 1.3 (52 ms / 40 ms): r = 1 a quarter of the way from 5 (r0 0.8) to 6."""
    f = _finalist(_pt(6.0, 0.18, 0.052))
    cap, bounded = slo_capacity(f)  # type: ignore[arg-type]
    assert bounded and cap == pytest.approx(5.0 + (1 - 0.8) / (1.3 - 0.8))


def test_a_saturated_point_bounds_the_capacity_at_the_last_point_under_it() -> None:
    f = _finalist(_pt(6.0, 0.18, 0.02), _pt(8.0, math.nan, math.nan, saturated=True))
    assert slo_capacity(f) == (6.0, True)  # type: ignore[arg-type]


def test_no_break_on_the_curve_is_a_lower_bound_and_no_plan_is_nan() -> None:
    f = _finalist(_pt(6.0, 0.18, 0.02), _pt(7.0, 0.19, 0.03))
    assert slo_capacity(f) == (7.0, False)  # type: ignore[arg-type]
    cap, bounded = slo_capacity(_finalist(_pt(6.0, 0.18, 0.02), meets=False))  # type: ignore[arg-type]
    assert math.isnan(cap) and not bounded
    cap, _ = slo_capacity(_finalist())  # type: ignore[arg-type]
    assert math.isnan(cap)
