"""``gemm_k`` of the default profile: GEMM rate against the inner dimension K, measured on an H200.

``validation/closedloop/gemm_k_h200-sxm.csv`` (``python -m calibrate.closedloop.gemm_k`` on the lent
H200): ``x @ w`` for M ∈ {2048, 8192, 32768}, N ∈ {4096, 7168}, K from 128 to 8192, bf16 and fp8, in
CUDA graphs. For each dtype and (M, N) the rate at every K is divided by the best rate over K of that
(M, N); the curve is the median over (M, N) per K, made non-decreasing in log K (pool-adjacent
violators) and normalised to 1 at the largest K. The bf16 curve also serves fp16 (same tensor-core
path). Applied on the devices with the H200's streaming multiprocessor
(:data:`roofline.published.grouped_gemm.SAME_SM`); others keep 1, as nothing was measured there.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import numpy as np

from roofline.profile import CalibrationProfile, Curve, GemmK
from roofline.published.graph_overhead import closedloop_dir
from roofline.published.grouped_gemm import MEASURED_ON, SAME_SM
from roofline.published.monotone import monotone_log_fit

MEASUREMENT = "gemm_k_h200-sxm.csv"
SERVES = {"bf16": ("bf16", "fp16"), "fp8": ("fp8",)}


def k_ratios(path: Path | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per dtype: (K, rate at K / best rate over K of the same (M, N)) of every measured GEMM."""
    groups: dict[tuple[str, int, int], list[tuple[int, float]]] = defaultdict(list)
    with (path or closedloop_dir() / MEASUREMENT).open(newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            groups[(r["dtype"], int(r["m"]), int(r["n"]))].append((int(r["k"]), float(r["flops_per_s"])))
    out: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for (dtype, _, _), pts in groups.items():
        best = max(rate for _, rate in pts)
        for k, rate in pts:
            out[dtype][0].append(float(k))
            out[dtype][1].append(rate / best)
    return {d: (np.asarray(ks), np.asarray(rs)) for d, (ks, rs) in out.items()}


def fit_gemm_k(profile: CalibrationProfile, path: Path | None = None) -> CalibrationProfile:
    """``profile`` with ``gemm_k`` fitted to the H200 measurement (module docstring)."""
    curves: dict[str, Curve] = {}
    record: dict[str, dict[str, object]] = {}
    for dtype, (k, ratio) in sorted(k_ratios(path).items()):
        ux, fitted = monotone_log_fit(k, ratio)
        y = fitted / fitted[-1]
        curve = Curve(
            x=tuple(float(v) for v in ux),
            y=tuple(round(float(v), 4) for v in y),
            sources=(f"validation/closedloop/{MEASUREMENT} ({dtype})",),
        )
        for served in SERVES.get(dtype, ()):
            curves[served] = curve
        record[dtype] = {"gemms": len(k), "k": [int(v) for v in ux], "curve": list(curve.y)}
    src = (
        f"measured on an H200 (validation/closedloop/{MEASUREMENT}: rate at K / best rate over K per (M, N), "
        f"median per K, monotone); applied to devices with the same Hopper SM: {', '.join(SAME_SM)}"
    )
    gk = GemmK(devices=SAME_SM, measured_on=MEASURED_ON, curves=curves, sources=(src,))
    return profile.model_copy(update={"gemm_k": gk, "residuals": {**profile.residuals, "gemm_k": record}})
