"""Latency-vs-load curves of a sized deployment: :func:`load_points` for one request shape and
:func:`mix_load_points` for a workload mix (:mod:`roofline.serving.plan.mixplan`).

The mix's curve is as :func:`load_points`, one seeded run per load (``CURVE_LOADS`` × the replica's
sustainable rate) on the mixed stream; the SLO-percentile figures are those of the binding classes, so
:func:`roofline.serving.plan.slo_capacity.slo_capacity` reads the curve against the same thresholds as the check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from roofline.serving.sim.metrics import finite_percentile as pct

if TYPE_CHECKING:
    from roofline.prediction import ModelArg
    from roofline.serving.plan.planner import Candidate
    from roofline.serving.workload.mix import WorkloadMix

#: load grid (fractions of the sustainable rate) of the latency-vs-load curve.
CURVE_LOADS = (0.1, 0.25, 0.4, 0.55, 0.7, 0.8, 0.88, 0.94)


@dataclass(frozen=True)
class LoadPoint:
    """Simulated latencies (s) of one replica at ``rate`` requests/s: P50 and the P99 tail."""

    rate: float
    ttft_p50_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p99_s: float
    saturated: bool
    ttft_slo_s: float = math.nan  # TTFT and TPOT at the SLO percentiles (the curve's own, for the SLO capacity)
    tpot_slo_s: float = math.nan


def mix_load_points(
    model: ModelArg,
    c: Candidate,
    kw: dict[str, Any],
    sus: float,
    mix: WorkloadMix,
    n: int,
    seed: int,
    figures: tuple[str, str],
) -> tuple[LoadPoint, ...]:
    """:func:`load_points` on the mixed stream: P50/P99 over every request, and
    TTFT at the percentile of class ``figures[0]`` over its requests, TPOT likewise for class ``figures[1]`` (the
    binding figures, so :func:`roofline.serving.plan.slo_capacity.slo_capacity` reads the same check)."""
    from roofline.serving.simulate import simulate

    ct, cp = mix.get(figures[0]), mix.get(figures[1])
    out = []
    for f in CURVE_LOADS:
        s = simulate(model, c.hardware, qps=f * sus, mix=mix, num_requests=n, seed=seed, **kw)
        r = s.requests
        t, u, names = r["ttft_s"].to_numpy(), r["tpot_s"].to_numpy(), r["class"].to_numpy()
        sat = s.saturated is not None
        out.append(
            LoadPoint(
                f * sus,
                pct(t, 50),
                pct(t, 99),
                pct(u, 50),
                pct(u, 99),
                sat,
                pct(t[names == ct.name], ct.ttft_pct),
                pct(u[names == cp.name], cp.tpot_pct),
            )
        )
    return tuple(out)


def load_points(
    model: ModelArg,
    c: Candidate,
    kw: dict[str, Any],
    sus: float,
    p: int,
    o: int,
    n: int,
    seed: int,
    pcts: tuple[float, float] = (99.0, 99.0),
) -> tuple[LoadPoint, ...]:
    """Simulated P50/P99 TTFT and TPOT (and both at the SLO percentiles ``pcts``) of one replica over
    CURVE_LOADS × the sustainable rate."""
    from roofline.serving.simulate import simulate

    out = []
    for f in CURVE_LOADS:
        s = simulate(model, c.hardware, qps=f * sus, prompt_len=p, output_len=o, num_requests=n, seed=seed, **kw)
        r = s.requests
        t, u = r["ttft_s"].to_numpy(), r["tpot_s"].to_numpy()
        sat = s.saturated is not None
        out.append(
            LoadPoint(f * sus, pct(t, 50), pct(t, 99), pct(u, 50), pct(u, 99), sat, pct(t, pcts[0]), pct(u, pcts[1]))
        )
    return tuple(out)
