"""What ``roofline plan`` prints: the JSON document or the tables, the recommendation and each simulated
finalist's line (:func:`emit_plan`), and the exit status when nothing meets the SLOs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from roofline.cli.mix import class_lines, classes_dict
from roofline.cli.options import console, dumps
from roofline.errors import InfeasibleError

if TYPE_CHECKING:
    from roofline.serving.plan.finalists import Finalist
    from roofline.serving.plan.procurement import Procurement
    from roofline.serving.plan.result import Candidate, PlanResult


def emit_plan(
    res: PlanResult,
    sized: list[Finalist] | None,
    best: Finalist | None,
    *,
    as_json: bool,
    show_all: bool,
    terms: Procurement,
) -> None:
    """Print the plan (``sized`` None: not simulated) as JSON or tables; raise InfeasibleError (exit 1) when no
    candidate is feasible or, simulated, none meets the SLOs."""
    found = sized or []
    if as_json:
        doc = res.to_dict()
        if sized is not None:
            doc["simulated"] = [sized_dict(f) for f in found]
            doc["recommended_simulated"] = sized_dict(best) if best is not None else None
        typer.echo(dumps(doc))
    else:
        if terms.describe():
            console().print(f"[dim]buyer's terms: {terms.describe()}[/]", soft_wrap=True)
        print_plan(res, found, show_all, best)
    if res.recommended is None:
        raise InfeasibleError(res.explain_infeasible())
    if sized is not None and best is None:
        raise InfeasibleError(
            "no candidate meets the SLOs on the simulator: "
            + "; ".join(f"{f.candidate.label}: {f.reason}" for f in found)
        )


def sized_dict(f: Finalist) -> dict[str, Any]:
    """JSON fields of one simulator-sized candidate (seconds, requests/s, USD)."""
    keys = (
        "replicas",
        "gpus",
        "ttft_pct",
        "tpot_pct",
        "ttft_s",
        "tpot_s",
        "ttft_upper_s",
        "tpot_upper_s",
        "confidence",
        "meets_slo",
        "min_headroom",
        "usd_per_hour",
        "usd_per_million_output_tokens",
        "kwh_per_million_output_tokens",
        "energy_usd_per_hour",
        "mean_board_power_w",
        "busy_fraction",
        "spare_replicas",
        "peak_factor",
        "rented_gpus",
        "reason",
        "sizing_runs",
        "ttft_threshold_s",
        "tpot_threshold_s",
        "ttft_sampled_hi_s",
        "tpot_sampled_hi_s",
        "ttft_margin",
        "tpot_margin",
    )
    d: dict[str, Any] = {"label": f.candidate.label, **{k: getattr(f, k) for k in keys}}
    d |= {"capacity_rps": f.capacity_rps, "knee_rps": f.knee_rps, "headroom": f.headroom}
    d |= {"slo_capacity_rps": f.slo_capacity_rps, "slo_headroom": f.slo_headroom}
    return d | classes_dict(f)


def confidence_note(rec: Candidate) -> str:
    """How sure the recommendation is: the level it was sized at, or its headroom against the model's error."""
    knee = f"; above 85 % utilisation ({rec.saturation_rps:.3g} req/s), latencies are lower bounds"
    sat = knee if rec.latency_bound == "lower" else ""
    if rec.confidence is not None:
        return f" — SLOs hold at the {100 * rec.confidence:.0f} % upper bound of the model's error{sat}"
    if rec.within_error:
        return (
            f" — [yellow]⚠ headroom is inside the model's 80 % error (±{100 * rec.error_margin:.0f}%): "
            f"size with --confidence 0.9[/]{sat}"
        )
    return f" (model error ±{100 * rec.error_margin:.0f}% at 80 %){sat}"


def print_plan(res: PlanResult, sized: list[Finalist], show_all: bool, best: Finalist | None = None) -> None:
    """The plan's tables, the recommendation with its confidence note, and each simulated finalist's line; with
    simulated finalists the recommendation is the simulated pick and the closed form's is labelled as such."""
    from roofline.cli.render import plan_tables, usd

    con = console()
    for table in plan_tables(res, None if show_all else 15):
        con.print(table)
    rec = res.recommended
    if rec is not None:
        rented = rec.rented_gpus(rec.replicas + rec.spare_replicas)
        cost = f", {usd(rec.usd_per_hour)}/hour" if rec.usd_per_hour is not None else ""
        cost += f" ({rented} rented)" if rec.usd_per_hour is not None and rented != rec.gpus else ""
        head = "closed-form pick (before simulation)" if sized else "recommended"
        con.print(
            f"[bold]{head}:[/] {rec.replicas}{spare_text(rec.spare_replicas)} × {rec.label} = "
            f"[bold]{rec.gpus} GPUs[/]{cost}; "
            f"batch ≤ {rec.batch} per replica, {rec.replica_rps:.3g} req/s per replica, "
            f"headroom {100 * rec.headroom:.0f}%" + confidence_note(rec),
            soft_wrap=True,
        )
        unpriced = sorted({c.hardware for c in res.candidates if c.feasible and c.usd_per_hour is None})
        if unpriced:
            con.print(
                f"[dim]no price known for {', '.join(unpriced)}: ranked after priced hardware by GPUs; "
                f"pass --price NAME=USD to compare[/]"
            )
    for f in sized:
        state = "meets" if f.meets_slo else "[red]misses[/]"
        cost = f", {usd(f.usd_per_hour)}/hour" if f.usd_per_hour is not None else ""
        con.print(
            f"[bold]simulated:[/] {f.candidate.label}: {f.replicas} replicas{spare_text(f.spare_replicas)} = {f.gpus} "
            f"GPUs{cost}; at the planned "
            f"load TTFT P{f.ttft_pct:g} {f.ttft_s * 1e3:.0f} ms, TPOT P{f.tpot_pct:g} {f.tpot_s * 1e3:.1f} ms "
            f"({state} the SLOs at the {100 * f.confidence:.0f} % bound of the simulator's error on public "
            f"serving rows: TTFT ×{f.ttft_upper_s / f.ttft_s:.2f}, TPOT ×{f.tpot_upper_s / f.tpot_s:.2f}), "
            f"capacity {f.capacity_rps:.3g} req/s, "
            f"headroom {100 * f.headroom:.0f}%"
            + (
                f"; decided at TTFT ≤ {f.ttft_threshold_s * 1e3:.0f} ms, TPOT ≤ {f.tpot_threshold_s * 1e3:.1f} ms "
                f"(SLO ÷ factor) with margins {100 * f.ttft_margin:.0f}% / {100 * f.tpot_margin:.0f}% over "
                f"{f.sizing_runs} run(s)"
                if f.meets_slo
                else ""
            )
        )
        for line in class_lines(f):
            con.print(line, soft_wrap=True)
    if sized:
        print_simulated_pick(best)


def spare_text(n: int) -> str:
    """' (+1 spare)' for ``n`` spare replicas, '' for none."""
    return f" (+{n} spare)" if n else ""


def print_simulated_pick(best: Finalist | None) -> None:
    """The recommendation from the simulated check alone (or that none of the finalists meets the SLOs)."""
    from roofline.cli.render import usd

    con = console()
    if best is None:
        con.print("[bold red]recommended: none[/] — no simulated finalist meets the SLOs (reasons above)")
        return
    cost = f", {usd(best.usd_per_hour)}/hour" if best.usd_per_hour is not None else ""
    cost += f" ({best.rented_gpus} rented)" if best.usd_per_hour is not None and best.rented_gpus != best.gpus else ""
    con.print(
        f"[bold]recommended:[/] {best.replicas}{spare_text(best.spare_replicas)} × {best.candidate.label} = "
        f"[bold]{best.gpus} GPUs[/]{cost} "
        f"(simulated; TTFT P{best.ttft_pct:g} {best.ttft_s * 1e3:.0f} ms, TPOT P{best.tpot_pct:g} "
        f"{best.tpot_s * 1e3:.1f} ms over {best.sizing_runs} replicated run(s))"
        + (f"; binding class: {best.binding_class}" if best.binding_class else ""),
        soft_wrap=True,
    )
