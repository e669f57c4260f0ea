"""GEMM compute rate against the inner dimension K (measured on an H200).

GIVEN the default profile, WHEN a GEMM is costed, THEN on the measured devices its compute ceiling is the
large-GEMM ceiling × g(M) × the K curve at its K (short K = row-parallel GEMMs under tensor parallelism),
1 at large K and on other devices, and the shipped curve is the documented fit of the committed measurement.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from statistics import median

import numpy as np
import pytest

import roofline
from roofline.evaluate import ceilings
from roofline.ops.records import gemm
from roofline.profile import default_profile
from roofline.published.gemm_k import MEASUREMENT, fit_gemm_k
from roofline.published.graph_overhead import closedloop_dir


@pytest.mark.parametrize("hw_name,measured", [("h200-sxm", True), ("h100-sxm", True), ("b200", False)])
@pytest.mark.parametrize("k", [256.0, 1024.0, 8192.0])
def test_compute_ceiling_follows_the_k_curve(hw_name: str, measured: bool, k: float) -> None:
    prof, hw = default_profile(), roofline.hardware(hw_name)
    op = gemm("attn.o_proj", "attention", "attn", 1, "bf16", 4096.0, 8192.0, k, 2.0, 2.0)
    c, _ = ceilings(op, hw, prof)
    curve = prof.gemm_k.curves["bf16"]
    want = (
        prof.compute_ceiling(hw, "bf16") * float(prof.gemm_curve("bf16")(4096.0)) * (float(curve(k)) if measured else 1)
    )
    assert float(np.max(c)) == pytest.approx(want, rel=1e-12)
    if k >= 4096:
        assert float(curve(k)) == 1.0


def test_tensor_parallel_down_projection_is_slower_than_its_flops_say() -> None:
    """Llama-3.1-70B prefill at tp = 8 on H200: the FFN down GEMM (K = 28672/8 = 3584) loses little, the
    attention output GEMM (K = 8192/8 = 1024) about 7 %; at tp = 1 neither does."""
    curve = default_profile().gemm_k.curves["bf16"]
    assert 0.97 < float(curve(3584.0)) <= 1.0
    assert 0.85 < float(curve(1024.0)) < 0.97
    assert float(curve(128.0)) < 0.6


def test_shipped_curve_is_the_documented_fit() -> None:
    groups: dict[tuple[str, str, str], list[tuple[float, float]]] = defaultdict(list)
    with (closedloop_dir() / MEASUREMENT).open(newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            groups[(r["dtype"], r["m"], r["n"])].append((float(r["k"]), float(r["flops_per_s"])))
    per_k: dict[float, list[float]] = defaultdict(list)
    for (dtype, _, _), pts in groups.items():
        if dtype == "bf16":
            best = max(rate for _, rate in pts)
            for k, rate in pts:
                per_k[k].append(rate / best)
    prof = default_profile()
    curve = prof.gemm_k.curves["bf16"]
    assert curve.x == tuple(sorted(per_k)) and prof.gemm_k.curves["fp16"] == curve
    assert all(b >= a for a, b in zip(curve.y, curve.y[1:], strict=False)) and curve.y[-1] == 1.0
    assert curve.y[0] == pytest.approx(median(per_k[128.0]) / max(median(v) for v in per_k.values()), rel=0.05)
    assert fit_gemm_k(prof).gemm_k == prof.gemm_k
