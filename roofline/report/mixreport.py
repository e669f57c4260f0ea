"""The report for a workload mix (:mod:`roofline.serving.workload.mix`): its mean request, the class table.

With ``mix=`` the report's workload is the mix's **mean request**: prompt P̄ = Σ w_i·E[P_i] and output
Ō = Σ w_i·E[O_i] tokens (rounded; what the planner tier, the static predictions and the cost per token use), the
total rate, and the strictest class SLOs (what the planner tier holds the mean request to). The simulator sizes
every hardware on the mixed stream and checks each class at its own percentiles
(:mod:`roofline.serving.plan.mixplan`); the figures the report prints for TTFT and TPOT are then those of the
class whose check binds (least margin), beside that class's SLO (:func:`shown_workload`), and the class table
gives every class's share, lengths, SLOs, prefix share, simulated percentile and threshold.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.errors import ScenarioError
from roofline.serving.workload.presets import WorkloadPreset

if TYPE_CHECKING:
    from roofline.report.content import ReportData
    from roofline.serving.plan.finalists import Finalist
    from roofline.serving.workload.mix import WorkloadMix


def report_workload(
    workload: str, mix: WorkloadMix | str | Path | None, qps: float | None, given: Mapping[str, Any]
) -> tuple[WorkloadMix | None, WorkloadPreset]:
    """(None, the preset ``workload`` with the ``given`` lengths and SLOs and ``qps`` overriding it), or with a mix
    (the mix, its mean request: :func:`mix_workload`)."""
    from roofline.serving.workload.presets import resolve_workload

    if mix is None:
        return None, resolve_workload(workload, qps=qps, **given)
    return mix_workload(mix, qps, given, workload)


def mix_workload(
    mix: WorkloadMix | str | Path, qps: float | None, given: Mapping[str, object], workload: str
) -> tuple[WorkloadMix, WorkloadPreset]:
    """(the mix, the report's workload: its mean request at the total rate ``qps``, else the mix's own ``qps``);
    ``given`` (length and SLO arguments) and a ``workload`` preset other than the default refused beside it."""
    from roofline.serving.workload.mixparse import parse_mix
    from roofline.serving.workload.presets import resolve_workload

    clash = [k for k, v in given.items() if v is not None]
    if workload.strip().lower() not in ("chat", "mix"):
        clash.insert(0, f"workload={workload!r}")
    if clash:
        raise ScenarioError(
            f"a workload mix gives each class its own lengths and SLOs: drop {', '.join(clash)} (or put them in the "
            "mix's classes)"
        )
    m = parse_mix(mix)
    rate = qps if qps is not None else m.qps
    if rate is None:
        raise ScenarioError(
            "a workload mix needs the total request rate: give --qps (qps=) or qps: in the mix file, e.g. --qps 10"
        )
    t, u = m.strictest
    p, o = max(1, round(m.prompt_mean)), max(2, round(m.output_mean))
    checked = resolve_workload(
        "custom", prompt_len=p, output_len=o, qps=float(rate), ttft_slo_s=t.ttft_slo_s, tpot_slo_s=u.tpot_slo_s
    )  # every field checked as a workload's
    why = (
        f"A mix of {len(m.classes)} request classes ({m.source or 'given in Python'}), each with its own lengths and "
        f"SLOs: {'; '.join(c.describe() for c in m.classes)}. The planner tier sizes the mean request "
        f"({m.prompt_mean:,.0f} + {m.output_mean:,.0f} tokens) against the strictest SLOs; the simulator checks "
        "every class at its own percentiles on its own requests."
    )
    wl = replace(checked, name="mix", rationale=why, overridden=("qps",), ttft_pct=t.ttft_pct, tpot_pct=u.tpot_pct)
    return m, wl


def shown_workload(data: ReportData) -> WorkloadPreset:
    """The workload the report's text prints: as given, or for a mix its TTFT SLO and percentile those of the class
    whose TTFT check binds the recommendation (TPOT likewise), so each printed figure sits beside its own SLO."""
    rec = data.recommended
    return finalist_workload(data.inputs.workload, rec.finalist if rec is not None else None)


def finalist_workload(wl: WorkloadPreset, f: Finalist | None) -> WorkloadPreset:
    """``wl``, or for a mix finalist ``wl`` with the TTFT SLO and percentile of its TTFT-binding class and the TPOT
    ones of its TPOT-binding class (the classes its ``ttft_*`` and ``tpot_*`` figures are of)."""
    if f is None or not f.classes:
        return wl
    ct = next(c for c in f.classes if c.name == f.ttft_class)
    cp = next(c for c in f.classes if c.name == f.tpot_class)
    return replace(wl, ttft_slo_s=ct.ttft_slo_s, ttft_pct=ct.ttft_pct, tpot_slo_s=cp.tpot_slo_s, tpot_pct=cp.tpot_pct)


def class_rows(data: ReportData) -> list[dict[str, Any]]:
    """The class table: per class its share, lengths, SLOs, prefix share and, for the recommended deployment, the
    simulated TTFT and TPOT at its percentiles, their thresholds (SLO ÷ model-error factor), margin and whether it
    binds; [] without a mix."""
    from roofline.units import fmt_seconds

    mix = data.inputs.mix
    if mix is None:
        return []
    rec = data.recommended
    f = rec.finalist if rec is not None else None
    checks = {c.name: c for c in f.classes} if f is not None else {}
    rows = []
    for c in mix.classes:
        k = checks.get(c.name)
        rows.append(
            {
                "name": c.name,
                "share": c.share,
                "prompt": c.prompt.describe(),
                "output": c.output.describe(),
                "ttft_slo": f"P{c.ttft_pct:g} ≤ {fmt_seconds(c.ttft_slo_s)}",
                "tpot_slo": f"P{c.tpot_pct:g} ≤ {fmt_seconds(c.tpot_slo_s)}",
                "prefix_share": c.prefix_share,
                "ttft": "—" if k is None else f"{fmt_seconds(k.ttft_s)} (≤ {fmt_seconds(k.ttft_threshold_s)})",
                "tpot": "—" if k is None else f"{fmt_seconds(k.tpot_s)} (≤ {fmt_seconds(k.tpot_threshold_s)})",
                "margin": None if k is None else k.margin,
                "binding": f is not None and c.name == f.binding_class,
            }
        )
    return rows


def binding_text(data: ReportData) -> str:
    """A sentence naming the class that binds the recommendation ('' without a mix or a recommendation)."""
    rec = data.recommended
    f = rec.finalist if rec is not None else None
    if data.inputs.mix is None or f is None or not f.binding_class:
        return ""
    k = next(c for c in f.classes if c.name == f.binding_class)
    fig = "TTFT" if k.ttft_margin <= k.tpot_margin else "TPOT"
    return (
        f"Class {k.name} binds: its {fig} check holds with the least room ({100 * k.margin:.0f} % under its "
        "threshold): it is the class that breaks first as the load grows."
        if len(f.classes) > 1
        else f"Class {k.name} is the only class ({100 * k.margin:.0f} % under its threshold)."
    )
