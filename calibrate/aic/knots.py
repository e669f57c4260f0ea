"""Medians of a measured ratio per knot of a size axis: the one binning every table fit uses.

A row at size x belongs to the knot

    start:    b^floor(log_b x)        (the octave / power-of-b bin that starts at the knot)
    nearest:  b^round(log_b x)        (the knot nearest in log_b x)

and a knot is kept only with at least ``min_rows`` rows; its value is the median of those rows' values.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Placement = Literal["start", "nearest"]


def knot_of(x: np.ndarray, base: float = 2.0, placement: Placement = "start") -> np.ndarray:
    """The knot (a power of ``base``) each x ≥ 1 belongs to (module docstring); x < 1 counts as 1."""
    e = np.log2(np.maximum(np.asarray(x, dtype=np.float64), 1.0)) / np.log2(base)  # exact at powers of 2 and 4
    return base ** (np.floor(e) if placement == "start" else np.rint(e))


def knot_medians(
    x: np.ndarray,
    values: np.ndarray,
    *,
    base: float = 2.0,
    placement: Placement = "start",
    min_rows: int = 10,
) -> tuple[tuple[float, ...], tuple[float, ...], int]:
    """(knots, median of ``values`` per knot, rows used) over the knots with ≥ ``min_rows`` rows, knots ascending."""
    k = knot_of(x, base, placement)
    xs: list[float] = []
    ys: list[float] = []
    used = 0
    for knot in np.unique(k):
        sel = values[k == knot]
        if sel.size < min_rows:
            continue
        xs.append(float(knot))
        ys.append(float(np.median(sel)))
        used += int(sel.size)
    return tuple(xs), tuple(ys), used
