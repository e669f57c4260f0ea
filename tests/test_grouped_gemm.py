"""MoE expert GEMMs run as grouped GEMMs: their weight streaming is charged at the measured fraction.

GIVEN the default profile, WHEN a MoE decode step is costed, THEN the grouped expert GEMMs stream at
``grouped_gemm.memory_efficiency[hw]`` × the memory ceiling on the devices measured (the H200's
Hopper SM) and at the plain ceiling elsewhere, dense GEMMs are untouched, and the shipped value is
the documented median of the committed H200 measurement.
"""

from __future__ import annotations

import csv
from statistics import median

import numpy as np
import pytest

import roofline
from roofline.errors import SpecError
from roofline.evaluate import ceilings
from roofline.ops import decode_ops
from roofline.prediction import make_scenario
from roofline.profile import GroupedGemm, default_profile
from roofline.published.graph_overhead import closedloop_dir
from roofline.published.grouped_gemm import DECODE, SAME_SM, fit_grouped_gemm


def _ops(hw_name: str) -> tuple[roofline.HardwareSpec, list]:
    m, hw = roofline.model("qwen3-30b-a3b"), roofline.hardware(hw_name)
    sc = make_scenario(hw, 16, 1024, 16, weight_dtype="bf16")
    return hw, decode_ops(m, sc, hw, 1024.0)


@pytest.mark.parametrize("hw_name,measured", [("h200-sxm", True), ("h100-sxm", True), ("b200", False)])
def test_grouped_expert_gemms_take_the_measured_factors(hw_name: str, measured: bool) -> None:
    prof = default_profile()
    g = prof.grouped_gemm
    hw, ops = _ops(hw_name)
    experts = [op for op in ops if op.name.startswith("moe.experts_") and op.kind == "gemm"]
    dense = [op for op in ops if op.kind == "gemm" and not op.grouped]
    assert experts and all(op.grouped for op in experts) and dense
    ceiling = prof.memory_ceiling(hw)
    for op in experts:
        c, bw = ceilings(op, hw, prof)
        m = float(np.max(op.m))
        want_bw = ceiling * (float(g.memory_efficiency(m)) if measured else 1.0)
        k_factor = float(np.max(prof.gemm_k.factor(hw.name, op.dtype, op.k)))  # the K curve applies too
        want_c = (
            prof.compute_ceiling(hw, op.dtype)
            * float(prof.gemm_curve(op.dtype)(m))
            * k_factor
            * (g.compute_efficiency if measured else 1.0)
        )
        assert float(np.max(bw)) == pytest.approx(want_bw, rel=1e-12)
        assert float(np.max(c)) == pytest.approx(want_c, rel=1e-12)
    for op in dense:
        _, bw = ceilings(op, hw, prof)
        assert float(np.max(bw)) == pytest.approx(ceiling, rel=1e-12)


def test_shipped_values_are_the_documented_fits() -> None:
    """Memory curve = per-octave medians of the decode ratios made monotone; compute = median of compute-bound cases."""
    with (closedloop_dir() / DECODE).open(newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["half"] != "copy"]
    assert len(rows) == 40
    by_octave: dict[float, list[float]] = {}
    for r in rows:
        m = float(r["rows"]) / float(r["touched"])
        by_octave.setdefault(float(2.0 ** round(np.log2(m))), []).append(
            float(r["grouped_bytes_per_s"]) / float(r["dense_bytes_per_s"])
        )
    prof = default_profile()
    curve = prof.grouped_gemm.memory_efficiency
    assert curve is not None and curve.x == tuple(sorted(by_octave))
    meds = [median(by_octave[x]) for x in curve.x]
    assert all(b >= a for a, b in zip(curve.y, curve.y[1:], strict=False))  # non-decreasing
    assert curve.y[0] == pytest.approx(meds[0], abs=2e-4)  # the first octave has no violator to pool with
    rec = prof.residuals["grouped_gemm"]
    bound = [c["compute_efficiency"] for c in rec["prefill_cases"] if c["compute_bound"]]
    assert len(bound) == rec["compute_bound_cases"] > 0
    assert prof.grouped_gemm.compute_efficiency == pytest.approx(min(1.0, median(bound)), abs=1e-4)
    assert fit_grouped_gemm(prof).grouped_gemm == prof.grouped_gemm
    assert set(prof.grouped_gemm.devices) == set(SAME_SM)


def test_efficiency_outside_its_range_is_refused() -> None:
    with pytest.raises((ValueError, SpecError), match="compute_efficiency"):
        GroupedGemm(devices=("h200-sxm",), compute_efficiency=0.0)


def test_moe_stream_routes_like_the_cost_model() -> None:
    """The measurement's uniform top-k routing touches about as many experts as ffn.expected_distinct_experts."""
    import torch  # installed by the test command (the calibrate extra)

    from calibrate.closedloop.moe_stream import route
    from roofline.ops.ffn import expected_distinct_experts

    gen = torch.Generator().manual_seed(0)
    for batch in (8, 32, 128):
        touched = [len(route(torch, 128, 128, 8, batch, gen)) for _ in range(20)]
        want = float(expected_distinct_experts(128, 8, np.asarray(float(batch))))
        assert float(np.mean(touched)) == pytest.approx(want, rel=0.05)
    rows = route(torch, 32, 128, 8, 4096, gen)
    assert len(rows) == 32 and sum(rows) == pytest.approx(4096 * 8 * 32 / 128, rel=0.05)


def test_gpu_measurement_scripts_fail_kindly_without_a_gpu(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    """No CUDA device: one line naming the fix and exit 2, never a traceback; the output is checked first."""
    from calibrate.closedloop import gemm_k, moe_stream

    for main in (moe_stream.main, gemm_k.main):
        assert main(["-o", str(tmp_path / "x.csv")]) == 2
        err = capsys.readouterr().err
        assert "no CUDA device" in err and "Traceback" not in err
