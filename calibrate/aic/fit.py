"""A CalibrationProfile for one (gpu, framework) whose GEMM rates per format are fitted to AIC's table.

For each format of :data:`FIT_FORMATS` (a compute format) and :data:`WEIGHT_FORMAT_FITS` (the kernel an engine
dispatches for one weight storage format, e.g. block-scaled FP8), from the rows that are **layer-shaped**
(N, K ≥ :data:`LAYER_MIN_NK`) and that the base profile (default: the shipped default) calls
**compute-bound**, the achieved fraction of the datasheet peak of each row,

    a = FLOPs / (measured_s − dynamic_scale_s − overhead_s) / peak / gemm_k factor(K)

(overhead_s: the base profile's per-kernel graph cost; dynamic_scale_s: the row's dynamic activation-scale pass,
which static-scale deployments do not run, :func:`calibrate.aic.tables.dynamic_scale_s`) gives

* the large-GEMM efficiency = median a over the rows with M ≥ :data:`LARGE_M`;
* the efficiency against M = median a / efficiency in each octave of M from :data:`CURVE_MIN_M` up (a knot
  per octave holding :data:`MIN_BIN_ROWS` rows), the base curve below it: decode-sized GEMMs are memory- and
  latency-bound, and their excess over the roofline is the per-kernel cost, not a rate (one rate fitted at
  every M is what made decode TPOT 40 % wrong in issue #26); each knot ≥ the previous one × M_prev / M, so a
  GEMM's time never falls as M grows.

A compute format's fit sets ``compute[dtype]`` and ``gemm_m_efficiency_by_dtype[dtype]``; a weight format's sets
``compute_by_weight_format[format]`` (applied to dense GEMMs whose weights are stored in that format). Everything
else is the base profile's. The provenance names the table, the engine version, the rows used and the fit
residual (p10, median, p90 of predicted / measured over the rows used, re-timed with the fitted profile). The
shipped default is never changed; the profile is written only where ``-o`` says. The fitted ceiling is the
format's compute ceiling, so attention kernels of that format (× ``attention.compute_efficiency``) see it too.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from calibrate.aic.compare import gemm_op
from calibrate.aic.knots import knot_medians, knot_of
from calibrate.aic.tables import AIC_VERSION, AicTable, load_table, tables_newest_first
from roofline.errors import CalibrationError
from roofline.evaluate import op_time
from roofline.profile import CalibrationProfile, Ceiling, Curve, WeightFormatGemm, default_profile
from roofline.specs.hardware import ComputeDtype, HardwareSpec
from roofline.specs.library import hardware

#: AIC ``gemm_dtype`` whose compute format is unambiguous → the profile's compute format it fits.
FIT_FORMATS: dict[str, ComputeDtype] = {"bfloat16": "bf16", "fp8": "fp8", "nvfp4": "fp4", "sq": "int8"}
#: AIC ``gemm_dtype`` fitted as the kernel an engine dispatches for one weight format (the profile's
#: ``compute_by_weight_format``), with the compute format whose peak it is a fraction of: block-scaled FP8
#: checkpoints (DeepSeek-V3, Qwen3-FP8, GLM, MiniMax) run their own block-scaled kernel, not per-tensor FP8's.
WEIGHT_FORMAT_FITS: dict[str, tuple[str, ComputeDtype]] = {"fp8_block": ("fp8-block", "fp8")}
MIN_ROWS = 10  # fewer compute-bound large-M rows than this: the format is not fitted
#: Rows fitted: GEMMs with N and K of at least this (the layer shapes of the models served: hidden sizes and
#: tensor-parallel shards of 1k+); tile-starved toy shapes (N or K of 16-512) run far below their peak at any M.
LAYER_MIN_NK = 1024
LARGE_M = 4096  # the large-GEMM efficiency is the median over rows with M >= this
MIN_BIN_ROWS = 20  # an M with fewer used rows than this gets no knot of its own
CURVE_MIN_M = 512  # the smallest M whose octave gets a fitted knot (module docstring)
CURVE_FLOOR = 0.005  # curve values are positive (profile rule); a knot below this is held at it


@dataclass(frozen=True)
class FormatFit:
    """One format's fit: rows used, the efficiency before / after (of the datasheet peak) and the residual."""

    aic_dtype: str
    compute: ComputeDtype
    rows_used: int
    efficiency_before: float
    efficiency: float
    residual_p10: float
    residual_median: float
    residual_p90: float
    weight_format: str = ""  # set: the fit is that weight format's kernel (compute_by_weight_format)
    curve: Curve | None = None  # fitted efficiency against M (relative to ``efficiency``)

    @property
    def key(self) -> str:
        """Where the fit lands in the profile: ``compute.<dtype>`` or ``compute.<weight format>``."""
        return f"compute.{self.weight_format or self.compute}"


def fittable(aic_dtype: str) -> bool:
    """Whether :func:`fit_format` fits this AIC ``gemm_dtype``."""
    return aic_dtype in FIT_FORMATS or aic_dtype in WEIGHT_FORMAT_FITS


def gemm_table(gpu: str, framework: str, root: Path | None = None) -> AicTable:
    """The newest-version GEMM table of (gpu, framework) under ``root`` (default: the installed package)."""
    tables = tables_newest_first(gpu, framework, "gemm", root)
    if not tables:
        raise CalibrationError(f"no AIConfigurator GEMM table for gpu {gpu!r} and framework {framework!r}")
    return tables[0]


def fit_format(rows: pd.DataFrame, aic_dtype: str, hw: HardwareSpec, base: CalibrationProfile) -> FormatFit | None:
    """The fit of one format from its compute-bound layer-shaped rows under ``base`` (module docstring); None:
    too few rows (rows timed eagerly, :data:`calibrate.aic.tables.EAGER_GEMMS`, are host-paced and not used)."""
    rows = graph_rows(rows)
    op = gemm_op(rows, aic_dtype, hw) if len(rows) else None
    if op is None:
        return None
    wf, compute = WEIGHT_FORMAT_FITS.get(aic_dtype, ("", FIT_FORMATS.get(aic_dtype, "bf16")))
    peak = float(hw.peak_flops_per_s(compute) or np.nan)
    timing = op_time(op, hw, base)
    scale_s = rows["dynamic_scale_s"].to_numpy(np.float64) if "dynamic_scale_s" in rows else 0.0
    measured = rows["time_s"].to_numpy(np.float64) - scale_s  # the static-scale GEMM (tables.dynamic_scale_s)
    kernel_s = measured - timing.overhead_s
    layer = (op.n >= LAYER_MIN_NK) & (op.k >= LAYER_MIN_NK)
    used = (timing.bound == "compute") & (kernel_s > 0) & layer
    large = used & (op.m >= LARGE_M)
    if int(large.sum()) < MIN_ROWS:
        return None
    k_factor = np.broadcast_to(base.gemm_k.factor(hw.name, compute, op.k), op.m.shape)
    achieved = op.flops / np.where(kernel_s > 0, kernel_s, np.nan) / peak / k_factor  # of the peak, K factor out
    efficiency = float(np.median(achieved[large]))
    curve = _m_curve(op.m, achieved, used, efficiency, base.gemm_curve(compute, wf))
    before = base.gemm_compute_ceiling(hw, compute, wf) / peak
    fitted = with_efficiency(base, hw, compute, efficiency, (), wf, curve)
    ratio = op_time(op, hw, fitted).time_s[used] / measured[used]
    p10, p50, p90 = (float(q) for q in np.quantile(ratio, [0.1, 0.5, 0.9]))
    return FormatFit(aic_dtype, compute, int(used.sum()), before, efficiency, p10, p50, p90, wf, curve)


def graph_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of a normalised GEMM table the collector timed in CUDA-graph replay (kernel times)."""
    return rows[rows["launch"] != "eager"] if "launch" in rows else rows


def _m_curve(m: np.ndarray, achieved: np.ndarray, used: np.ndarray, ceiling: float, base: Curve) -> Curve:
    """Efficiency against M relative to ``ceiling``: the median achieved / ceiling of the used rows in each octave
    of M ≥ :data:`CURVE_MIN_M` (2^i ≤ M < 2^(i+1), knot at 2^i) with :data:`MIN_BIN_ROWS` of them; below, the
    base curve (decode-sized GEMMs are memory- and latency-bound: their excess is the per-kernel cost, not a rate).
    Each knot is kept ≥ the previous one × M_prev / M, so a GEMM's time never falls as M grows."""
    sel = used & (knot_of(m) >= CURVE_MIN_M)  # rows binned by octave of M, knot at its start
    kx, ky, _ = knot_medians(m[sel], achieved[sel], min_rows=MIN_BIN_ROWS)
    knots = [(x, y / ceiling) for x, y in zip(kx, ky, strict=True)]
    if not knots:
        return base
    below = [(float(x), float(y)) for x, y in zip(base.x, base.y, strict=True) if x < knots[0][0]]
    xs: list[float] = []
    ys: list[float] = []
    for x, y in [*below, *knots]:
        y = min(max(y, ys[-1] * xs[-1] / x if ys else y, CURVE_FLOOR), 1.5)
        xs.append(x)
        ys.append(y)
    return Curve(
        x=tuple(xs),
        y=tuple(ys),
        sources=(f"fitted: median achieved / large-GEMM efficiency per octave of M >= {CURVE_MIN_M}",),
    )


def with_efficiency(
    base: CalibrationProfile,
    hw: HardwareSpec,
    compute: ComputeDtype,
    efficiency: float,
    sources: tuple[str, ...],
    weight_format: str = "",
    curve: Curve | None = None,
) -> CalibrationProfile:
    """``base`` with the ``compute`` ceiling at ``efficiency`` of the datasheet peak (its vendor entry too) and,
    given, its efficiency ``curve`` against M; or, with ``weight_format``, that format's dense-GEMM kernel
    (``compute_by_weight_format``)."""
    if weight_format:
        rate = WeightFormatGemm(efficiency=efficiency, m_efficiency=curve, sources=sources)
        return base.model_copy(
            update={"compute_by_weight_format": {**base.compute_by_weight_format, weight_format: rate}}
        )
    vendor = {v: dict(d) for v, d in base.vendor_compute_efficiency.items()}
    if compute in vendor.get(hw.vendor, {}):
        vendor[hw.vendor][compute] = efficiency
    ceilings = {**base.compute, compute: Ceiling(efficiency=efficiency, sources=sources)}
    update: dict[str, object] = {"compute": ceilings, "vendor_compute_efficiency": vendor}
    if curve is not None:
        update["gemm_m_efficiency_by_dtype"] = {**base.gemm_m_efficiency_by_dtype, compute: curve}
    return base.model_copy(update=update)


def fit_profile(
    gpu: str, framework: str, *, root: Path | None = None, base: CalibrationProfile | None = None
) -> tuple[CalibrationProfile, list[FormatFit]]:
    """The fitted profile of (gpu, framework)'s newest GEMM table and the per-format fits (module docstring)."""
    table = gemm_table(gpu, framework, root)
    if table.hardware is None:
        raise CalibrationError(f"{gpu} has no roofline hardware spec; a profile needs a mapped GPU")
    hw, prof = hardware(table.hardware), base if base is not None else default_profile()
    df = load_table(table)
    fits = [
        f
        for dtype, rows in df.groupby("dtype", sort=True)
        if fittable(str(dtype)) and (f := fit_format(rows, str(dtype), hw, prof)) is not None
    ]
    if not fits:
        raise CalibrationError(f"{table.label}: no format with {MIN_ROWS}+ compute-bound rows to fit")
    fitted = prof
    for f in fits:
        src = (f"aiconfigurator-core {AIC_VERSION} {table.label}: {f.rows_used} compute-bound {f.aic_dtype} rows",)
        fitted = with_efficiency(fitted, hw, f.compute, f.efficiency, src, f.weight_format, f.curve)
    provenance = {
        "kind": "aiconfigurator",
        "source": f"aiconfigurator-core {AIC_VERSION}",
        "table": table.label,
        "engine": framework,
        "engine_version": table.version,
        "base_profile": prof.name,
        "fitted": "GEMM compute efficiency per format from compute-bound rows only; small-M behaviour left to "
        "the base profile's gemm_m_efficiency curve and per-kernel overheads",
        "fits": {f.weight_format or f.compute: fit_record(f) for f in fits},
    }
    name = f"aic-{gpu}-{framework}-{table.version}"
    update = {"name": name, "device": hw.name, "created": dt.date.today().isoformat(), "provenance": provenance}
    return fitted.model_copy(update=update), fits


def fit_record(f: FormatFit) -> dict[str, float | int | str]:
    return {
        "aic_dtype": f.aic_dtype,
        "rows_used": f.rows_used,
        "efficiency_before": f.efficiency_before,
        "efficiency": f.efficiency,
        "residual_ratio_p10": f.residual_p10,
        "residual_ratio_median": f.residual_median,
        "residual_ratio_p90": f.residual_p90,
    }
