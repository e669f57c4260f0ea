"""Residuals of a calibration: the built profile, evaluated by ``roofline.evaluate.op_time``, against
every measurement.

Each record becomes the :class:`roofline.ops.records.Op` the cost model would build for that kernel
(a GEMM of its M, N, K; a transfer of its bytes; an attention kernel with its K/V bytes, GQA group
and span; a collective of its wire bytes over ``world`` ranks; a chain of empty kernels), launched
eagerly when it was timed on the host and inside a CUDA graph when timed on the device. Its modelled
time is the evaluator's, so the residuals test the profile exactly as predictions use it (the
numpy algebra in :mod:`calibrate.fitting.timemodel` only drives the fit itself).

error = modelled / measured − 1. Per suite (and per dtype or kind within it) the table reports n,
the median and 90th-percentile absolute error, the largest absolute error, and the bias (median
signed error), all in percent.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibrate.fitting.timemodel import DEVICE_METHODS
from calibrate.measure.records import Record
from roofline.errors import RooflineError
from roofline.evaluate import op_time
from roofline.ops.records import Op, arr
from roofline.profile import CalibrationProfile
from roofline.specs.hardware import COMPUTE_DTYPES, HardwareSpec


def record_op(r: Record, profile: CalibrationProfile) -> Op | None:
    """The op the cost model would build for the kernel of record ``r`` (None for records it does not model)."""
    q: dict[str, Any] = r["params"]
    suite, kind = r["suite"], q.get("kind")
    common: dict[str, Any] = {
        "name": str(r["key"]),
        "group": str(suite),
        "layer_kind": "calibration",
        "count": 1,
        "kernels": int(q.get("kernels", 1)),
        "launch": "graph" if r.get("method") in DEVICE_METHODS else "eager",
    }
    dtype = str(q.get("dtype") or next(iter(d for d in profile.compute if d in COMPUTE_DTYPES), "fp32"))
    if dtype not in COMPUTE_DTYPES:
        return None
    if suite == "gemm" or (suite == "memory" and kind == "gemv"):
        return Op(
            kind="gemm",
            dtype=dtype,
            m=arr(q.get("m", 1)),
            n=arr(q.get("n", 1)),
            k=arr(q.get("k", 1)),
            flops=arr(q["flops"]),
            act_bytes=arr(q["bytes"]),
            **common,
        )
    if suite == "memory":
        zero = arr(0.0)
        return Op(
            kind="elementwise", dtype=dtype, m=zero, n=zero, k=zero, flops=zero, act_bytes=arr(q["bytes"]), **common
        )
    if suite == "attention":
        kv = float(q.get("kv_bytes", 0.0))
        span = float(q.get("seq", q.get("ctx", 1)))
        return Op(
            kind="attention",
            dtype=dtype,
            m=arr(1.0),
            n=arr(span),
            k=arr(q.get("head_dim", 128)),
            flops=arr(q["flops"]),
            act_bytes=arr(float(q["bytes"]) - kv),
            kv_read_bytes=arr(kv),
            q_per_kv=float(q.get("q_per_kv", 1.0)),
            context_dependent=kind == "decode",
            **common,
        )
    if suite == "collective":
        zero = arr(0.0)
        return Op(
            kind="comm",
            dtype=dtype,
            m=zero,
            n=zero,
            k=zero,
            flops=zero,
            comm_bytes=arr(q["wire_bytes"]),
            collectives=1,
            group_size=int(q.get("world", 2)),
            **common,
        )
    if suite == "overhead" and kind in ("chain", "graph_chain", "tiny"):
        zero = arr(0.0)
        return Op(kind="elementwise", dtype=dtype, m=zero, n=zero, k=zero, flops=zero, **common)
    return None


def predicted_s(r: Record, profile: CalibrationProfile, hw: HardwareSpec) -> float | None:
    """Modelled seconds per call of record ``r``: ``op_time`` of its op under ``profile`` on ``hw``."""
    op = record_op(r, profile)
    if op is None:
        return None
    try:
        return float(op_time(op, hw, profile).time_s)
    except RooflineError:  # a format or ceiling this profile lacks: the record is not modelled
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


def residual_table(records: list[Record], profile: CalibrationProfile, hw: HardwareSpec) -> dict[str, dict[str, float]]:
    """{suite: stats, "suite:dtype-or-kind": stats} over the ok records the cost model covers."""
    errs: dict[str, list[float]] = {}
    for r in records:
        pred = predicted_s(r, profile, hw)
        if pred is None or not np.isfinite(pred):
            continue
        e = pred / float(r["median_s"]) - 1.0
        errs.setdefault(str(r["suite"]), []).append(e)
        g = _group(r)
        if g != r["suite"]:
            errs.setdefault(g, []).append(e)
    return {k: _stats(np.asarray(v)) for k, v in sorted(errs.items())}
