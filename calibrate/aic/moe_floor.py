"""A quantised fused-MoE kernel's per-call floor (``GroupedRates.fixed_s``) from the few-token rows of a ``moe`` table.

The rates of :func:`calibrate.aic.moe.fit_grouped` are fitted where the grouped GEMMs dominate a row (``DOMINANCE``
× the act and launch terms); a quantised fused-MoE call also quantises its activations (before each GEMM),
aligns the tokens to the experts' blocks and sums the experts' outputs, work whose time does not shrink with the
tokens. On h200_sxm SGLang's block-FP8 Triton kernel takes 36.7 µs for one token where its two GEMMs, the act and
their launches at the fitted rates come to 13.9 µs (bf16 needs no floor: its layer shapes ship as measured
seconds). Under the profile with the format's rates, over the balanced rows of at most :data:`FLOOR_TOKENS`
tokens,

    floor = median(measured_s − predicted_s)          (s, at least 0)

where predicted_s is the comparison's price of the row (:func:`calibrate.aic.moe.moe_rows`: both grouped GEMMs,
the act, and the launches of every kernel the engine's module runs, :mod:`calibrate.aic.moe_module`: once those
alignment, routing and quantisation kernels are priced the floor is what is left, FP8 0 / 2–5 / 4–14 µs on vLLM /
SGLang / TensorRT-LLM where it was 11–26 µs with one launch per GEMM). The floor is paid once per MoE call, on
its first grouped GEMM (:meth:`roofline.profile.CalibrationProfile.floor_s`). Only kernels that quantise their
activations get one (:func:`with_call_floors`): fitted for the weight-only MXFP4 kernel too, its 28-39 µs floor on
h100/h200 vLLM made gpt-oss's closed-loop TPOT +5.6 → +31.5 % (a 438-row sample of the public rows, engine
profiles), a version's kernel the deployments evidently did not run.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from calibrate.aic.compare import GEMM_FORMATS, QUANTISED_ACTIVATIONS, moe_format_key
from calibrate.aic.moe import GroupedFit, fit_rows, moe_rows
from calibrate.aic.tables import AicTable
from roofline.profile import CalibrationProfile
from roofline.specs.hardware import HardwareSpec

FLOOR_TOKENS = 8  # rows of at most this many tokens: a call whose work is far below its fixed cost
MIN_FLOOR_ROWS = 20


def fit_call_floor(
    df: pd.DataFrame, formats: tuple[str, ...], hw: HardwareSpec, prof: CalibrationProfile
) -> tuple[float, int] | None:
    """(floor seconds, rows used) of the kernel format ``formats`` (AIC ``moe_dtype``, pooled) under ``prof``
    (module docstring); None with fewer than :data:`MIN_FLOOR_ROWS` rows."""
    rows = fit_rows(df, formats)
    rows = rows[rows["num_tokens"] <= FLOOR_TOKENS]
    if len(rows) < MIN_FLOOR_ROWS:
        return None
    priced = moe_rows(rows, hw, prof)
    excess = (priced["measured_s"] - priced["predicted_s"]).to_numpy(np.float64)
    if len(excess) < MIN_FLOOR_ROWS:
        return None
    return max(0.0, float(np.median(excess))), len(excess)


def with_call_floors(
    prof: CalibrationProfile,
    fits: list[tuple[AicTable, tuple[str, ...], GroupedFit]],
    frames: dict[AicTable, pd.DataFrame],
    hw: HardwareSpec,
    records: dict[str, Any],
) -> CalibrationProfile:
    """``prof`` with the floor of each kernel of ``prof.grouped_gemm.by_format`` that ``fits`` fitted (from its table
    in ``frames``) whose activations are quantised (W8A8 FP8, W4A4 NVFP4: ``compare.QUANTISED_ACTIVATIONS``), under
    its fitted rates; each floor is added to its ``records`` entry (``grouped_gemm.<format key>``). Weight-only
    kernels (int4 Marlin, MXFP4 W4A16) dequantise inside their GEMMs and have no such pass: their few-token excess
    is left unfitted (module docstring of :mod:`calibrate.aic.engine_profile`: their rates do not transfer either)."""
    by_format = dict(prof.grouped_gemm.by_format)
    for t, formats, _ in fits:
        if GEMM_FORMATS[formats[0]][1] not in QUANTISED_ACTIVATIONS:  # weight-only: no activation quantisation
            continue
        key = moe_format_key(formats[0], hw)  # every fitted format maps on hw (its rates were fitted there)
        floor = fit_call_floor(frames[t], formats, hw, prof) if key in by_format else None
        if floor is None:
            continue
        by_format[key] = by_format[key].model_copy(update={"fixed_s": floor[0]})
        records[f"grouped_gemm.{key}"].update({"fixed_s": floor[0], "rows_used_floor": floor[1]})
    return prof.model_copy(update={"grouped_gemm": prof.grouped_gemm.model_copy(update={"by_format": by_format})})
