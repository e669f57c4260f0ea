"""Latency against load, one chart per hardware, from the serving simulator.

For each hardware's simulator-sized deployment (:mod:`roofline.report.sizing`), two panels (TTFT,
TPOT) against the deployment's request rate (replicas × the per-replica rate simulated): the P50
line, a band from P50 to P99, the SLO, the planned load and the knee. Every label is in the legend,
never on the plot area, so no text can cover data. The x-axis is scaled to the planned region:
it ends at ``x_right`` (:func:`x_limit`), so the planned load sits at least a third of the way along;
the knee and capacity beyond it are stated in the legend and in the comparison table.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from roofline.report.content import HardwareRow, ReportData


def _ms(x: float) -> str:
    """Milliseconds for a chart label: 3 significant digits below 100 ms, whole ms with separators above (never
    an exponent: 1,300 ms, not 1.3e+03)."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def x_limit(qps: float, knee_rps: float, capacity_rps: float) -> float:
    """Right end of the load axis: max(1.5·qps, min(1.1·knee, 3·qps)), never past capacity.

    The planned load then sits between 1/3 and 2/3 of the axis (unless capacity is closer).
    """
    right = max(1.5 * qps, min(1.1 * knee_rps, 3.0 * qps))
    return min(right, capacity_rps) if capacity_rps > qps else right


def load_figure(data: ReportData, i: int, row: HardwareRow, colour: str) -> Figure:
    """TTFT and TPOT against request rate for one hardware (see the module docstring)."""
    from roofline.report.charts import new_figure, style
    from roofline.report.mixreport import finalist_workload

    f = row.finalist
    assert f is not None
    wl = finalist_workload(data.inputs.workload, f)  # a mix: the binding classes' SLOs and percentiles
    pts = sorted(f.curve, key=lambda p: p.rate)
    x = np.asarray([p.rate * f.replicas for p in pts if not p.saturated])
    sel = [p for p in pts if not p.saturated]
    right = x_limit(wl.qps, f.knee_rps, f.capacity_rps)
    with style(f"load-{i}"):
        fig, axes = new_figure(9.6, 3.6, 2)
        panels = (
            ("TTFT", [p.ttft_p50_s for p in sel], [p.ttft_p99_s for p in sel], wl.ttft_slo_s, wl.ttft_pct, f.ttft_s),
            ("TPOT", [p.tpot_p50_s for p in sel], [p.tpot_p99_s for p in sel], wl.tpot_slo_s, wl.tpot_pct, f.tpot_s),
        )
        thresholds = (f.ttft_threshold_s, f.tpot_threshold_s)
        slo_cap = f.slo_capacity_rps
        for ax, (name, p50, p99, slo, pct, at), thr in zip(axes, panels, thresholds, strict=True):
            y50, y99 = np.asarray(p50) * 1e3, np.asarray(p99) * 1e3
            ax.fill_between(x, y50, y99, color=colour, alpha=0.18, lw=0, label="P50 to P99 band")
            ax.plot(x, y50, color=colour, lw=1.6, label="P50")
            ax.axhline(slo * 1e3, color="#111827", ls="--", lw=1, label=f"SLO P{pct:g} ≤ {slo * 1e3:g} ms")
            if math.isfinite(thr) and thr < slo:
                label = f"decided at ≤ {_ms(thr * 1e3)} ms (SLO ÷ model error)"
                ax.axhline(thr * 1e3, color="#b45309", ls=(0, (4, 2)), lw=1.2, label=label)
            if math.isfinite(slo_cap) and slo_cap <= right:
                ax.axvline(slo_cap, color="#b45309", ls="-", lw=1, label=f"SLO capacity {slo_cap:.3g} req/s")
            ax.axvline(wl.qps, color="#6b7280", ls=":", lw=1.2, label=f"planned load {wl.qps:g} req/s")
            ax.plot(
                [wl.qps],
                [at * 1e3],
                "o",
                mfc="white",
                mec=colour,
                mew=1.6,
                ms=7,
                zorder=4,
                label=f"P{pct:g} at planned load: {_ms(at * 1e3)} ms",
            )
            knee_text = f"knee {f.knee_rps:.3g} req/s"
            if f.knee_rps <= right:
                ax.axvline(f.knee_rps, color="#b91c1c", ls="-.", lw=1, label=knee_text)
            else:
                ax.plot([], [], " ", label=knee_text + " (beyond the axis)")
            top = max(float(np.nanmax(y99[x <= right])) if np.any(x <= right) else 0.0, slo * 1e3, at * 1e3)
            ax.set_xlim(0, right)
            ax.set_ylim(0, top * 1.15 if math.isfinite(top) else slo * 2e3)
            ax.set_xlabel(f"requests/s ({f.replicas} replica{'s' if f.replicas != 1 else ''})")
            ax.set_ylabel(f"{name} (ms)")
            ax.set_title(f"{row.hardware.display_name} · {f.candidate.parallelism}: {name} against load", loc="left")
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, borderaxespad=0)
    return fig


def load_charts(data: ReportData) -> dict[str, str]:
    """{chart id: inline SVG} of every hardware with a simulator-sized deployment and a curve."""
    from roofline.report.charts import color, figure_svg

    out = {}
    for i, r in enumerate(data.rows):
        if r.finalist is None or not r.finalist.curve:
            continue
        fig = load_figure(data, i, r, color(i))
        out[f"load-{r.hardware.name}"] = figure_svg(fig, f"load-{i}", f"Latency against load on {r.hardware.name}")
    return out
