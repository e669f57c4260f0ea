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

from calibrate.aic.compare import KV_FORMATS, gqa_op, mla_op
from calibrate.aic.knots import knot_medians
from calibrate.aic.tables import AIC_VERSION
from roofline.evaluate import op_time
from roofline.profile import CalibrationProfile, Curve
from roofline.specs.hardware import HardwareSpec
from roofline.specs.precision import Precision

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


def _rows(df: pd.DataFrame, kv: str = "bfloat16") -> pd.DataFrame:
    keep = (df["dtype"] == "bfloat16") & (df["kv_dtype"] == kv) & ~np.isfinite(df["window"])
    keep &= (df["phase"] == "prefill") & (df["past"] == 0) & (df["batch"] * df["q_heads"] >= MIN_TILES)
    return df[keep]


def _priced(
    rows: pd.DataFrame, hw: HardwareSpec, prof: CalibrationProfile, mla: bool = False
) -> tuple[np.ndarray, ...]:
    """(context, achieved fraction of the bf16 peak, predicted / measured time) of every row (one KV format;
    ``mla``: rows of an MLA kernel table), each priced as roofline prices the kernel under ``prof``
    (:func:`calibrate.aic.compare.gqa_op` / :func:`~calibrate.aic.compare.mla_op`)."""
    ctxs, fracs, ratios = [], [], []
    peak = float(hw.peak_flops_per_s("bf16") or np.nan)
    for _, r in rows.groupby(["q_heads", "kv_heads", "head_dim"], sort=True):
        op = mla_op(r, hw) if mla else gqa_op(r, hw)
        timing = op_time(op, hw, prof)
        measured = r["time_s"].to_numpy(np.float64)
        kernel_s = measured - timing.overhead_s
        ctxs.append(r["new_tokens"].to_numpy(np.float64))
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


def fit_mla_prefill(df: pd.DataFrame, hw: HardwareSpec, prof: CalibrationProfile, label: str) -> PrefillFit | None:
    """``attention.mla_prefill_efficiency`` from a normalised context-MLA table: its rows chosen as the curves'
    (:func:`_rows`), each priced as roofline's MLA prefill kernel (:func:`calibrate.aic.compare.mla_op`), a knot per
    octave of context at the median achieved fraction of the bf16 peak (module docstring); None without two knots."""
    rows = _rows(df)
    n, a, _ = _priced(rows, hw, prof, mla=True)
    ok = np.isfinite(a)
    kx, ky, _ = knot_medians(n[ok], a[ok], min_rows=MIN_BIN_ROWS)
    if len(kx) < 2:
        return None
    src = f"aiconfigurator-core {AIC_VERSION} {label}: median achieved fraction of the bf16 peak per octave"
    curve = Curve(x=kx, y=tuple(float(np.clip(y, CURVE_FLOOR, 1.5)) for y in ky), sources=(src,))
    att = prof.attention.model_copy(update={"mla_prefill_efficiency": curve})
    _, _, ratio = _priced(rows, hw, prof.model_copy(update={"attention": att}), mla=True)
    p10, p50, p90 = (float(q) for q in np.quantile(ratio[ok], [0.1, 0.5, 0.9]))
    return PrefillFit(int(rows["head_dim"].iloc[0]), curve, int(ok.sum()), p10, p50, p90)


@dataclass(frozen=True)
class KvRateFit:
    """A KV format's prefill rate relative to the 16-bit-KV curves, its rows and residual (p10 / median / p90)."""

    kv_format: str
    rate: float
    rows_used: int
    residual_p10: float
    residual_median: float
    residual_p90: float

    def record(self) -> dict[str, float | int | str]:
        return {
            "kv_format": self.kv_format,
            "rate": self.rate,
            "rows_used": self.rows_used,
            "residual_ratio_p10": self.residual_p10,
            "residual_ratio_median": self.residual_median,
            "residual_ratio_p90": self.residual_p90,
        }


def _relative_rate(rows: pd.DataFrame, hw: HardwareSpec, prof: CalibrationProfile, mla: bool = False) -> np.ndarray:
    """Per row (one KV format): its achieved fraction of the bf16 peak / the 16-bit-KV curve of ``prof``
    (``mla``: the MLA kernel's)."""
    out = []
    for _, r in rows.groupby("head_dim", sort=True):
        hd = float(r["head_dim"].iloc[0])
        curve = prof.attention.mla_prefill_efficiency if mla else prof.attention.prefill_curve(hd)
        n, a, _ = _priced(r, hw, prof, mla)
        out.append(a / curve(n) if curve is not None else np.full(len(r), np.nan))
    return np.concatenate(out) if out else np.zeros(0)


def fit_prefill_kv_rates(
    df: pd.DataFrame, hw: HardwareSpec, prof: CalibrationProfile, mla: bool = False
) -> list[KvRateFit]:
    """Each quantised KV format's ``attention.prefill_kv_rate`` (``mla``: of a context-MLA table, keyed
    ``mla:<format>``): the median, over the table's rows of that format chosen as the curves' rows are (prefill from
    empty, batch × heads ≥ :data:`MIN_TILES`, 16-bit math), of the achieved fraction of the bf16 peak / the
    16-bit-KV curve of ``prof`` at the row's context (the kernel the format dispatches: FP8 FMHA above 1, a kernel
    that dequantises K/V below)."""
    fits = []
    for aic_kv, kv in KV_FORMATS.items():
        rows = _rows(df, aic_kv)
        if kv is Precision.BF16 or rows.empty:
            continue
        ratio = _relative_rate(rows, hw, prof, mla)
        ok = np.isfinite(ratio) & (ratio > 0)
        if int(ok.sum()) < MIN_BIN_ROWS:
            continue
        rate, key = float(np.median(ratio[ok])), f"{'mla:' if mla else ''}{kv.value}"
        res = _priced(rows, hw, with_kv_rates(prof, {key: rate}, ()), mla)[2]
        p10, p50, p90 = (float(q) for q in np.quantile(res[np.isfinite(res)], [0.1, 0.5, 0.9]))
        fits.append(KvRateFit(key, rate, int(ok.sum()), p10, p50, p90))
    return fits


def with_kv_rates(prof: CalibrationProfile, rates: dict[str, float], sources: tuple[str, ...]) -> CalibrationProfile:
    """``prof`` with ``attention.prefill_kv_rate`` of the formats in ``rates`` replaced (the others kept)."""
    att = prof.attention
    update = {"prefill_kv_rate": {**att.prefill_kv_rate, **rates}, "sources": (*att.sources, *sources)}
    return prof.model_copy(update={"attention": att.model_copy(update=update)})


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
