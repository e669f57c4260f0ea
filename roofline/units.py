"""Strict parsing and formatting of physical quantities.

Spec files write every dimensioned value with an explicit unit (``3.35 TB/s``,
``80 GiB``, ``989.5 TFLOPS``, ``2 us``, ``700 W``). Inside roofline every value is a
float64 in SI base units: bytes, bytes/s, FLOP/s, seconds, watts. Decimal (kB, MB,
GB, TB: powers of 1000) and binary (KiB, MiB, GiB, TiB: powers of 1024) prefixes are
different units and are never mixed. A bare number where a unit is required is an
error, and so is an unknown unit.
"""

from __future__ import annotations

import math
import re
from typing import Literal

Dimension = Literal["bytes", "bytes_per_s", "flops_per_s", "seconds", "watts", "count"]

_DEC = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BIN = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}


def _table() -> dict[Dimension, dict[str, float]]:
    byte_units: dict[str, float] = {"B": 1.0}
    for p, f in _DEC.items():
        if p and p != "K":
            byte_units[f"{p}B"] = f
    for p, f in _BIN.items():
        byte_units[f"{p}B"] = f
    bw = {f"{u}/s": f for u, f in byte_units.items()}
    flops: dict[str, float] = {}
    for p, f in _DEC.items():
        if p == "K":
            continue
        for word in ("FLOPS", "FLOP/s", "OPS", "OP/s"):
            flops[f"{p}{word}"] = f
    seconds = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "min": 60.0, "h": 3600.0}
    watts = {"W": 1.0, "kW": 1e3}
    count = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}
    return {
        "bytes": byte_units,
        "bytes_per_s": bw,
        "flops_per_s": flops,
        "seconds": seconds,
        "watts": watts,
        "count": count,
    }


UNITS: dict[Dimension, dict[str, float]] = _table()
# re.ASCII: \d is 0-9 only (float() would read Arabic-Indic or full-width digits as numbers)
_NUM = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-zµ/]*)\s*$", re.ASCII)


class UnitError(ValueError):
    """Raised for a missing or unknown unit; wrapped into SpecError by callers."""


def parse_quantity(value: object, dim: Dimension) -> float:
    """Parse ``value`` (e.g. ``"3.35 TB/s"``) into SI units of ``dim`` as float64.

    Numbers without a unit are accepted only for ``dim == "count"`` and for zero.
    """
    if isinstance(value, bool):
        raise UnitError(f"expected a {dim} quantity with a unit, got the boolean {value}")
    if isinstance(value, int | float):
        if dim == "count" or value == 0:
            return float(value)
        example = next(iter(k for k in UNITS[dim] if k))
        raise UnitError(f"a bare number ({value}) is ambiguous here: write it with a unit, e.g. '{value} {example}'")
    if not isinstance(value, str):
        raise UnitError(f"expected a string such as '80 GB' for a {dim} quantity, got {type(value).__name__}")
    m = _NUM.match(value)
    if not m:
        raise UnitError(f"cannot read {value!r} as a number followed by a unit")
    number, unit = float(m.group(1)), m.group(2)
    table = UNITS[dim]
    if unit not in table:
        if unit == "" and number == 0:
            return 0.0
        known = ", ".join(k for k in table if k) or "none"
        raise UnitError(f"unknown or missing unit {unit!r} in {value!r}; known units for {dim}: {known}")
    return number * table[unit]


def parse_duration(text: str | float) -> float:
    """CLI helper: ``500ms``, ``0.5s``, ``50 ms`` -> seconds. A bare number means seconds."""
    if isinstance(text, int | float) or re.fullmatch(r"\s*[-+]?[\d.]+(e[-+]?\d+)?\s*", str(text), re.ASCII):
        try:
            return float(text)
        except (ValueError, OverflowError):
            raise UnitError(f"cannot read {text!r} as a duration") from None
    return parse_quantity(str(text), "seconds")


def parse_count(text: str | int) -> int:
    """CLI helper: ``2k`` -> 2000, ``32768`` -> 32768, ``1M`` -> 1000000. Must be integral."""
    if isinstance(text, bool):
        raise UnitError(f"expected a whole number, got the boolean {text}")
    if isinstance(text, int):
        return text
    v: float = parse_quantity(str(text).strip(), "count") if isinstance(text, str) else float(text)
    if not math.isfinite(v) or v != int(v):
        raise UnitError(f"{text!r} is not a whole number")
    return int(v)


#: The project's one convention for printed memory sizes (CLI, API card, report): binary prefixes,
#: GiB = 2**30 bytes. Rates (bandwidth TB/s, FLOP/s) stay decimal, as datasheets give them.
MEMORY_SIZES_BINARY = True


def fmt_bytes(n: float, binary: bool = MEMORY_SIZES_BINARY) -> str:
    """Format a memory size with a labelled prefix: binary (GiB = 2**30 B) by default, decimal GB when
    ``binary`` is False (only where a datasheet's decimal figure is shown next to it)."""
    if binary:
        for unit, f in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
            if abs(n) >= f:
                return f"{n / f:.2f} {unit}"
        return f"{n:.0f} B"
    for unit, g in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= g:
            return f"{n / g:.2f} {unit}"
    return f"{n:.0f} B"


def fmt_seconds(s: float) -> str:
    """Format a duration with a unit that keeps three significant digits, the unit chosen after rounding to them
    (0.9996 s is "1 s", not "1e+03 ms")."""
    if s != s:  # NaN
        return "n/a"
    a = abs(float(f"{s:.3g}")) if math.isfinite(s) else abs(s)
    if a >= 1:
        return f"{s:.3g} s" if a < 100 else f"{s:.0f} s"
    if a >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    if a >= 1e-6:
        return f"{s * 1e6:.3g} µs"
    return f"{s * 1e9:.3g} ns"


def fmt_rate(x: float, unit: str) -> str:
    """Format a rate such as FLOP/s or B/s with an SI prefix (T, G, M, k)."""
    for prefix, f in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= f:
            return f"{x / f:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def usd_per_million_tokens(usd_per_hour: float, tokens_per_s: float) -> float:
    """Cost of a million tokens: ($/hour) / (tokens/s × 3600 s/hour) × 1e6; NaN when no tokens flow."""
    return usd_per_hour / (tokens_per_s * 3600.0) * 1e6 if tokens_per_s > 0 else float("nan")
