"""Prefill attention rates from an engine's context-attention table: ``attention.prefill_compute_efficiency``.

The default profile's prefill curve is FlashAttention-3's paper figure on an H100, applied as a fraction of the peak
on every device and engine. Each engine's context-attention table measures its own kernel (vLLM's FA3 build,
FlashInfer, TensorRT-LLM's FMHA) on each GPU. For each head dim d the table holds, from the rows that are 16-bit
math and KV, full attention, prefill from an empty cache (``past`` 0), with batch × query heads ≥
:data:`MIN_TILES` (enough work to fill the GPU; a lone short sequence of a few heads is latency-bound), the
achieved fraction of the bf16 peak of each row,

    a = FLOPs / (measured_s − overhead_s) / peak      (FLOPs and overhead as roofline prices the kernel),

gives the curve against the attended context: a knot per octave of the context (2^i ≤ n < 2^(i+1), knot at 2^i)
holding :data:`MIN_BIN_ROWS` rows, at the median a. A head dim the table does not hold keeps the base curve.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from calibrate.aic.compare import placeholder_model
from calibrate.aic.knots import knot_medians
from calibrate.aic.tables import AIC_VERSION
from roofline.evaluate import op_time
from roofline.ops.attention import attention_kernel
from roofline.ops.context import BuildContext
from roofline.ops.records import with_fields
from roofline.profile import CalibrationProfile, Curve
from roofline.specs.hardware import HardwareSpec
from roofline.specs.precision import Precision
from roofline.specs.scenario import Scenario

MIN_TILES = 32  # batch × query heads below this: the kernel cannot fill the GPU at any context
MIN_BIN_ROWS = 10  # an octave of context with fewer rows gets no knot
CURVE_FLOOR = 0.005


@dataclass(frozen=True)
class PrefillFit:
    """One head dim's fitted curve, the rows used and the residual (predicted / measured, p10 / median / p90)."""

    head_dim: int
    curve: Curve
    rows_used: int
    residual_p10: float
    residual_median: float
    residual_p90: float

    def record(self) -> dict[str, float | int]:
        return {
            "head_dim": self.head_dim,
            "rows_used": self.rows_used,
            "residual_ratio_p10": self.residual_p10,
            "residual_ratio_median": self.residual_median,
            "residual_ratio_p90": self.residual_p90,
        }


def _rows(df: pd.DataFrame) -> pd.DataFrame:
    keep = (df["dtype"] == "bfloat16") & (df["kv_dtype"] == "bfloat16") & ~np.isfinite(df["window"])
    keep &= (df["phase"] == "prefill") & (df["past"] == 0) & (df["batch"] * df["q_heads"] >= MIN_TILES)
    return df[keep]


def _priced(rows: pd.DataFrame, hw: HardwareSpec, prof: CalibrationProfile) -> tuple[np.ndarray, ...]:
    """(context, achieved fraction of the bf16 peak, predicted / measured time) of every row, each priced as
    roofline prices the kernel under ``prof``."""
    ctxs, fracs, ratios = [], [], []
    sc = Scenario(kv_dtype=Precision.BF16)
    peak = float(hw.peak_flops_per_s("bf16") or np.nan)
    for _, r in rows.groupby(["q_heads", "kv_heads", "head_dim"], sort=True):
        hq, hkv, d = (float(r[c].iloc[0]) for c in ("q_heads", "kv_heads", "head_dim"))
        b, t, past = (r[c].to_numpy(np.float64) for c in ("batch", "new_tokens", "past"))
        ctx = BuildContext.create(placeholder_model(), sc, hw, "prefill", b, t, past)
        op = attention_kernel(ctx, "aic", 1, float("inf"), hq, hkv, d, d, 2 * hkv * d)
        timing = op_time(with_fields(op, launch="graph"), hw, prof)
        measured = r["time_s"].to_numpy(np.float64)
        kernel_s = measured - timing.overhead_s
        ctxs.append(t)
        fracs.append(np.where(kernel_s > 0, op.flops / np.where(kernel_s > 0, kernel_s, 1.0) / peak, np.nan))
        ratios.append(timing.time_s / measured)
    return np.concatenate(ctxs), np.concatenate(fracs), np.concatenate(ratios)


def fit_prefill(df: pd.DataFrame, hw: HardwareSpec, prof: CalibrationProfile, label: str) -> list[PrefillFit]:
    """The fitted curve of each head dim of a normalised context-attention table (module docstring)."""
    fits = []
    for _, r in _rows(df).groupby("head_dim", sort=True):
        d = int(r["head_dim"].iloc[0])
        n, a, _ = _priced(r, hw, prof)
        ok = np.isfinite(a)
        kx, ky, _ = knot_medians(n[ok], a[ok], min_rows=MIN_BIN_ROWS)  # per octave of the context
        if len(kx) < 2:
            continue
        src = f"aiconfigurator-core {AIC_VERSION} {label}: median achieved fraction of the bf16 peak per octave"
        curve = Curve(x=kx, y=tuple(float(np.clip(y, CURVE_FLOOR, 1.5)) for y in ky), sources=(src,))
        _, _, ratio = _priced(r, hw, with_prefill(prof, {d: curve}, ()))
        p10, p50, p90 = (float(q) for q in np.quantile(ratio[ok], [0.1, 0.5, 0.9]))
        fits.append(PrefillFit(d, curve, int(ok.sum()), p10, p50, p90))
    return fits


def with_prefill(prof: CalibrationProfile, curves: dict[int, Curve], sources: tuple[str, ...]) -> CalibrationProfile:
    """``prof`` with the prefill curves of the head dims in ``curves`` replaced (the others kept)."""
    att = prof.attention
    merged = {**att.prefill_compute_efficiency, **curves}
    return prof.model_copy(
        update={
            "attention": att.model_copy(
                update={"prefill_compute_efficiency": merged, "sources": (*att.sources, *sources)}
            )
        }
    )
