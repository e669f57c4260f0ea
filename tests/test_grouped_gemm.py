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
from roofline.published.grouped_gemm import MEASUREMENT, SAME_SM, fit_grouped_gemm


def _ops(hw_name: str) -> tuple[roofline.HardwareSpec, list]:
    m, hw = roofline.model("qwen3-30b-a3b"), roofline.hardware(hw_name)
    sc = make_scenario(hw, 16, 1024, 16, weight_dtype="bf16")
    return hw, decode_ops(m, sc, hw, 1024.0)


@pytest.mark.parametrize("hw_name,measured", [("h200-sxm", True), ("h100-sxm", True), ("b200", False)])
def test_grouped_expert_gemms_stream_at_the_measured_fraction(hw_name: str, measured: bool) -> None:
    prof = default_profile()
    hw, ops = _ops(hw_name)
    experts = [op for op in ops if op.name.startswith("moe.experts_") and op.kind == "gemm"]
    dense = [op for op in ops if op.kind == "gemm" and not op.grouped]
    assert experts and all(op.grouped for op in experts) and dense
    want = prof.grouped_gemm.memory_efficiency["h200-sxm"] if measured else 1.0
    ceiling = prof.memory_ceiling(hw)
    for op in experts:
        _, bw = ceilings(op, hw, prof)
        assert float(np.max(bw)) == pytest.approx(ceiling * want, rel=1e-12)
    for op in dense:
        _, bw = ceilings(op, hw, prof)
        assert float(np.max(bw)) == pytest.approx(ceiling, rel=1e-12)


def test_shipped_value_is_the_median_of_the_measurement() -> None:
    with (closedloop_dir() / MEASUREMENT).open(newline="", encoding="utf-8") as fh:
        ratios = [float(r["grouped_bytes_per_s"]) / float(r["dense_bytes_per_s"]) for r in csv.DictReader(fh)
                  if r["half"] != "copy"]  # fmt: skip
    assert len(ratios) == 40
    prof = default_profile()
    assert prof.grouped_gemm.memory_efficiency == dict.fromkeys(SAME_SM, round(median(ratios), 4))
    assert fit_grouped_gemm(prof).grouped_gemm == prof.grouped_gemm
    assert 0.3 < median(ratios) < 0.9  # grouped GEMMs with a few rows per expert stream below dense ones


def test_efficiency_outside_its_range_is_refused() -> None:
    with pytest.raises((ValueError, SpecError), match="grouped_gemm"):
        GroupedGemm(memory_efficiency={"h200-sxm": 0.0})


def test_moe_stream_routes_like_the_cost_model() -> None:
    """The measurement's uniform top-k routing touches about as many experts as ffn.expected_distinct_experts."""
    torch = pytest.importorskip("torch")
    from calibrate.closedloop.moe_stream import _touched, _touched_many
    from roofline.ops.ffn import expected_distinct_experts

    gen = torch.Generator().manual_seed(0)
    for batch in (8, 32, 128):
        touched = [len(_touched(torch, 128, 128, 8, batch, gen)) for _ in range(20)]
        want = float(expected_distinct_experts(128, 8, np.asarray(float(batch))))
        assert float(np.mean(touched)) == pytest.approx(want, rel=0.05)
    rows = _touched_many(torch, 32, 128, 8, 4096, gen)
    assert len(rows) == 32 and sum(rows) == pytest.approx(4096 * 8 * 32 / 128, rel=0.05)
