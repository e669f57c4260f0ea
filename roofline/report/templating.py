"""The jinja2 environment shared by the HTML report and the notebook view, and its number filters.

Autoescaping is on for every template: model and hardware names, notes and provenance from
YAML are always rendered as text. Only chart SVG produced by matplotlib (which escapes its
own text) and the bundled stylesheet are inserted as markup.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    import jinja2

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _finite(v: Any) -> TypeGuard[float]:
    """True when ``float(v)`` is finite: the filters then format ``v`` as a number."""
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def duration(v: float | None) -> str:
    """Seconds as '850 µs', '12.3 ms' or '1.23 s'; '—' when undefined."""
    if not _finite(v):
        return "—"
    s = float(v)
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms" if s < 0.1 else f"{s * 1e3:.0f} ms"
    return f"{s:.3g} s"


def number(v: float | None, digits: int = 3) -> str:
    """A number with thousands separators; ``digits`` significant digits below 10^(digits-1)."""
    if not _finite(v):
        return "—"
    x = float(v)
    if x == int(x) or abs(x) >= 10 ** (digits - 1):
        return f"{x:,.0f}"
    return f"{x:,.{digits - 1 - math.floor(math.log10(abs(x)))}f}"


def usd(v: float | None) -> str:
    """US dollars: '$1,234' or '$12.34'."""
    if not _finite(v):
        return "—"
    x = float(v)
    return f"${x:,.0f}" if abs(x) >= 1000 else f"${x:,.2f}"


def gib(v: float | None) -> str:
    """Bytes as GiB (2^30 bytes) with 1 decimal."""
    return f"{float(v) / 2**30:,.1f} GiB" if _finite(v) else "—"


def binary_bytes(v: float | None) -> str:
    """Bytes with a binary prefix: '320 KiB', '1.5 MiB'."""
    if not _finite(v):
        return "—"
    x = float(v)
    for unit, f in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if x >= f:
            return f"{x / f:.4g} {unit}"
    return f"{x:.0f} B"


def count(v: float | None) -> str:
    """Large counts as '70.55 B', '8.03 M'."""
    if not _finite(v):
        return "—"
    x = float(v)
    for unit, f in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= f:
            return f"{x / f:.4g} {unit}"
    return f"{x:.0f}"


def rate(v: float | None, unit: str = "FLOP/s") -> str:
    """Rates with SI prefixes: '989.5 TFLOP/s', '3.35 TB/s'."""
    if not _finite(v):
        return "—"
    x = float(v)
    for p, f in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if abs(x) >= f:
            return f"{x / f:.4g} {p}{unit}"
    return f"{x:.4g} {unit}"


def percent(v: float | None, digits: int = 0, signed: bool = False) -> str:
    """Fraction as percent: 0.153 → '15%' (signed: '+15%')."""
    if not _finite(v):
        return "—"
    return f"{float(v) * 100:{'+' if signed else ''}.{digits}f}%"


def raw(v: object) -> str:
    """Exact machine value for ``data-value`` attributes (float repr, 'nan' when undefined)."""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int | float):
        return repr(float(v)) if isinstance(v, float) else str(v)
    try:
        return repr(float(v))  # type: ignore[arg-type]  # whatever float() takes (numpy scalars); else str(v)
    except (TypeError, ValueError):
        return str(v)


FILTERS = {
    "duration": duration, "number": number, "usd": usd, "gib": gib, "binary_bytes": binary_bytes,
    "count": count, "rate": rate, "percent": percent, "raw": raw,
}  # fmt: skip


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """Jinja2 environment over ``templates/`` with autoescape on and the number filters."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(FILTERS)
    env.globals["finite"] = _finite
    return env


@functools.lru_cache(maxsize=1)
def stylesheet() -> str:
    """The one stylesheet shared by report and notebook views (scoped under ``.rl``)."""
    return (TEMPLATES / "style.css").read_text(encoding="utf-8")


def render_template(name: str, **context: object) -> str:
    """Render ``templates/name`` with the shared stylesheet available as ``css``."""
    from markupsafe import Markup

    return environment().get_template(name).render(css=Markup(stylesheet()), **context)
