"""Which attention parameters each kernel takes (roofline.profile_attention.Attention): the per-call floors, the
prefill curves and rates, and the decode kernels' memory rate, by phase, KV format and family (GQA vs MLA), each
checked on the op's time against a profile without the parameter (hand-derived: the time moves by exactly the
parameter's share, or not at all)."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.evaluate import op_time
from roofline.ops.attention import attention_kernel
from roofline.ops.context import BuildContext
from roofline.ops.records import Op, with_fields
from roofline.profile import Curve, datasheet_profile
from roofline.specs.library import hardware, model
from roofline.specs.precision import Precision
from roofline.specs.scenario import Scenario

HW = hardware("h100-sxm")


def _op(phase: str, kv: Precision, mla: bool, batch: float = 64.0, context: float = 4096.0) -> Op:
    """A graph-launched attention kernel: GQA 32 / 8 heads of 128, or DeepSeek-V3's MLA with 16 heads per GPU."""
    t, past = (context, 0.0) if phase == "prefill" else (1.0, context - 1.0)
    ctx = BuildContext.create(model("llama-3.1-8b"), Scenario(kv_dtype=kv), HW, phase, batch, t, past)  # type: ignore[arg-type]
    if mla:
        dims = (16.0, 16.0, 192.0, 128.0) if phase == "prefill" else (16.0, 1.0, 576.0, 512.0)
        op = attention_kernel(ctx, "x", 1, float("inf"), *dims, 576.0, kv_format=kv.value, mla=True)
    else:
        op = attention_kernel(ctx, "x", 1, float("inf"), 32.0, 8.0, 128.0, 128.0, 2048.0, kv_format=kv.value)
    return with_fields(op, launch="graph")


def _with(**attention: object) -> object:
    base = datasheet_profile()
    return base.model_copy(update={"attention": base.attention.model_copy(update=attention)})


@pytest.mark.parametrize("mla", [False, True])
def test_floors_by_phase_and_family(mla: bool) -> None:
    base = datasheet_profile()
    prof = _with(decode_fixed_s=7e-6, prefill_fixed_s=5e-6, mla_decode_fixed_s=3e-6)
    for phase, expect in (("decode", 3e-6 if mla else 7e-6), ("prefill", 5e-6)):
        op = _op(phase, Precision.BF16, mla)
        gap = float(op_time(op, HW, prof).time_s) - float(op_time(op, HW, base).time_s)  # type: ignore[arg-type]
        assert gap == pytest.approx(expect, abs=1e-15), (phase, mla)


def test_decode_rate_divides_the_decode_kernels_memory_time_by_format_and_family() -> None:
    base = datasheet_profile()
    prof = _with(decode_rate={"fp8": 0.5, "mla:bf16": 0.25})
    for kv, mla, rate in ((Precision.FP8, False, 0.5), (Precision.BF16, True, 0.25), (Precision.BF16, False, 1.0)):
        op = _op("decode", kv, mla)
        mem = float(op_time(op, HW, prof).memory_s)  # type: ignore[arg-type]
        assert mem == pytest.approx(float(op_time(op, HW, base).memory_s) / rate, rel=1e-12), (kv, mla)
    pre = _op("prefill", Precision.FP8, False)
    assert float(op_time(pre, HW, prof).memory_s) == float(op_time(pre, HW, base).memory_s)  # type: ignore[arg-type]


def test_prefill_curves_and_kv_rates_by_family() -> None:
    """A prefill kernel computes at peak × curve(context) × its KV format's rate: GQA on the head-dim curve, MLA on
    its own curve where set (the head-dim curve otherwise), each rate keyed by format and family."""
    flat = Curve(x=(512.0, 65536.0), y=(0.5, 0.5))
    mla_curve = Curve(x=(512.0, 65536.0), y=(0.25, 0.25))
    peak = float(HW.peak_flops_per_s("bf16"))
    prof = _with(
        prefill_compute_efficiency={128: flat, 192: flat},
        mla_prefill_efficiency=mla_curve,
        prefill_kv_rate={"fp8": 0.8, "mla:fp8": 0.5},
    )
    for kv, mla, fraction in (
        (Precision.BF16, False, 0.5),
        (Precision.FP8, False, 0.5 * 0.8),
        (Precision.BF16, True, 0.25),
        (Precision.FP8, True, 0.25 * 0.5),
    ):
        op = _op("prefill", kv, mla)
        t = op_time(op, HW, prof)  # type: ignore[arg-type]
        assert float(t.compute_s) == pytest.approx(float(np.max(op.flops)) / (peak * fraction), rel=1e-12), (kv, mla)
    no_mla_curve = _with(prefill_compute_efficiency={128: flat, 192: flat})
    op = _op("prefill", Precision.BF16, True)
    assert float(op_time(op, HW, no_mla_curve).compute_s) == pytest.approx(float(op.flops) / (peak * 0.5))  # type: ignore[arg-type]
