"""Sensitivity: re-size with the achieved bandwidth or compute ±15% and with datasheet ceilings.

Each variant is a modified :class:`~roofline.profile.CalibrationProfile` (``model_copy``), run
through exactly the baseline's pipeline: the planner prunes, the simulator sizes each hardware's
finalists at the planned load (:func:`roofline.report.sizing.size_hardware`, without curves), and the
first by :data:`~roofline.report.sizing.RANK_RULE` is the variant's answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from roofline.profile import CalibrationProfile, Ceiling, datasheet_profile
from roofline.report.content import ReportInputs, hw_name, num, run_plan
from roofline.serving.plan.planner import PlanResult

if TYPE_CHECKING:
    from roofline.serving.plan.finalists import Finalist
    from roofline.serving.plan.parallel import Jobs, Pending
    from roofline.serving.plan.planner import Candidate

STEP = 0.15


@dataclass(frozen=True)
class SensitivityRow:
    """The planner's answer under one profile variant, compared with the baseline."""

    label: str
    description: str
    hardware: str | None
    display_name: str
    tp: int | None
    gpus: float
    usd_per_hour: float
    usd_per_million_output_tokens: float
    tpot_s: float
    ttft_s: float
    changes_choice: bool
    baseline: bool = False
    change: str = ""

    @property
    def downside(self) -> bool:
        """The answer got worse: more GPUs, other hardware or no plan at all."""
        return self.change in ("no plan", "other hardware", "more GPUs")


def _scale(c: Ceiling, f: float) -> Ceiling:
    upd: dict[str, Any] = {}
    if c.efficiency is not None:
        upd["efficiency"] = c.efficiency * f
    if c.value is not None:
        upd["value"] = c.value * f
    return c.model_copy(update=upd)


def scale_bandwidth(p: CalibrationProfile, f: float) -> CalibrationProfile:
    """The profile with every achieved HBM bandwidth multiplied by ``f``."""
    return p.model_copy(update={"memory": _scale(p.memory, f), "name": f"{p.name} bandwidth x{f:g}"})


def scale_compute(p: CalibrationProfile, f: float) -> CalibrationProfile:
    """The profile with every achieved compute ceiling (all formats, all vendors) multiplied by ``f``."""
    vendor = {v: {d: e * f for d, e in effs.items()} for v, effs in p.vendor_compute_efficiency.items()}
    return p.model_copy(
        update={
            "compute": {d: _scale(c, f) for d, c in p.compute.items()},
            "vendor_compute_efficiency": vendor,
            "name": f"{p.name} compute x{f:g}",
        }
    )


Variant = Callable[[CalibrationProfile], CalibrationProfile]


def variants() -> list[tuple[str, str, Variant]]:
    """(label, description, transform) of each sensitivity case; a transform maps the profile that prices a
    device (its engine-kernel profile or the given calibration) to the varied one."""
    pct = f"{STEP:.0%}"
    out: list[tuple[str, str, Variant]] = [
        (
            f"bandwidth -{pct}",
            f"achieved HBM bandwidth is {pct} below the profile",
            partial(scale_bandwidth, f=1 - STEP),
        ),
        (
            f"bandwidth +{pct}",
            f"achieved HBM bandwidth is {pct} above the profile",
            partial(scale_bandwidth, f=1 + STEP),
        ),
        (f"compute -{pct}", f"achieved compute is {pct} below the profile", partial(scale_compute, f=1 - STEP)),
        (f"compute +{pct}", f"achieved compute is {pct} above the profile", partial(scale_compute, f=1 + STEP)),
        ("datasheet", "datasheet peaks are reached, with no overheads (an upper bound)", datasheet_profile),
    ]
    return out


def _key(f: Finalist | None) -> tuple[str, float] | None:
    """What counts as the answer: which hardware and how many GPUs (tp alone may shift)."""
    return None if f is None else (hw_name(f.candidate.hardware), float(f.gpus))


def _change(key: tuple[str, float] | None, base: tuple[str, float] | None) -> str:
    """'' when the answer holds, else how it moved: no plan, other hardware, more or fewer GPUs."""
    if key == base:
        return ""
    if key is None:
        return "no plan"
    if base is None:
        return "plan found"
    if key[0] != base[0]:
        return "other hardware"
    return "more GPUs" if key[1] > base[1] else "fewer GPUs"


def _row(
    label: str, desc: str, f: Finalist | None, names: dict[str, str], base_key: tuple[str, float] | None, baseline: bool
) -> SensitivityRow:
    key = _key(f)
    change = "" if baseline else _change(key, base_key)
    nan = math.nan
    if f is None or key is None:
        return SensitivityRow(
            label, desc, None, "none meets the SLOs", None, nan, nan, nan, nan, nan, bool(change), baseline, change
        )
    return SensitivityRow(
        label,
        desc,
        key[0],
        names.get(key[0], key[0]),
        int(f.candidate.tp),
        key[1],
        num(f.total_usd_per_hour),
        num(f.usd_per_million_output_tokens),
        float(f.tpot_s),
        float(f.ttft_s),
        bool(change),
        baseline,
        change,
    )


def best_sized(inp: ReportInputs, plan: PlanResult) -> Finalist | None:
    """The first simulator-sized deployment by RANK_RULE over ``inp``'s hardware (None if none meets the SLOs).

    Branch and bound across hardware: sizing only adds replicas, so a planner cost above the best sized cost cannot
    win; nor can the replicas of a candidate past :func:`~roofline.report.sizing.gpus_that_can_win` against the
    best so far, so its search stops there (stopped early, it would not have replaced the best). Candidates of
    equal planner cost and GPUs are all sized whatever the order (the break never falls between them): the
    largest replica first, which tends to need the fewest added replicas and so bounds the others' searches
    sooner; the choice among them is still made in the planner's order, so the answer is the same."""
    from itertools import groupby

    from roofline.report.sizing import planner_cost, sized_cost

    best = None
    feasible = sorted((c for c in plan.candidates if c.feasible), key=lambda c: (planner_cost(c), c.gpus))
    for key, tied in groupby(feasible, key=lambda c: (planner_cost(c), c.gpus)):
        if best is not None and key > (sized_cost(best), best.gpus):
            break
        best = _best_of_tied(inp, list(tied), best)
    return best


def _best_of_tied(inp: ReportInputs, tied: list[Candidate], best: Finalist | None) -> Finalist | None:
    """``best`` or the first of ``tied`` (in their order) that ranks before it, each sized with its search bounded
    by the best of ``best`` and the ones sized before it (largest replica first)."""
    from roofline.report.sizing import gpus_that_can_win, rank_key, size_hardware

    specs = {h.name: h for h in inp.hardware}
    spare = inp.procurement.spare_replicas
    bound, sized = best, {}
    for i in sorted(range(len(tied)), key=lambda i: -tied[i].gpus_per_replica):
        c = tied[i]
        cap = None if bound is None else gpus_that_can_win(c, bound, spare)
        f, _ = size_hardware(inp, specs[hw_name(c.hardware)], [c], curve=False, max_gpus=cap)
        sized[i] = f
        if f is not None and (bound is None or rank_key(f) < rank_key(bound)):
            bound = f
    for i in range(len(tied)):  # the choice in the planner's order: on an exact tie the earlier one stays
        f = sized[i]
        if f is not None and (best is None or rank_key(f) < rank_key(best)):
            best = f
    return best


def sensitivity(
    inp: ReportInputs,
    base_plan: PlanResult,
    base: Finalist | None = None,
    jobs: int | Jobs | None = 1,
    sized: Sequence[Finalist | None] | None = None,
) -> tuple[SensitivityRow, ...]:
    """The baseline row (``base``: the report's recommended Finalist) and one re-sized row per variant, the
    variants on up to ``jobs`` processes (:func:`roofline.serving.plan.parallel.map_jobs`, results as in turn);
    ``sized``: the variants' deployments already sized (:func:`start_variants`), in the order of :func:`variants`."""
    names = {h.name: h.display_name for h in inp.hardware}
    base_key = _key(base)
    given = f"profile '{inp.profile.name}' as given" if inp.calibrated else "each device's engine-kernel profile"
    rows = [_row("baseline", given, base, names, base_key, True)]
    vs = variants()
    if sized is None:
        from roofline.serving.plan.parallel import map_jobs

        sized = map_jobs(partial(_resized, inp), [fn for _, _, fn in vs], jobs)
    rows += [_row(label, desc, f, names, base_key, False) for (label, desc, _), f in zip(vs, sized, strict=True)]
    return tuple(rows)


def start_variants(inp: ReportInputs, jobs: Jobs) -> Pending[Finalist | None]:
    """Queue every variant's re-sizing on ``jobs`` (they do not depend on the baseline's answer); its results are
    :func:`sensitivity`'s ``sized``."""
    return jobs.start(partial(_resized, inp), [fn for _, _, fn in variants()])


def _resized(inp: ReportInputs, variant: Variant) -> Finalist | None:
    """The best simulator-sized deployment with every device's profile through ``variant``."""
    from dataclasses import replace

    varied = replace(inp, variant=variant)
    return best_sized(varied, run_plan(varied))
