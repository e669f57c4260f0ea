"""The profile's curves (multipliers against a size, piecewise-linear in log2 of the size, clamped at both ends) and
the per-weight-format GEMM rates that carry one."""

from __future__ import annotations

import functools

import numpy as np
from numpy.typing import ArrayLike
from pydantic import Field, model_validator

from roofline.specs._base import Frozen


def interp_log2(x_knots: ArrayLike, y_knots: ArrayLike, x: ArrayLike) -> np.ndarray:
    """Piecewise-linear interpolation in log2(x), clamped at both ends: how every profile curve is read."""
    return _interp_knots(np.log2(np.asarray(x_knots, dtype=np.float64)), np.asarray(y_knots, dtype=np.float64), x)


def _interp_knots(log2_x_knots: np.ndarray, y_knots: np.ndarray, x: ArrayLike) -> np.ndarray:
    """:func:`interp_log2` with the knots already read: log2 of the x knots and the y knots (float64 arrays)."""
    lx = np.log2(np.maximum(np.asarray(x, dtype=np.float64), 1e-30))
    return np.interp(lx, log2_x_knots, y_knots)


@functools.lru_cache(maxsize=512)
def _knots(x: tuple[float, ...], y: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray, dict[float, np.ndarray]]:
    """(log2 of the x knots, the y knots, the values read so far at single sizes) of one knot set: the knots as
    read-only float64 arrays, read once; the values (np.float64, immutable) by size, as op builds ask for the
    same few sizes (every GEMM of a step shares its M)."""
    lx, ly = np.log2(np.asarray(x, dtype=np.float64)), np.asarray(y, dtype=np.float64)
    lx.flags.writeable = ly.flags.writeable = False
    return lx, ly, {}


class Curve(Frozen):
    """Multiplier against a size, piecewise-linear in log2(x), clamped at both ends."""

    x: tuple[float, ...] = Field(min_length=1)
    y: tuple[float, ...] = Field(min_length=1)
    sources: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _ok(self) -> Curve:
        if len(self.x) != len(self.y):
            raise ValueError("x and y must have the same length")
        if any(b <= a for a, b in zip(self.x, self.x[1:], strict=False)) or min(self.x) <= 0:
            raise ValueError("x must be positive and strictly increasing")
        if not all(0 < v <= 1.5 for v in self.y):
            raise ValueError("curve values must be in (0, 1.5]")
        return self

    def __call__(self, x: ArrayLike) -> np.ndarray:
        """Interpolated multiplier at ``x`` (array-friendly), see :func:`interp_log2` (knots read once per curve)."""
        lx, ly, seen = _knots(self.x, self.y)
        if not (isinstance(x, float | np.floating) or (isinstance(x, np.ndarray) and x.ndim == 0)):
            return _interp_knots(lx, ly, x)
        key = float(x)
        hit = seen.get(key)
        if hit is None:
            if len(seen) > 4096:
                seen.clear()
            hit = seen[key] = _interp_knots(lx, ly, x)
        return hit


class WeightFormatGemm(Frozen):
    """The dense-GEMM kernel an engine dispatches for one weight storage format (e.g. block-scaled FP8):
    large-GEMM ``efficiency`` of the compute format's peak and its own efficiency against M (``m_efficiency``;
    None: the compute format's curve)."""

    efficiency: float = Field(gt=0, le=1.5)
    m_efficiency: Curve | None = None
    sources: tuple[str, ...] = ()
