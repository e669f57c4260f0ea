"""Rich rendering of a calibration profile: measured ceilings against peaks, curves, overheads."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from roofline.errors import RooflineError
from roofline.profile import CalibrationProfile, Curve
from roofline.specs.hardware import HardwareSpec
from roofline.units import fmt_rate, fmt_seconds

if TYPE_CHECKING:
    from rich.console import RenderableType


def reference_hardware(profile: CalibrationProfile) -> HardwareSpec | None:
    """The spec whose peaks the profile's efficiencies refer to: embedded, else the bundled ``device``."""
    if profile.hardware is not None:
        return profile.hardware
    if profile.device is None:
        return None
    import roofline

    try:
        return roofline.hardware(profile.device)
    except RooflineError:
        return None


def _pct(x: float | None) -> str:
    return f"{100 * x:.1f}%" if x is not None else "–"


def _res(profile: CalibrationProfile, key: str) -> str:
    r: Any = profile.residuals.get(key)
    return f"{r['median_abs_pct']:.1f}% (n={r['n']})" if isinstance(r, dict) and "median_abs_pct" in r else "–"


def summary_table(profile: CalibrationProfile, hw: HardwareSpec | None) -> Table:
    """Measured ceilings vs peak (datasheet, or measured best for host/unbundled devices), % of peak."""
    peak_kind = "measured best" if profile.hardware is not None else "datasheet"
    t = Table(title=f"{profile.name}: measured vs {peak_kind} peak", title_justify="left")
    for col in ("quantity", "measured", f"{peak_kind} peak", "% of peak", "spread", "fit residual (median |err|)"):
        t.add_column(col, justify="left" if col == "quantity" else "right")
    for dtype, c in profile.compute.items():
        peak = hw.peak_flops_per_s(dtype) if hw else None
        meas = c.value if c.value is not None else (c.efficiency or 0) * (peak or 0)
        unit = "OP/s" if dtype == "int8" else "FLOP/s"
        t.add_row(
            f"GEMM {dtype}",
            fmt_rate(meas, unit),
            fmt_rate(peak, unit) if peak else "–",
            _pct(meas / peak if peak else c.efficiency),
            _pct(c.spread),
            _res(profile, f"gemm:{dtype}"),
        )
    m = profile.memory
    bw = hw.memory.bandwidth_bytes_per_s if hw else None
    meas_bw = m.value if m.value is not None else (m.efficiency or 0) * (bw or 0)
    t.add_row(
        "memory bandwidth",
        fmt_rate(meas_bw, "B/s"),
        fmt_rate(bw, "B/s") if bw else "–",
        _pct(meas_bw / bw if bw else m.efficiency),
        _pct(m.spread),
        _res(profile, "memory"),
    )
    a = profile.attention
    t.add_row("attention compute ×", f"{a.compute_efficiency:.3f}", "", "", "", _res(profile, "attention:prefill"))
    t.add_row("attention memory ×", f"{a.memory_efficiency:.3f}", "", "", "", _res(profile, "attention:decode"))
    t.add_row("GQA K/V reuse", f"{a.gqa_kv_reuse:.2f}", "", "", "", "")
    o = profile.overheads
    t.add_row("per-kernel overhead", fmt_seconds(o.per_kernel_s), "", "", "", _res(profile, "overhead:chain"))
    t.add_row(
        "per-kernel (CUDA graph)", fmt_seconds(o.per_kernel_graph_s), "", "", "", _res(profile, "overhead:graph_chain")
    )
    t.add_row("per-step overhead", fmt_seconds(o.per_step_s), "", "", "", "")
    comm = profile.comm
    t.add_row("link efficiency", f"{comm.link_efficiency:.3f}", "", "", "", _res(profile, "collective"))
    t.add_row("collective latency", fmt_seconds(comm.latency_s), "", "", "", "")
    return t


def curve_table(title: str, curve: Curve, label: str, fmt: Callable[[float], str]) -> Table:
    """A two-row table of a curve's knots."""
    t = Table(title=title, title_justify="left", show_header=False)
    t.add_column(label)
    for _ in curve.x:
        t.add_column(justify="right")
    t.add_row(label, *[fmt(x) for x in curve.x])
    t.add_row("× ceiling", *[f"{y:.3f}" for y in curve.y])
    return t


def _bytes(x: float) -> str:
    for unit, f in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if x >= f:
            return f"{x / f:.3g}{unit}"
    return f"{x:.0f}B"


def render_profile(profile: CalibrationProfile) -> Group:
    """Header, summary table, curves and notes as one renderable."""
    hw = reference_hardware(profile)
    prov = profile.provenance
    versions = prov.get("versions") or {}
    head = Text(
        f"profile {profile.name} (schema v{profile.schema_version}, created {profile.created}) — device "
        f"{profile.device or 'relative'}"
        + (f" [{prov.get('device_name')}]" if prov.get("device_name") else "")
        + (f", torch {versions.get('torch')}" if versions.get("torch") else "")
        + (f", {prov.get('wall_s')} s" if prov.get("wall_s") is not None else "")
        + (" — INTERRUPTED run" if prov.get("interrupted") else "")
    )
    parts: list[Any] = [
        head,
        summary_table(profile, hw),
        curve_table("GEMM efficiency vs M", profile.gemm_m_efficiency, "M", lambda x: f"{x:g}"),
    ]
    if profile.memory_size_efficiency is not None:
        parts.append(
            curve_table("memory efficiency vs bytes per kernel", profile.memory_size_efficiency, "bytes", _bytes)
        )
    for note in profile.residuals.get("notes", []) or []:
        parts.append(Text(f"note: {note}", style="yellow"))
    return Group(*parts)


def render_text(renderable: RenderableType, width: int = 120) -> str:
    """Plain text of a rich renderable."""
    console = Console(file=io.StringIO(), width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()
