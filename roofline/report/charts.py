"""Matplotlib charts (Agg backend) and their inline-SVG form for the report and notebooks.

SVG text stays text (``svg.fonttype: none``) in the page's own font stack: no font files,
no URLs. Every figure gets a fixed hash salt so its element ids are deterministic and do
not collide with the ids of the other charts inlined in the same page.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack

import numpy as np

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    from roofline.report.content import HardwareRow, ReportData
    from roofline.result import PredictionResult
    from roofline.serving.plan.planner import Candidate

#: planned-point marker per hardware in the Pareto chart: distinct shapes, so points never read as one.
MARKERS = ("*", "D", "s", "^", "P", "X", "v", "h")
PALETTE = ("#2563eb", "#dc2626", "#059669", "#7c3aed", "#d97706", "#0891b2", "#db2777", "#4b5563")
PHASE_STYLE = {"prefill": ("#2563eb", "o"), "decode": ("#ea580c", "^")}
RC: dict[str, Any] = {
    "svg.fonttype": "none",
    "text.parse_math": False,
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica"],
    "font.size": 8.5,
    "axes.titlesize": 9.5,
    "axes.labelsize": 8.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e5e7eb",
    "grid.linewidth": 0.6,
    "legend.fontsize": 7.5,
    "legend.frameon": False,
    "figure.dpi": 100,
}


def _rc(salt: str) -> Any:
    """The report's rc settings with a deterministic SVG id salt for one chart."""
    return {**RC, "svg.hashsalt": f"roofline-{salt}"}


def color(i: int) -> str:
    """Colour of the i-th hardware, the same in every chart and table."""
    return PALETTE[i % len(PALETTE)]


@contextmanager
def style(salt: str) -> Iterator[None]:
    """The report's rc settings and a deterministic SVG id salt.

    Figures are built with ``matplotlib.figure.Figure`` (never pyplot), so they render through
    Agg/SVG canvases whatever the interactive backend is, and no GUI is touched.
    """
    import matplotlib

    with matplotlib.rc_context(_rc(salt)):
        yield


class SubplotOptions(TypedDict, total=False):
    """Keyword options of ``Figure.subplots`` that :func:`new_figure` passes on."""

    sharex: bool | Literal["none", "all", "row", "col"]
    sharey: bool | Literal["none", "all", "row", "col"]
    width_ratios: Sequence[float] | None
    height_ratios: Sequence[float] | None
    subplot_kw: dict[str, Any] | None  # matplotlib's own type: Axes keyword arguments
    gridspec_kw: dict[str, Any] | None  # matplotlib's own type: GridSpec keyword arguments


def new_figure(width: float, height: float, ncols: int = 1, **kw: Unpack[SubplotOptions]) -> tuple[Figure, list[Axes]]:
    """A figure (not registered with pyplot, so it is garbage-collected and a notebook shows it once) with ``ncols``
    axes; it renders itself in a notebook (``_repr_png_``) whether or not pyplot's inline backend is loaded."""
    fig = _display_figure_class()(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False, **kw)[0]
    return fig, list(axes)


_DISPLAY_FIGURE: list[type[Figure]] = []


def _display_figure_class() -> type[Figure]:
    """``matplotlib.figure.Figure`` with a PNG representation for IPython, defined on first use (matplotlib is
    imported only when a chart is drawn)."""
    if not _DISPLAY_FIGURE:
        from matplotlib.figure import Figure

        class DisplayFigure(Figure):
            """A Figure IPython can show without pyplot: a fresh kernel displays it, and exactly once."""

            def _repr_png_(self) -> bytes:
                buf = io.BytesIO()
                self.savefig(buf, format="png", dpi=100)
                return buf.getvalue()

        _DISPLAY_FIGURE.append(DisplayFigure)
    return _DISPLAY_FIGURE[0]


_STRIP = (
    re.compile(r"<\?xml[^>]*\?>\s*"),
    re.compile(r"<!DOCTYPE[^>]*>\s*"),
    re.compile(r"<metadata>.*?</metadata>\s*", re.S),
    re.compile(r'\sxmlns(?::\w+)?="[^"]*"'),
    re.compile(r"<!--.*?-->\s*", re.S),
)


def figure_svg(fig: Figure, salt: str, label: str) -> str:
    """The figure as an inline ``<svg>`` element: no XML prolog, DTD URL, metadata or namespaces."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context(_rc(salt)):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    svg = buf.getvalue()
    for pat in _STRIP:
        svg = pat.sub("", svg)
    from markupsafe import escape

    return svg.replace("<svg ", f'<svg role="img" aria-label="{escape(label)}" class="chart" ', 1).strip()


def si_formatter(unit: str = "", whole: bool = False) -> FuncFormatter:
    """Tick labels with SI prefixes as plain text (labels never go through mathtext).

    ``whole``: whole numbers below 100,000 are written out (batch sizes: 1024, not 1.024 k).
    """
    from matplotlib.ticker import FuncFormatter

    def fmt(x: float, _pos: int) -> str:
        if whole and x == int(x) and abs(x) < 1e5:
            return f"{int(x)}"
        for p, f in (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
            if abs(x) >= f:
                return f"{x / f:g} {p}{unit}"
        return f"{x:g}{' ' + unit if unit else ''}"

    return FuncFormatter(fmt)


def plain_log(ax: Axes, axis: str = "x", base: float = 10, unit: str = "") -> None:
    """Log scale on ``axis`` with plain-text tick labels (SI prefixes in base 10) and no minor ticks.

    Minor log ticks cost more to draw than the data (every tick is an artist), so there are none.
    """
    from matplotlib.ticker import NullLocator

    getattr(ax, f"set_{axis}scale")("log", base=base)
    a = ax.xaxis if axis == "x" else ax.yaxis
    a.set_major_formatter(si_formatter(unit, whole=base == 2))
    a.set_minor_locator(NullLocator())


# ---- roofline chart --------------------------------------------------------------------------
def _roofline_axes(ax: Axes, r: PredictionResult, col: str) -> None:
    """Datasheet and calibrated roofs of ``r.hardware`` with ``r``'s prefill and decode ops."""
    hw, prof = r.hardware, r.profile
    dtype = r.scenario.gemm_compute_dtype(hw)
    peak, bw = float(hw.peak_flops_per_s(dtype) or np.nan), hw.memory.bandwidth_bytes_per_s
    comp, mem = prof.compute_ceiling(hw, dtype), prof.memory_ceiling(hw)
    x = np.geomspace(0.1, 1e5, 200)
    ax.plot(x, np.minimum(peak, x * bw), color="#9ca3af", ls="--", lw=1, label=f"datasheet ({dtype})")
    ax.plot(x, np.minimum(comp, x * mem), color=col, lw=1.6, label=f"profile '{prof.name}'")
    ops = r.ops
    ops = ops[(ops["flops"] > 0) & np.isfinite(ops["intensity_flops_per_byte"]) & (ops["op_time_s"] > 0)]
    for phase, (c, marker) in PHASE_STYLE.items():
        sub = ops[ops["phase"] == phase]
        if sub.empty:
            continue
        share = sub["time_s"] / max(float(sub["time_s"].sum()), 1e-30)
        ax.scatter(
            sub["intensity_flops_per_byte"],
            sub["flops"] / sub["op_time_s"],
            s=12 + 220 * share,
            c=c,
            marker=marker,
            alpha=0.75,
            edgecolors="white",
            linewidths=0.5,
            label=f"{phase} ops",
            zorder=3,
        )
    ax.axvline(comp / mem, color=col, lw=0.6, ls=":")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_title(f"{hw.display_name}\ntp {r.scenario.tp} · batch {int(np.asarray(r.scenario.batch))}", loc="left")
    plain_log(ax, "x")
    plain_log(ax, "y", unit="FLOP/s")
    ax.set_xlim(0.1, 1e5)


def roofline_figure(results: Sequence[PredictionResult], colors: Sequence[str] | None = None) -> Figure:
    """Roofline per result: roofs (datasheet dashed, profile solid) and ops by achieved FLOP/s.

    Marker area is the op's share of its phase's time; ops below the roof lose time to
    launch overheads or low-M GEMM efficiency.
    """
    if not results:
        raise ValueError("roofline_figure needs at least one PredictionResult")
    with style("roofline"):
        n = len(results)
        fig, axes = new_figure(4.8 if n == 1 else min(3.3 * n, 9.6), 3.5, n, sharey=True)
        for i, (ax, r) in enumerate(zip(axes, results, strict=True)):
            _roofline_axes(ax, r, colors[i] if colors else color(i))
        axes[0].legend(loc="lower right")
        axes[0].set_ylabel("achieved FLOP/s")
    return fig


# ---- report charts -----------------------------------------------------------------------------
def _planned(data: ReportData) -> list[tuple[int, HardwareRow, Candidate, PredictionResult]]:
    """(colour index, row, its planned candidate, its prediction) for each hardware with a plan."""
    return [
        (i, r, r.candidate, r.prediction)
        for i, r in enumerate(data.rows)
        if r.prediction is not None and r.candidate is not None
    ]


def _frontier(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points not dominated (higher x and higher y both better), sorted by x."""
    order = np.argsort(-x, kind="stable")
    fx, fy, best = [], [], -np.inf
    for j in order:
        if y[j] > best:
            fx.append(x[j])
            fy.append(y[j])
            best = y[j]
    return np.asarray(fx[::-1]), np.asarray(fy[::-1])


def pareto_figure(data: ReportData) -> Figure:
    """Output tokens/s per GPU against tokens/s per user over batch × layout (tp, and attention DP for MoE models):
    the frontier per hardware."""
    from roofline.errors import RooflineError
    from roofline.report.curves import replica_curve
    from roofline.serving.plan.layouts import layouts
    from roofline.serving.plan.loadcurve import tokens_per_s_per_gpu

    inp = data.inputs
    wl = inp.workload
    heads = inp.model.attention.num_heads
    tps = inp.tp_options or tuple(t for t in (1, 2, 4, 8) if heads % t == 0)
    lays = layouts(inp.model, tps, inp.dp_options)  # the plan's (tp, dp) layouts: DP with wide EP for MoE models
    with style("pareto"):
        fig, (ax,) = new_figure(9.6, 3.4)
        for i, hw in enumerate(inp.hardware):
            pts = []
            for tp, dp in lays:
                for prec in inp.precisions:
                    try:
                        df = replica_curve(inp, hw, tp=tp, precision=prec, kv_dtype=inp.kv_dtype or "bf16", dp=dp)
                    except RooflineError:
                        continue
                    ok = df[df["ttft_s"] <= wl.ttft_slo_s]
                    pts.append(ok[["user_tok_s", "tok_s_per_gpu"]].to_numpy(dtype=np.float64))
            allp = np.vstack(pts) if pts else np.empty((0, 2))
            if not len(allp):
                continue
            ax.scatter(allp[:, 0], allp[:, 1], s=6, color=color(i), alpha=0.25, lw=0)
            fx, fy = _frontier(allp[:, 0], allp[:, 1])
            ax.plot(fx, fy, color=color(i), lw=1.8, label=hw.display_name)
            row = data.rows[i]
            if row.candidate is not None and row.feasible:
                c = row.candidate
                rps = tokens_per_s_per_gpu(c.replica_rps, wl.output_len, c.gpus_per_replica)
                ax.plot(
                    [1 / c.tpot_full_load_s],
                    [float(rps)],
                    MARKERS[i % len(MARKERS)],
                    color=color(i),
                    ms=10,
                    mec="white",
                    mew=0.8,
                    zorder=4,
                    label=f"{hw.display_name}: planned batch",
                )
        slo = 1.0 / wl.tpot_slo_s
        ax.axvline(slo, color="#111827", ls="--", lw=1, label=f"TPOT SLO: {slo:.3g} tok/s per user")
        ax.axvspan(0, slo, color="#f3f4f6", zorder=0)
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("tokens/s per user at full load (1 / TPOT at the batch's maximum rate)")
        ax.set_ylabel("output tokens/s per GPU at full load")
        ax.set_title(
            "Throughput per GPU against per-user speed at full load (configurations meeting the TTFT SLO)", loc="left"
        )
        if any(not lab.startswith("TPOT SLO") for lab in ax.get_legend_handles_labels()[1]):
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        else:
            ax.text(0.5, 0.5, empty_reason(data), transform=ax.transAxes, ha="center")
    return fig


def empty_reason(data: ReportData) -> str:
    """Why the Pareto chart is empty: memory when nothing fits, else the TTFT SLO."""
    reasons = [r.reason for r in data.rows]
    if reasons and all("does not fit" in x or "KV pool" in x for x in reasons):
        return "no configuration fits in memory (see the comparison table)"
    return "no configuration meets the TTFT SLO"


MEMORY_PARTS = (
    ("weights", "#475569"), ("reserve (activations + runtime)", "#f59e0b"), ("KV cache in use", "#2563eb"),
    ("KV budget free", "#bfdbfe"), ("held back by the engine", "#e5e7eb"),
)  # fmt: skip


def memory_parts(r: PredictionResult) -> list[float]:
    """Per-GPU bytes in MEMORY_PARTS order; they sum to the device capacity."""
    m = r.memory
    kv = float(np.asarray(m.kv_bytes))
    budget = float(np.asarray(m.kv_budget_bytes))
    return [
        m.weight_bytes,
        float(np.asarray(m.reserve_bytes)),
        kv,
        max(budget - kv, 0.0),
        m.capacity_bytes - m.usable_bytes,
    ]


def memory_figure(data: ReportData) -> Figure:
    """Per-GPU memory at the planned configuration: weights, reserve, KV used and free, with max batch."""
    planned = _planned(data)
    with style("memory"):
        fig, (ax,) = new_figure(9.6, 0.9 + 0.5 * max(len(planned), 1))
        gib = 2.0**30
        for y, (*_, pred) in enumerate(planned):
            left = 0.0
            for (name, col), v in zip(MEMORY_PARTS, memory_parts(pred), strict=True):
                ax.barh(y, v / gib, left=left, color=col, height=0.6, label=name if y == 0 else None)
                left += v / gib
            ctx = data.inputs.workload.prompt_len + data.inputs.workload.output_len
            ax.annotate(
                f"max batch {pred.max_batch} at {ctx} tokens",
                (left, y),
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
                fontsize=7.5,
            )
        ticks = [f"{r.hardware.display_name}\n{c.parallelism}, batch {c.batch}" for _, r, c, _ in planned]
        ax.set_yticks(range(len(planned)), ticks)
        ax.invert_yaxis()
        ax.set_xlabel("GiB per GPU")
        ax.grid(axis="y", visible=False)
        ax.set_xlim(right=ax.get_xlim()[1] * 1.2)
        ax.set_axisbelow(True)
        ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncol=5, borderaxespad=0.3)
    return fig


def report_charts(data: ReportData) -> dict[str, str]:
    """The Pareto, memory and roofline charts as inline SVG, keyed by chart id (latency-vs-load charts:
    :func:`roofline.report.loadcharts.load_charts`)."""
    charts = {}
    if any(r.prediction is not None for r in data.rows):
        charts["memory"] = figure_svg(memory_figure(data), "memory", "Memory per GPU")
        planned = _planned(data)
        fig = roofline_figure([pred for *_, pred in planned], [color(i) for i, *_ in planned])
        charts["roofline"] = figure_svg(fig, "roofline", "Roofline with prefill and decode ops")
    charts["pareto"] = figure_svg(pareto_figure(data), "pareto", "Throughput per GPU against tokens/s per user")
    return charts
