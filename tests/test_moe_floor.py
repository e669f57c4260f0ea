"""A quantised fused-MoE call's per-call floor (``GroupedRates.fixed_s``): fitted from the few-token rows, paid once
per call on its first grouped GEMM, only on the devices the rates were measured on."""

from __future__ import annotations

import numpy as np
import pandas as pd

from calibrate.aic.moe import moe_ops_for_rows, moe_rows
from calibrate.aic.moe_floor import FLOOR_TOKENS, fit_call_floor
from roofline.engine.profiles import shipped_engine_profile
from roofline.evaluate import op_time
from roofline.profile import CalibrationProfile
from roofline.specs.library import hardware

HW = hardware("h200-sxm")
KEY = "fp8:1.0"  # format_key of block-FP8 weights (fp8 compute, 1 byte per weight)
FLOOR_S = 20e-6


def _profile(fixed_s: float) -> CalibrationProfile:
    """The shipped h200-sxm SGLang profile with its block-FP8 MoE kernel's floor set to ``fixed_s``."""
    prof = shipped_engine_profile("h200-sxm", "sglang")
    assert prof is not None and KEY in prof.grouped_gemm.by_format
    gg = prof.grouped_gemm
    rates = {**gg.by_format, KEY: gg.by_format[KEY].model_copy(update={"fixed_s": fixed_s})}
    return prof.model_copy(update={"grouped_gemm": gg.model_copy(update={"by_format": rates})})


def _rows(tokens: range) -> pd.DataFrame:
    """Balanced block-FP8 rows of a DeepSeek-V3-shaped layer (7168 hidden, 2048 expert width, top 8 of 256, ep 8)
    at ``tokens``, their measured time (1 s) left to set."""
    n = len(tokens)
    return pd.DataFrame(
        {
            "gpu": "h200_sxm",
            "framework": "sglang",
            "version": "0.5.14",
            "kernel": "sglang_fused_moe_triton",
            "moe_dtype": "fp8_block",
            "distribution": "balanced",
            "num_tokens": np.array(tokens, dtype=np.float64),
            "hidden_size": 7168.0,
            "inter_size": 2048.0,
            "topk": 8.0,
            "num_experts": 256.0,
            "moe_tp_size": 1.0,
            "moe_ep_size": 8.0,
            "time_s": np.ones(n),
        }
    )


def test_floor_is_the_median_excess_of_the_few_token_rows() -> None:
    """Rows measured at exactly roofline's price + 20 µs: the floor is 20 µs, and with it every row is exact."""
    rows = pd.concat([_rows(range(1, FLOOR_TOKENS + 1))] * 3, ignore_index=True)
    unfloored = _profile(0.0)
    rows["time_s"] = moe_rows(rows, HW, unfloored)["predicted_s"].to_numpy() + FLOOR_S
    fit = fit_call_floor(rows, ("fp8_block",), HW, unfloored)
    assert fit is not None and fit[1] == len(rows) and abs(fit[0] - FLOOR_S) < 1e-12
    ratio = moe_rows(rows, HW, _profile(fit[0]))["ratio"].to_numpy()
    assert np.allclose(ratio, 1.0, rtol=1e-12, atol=0)


def test_floor_is_paid_once_per_call_and_only_where_measured() -> None:
    """The gate_up GEMM carries the floor, the down GEMM does not; on a device outside the rates' devices (b200)
    neither does."""
    ops = moe_ops_for_rows(_rows(range(1, 2)), HW, "fp8_block")
    assert ops is not None
    with_floor, without = _profile(FLOOR_S), _profile(0.0)
    up = float(np.asarray(op_time(ops.gate_up, HW, with_floor).time_s - op_time(ops.gate_up, HW, without).time_s)[0])
    down = op_time(ops.down, HW, with_floor).time_s - op_time(ops.down, HW, without).time_s
    assert abs(up - FLOOR_S) < 1e-15 and float(np.max(np.abs(down))) == 0.0
    other = hardware("b200")
    ops_b = moe_ops_for_rows(_rows(range(1, 2)), other, "fp8_block")
    assert ops_b is not None
    assert (
        float(
            np.asarray(
                op_time(ops_b.gate_up, other, with_floor).time_s - op_time(ops_b.gate_up, other, without).time_s
            )[0]
        )
        == 0.0
    )


def test_only_kernels_that_quantise_activations_ship_a_floor() -> None:
    """h100-sxm SGLang: its block-FP8 (W8A8) kernel ships a floor (what its few-token rows hold beyond the module's
    inventoried kernels); its weight-only kernels (MXFP4 W4A16, int4) do not."""
    prof = shipped_engine_profile("h100-sxm", "sglang")
    assert prof is not None
    by_format = prof.grouped_gemm.by_format
    assert by_format["fp8:1.0"].fixed_s > 0
    weight_only = [k for k in by_format if k.startswith("bf16:0.5")]
    assert weight_only and all(by_format[k].fixed_s == 0 for k in weight_only)
