"""The quantised dense-GEMM kernels at decode sizes, relative to the engine's 16-bit GEMM, from one AIC GEMM table:
how fast each streams its weights (``gemm_memory_rate``) and what each costs per call beyond its launches
(``gemm_fixed_s``).

At decode sizes a dense GEMM reads its weights once and is memory- or latency-bound. The kernels engines dispatch
for quantised weights (per-tensor FP8, block-scaled FP8, NVFP4) neither stream at the 16-bit kernel's rate nor
start as fast: on b200_sxm TensorRT-LLM's NVFP4 linear takes 12.1 µs at M ≤ 16 where its two launches (the
activation quantisation, the GEMM) cost 6.3 µs, and its memory-bound rows run 0.56 of the time the shared memory
ceiling gives (bf16 rows: 0.89). Under the profile fitted so far, for each row (seconds)

    net_s = measured_s − dynamic_scale_s − overhead_s

(overhead_s: the row's launch cost; dynamic_scale_s: the collector's dynamic activation-scale pass,
:func:`calibrate.aic.tables.dynamic_scale_s`), over layer-shaped rows (N, K ≥ ``fit.LAYER_MIN_NK``) timed in
graph replay:

* **rate**: over the memory-bound decode-sized rows (M ≤ :data:`DECODE_M`) whose memory time is at least
  :data:`WORK_OVER_FLOOR` × their launch cost (the streaming, not the floor), achieved = memory_s / net_s; the
  format's rate = median achieved / the same median over the table's bf16 rows;
* **floor**: over the rows whose roofline work max(compute_s, memory_s) at that rate is below
  ``latency.LATENCY_SHARE`` of the measured time, excess = net_s − work_s; the format's floor = median excess −
  the same median over the bf16 rows, at least 0.

The 16-bit kernel stays the reference (rate 1, floor 0: its excess is the per-kernel cost,
:func:`calibrate.aic.latency.fit_per_kernel`), as the decode-attention rates keep theirs, so the memory ceiling
and the launch cost every other op is priced at do not move.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from calibrate.aic.compare import GEMM_FORMATS, gemm_op
from calibrate.aic.fit import LAYER_MIN_NK, graph_rows
from calibrate.aic.latency import LATENCY_SHARE
from roofline.evaluate import op_time
from roofline.profile import CalibrationProfile
from roofline.specs.hardware import HardwareSpec

#: AIC ``gemm_dtype`` whose kernel is fitted (each a distinct weight format of the profile).
KERNEL_FORMATS = ("fp8", "fp8_block", "nvfp4")
REFERENCE = "bfloat16"
DECODE_M = 256  # rows with at most this many tokens: the decode GEMMs the rate prices
WORK_OVER_FLOOR = 3.0  # memory time ≥ this × the launch cost: the row measures streaming, not the floor
MIN_ROWS = 20
RATE_CLAMP = (0.05, 1.5)


@dataclass(frozen=True)
class KernelFit:
    """One format's kernel relative to the 16-bit GEMM: its rate and floor (s), the rows behind each, the excess
    medians (s) the floor came from, and each fit's residual (p10, median, p90 of predicted / measured seconds over
    its rows: streaming seconds at the rate; whole rows, less any dynamic-scale pass, with the floor)."""

    aic_dtype: str
    weight_format: str
    rate: float
    rate_rows: int
    rate_residual: tuple[float, float, float]
    fixed_s: float
    floor_rows: int
    floor_residual: tuple[float, float, float]
    excess_s: float
    reference_excess_s: float

    def records(self, table: str) -> dict[str, dict[str, float | int | str]]:
        """The two fits as the profile's provenance records them (``gemm_memory_rate.<format>``,
        ``gemm_fixed_s.<format>``)."""

        def residual(r: tuple[float, float, float]) -> dict[str, float]:
            return {"residual_ratio_p10": r[0], "residual_ratio_median": r[1], "residual_ratio_p90": r[2]}

        fmt = self.weight_format
        return {
            f"gemm_memory_rate.{fmt}": {
                "table": table,
                "aic_dtype": self.aic_dtype,
                "efficiency": self.rate,
                "rows_used": self.rate_rows,
                **residual(self.rate_residual),
            },
            f"gemm_fixed_s.{fmt}": {
                "table": table,
                "aic_dtype": self.aic_dtype,
                "value_s": self.fixed_s,
                "rows_used": self.floor_rows,
                "excess_median_s": self.excess_s,
                "bf16_excess_median_s": self.reference_excess_s,
                **residual(self.floor_residual),
            },
        }


def _quantiles(x: np.ndarray) -> tuple[float, float, float]:
    q = np.quantile(x, [0.1, 0.5, 0.9])
    return float(q[0]), float(q[1]), float(q[2])


@dataclass(frozen=True)
class _Rows:
    """The per-row terms of one format's layer-shaped graph rows (module docstring), seconds."""

    m: np.ndarray
    net_s: np.ndarray
    memory_s: np.ndarray
    work_s: np.ndarray
    overhead_s: np.ndarray
    measured_s: np.ndarray
    memory_bound: np.ndarray


def _terms(rows: pd.DataFrame, aic_dtype: str, hw: HardwareSpec, prof: CalibrationProfile) -> _Rows | None:
    rows = graph_rows(rows)
    op = gemm_op(rows, aic_dtype, hw) if len(rows) else None
    if op is None:
        return None
    t = op_time(op, hw, prof)
    layer = (op.n >= LAYER_MIN_NK) & (op.k >= LAYER_MIN_NK)
    scale_s = rows["dynamic_scale_s"].to_numpy(np.float64) if "dynamic_scale_s" in rows else 0.0
    measured = rows["time_s"].to_numpy(np.float64)
    shape = measured.shape
    over = np.broadcast_to(t.overhead_s, shape)
    memory = np.broadcast_to(t.memory_s, shape)
    work = np.maximum(np.broadcast_to(t.compute_s, shape), memory)
    net = measured - scale_s - over
    keep = layer & (measured > 0)
    bound = np.broadcast_to(t.bound == "memory", shape)
    return _Rows(op.m[keep], net[keep], memory[keep], work[keep], over[keep], measured[keep], bound[keep])


def _achieved(r: _Rows) -> np.ndarray:
    used = (r.m <= DECODE_M) & r.memory_bound & (r.memory_s >= WORK_OVER_FLOOR * r.overhead_s) & (r.net_s > 0)
    return np.asarray(r.memory_s[used] / r.net_s[used], dtype=np.float64)


def _latency_rows(r: _Rows, rate: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(excess_s, roofline seconds without the floor, measured_s − dynamic_scale_s) of the latency-bound rows
    (module docstring): work at the format's rate plus the launch cost."""
    work = np.maximum(r.work_s, r.memory_s / rate)  # memory time at the format's rate
    used = work < LATENCY_SHARE * r.measured_s
    return r.net_s[used] - work[used], work[used] + r.overhead_s[used], r.net_s[used] + r.overhead_s[used]


def fit_gemm_kernels(df: pd.DataFrame, hw: HardwareSpec, prof: CalibrationProfile) -> list[KernelFit]:
    """The kernel fit of each :data:`KERNEL_FORMATS` format a normalised GEMM table holds :data:`MIN_ROWS` used rows
    of in both regimes (module docstring); none without as many bf16 rows of each."""
    by_dtype = {str(d): rows for d, rows in df.groupby("dtype", sort=True)}
    ref = _terms(by_dtype[REFERENCE], REFERENCE, hw, prof) if REFERENCE in by_dtype else None
    if ref is None:
        return []
    ref_achieved, ref_excess = _achieved(ref), _latency_rows(ref, 1.0)[0]
    if min(len(ref_achieved), len(ref_excess)) < MIN_ROWS:
        return []
    fits = []
    for aic_dtype in KERNEL_FORMATS:
        r = _terms(by_dtype[aic_dtype], aic_dtype, hw, prof) if aic_dtype in by_dtype else None
        achieved = _achieved(r) if r is not None else np.empty(0)
        if r is None or len(achieved) < MIN_ROWS:
            continue
        rate = float(np.clip(np.median(achieved) / np.median(ref_achieved), *RATE_CLAMP))
        excess, priced, measured = _latency_rows(r, rate)
        if len(excess) < MIN_ROWS:
            continue
        e, e_ref = float(np.median(excess)), float(np.median(ref_excess))
        fixed = max(0.0, e - e_ref)
        fmt = GEMM_FORMATS[aic_dtype][0].value
        rate_res = _quantiles(achieved / rate)  # streaming seconds ∝ 1 / rate
        floor_res = _quantiles((priced + fixed) / measured)
        fits.append(KernelFit(aic_dtype, fmt, rate, len(achieved), rate_res, fixed, len(excess), floor_res, e, e_ref))
    return fits


def with_gemm_kernels(prof: CalibrationProfile, fits: list[KernelFit]) -> CalibrationProfile:
    """``prof`` with ``gemm_memory_rate`` and ``gemm_fixed_s`` of each fitted weight format set."""
    rates = {**prof.gemm_memory_rate, **{f.weight_format: f.rate for f in fits}}
    fixed = {**prof.gemm_fixed_s, **{f.weight_format: f.fixed_s for f in fits}}
    return prof.model_copy(update={"gemm_memory_rate": rates, "gemm_fixed_s": fixed})
