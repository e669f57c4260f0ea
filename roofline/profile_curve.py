"""The profile's curves (multipliers against a size, piecewise-linear in log2 of the size, clamped at both ends) and
the per-weight-format GEMM rates that carry one."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from pydantic import Field, model_validator

from roofline.specs._base import Frozen


def interp_log2(x_knots: ArrayLike, y_knots: ArrayLike, x: ArrayLike) -> np.ndarray:
    """Piecewise-linear interpolation in log2(x), clamped at both ends: how every profile curve is read."""
    lx = np.log2(np.maximum(np.asarray(x, dtype=np.float64), 1e-30))
    return np.interp(lx, np.log2(np.asarray(x_knots, dtype=np.float64)), np.asarray(y_knots, dtype=np.float64))


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
        """Interpolated multiplier at ``x`` (array-friendly), see :func:`interp_log2`."""
        return interp_log2(self.x, self.y, x)


class WeightFormatGemm(Frozen):
    """The dense-GEMM kernel an engine dispatches for one weight storage format (e.g. block-scaled FP8):
    large-GEMM ``efficiency`` of the compute format's peak and its own efficiency against M (``m_efficiency``;
    None: the compute format's curve)."""

    efficiency: float = Field(gt=0, le=1.5)
    m_efficiency: Curve | None = None
    sources: tuple[str, ...] = ()
