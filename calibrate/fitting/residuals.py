"""Residuals of a fit: the model of :mod:`calibrate.fitting.timemodel` against every measurement.

For each record, error = modelled / measured − 1. Per suite (and per dtype or kind
within it) the table reports n, the median and 90th-percentile absolute error, the
largest absolute error, and the bias (median signed error), all in percent.
"""

from __future__ import annotations

import numpy as np

from calibrate.fitting.timemodel import (
    Params,
    fixed_s,
    predict_attention,
    predict_collective,
    predict_gemm,
    predict_transfer,
)
from calibrate.measure.records import Record


def predicted_s(r: Record, p: Params) -> float | None:
    """Modelled seconds per call of record ``r`` under ``p`` (None when the model lacks a term)."""
    q = r["params"]
    fixed = fixed_s(p, r.get("method"), float(q.get("kernels", 1)))
    suite = r["suite"]
    if suite == "gemm" or (suite == "memory" and q.get("kind") == "gemv"):
        return predict_gemm(p, str(q["dtype"]), float(q.get("m", 1)), float(q["flops"]), float(q["bytes"]), fixed)
    if suite == "memory":
        return predict_transfer(p, float(q["bytes"]), fixed)
    if suite == "attention":
        kv, g = float(q.get("kv_bytes", 0.0)), float(q.get("q_per_kv", 1.0))
        return predict_attention(p, str(q["dtype"]), float(q["flops"]), float(q["bytes"]), kv, g, fixed)
    if suite == "collective":
        return predict_collective(p, float(q["wire_bytes"]), fixed)
    if suite == "overhead" and q.get("kind") in ("chain", "graph_chain", "tiny"):
        return fixed
    return None


def _group(r: Record) -> str:
    q = r["params"]
    sub = q.get("dtype") if r["suite"] == "gemm" else q.get("kind")
    return f"{r['suite']}:{sub}" if sub is not None else str(r["suite"])


def _stats(err: np.ndarray) -> dict[str, float]:
    a = np.abs(err) * 100
    return {
        "n": int(err.size),
        "median_abs_pct": round(float(np.median(a)), 2),
        "p90_abs_pct": round(float(np.percentile(a, 90)), 2),
        "max_abs_pct": round(float(np.max(a)), 2),
        "bias_pct": round(float(np.median(err) * 100), 2),
    }


def residual_table(records: list[Record], p: Params) -> dict[str, dict[str, float]]:
    """{suite: stats, "suite:dtype-or-kind": stats} over the ok records the model covers."""
    errs: dict[str, list[float]] = {}
    for r in records:
        pred = predicted_s(r, p)
        if pred is None:
            continue
        e = pred / float(r["median_s"]) - 1.0
        errs.setdefault(str(r["suite"]), []).append(e)
        g = _group(r)
        if g != r["suite"]:
            errs.setdefault(g, []).append(e)
    return {k: _stats(np.asarray(v)) for k, v in sorted(errs.items())}
