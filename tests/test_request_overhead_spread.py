"""Per-request overhead with a spread (``request_overhead_cv``): hand-checked properties (GIVEN / WHEN / THEN)."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.errors import ScenarioError
from roofline.serving.simulate import simulate

M, HW = "llama-3.1-8b", "h100-sxm"
KW = {"prompt_len": 512, "output_len": 64}


def test_zero_spread_is_the_constant_overhead() -> None:
    """GIVEN cv = 0 THEN the run is the constant-overhead run exactly (no extra draws, same TTFT)."""
    const = {"request_overhead_s": 0.02}
    a = simulate(M, HW, qps=4.0, num_requests=200, engine_overrides=const, **KW).summary
    b = simulate(M, HW, qps=4.0, num_requests=200, engine_overrides=const | {"request_overhead_cv": 0.0}, **KW).summary
    assert a == b


def test_exponential_overhead_adds_its_mean_at_low_load() -> None:
    """GIVEN cv = 1 (exponential) of mean 50 ms at a load so low that requests never meet WHEN simulated THEN the
    mean TTFT is one prefill + 50 ms within the sampling error of 400 draws (σ/√n = 2.5 ms: 4σ = 10 ms), and the
    run is the same for the same seed."""
    over = {"request_overhead_s": 0.05, "request_overhead_cv": 1.0}
    base = simulate(M, HW, qps=0.2, num_requests=400, **KW).summary["ttft_mean_s"]
    s = simulate(M, HW, qps=0.2, num_requests=400, engine_overrides=over, **KW).summary
    assert s["ttft_mean_s"] - base == pytest.approx(0.05, abs=0.010)
    assert s == simulate(M, HW, qps=0.2, num_requests=400, engine_overrides=over, **KW).summary
    other = simulate(M, HW, qps=0.2, num_requests=400, engine_overrides=over, seed=1, **KW).summary
    assert other["ttft_mean_s"] != s["ttft_mean_s"]


def test_closed_loop_with_spread_keeps_littles_law() -> None:
    """GIVEN 16 closed-loop clients whose requests reach the engine after an exponential 20 ms THEN concurrency =
    throughput × mean E2E within 1 % (E2E counts from the client's send, overhead included)."""
    over = {"request_overhead_s": 0.02, "request_overhead_cv": 1.0}
    s = simulate(M, HW, concurrency=16, num_requests=800, engine_overrides=over, **KW).summary
    assert s["request_throughput_rps"] * s["e2e_mean_s"] == pytest.approx(16, rel=0.01)


def test_entries_reach_the_queue_in_time_order() -> None:
    """GIVEN an open loop with a wide overhead spread (cv = 2) THEN every request still finishes and its first token
    never precedes its send time plus nothing (TTFT > 0), though entries overtake each other."""
    over = {"request_overhead_s": 0.05, "request_overhead_cv": 2.0}
    s = simulate(M, HW, qps=8.0, num_requests=300, engine_overrides=over, **KW)
    r = s.requests
    assert r["finish_s"].notna().all() and (r["first_token_s"] > r["arrival_s"]).all()
    assert np.all(np.diff(r["arrival_s"].to_numpy()) >= 0)


def test_spread_is_validated() -> None:
    with pytest.raises(ScenarioError):
        simulate(M, HW, qps=1.0, num_requests=10, engine_overrides={"request_overhead_cv": -1.0}, **KW)
