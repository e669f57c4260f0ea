"""The report's sizing: the planner prunes, the simulator sizes the finalists at the planned load.

Per hardware, the planner's feasible candidates are taken in order of their planner cost; each is
re-sized by :func:`roofline.serving.plan.finalists.size_finalist` (percentile SLOs at the upper bound of
the model's error, headroom at least the minimum). Re-sizing only adds replicas, so a candidate whose
planner cost is already above the best re-sized cost cannot win and is not simulated
(branch and bound). The rows are then ranked by :data:`RANK_RULE`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from roofline.errors import RooflineError

if TYPE_CHECKING:
    from roofline.report.content import ReportInputs
    from roofline.serving.plan.finalists import Finalist
    from roofline.serving.plan.planner import Candidate
    from roofline.specs.hardware import HardwareSpec

RANK_RULE = (
    "lowest cost per hour (GPUs, plus electricity when a price per kWh is given); on a tie, fewer GPUs, "
    "then the lower TPOT at the SLO percentile, then the smaller tensor-parallel size"
)


def rank_key(f: Finalist) -> tuple[float, int, float, int]:
    """Sort key implementing :data:`RANK_RULE` (unpriced after priced)."""
    cost = f.total_usd_per_hour
    return (math.inf if cost is None else cost, f.gpus, f.tpot_s, f.candidate.tp)


def planner_cost(c: Candidate) -> float:
    """A candidate's planner $/hour (inf when unpriced): a lower bound of its simulator-sized cost."""
    return math.inf if c.usd_per_hour is None else float(c.usd_per_hour)


def size_hardware(
    inp: ReportInputs,
    hw: HardwareSpec,
    cands: Sequence[Candidate],
    *,
    curve: bool = True,
    speculative: str | None = None,
    max_gpus: int | None = None,
) -> tuple[Finalist | None, str]:
    """Cheapest simulator-confirmed deployment on ``hw`` from the planner's ``cands`` (or None and why); ``max_gpus``
    stops each candidate's search past that many GPUs (see :func:`gpus_that_can_win`)."""
    from roofline.serving.plan.finalists import size_finalist
    from roofline.serving.plan.mixcurve import load_points

    wl = inp.workload
    best: Finalist | None = None
    reasons: list[str] = []
    for c in sorted((c for c in cands if c.feasible), key=lambda c: (planner_cost(c), c.gpus)):
        if best is not None and (planner_cost(c), c.gpus) > (sized_cost(best), best.gpus):
            break
        try:
            f = size_finalist(
                inp.model,
                c,
                qps=wl.qps,
                prompt_len=wl.prompt_len,
                output_len=wl.output_len,
                ttft_slo_s=wl.ttft_slo_s,
                tpot_slo_s=wl.tpot_slo_s,
                ttft_pct=wl.ttft_pct,
                tpot_pct=wl.tpot_pct,
                confidence=inp.confidence,
                min_headroom=inp.min_headroom,
                engine=inp.engine,
                engine_overrides=inp.engine_overrides,
                calibration=inp.calibration_for(hw),
                tdp_watts=hw.tdp_watts,
                usd_per_kwh=inp.usd_per_kwh,
                procurement=inp.procurement,
                curve=False,
                speculative=speculative,
                seed=inp.seed,
                num_requests=inp.num_requests,
                max_gpus=_tighter(best.gpus if best is not None else None, max_gpus),  # more GPUs cannot rank first
                mix=inp.mix,
            )
        except RooflineError as exc:
            reasons.append(f"{c.label}: {exc}")
            continue
        if not f.meets_slo:
            reasons.append(f"{c.label}: {f.reason}")
            continue
        if best is None or rank_key(f) < rank_key(best):
            best = f
    if best is not None and curve:
        from dataclasses import replace

        from roofline.serving.plan.finalists import sim_kwargs

        kw = sim_kwargs(
            best.candidate,
            inp.engine,
            inp.engine_overrides,
            inp.calibration_for(_spec(inp, best.candidate.hardware)),
        )
        pcts = (best.ttft_pct, best.tpot_pct)
        sus = best.sustainable_replica_rps
        if inp.mix is None:
            pts = load_points(inp.model, best.candidate, kw, sus, wl.prompt_len, wl.output_len, 1000, 0, pcts)
        else:  # the mixed stream, at the binding classes' percentiles (roofline.serving.plan.mixplan)
            from roofline.serving.plan.mixcurve import mix_load_points

            figs = (best.ttft_class, best.tpot_class)
            pts = mix_load_points(inp.model, best.candidate, kw, sus, inp.mix, inp.num_requests, 0, figs)
        best = replace(best, curve=pts)
    return best, "; ".join(reasons)


def _tighter(a: int | None, b: int | None) -> int | None:
    """The smaller of two GPU caps (None: no cap)."""
    return b if a is None else a if b is None else min(a, b)


def gpus_that_can_win(c: Candidate, best: Finalist, spare_replicas: int = 0) -> int:
    """The most GPUs (whole replicas of ``c``) at which a sized ``c`` could still rank before ``best``.

    A deployment of r replicas of ``c`` pays for r + ``spare_replicas`` replicas: g(r) GPUs and u(r) =
    rented GPUs × $/GPU-hour (inf unpriced), exactly as the sizing prices it
    (:func:`roofline.serving.plan.procurement.cost_fields`); its total cost adds electricity, never negative. So
    when (u(r), g(r)) > (best's total cost, best's GPUs), :func:`rank_key` puts it after ``best``: it cannot win.
    u is non-decreasing and g increasing in r, so the replicas worth trying are 1 … r_max; this returns
    r_max × GPUs per replica (0 when none is)."""
    per = c.gpus_per_replica
    bound = (rank_key(best)[0], best.gpus)
    r = 0
    while r < 4096:
        paid = r + 1 + spare_replicas
        usd = math.inf if c.usd_per_gpu_hour is None else c.rented_gpus(paid) * c.usd_per_gpu_hour
        if (usd, paid * per) > bound:
            break
        r += 1
    return r * per


def _spec(inp: ReportInputs, name: str) -> HardwareSpec:
    """The report's hardware spec named ``name``."""
    return next(h for h in inp.hardware if h.name == name)


def sized_cost(f: Finalist) -> float:
    """A sized deployment's GPU $/hour (inf when unpriced), comparable with :func:`planner_cost`."""
    cost = f.usd_per_hour
    return math.inf if cost is None else float(cost)
