"""Invariants and properties of the cost model: conservation, growth with batch and context, linearity, sharding."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import roofline
from roofline.errors import ScenarioError
from roofline.memory import kv_bytes_per_sequence
from roofline.prediction import _step_times, make_scenario
from roofline.profile import datasheet_profile, default_profile

MODELS = ["llama-3.1-8b", "mixtral-8x7b", "deepseek-v3", "gemma-2-9b", "gpt-oss-120b", "qwen2.5-7b"]


@pytest.mark.parametrize("name", MODELS)
def test_breakdown_sums_to_totals(name: str) -> None:
    tp = {"deepseek-v3": 8, "mixtral-8x7b": 2}.get(name, 1)
    hw = "b200" if name in ("deepseek-v3", "gpt-oss-120b") else "h100-sxm"
    wd = {"deepseek-v3": "fp8", "gpt-oss-120b": "fp4"}.get(name, "bf16")
    r = roofline.predict(name, hw, batch=4, prompt_len=1000, output_len=50, tp=tp, weight_dtype=wd)
    by_phase = r.ops.groupby("phase")["time_s"].sum()
    assert by_phase["prefill"] == pytest.approx(r.ttft_s, rel=1e-12)
    assert by_phase["decode"] == pytest.approx(r.tpot_s, rel=1e-12)
    assert r.e2e_s == pytest.approx(r.ttft_s + 49 * r.tpot_s, rel=1e-12)
    assert r.layer_breakdown()["time_s"].sum() == pytest.approx(r.ttft_s + r.tpot_s, rel=1e-12)


def test_deterministic() -> None:
    a = roofline.predict("llama-3.1-70b", "h100-sxm", batch=8, prompt_len=2048, output_len=256, tp=4)
    b = roofline.predict("llama-3.1-70b", "h100-sxm", batch=8, prompt_len=2048, output_len=256, tp=4)
    assert a.summary() == b.summary()


@pytest.mark.parametrize("name", ["llama-3.1-8b", "gemma-2-9b", "gpt-oss-120b"])
def test_closed_form_decode_sum_equals_stepwise(name: str) -> None:
    # the closed-form sum over growing context must equal evaluating every decode step
    m, hw, prof = roofline.model(name), roofline.hardware("h200-sxm"), default_profile()
    r = roofline.predict(m, hw, batch=16, prompt_len=3000, output_len=2000, weight_dtype="fp8", calibration=prof)
    from roofline.ops import decode_ops

    ops = decode_ops(m, r.scenario, hw, 3001)
    steps = _step_times(ops, hw, prof, 3000 + np.arange(1, 2000, dtype=float))
    assert r.decode_s == pytest.approx(steps.sum(), rel=1e-9)
    assert r.tpot_steps_s == pytest.approx(steps, rel=1e-12)


def test_sweep_matches_predict() -> None:
    df = roofline.sweep("llama-3.1-8b", "h100-sxm", batch=[1, 8, 256], prompt_len=[128, 4096], output_len=[16, 512])
    assert len(df) == 12
    for row in df.itertuples():
        r = roofline.predict(
            "llama-3.1-8b", "h100-sxm", batch=row.batch, prompt_len=row.prompt_len, output_len=row.output_len
        )
        assert row.fits == r.fits
        assert row.ttft_s == pytest.approx(r.ttft_s, rel=1e-12, nan_ok=True)
        assert row.tpot_s == pytest.approx(r.tpot_s, rel=1e-12, nan_ok=True)
        assert row.e2e_s == pytest.approx(r.e2e_s, rel=1e-12, nan_ok=True)
        assert row.missing_bytes == pytest.approx(r.missing_bytes)
        assert row.max_batch == r.max_batch
    assert df.fits.any() and not df.fits.all()


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    b=st.integers(1, 256),
    p=st.integers(1, 16384),
    o=st.integers(2, 2048),
    db=st.integers(1, 64),
    dp=st.integers(1, 4096),
)
def test_monotone_in_batch_and_context(b: int, p: int, o: int, db: int, dp: int) -> None:
    base = make_scenario(roofline.hardware("h100-sxm"), b, p, o, engine_overrides={"capacity_bytes": 1e15})
    run = roofline.predict
    r0 = run("mixtral-8x7b", "h100-sxm", scenario=base)
    rb = run("mixtral-8x7b", "h100-sxm", scenario=base.with_shape(batch=b + db))
    rp = run("mixtral-8x7b", "h100-sxm", scenario=base.with_shape(prompt_len=p + dp))
    for r in (rb, rp):
        assert r.ttft_s >= r0.ttft_s * (1 - 1e-12)
        assert r.tpot_s >= r0.tpot_s * (1 - 1e-12)
    assert rb.throughput_tok_s >= r0.throughput_tok_s * (1 - 1e-9) or rb.bound_decode == "compute"


@settings(max_examples=25, deadline=None)
@given(scale=st.floats(1.01, 4.0), b=st.integers(1, 128), p=st.integers(16, 8192))
def test_faster_hardware_is_never_slower(scale: float, b: int, p: int) -> None:
    hw = roofline.hardware("a100-80gb-sxm")
    faster_bw = hw.model_copy(
        update={
            "memory": hw.memory.model_copy(update={"bandwidth_bytes_per_s": hw.memory.bandwidth_bytes_per_s * scale})
        }
    )
    faster_c = hw.model_copy(
        update={"peak_dense": hw.peak_dense.model_copy(update={"bf16": hw.peak_dense.bf16 * scale})}
    )  # type: ignore[operator]
    big: dict[str, Any] = {"engine_overrides": {"capacity_bytes": 1e15}}
    r0 = roofline.predict("llama-3.1-8b", hw, batch=b, prompt_len=p, output_len=32, **big)
    for fast in (faster_bw, faster_c):
        r = roofline.predict("llama-3.1-8b", fast, batch=b, prompt_len=p, output_len=32, **big)
        assert r.ttft_s <= r0.ttft_s * (1 + 1e-12)
        assert r.tpot_s <= r0.tpot_s * (1 + 1e-12)


@settings(max_examples=30, deadline=None)
@given(l1=st.integers(1, 100_000), l2=st.integers(1, 100_000))
def test_kv_linear_in_context(l1: int, l2: int) -> None:
    m = roofline.model("qwen2.5-72b")
    f = lambda n: float(kv_bytes_per_sequence(m, n, 2.0))  # noqa: E731
    assert f(l1 + l2) == pytest.approx(f(l1) + f(l2), rel=1e-12)


def test_decode_batch1_is_weight_streaming() -> None:
    # datasheet roofline, batch 1, short context: TPOT ~ weight bytes / bandwidth
    r = roofline.predict(
        "llama-3.1-70b", "h200-sxm", batch=1, prompt_len=16, output_len=4, tp=2, calibration=datasheet_profile()
    )
    assert r.fits
    assert r.tpot_s == pytest.approx(r.weight_bytes_per_gpu / 4.8e12, rel=0.03)


def test_tp2_halves_weights_per_gpu() -> None:
    one = roofline.predict("llama-3.1-70b", "h200-sxm", batch=1, prompt_len=16, output_len=2, tp=1)
    two = roofline.predict("llama-3.1-70b", "h200-sxm", batch=1, prompt_len=16, output_len=2, tp=2)
    assert not one.fits and two.fits
    assert two.weight_bytes_per_gpu == pytest.approx(one.weight_bytes_per_gpu / 2, rel=1e-3)
    assert one.weight_bytes_per_gpu == 2 * roofline.model("llama-3.1-70b").param_count()


def test_moe_decode_touches_k_experts_then_all() -> None:
    m = roofline.model("mixtral-8x7b")
    expert_bytes = 3 * 4096 * 14336 * 2  # one gated expert, bf16
    for batch, experts in ((1, 2.0), (4096, 8.0)):
        r = roofline.predict(
            m,
            "h200-sxm",
            batch=batch,
            prompt_len=16,
            output_len=2,
            engine_overrides={"capacity_bytes": 1e15, "max_num_seqs": 4096},
        )
        dec = r.ops[(r.ops.phase == "decode") & r.ops.name.str.startswith("moe.experts_")]
        assert dec.weight_bytes.sum() == pytest.approx(experts * expert_bytes, rel=1e-6)


def test_infeasible_is_a_result_with_missing_bytes() -> None:
    r = roofline.predict("llama-3.1-405b", "l4", batch=1, prompt_len=128, output_len=8)
    assert not r.fits
    assert r.missing_bytes > 700e9
    assert math.isnan(r.ttft_s) and math.isnan(r.tpot_s)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"batch": 0}, "batch"),
        ({"prompt_len": -5}, "prompt_len"),
        ({"output_len": 0}, "output_len"),
        ({"tp": 3}, "tp=3"),
        ({"weight_dtype": "fp9"}, "fp8"),
        ({"pp": 500}, "pp=500"),
        ({"ep": 2}, "dense"),
    ],
)
def test_bad_scenarios_raise_with_a_fix(kwargs: dict, needle: str) -> None:
    base = {"batch": 1, "prompt_len": 128, "output_len": 8}
    with pytest.raises(ScenarioError, match=needle):
        roofline.predict("llama-3.1-8b", "h100-sxm", **(base | kwargs))


def test_fp8_on_a100_is_refused_kindly() -> None:
    with pytest.raises(ScenarioError, match="no published fp8"):
        roofline.predict("llama-3.1-8b", "a100-80gb-sxm", weight_dtype="fp8")
