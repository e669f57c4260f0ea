"""Notebook view of a :class:`~roofline.result.PredictionResult` (its ``_repr_html_``).

Uses the report's templates, macros and stylesheet, so a prediction looks the same in a
notebook and in a saved report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from roofline.report.charts import MEMORY_PARTS, memory_parts
from roofline.report.templating import render_template

if TYPE_CHECKING:
    from roofline.result import PredictionResult
    from roofline.serving.plan.result import PlanResult
    from roofline.serving.sim.result import SimulationResult

#: (summary key, label, scale, unit) of the simulation card's rows.
_SIM_ROWS = (
    ("ttft_mean_s", "TTFT mean", 1e3, "ms"),
    ("ttft_p99_s", "TTFT P99", 1e3, "ms"),
    ("tpot_mean_s", "TPOT mean", 1e3, "ms"),
    ("tpot_p99_s", "TPOT P99", 1e3, "ms"),
    ("e2e_p99_s", "E2E P99", 1.0, "s"),
    ("request_throughput_rps", "throughput", 1.0, "req/s"),
    ("output_throughput_tok_s", "output tokens", 1.0, "tok/s"),
    ("mean_batch", "mean batch", 1.0, ""),
)


def layer_groups(result: PredictionResult) -> list[tuple[str, float, float]]:
    """(group, prefill seconds, mean decode-step seconds) in the order ops appear."""
    df = result.layer_breakdown()
    groups: dict[str, list[float]] = {}
    for _, row in df.iterrows():
        g = groups.setdefault(str(row["group"]), [0.0, 0.0])
        g[0 if row["phase"] == "prefill" else 1] += float(row["time_s"])
    return [(g, pre, dec) for g, (pre, dec) in groups.items() if pre > 0 or dec > 0]


def prediction_html(result: PredictionResult) -> str:
    """Self-contained HTML fragment (scoped styles, no scripts) summarising one prediction, each headline with its
    80 % prediction interval (the card used to show the point values alone)."""
    parts = [(name, v, col) for (name, col), v in zip(MEMORY_PARTS, memory_parts(result), strict=True)]
    return render_template(
        "prediction.html.j2",
        r=result,
        summary=result.summary(),
        memory_parts=parts,
        groups=layer_groups(result),
        iv=headline_intervals(result),
    )


def headline_intervals(result: PredictionResult) -> dict[str, str]:
    """' · 80 %: low–high' per headline figure (seconds or tokens/s), empty when the scenario does not fit."""
    from roofline.units import fmt_seconds

    if not result.fits:
        return {}
    out = {}
    for key in ("ttft_s", "tpot_s", "e2e_s", "throughput_tok_s"):
        lo, hi = result.interval(key, 0.8)
        text = f"{lo:,.0f}–{hi:,.0f} tok/s" if key == "throughput_tok_s" else f"{fmt_seconds(lo)}–{fmt_seconds(hi)}"
        out[key] = f" · 80 %: {text}"
    return out


def simulation_html(result: SimulationResult) -> str:
    """HTML fragment of a simulation (a notebook's view): what ran, its headline latencies and throughput with
    their 80 % intervals where the serving model has them, and whether it saturated."""
    from html import escape

    summary, cfg = result.summary, result.config
    rows = []
    for key, label, scale, unit in _SIM_ROWS:
        v = summary.get(key)
        if v is None:
            continue
        cell = f"{float(v) * scale:,.4g} {unit}".strip()
        if key.endswith("_s") and not key.endswith("tok_s"):  # latencies carry an interval; rates show their value
            lo, hi = result.interval(key, 0.8)
            cell += f" ({lo * scale:,.3g}–{hi * scale:,.3g})"
        rows.append(f"<tr><td>{escape(label)}</td><td style='text-align:right'>{escape(cell)}</td></tr>")
    title = escape(f"{cfg.get('label', 'simulation')} · {len(result.requests):,} requests")
    sat = f"<p><b>saturated:</b> {escape(str(result.saturated))}</p>" if result.saturated else ""
    return f"<div><p><b>{title}</b> (80 % intervals in brackets)</p><table>{''.join(rows)}</table>{sat}</div>"


def plan_html(plan: PlanResult) -> str:
    """HTML fragment of a plan: the recommendation and the ten first candidates (pandas' escaped table)."""
    from html import escape

    rec = plan.recommended
    head = (
        f"recommended: {rec.replicas} × {rec.label} = {rec.gpus} GPUs"
        + (f", ${rec.usd_per_hour:,.2f}/hour" if rec.usd_per_hour is not None else "")
        if rec is not None
        else "no candidate meets the SLOs"
    )
    frame = plan.to_frame().head(10).to_html(index=False, float_format=lambda x: f"{x:.3g}")
    return f"<div><p><b>{escape(plan.model)} at {plan.qps:g} req/s</b>: {escape(head)}</p>{frame}</div>"
