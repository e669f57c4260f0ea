"""Quantised dense-GEMM kernels at decode sizes: the weight-streaming rate and per-call floor each format's kernel
has relative to the 16-bit GEMM (``gemm_memory_rate``, ``gemm_fixed_s``), fitted and priced."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from calibrate.aic.compare import gemm_op
from calibrate.aic.gemm_kernels import fit_gemm_kernels, with_gemm_kernels
from calibrate.aic.tables import list_tables, load_table
from roofline.evaluate import op_time
from roofline.ops.records import with_fields
from roofline.profile import datasheet_profile
from roofline.specs.library import hardware

HW = hardware("h100-sxm")
FLOOR_S, RATE = 5e-6, 0.5


def _one(x: object) -> float:
    return float(np.asarray(x).reshape(-1)[0])


def _memory_s(dtype: str, m: int, n: int, k: int) -> float:
    rows = pd.DataFrame({"m": [float(m)], "n": [float(n)], "k": [float(k)]})
    op = gemm_op(rows, dtype, HW)
    assert op is not None
    return _one(op_time(op, HW, datasheet_profile()).memory_s)


def _synthetic(root: Path) -> None:
    """On h100_sxm (datasheet ceilings, no launch cost): bf16 rows that stream at exactly the memory ceiling, 30 of
    them pure streaming (M 1-30, N = K = 8192) and 21 small ones (M 1-21, N = K = 1024) with 4 µs on top; fp8 rows
    of the same shapes streaming at half that rate, the small ones with 4 + 5 µs on top."""
    rows: list[dict[str, object]] = []
    for dtype, slow, extra_s in (("bfloat16", 1.0, 0.0), ("fp8", RATE, FLOOR_S)):
        for m in range(1, 31):
            seconds = _memory_s(dtype, m, 8192, 8192) / slow
            rows.append(
                {"kernel_source": "t", "gemm_dtype": dtype, "m": m, "n": 8192, "k": 8192, "latency": seconds * 1e3}
            )
        for m in range(1, 22):
            seconds = _memory_s(dtype, m, 1024, 1024) / slow + 4e-6 + extra_s
            rows.append(
                {"kernel_source": "t", "gemm_dtype": dtype, "m": m, "n": 1024, "k": 1024, "latency": seconds * 1e3}
            )
    path = root / "h100_sxm" / "gemm" / "vllm" / "0.24.0" / "gemm_perf.parquet"
    path.parent.mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(path, index=False)


def test_fit_recovers_the_rate_and_the_floor_by_hand(tmp_path: Path) -> None:
    _synthetic(tmp_path)
    (table,) = list_tables(tmp_path)
    (fit,) = fit_gemm_kernels(load_table(table), HW, datasheet_profile())
    assert fit.weight_format == "fp8" and (fit.rate_rows, fit.floor_rows) == (51, 21)
    assert abs(fit.rate - RATE) < 1e-12
    assert abs(fit.reference_excess_s - 4e-6) < 1e-12 and abs(fit.excess_s - 9e-6) < 1e-12
    assert abs(fit.fixed_s - FLOOR_S) < 1e-12


def test_the_fitted_kernel_reprices_exactly_its_format(tmp_path: Path) -> None:
    """time = max(compute, bytes / (rate × bandwidth)) + launches + floor for a dense GEMM of that weight format; a
    bf16 GEMM and a grouped (MoE) fp8 GEMM keep their time."""
    _synthetic(tmp_path)
    (table,) = list_tables(tmp_path)
    base = datasheet_profile()
    prof = with_gemm_kernels(base, fit_gemm_kernels(load_table(table), HW, base))
    shape = pd.DataFrame({"m": [8.0], "n": [4096.0], "k": [4096.0]})
    fp8, bf16 = gemm_op(shape, "fp8", HW), gemm_op(shape, "bfloat16", HW)
    assert fp8 is not None and bf16 is not None
    before, after = op_time(fp8, HW, base), op_time(fp8, HW, prof)
    assert abs(_one(after.memory_s) / (_one(before.memory_s) / RATE) - 1) < 1e-12
    assert abs(_one(after.time_s) - (_one(before.memory_s) / RATE + FLOOR_S)) < 1e-15
    assert _one(op_time(bf16, HW, prof).time_s) == _one(op_time(bf16, HW, base).time_s)
    grouped = with_fields(fp8, grouped=True)
    assert _one(op_time(grouped, HW, prof).time_s) == _one(op_time(grouped, HW, base).time_s)
