"""A CalibrationProfile for one (gpu, framework) whose GEMM compute efficiency per format is fitted to AIC's table.

Only the large-GEMM ceiling is fitted, and only from the rows the base profile (default: the shipped default)
calls **compute-bound**; for each format of :data:`FIT_FORMATS`

    efficiency' = efficiency × exp(median(log(compute_s / (measured_s − overhead_s))))

over those rows (compute_s: the base profile's FLOPs / compute ceiling of the row, overhead_s its per-kernel
graph cost), so that the median compute-bound row is predicted exactly. Small-M behaviour is left to the base
profile's ``gemm_m_efficiency`` curve and per-kernel overheads: one rate fitted at every M (the small-M GEMMs
are latency-bound) is what made decode TPOT 40 % wrong in issue #26. Everything else is the base profile's.
The provenance names the table, the engine version, the rows used and the fit residual (p10, median, p90 of
predicted / measured over the rows used, re-timed with the fitted profile). The shipped default is never
changed; the profile is written only where ``-o`` says. The fitted ceiling is the format's compute ceiling, so
attention kernels of that format (× ``attention.compute_efficiency``) see it too.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from calibrate.aic.compare import gemm_op
from calibrate.aic.tables import AIC_VERSION, AicTable, load_table, tables_newest_first
from roofline.errors import CalibrationError
from roofline.evaluate import op_time
from roofline.profile import CalibrationProfile, Ceiling, default_profile
from roofline.specs.hardware import ComputeDtype, HardwareSpec
from roofline.specs.library import hardware

#: AIC ``gemm_dtype`` whose compute format is unambiguous → the profile's compute format it fits.
FIT_FORMATS: dict[str, ComputeDtype] = {"bfloat16": "bf16", "fp8": "fp8", "nvfp4": "fp4", "sq": "int8"}
MIN_ROWS = 10  # fewer compute-bound rows than this: the format is not fitted


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


def gemm_table(gpu: str, framework: str, root: Path | None = None) -> AicTable:
    """The newest-version GEMM table of (gpu, framework) under ``root`` (default: the installed package)."""
    tables = tables_newest_first(gpu, framework, "gemm", root)
    if not tables:
        raise CalibrationError(f"no AIConfigurator GEMM table for gpu {gpu!r} and framework {framework!r}")
    return tables[0]


def fit_format(rows: pd.DataFrame, aic_dtype: str, hw: HardwareSpec, base: CalibrationProfile) -> FormatFit | None:
    """The fit of one format from its compute-bound rows under ``base`` (module docstring); None: too few rows."""
    op = gemm_op(rows, aic_dtype, hw)
    if op is None:
        return None
    timing = op_time(op, hw, base)
    measured = rows["time_s"].to_numpy(np.float64)
    kernel_s = measured - timing.overhead_s
    used = (timing.bound == "compute") & (kernel_s > 0)
    if int(used.sum()) < MIN_ROWS:
        return None
    scale = float(np.exp(np.median(np.log(timing.compute_s[used] / kernel_s[used]))))
    compute = FIT_FORMATS[aic_dtype]
    before = base.compute_ceiling(hw, compute) / float(hw.peak_flops_per_s(compute) or np.nan)
    fitted = with_efficiency(base, hw, compute, before * scale, ())
    ratio = op_time(op, hw, fitted).time_s[used] / measured[used]
    p10, p50, p90 = (float(q) for q in np.quantile(ratio, [0.1, 0.5, 0.9]))
    return FormatFit(aic_dtype, compute, int(used.sum()), before, before * scale, p10, p50, p90)


def with_efficiency(
    base: CalibrationProfile, hw: HardwareSpec, compute: ComputeDtype, efficiency: float, sources: tuple[str, ...]
) -> CalibrationProfile:
    """``base`` with the ``compute`` ceiling at ``efficiency`` of the datasheet peak (its vendor entry too)."""
    vendor = {v: dict(d) for v, d in base.vendor_compute_efficiency.items()}
    if compute in vendor.get(hw.vendor, {}):
        vendor[hw.vendor][compute] = efficiency
    ceilings = {**base.compute, compute: Ceiling(efficiency=efficiency, sources=sources)}
    return base.model_copy(update={"compute": ceilings, "vendor_compute_efficiency": vendor})


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
        if str(dtype) in FIT_FORMATS and (f := fit_format(rows, str(dtype), hw, prof)) is not None
    ]
    if not fits:
        raise CalibrationError(f"{table.label}: no format with {MIN_ROWS}+ compute-bound rows to fit")
    fitted = prof
    for f in fits:
        src = (f"aiconfigurator-core {AIC_VERSION} {table.label}: {f.rows_used} compute-bound {f.aic_dtype} rows",)
        fitted = with_efficiency(fitted, hw, f.compute, f.efficiency, src)
    provenance = {
        "kind": "aiconfigurator",
        "source": f"aiconfigurator-core {AIC_VERSION}",
        "table": table.label,
        "engine": framework,
        "engine_version": table.version,
        "base_profile": prof.name,
        "fitted": "GEMM compute efficiency per format from compute-bound rows only; small-M behaviour left to "
        "the base profile's gemm_m_efficiency curve and per-kernel overheads",
        "fits": {f.compute: fit_record(f) for f in fits},
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
