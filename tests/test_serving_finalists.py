"""Simulator sizing of plan finalists (roofline.serving.plan.finalists): invariants and hand-checked formulas.

GIVEN Llama-3.1-8B on one H100 (tp 1), chat lengths (1,024 + 256 tokens) at 20 requests/s, TTFT P99 ≤ 0.5 s,
TPOT P90 ≤ 50 ms. WHEN the planner's cheapest candidate is re-sized on the simulator THEN:
* replicas never fall below the planner's, and headroom = replicas·λ_sus/qps − 1 ≥ the minimum;
* the SLO check is on value × the engine's serving upper factor at the confidence level (serving_upper_factor);
* cost = GPUs × price; energy = GPUs × TDP / (qps · O) J per token → kWh per 1e6 tokens;
* the percentiles are those of roofline.simulate at qps / replicas (same seed).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import roofline
from roofline.published.serving_error import serving_upper_factor
from roofline.serving.plan.finalists import checkpoint_format, size_finalist
from roofline.serving.plan.procurement import IDLE_POWER_FRACTION

M, HW, QPS, P, OUT = "llama-3.1-8b", "h100-sxm", 20.0, 1024, 256


@pytest.fixture(scope="module")
def cand() -> Any:
    p = roofline.plan(
        M, qps=QPS, prompt_len=P, output_len=OUT, ttft_slo_s=0.5, tpot_slo_s=0.05, hardware=[HW], tp_options=[1]
    )
    assert p.recommended is not None
    return p.recommended


def _size(c: Any, **kw: Any) -> Any:
    return size_finalist(
        M, c, qps=QPS, prompt_len=P, output_len=OUT, ttft_slo_s=0.5, tpot_slo_s=0.05, curve=False, tdp_watts=700.0, **kw
    )


def test_sizing_invariants_and_formulas(cand: Any) -> None:
    f = _size(cand, usd_per_kwh=0.1)
    assert f.meets_slo and f.replicas >= cand.replicas and f.gpus == f.replicas * cand.tp
    assert f.min_headroom == pytest.approx(cand.error_margin)  # default: the model's 80 % bound
    assert f.capacity_rps == pytest.approx(f.replicas * f.sustainable_replica_rps)
    assert (
        f.headroom == pytest.approx(f.replicas * f.sustainable_replica_rps / QPS - 1) and f.headroom >= f.min_headroom
    )
    assert f.knee_rps <= f.capacity_rps
    assert f.ttft_upper_s == pytest.approx(f.ttft_s * serving_upper_factor("ttft_s", 0.8, "vllm"))
    assert f.tpot_upper_s == pytest.approx(f.tpot_s * serving_upper_factor("tpot_s", 0.8, "vllm"))
    assert f.ttft_upper_s <= 0.5 and f.tpot_upper_s <= 0.05
    price = roofline.hardware(HW).price.usd_per_gpu_hour
    assert f.rented_gpus == 8 and f.usd_per_hour == pytest.approx(f.rented_gpus * price)  # one 8-GPU instance
    # board power: each serving GPU P_idle + (TDP − P_idle)·u at its simulated busy fraction u, the rented but
    # unused GPUs of the instance at P_idle (roofline.serving.plan.procurement)
    idle_w = IDLE_POWER_FRACTION * 700.0
    kw = (f.gpus * (idle_w + (700.0 - idle_w) * f.busy_fraction) + (f.rented_gpus - f.gpus) * idle_w) / 1000.0
    assert 0.0 < f.busy_fraction <= 1.0
    assert f.energy_usd_per_hour == pytest.approx(kw * 0.1)  # kW × USD/kWh
    assert f.kwh_per_million_output_tokens == pytest.approx(kw / (QPS * OUT * 3600.0) * 1e6)
    per_m = (f.usd_per_hour + f.energy_usd_per_hour) / (QPS * OUT * 3600) * 1e6
    assert f.usd_per_million_output_tokens == pytest.approx(per_m)
    # the mean P99 over the deciding check's replicated runs, seeds 0 … runs − 1 (roofline.serving.plan.sampling)
    p99 = []
    for seed in range(f.sizing_runs):
        s = roofline.simulate(
            M, HW, tp=1, qps=QPS / f.replicas, prompt_len=P, output_len=OUT, num_requests=1000, seed=seed
        )
        p99.append(float(np.percentile(s.requests["ttft_s"].dropna(), 99)))
    assert f.sizing_runs >= 1 and f.ttft_s == pytest.approx(sum(p99) / len(p99), rel=1e-12)


def test_a_larger_minimum_headroom_adds_replicas(cand: Any) -> None:
    f = _size(cand, min_headroom=3.0)
    assert f.replicas >= math.ceil(QPS * 4.0 / f.sustainable_replica_rps) and f.headroom >= 3.0


def test_a_stricter_confidence_never_needs_fewer_gpus(cand: Any) -> None:
    assert _size(cand, confidence=0.95).gpus >= _size(cand, confidence=0.5).gpus


def test_checkpoint_format_is_the_dominant_group() -> None:
    assert checkpoint_format("deepseek-v3") == "fp8-block"  # routed experts of the FP8 checkpoint
    assert checkpoint_format("llama-3.1-8b") is None  # no checkpoint block: the native dtype
