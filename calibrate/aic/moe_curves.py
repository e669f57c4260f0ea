"""The generic grouped-GEMM curves of a MoE fit (:mod:`calibrate.aic.moe`): the separable streaming factor
against expert-matrix size and rows per expert, and the compute factor against rows per expert, from the per-row
factors the fit derives."""

from __future__ import annotations

import numpy as np

from calibrate.aic.knots import knot_medians, knot_of

MIN_ROWS = 10  # rows a memory knot (or the compute fit) needs
MEMORY_CLAMP = (0.05, 1.5)
SEPARABLE_PASSES = 4  # alternating-median passes of the separable streaming fit (converged to < 1e-3 by 3)


def memory_curves(
    expert_elements: np.ndarray, rows_per_expert: np.ndarray, factor: np.ndarray
) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...], tuple[float, ...], np.ndarray]:
    """(size knots 4^j, streaming factor per size knot, rows knots 2^q, relative factor per rows knot, rows used)
    of the streaming fit: factor ≈ s(n·k) × g(rows per expert), separable, by alternating medians.

    Each row sits at the size knot nearest in log4 of its gate_up matrix's n·k and the rows knot nearest in log2
    of its rows per expert; only rows whose two knots both hold ≥ MIN_ROWS rows are used. Starting from g = 1,
    :data:`SEPARABLE_PASSES` times: s(j) = median of factor / g over the rows at j, then g(q) = median of factor / s
    over the rows at q; finally g is divided by its largest knot (1 at the best-filled tiles) and s multiplied by
    it, so s is the rate of the best tile fill. The rows curve is then made non-increasing: it starts at its best
    knot (1 below it, where the curve clamps) and each later knot is at most the one before. With the touched
    experts non-decreasing in the tokens and the rows per expert too, a step's streaming time then never falls
    as its batch grows (a rise from 1–2 rows to the best knot, 0.80–0.91 → 1 on h100_sxm vllm, let Mixtral's decode
    step get 1.2 % cheaper from batch 9 to 16; those low knots are partly the tables' balanced routing touching
    more experts than uniform routing's expectation, which the fit's bytes assume). The size sets how close a
    matrix gets to the bandwidth; the rows set how well the kernel's tiles are filled (the rate falls towards the
    compute ridge). Where the rows outgrow the memory regime, the compute factor takes over through the roofline
    max."""
    j = knot_of(expert_elements, 4.0, "nearest")
    q = knot_of(rows_per_expert, 2.0, "nearest")
    keep = np.ones(factor.shape, dtype=bool)
    for key in (j, q):
        ks, counts = np.unique(key[keep], return_counts=True)
        keep &= np.isin(key, ks[counts >= MIN_ROWS])
    j, q, f = j[keep], q[keep], factor[keep]
    sj, gq = np.unique(j), np.unique(q)
    g = np.ones(f.shape)
    for _ in range(SEPARABLE_PASSES):
        s_at = {k: float(np.median(f[j == k] / g[j == k])) for k in sj}
        s = np.array([s_at[k] for k in j])
        g_at = {k: float(np.median(f[q == k] / s[q == k])) for k in gq}
        g = np.array([g_at[k] for k in q])
    top = max(g_at.values()) if g_at else 1.0
    s_y = tuple(float(np.clip(s_at[k] * top, *MEMORY_CLAMP)) for k in sj)
    peak = int(np.argmax([g_at[k] >= top * (1 - 1e-9) for k in gq])) if g_at else 0  # the first best knot
    g_x = tuple(float(k) for k in gq[peak:])  # the curve starts at its best knot: 1 below it (clamped)
    g_y = tuple(
        float(v) for v in np.minimum.accumulate([np.clip(g_at[k] / top, MEMORY_CLAMP[0], 1.0) for k in gq[peak:]])
    )
    return tuple(float(k) for k in sj), s_y, g_x, g_y, keep


def compute_curve(rows_per_expert: np.ndarray, factor: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(rows knots 2^q, compute factor per knot) of the compute-bound rows: the median per knot nearest in log2 of
    the rows per expert (≥ MIN_ROWS rows), each knot kept ≥ the previous one × its rows ratio so a grouped GEMM's
    compute time never falls as its rows grow; clamped to (0.05, 1.5]."""
    xs, ys, _ = knot_medians(rows_per_expert, factor, base=2.0, placement="nearest", min_rows=MIN_ROWS)
    out: list[float] = []
    for i, y in enumerate(ys):
        low = out[-1] * xs[i - 1] / xs[i] if out else MEMORY_CLAMP[0]
        out.append(float(np.clip(max(y, low), MEMORY_CLAMP[0], 1.5)))
    return xs, tuple(out)
