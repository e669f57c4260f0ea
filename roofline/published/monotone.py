"""Monotone curve fitting in pure numpy: weighted isotonic regression and knot thinning.

The one home of these fits: the default profile's derivation from published rows
(:mod:`roofline.published.default_profile`) and ``roofline calibrate``'s fitter
(:mod:`calibrate.fitting.fit`) both use them; curves are evaluated by
:func:`roofline.profile.interp_log2`.

Efficiency curves are fitted as *non-decreasing* functions of log2(size): a bigger GEMM
or a bigger transfer never runs at a lower fraction of the ceiling in the model, even
when one noisy measurement says so. The fit is the weighted least-squares isotonic
regression (pool-adjacent-violators), done on log(rate) so that a 2× error weighs the
same above and below the curve.
"""

from __future__ import annotations

import numpy as np


def isotonic_increasing(y: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """Weighted least-squares non-decreasing fit of ``y`` (ordered by x) by pool-adjacent-violators.

    Minimises Σ wᵢ (ŷᵢ − yᵢ)² subject to ŷ₀ ≤ ŷ₁ ≤ … . O(n).
    """
    y = np.asarray(y, dtype=np.float64)
    w = np.ones_like(y) if w is None else np.asarray(w, dtype=np.float64)
    if y.ndim != 1 or w.shape != y.shape:
        raise ValueError("y and w must be 1-D arrays of the same length")
    means: list[float] = []
    weights: list[float] = []
    counts: list[int] = []
    for yi, wi in zip(y, w, strict=True):
        means.append(float(yi))
        weights.append(float(wi))
        counts.append(1)
        while len(means) > 1 and means[-2] > means[-1]:
            m2, w2, c2 = means.pop(), weights.pop(), counts.pop()
            m1, w1, c1 = means.pop(), weights.pop(), counts.pop()
            wt = w1 + w2
            means.append((m1 * w1 + m2 * w2) / wt if wt > 0 else (m1 + m2) / 2)
            weights.append(wt)
            counts.append(c1 + c2)
    return np.repeat(np.asarray(means), np.asarray(counts, dtype=np.int64))


def group_median(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(unique sorted x, median of y per x, count per x)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    ux = np.unique(x)
    med = np.array([np.median(y[x == v]) for v in ux])
    cnt = np.array([int(np.sum(x == v)) for v in ux], dtype=np.float64)
    return ux, med, cnt


def monotone_log_fit(x: np.ndarray, rate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Non-decreasing fit of ``rate`` against ``x``: median per x, then isotonic in log(rate).

    Returns (unique x, fitted rate at each x). Weights = number of points per x.
    """
    ux, med, cnt = group_median(x, rate)
    fitted = np.exp(isotonic_increasing(np.log(med), cnt))
    return ux, fitted


def bucket_log2(x: np.ndarray, per_octave: int = 1) -> np.ndarray:
    """Snap positive ``x`` to the nearest 2^(j/per_octave): merges near-equal sizes into one knot."""
    lx = np.log2(np.asarray(x, dtype=np.float64))
    return np.asarray(2.0 ** (np.round(lx * per_octave) / per_octave))


def thin_knots(x: np.ndarray, y: np.ndarray, rel_tol: float = 1e-3) -> tuple[np.ndarray, np.ndarray]:
    """Drop interior knots that lie on the straight line (in log2 x) between their neighbours.

    The piecewise-linear interpolant in log2(x) is unchanged to within ``rel_tol``.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if len(x) <= 2:
        return x, y
    keep = [0]
    lx = np.log2(x)
    for i in range(1, len(x) - 1):
        a = keep[-1]
        b = i + 1
        interp = y[a] + (y[b] - y[a]) * (lx[i] - lx[a]) / (lx[b] - lx[a])
        if abs(interp - y[i]) > rel_tol * max(abs(y[i]), 1e-12):
            keep.append(i)
    keep.append(len(x) - 1)
    idx = np.asarray(keep)
    return x[idx], y[idx]
