"""The engine's output lag (``output_lag_steps`` = k): every token of a request reaches the client k of the
request's own inter-token intervals late. Hand-derived properties (GIVEN / WHEN / THEN)."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.errors import RooflineError
from roofline.prediction import make_scenario, resolve
from roofline.serving.plan.screening import screen
from roofline.serving.sim.steptime import StepModel
from roofline.serving.simulate import simulate

M, HW = "llama-3.1-8b", "h100-sxm"
ONE = {"qps": 1.0, "prompt_len": 1024, "output_len": 128, "num_requests": 1}
KEYS = ("ttft_mean_s", "tpot_mean_s", "itl_mean_s", "e2e_mean_s")


def test_one_request_shifts_by_k_of_its_own_intervals() -> None:
    """GIVEN one request alone WHEN k = 3 THEN TTFT and E2E grow by exactly 3·TPOT (TPOT of the run without the
    lag) and TPOT and ITL do not change."""
    a = simulate(M, HW, **ONE).summary
    b = simulate(M, HW, engine_overrides={"output_lag_steps": 3}, **ONE).summary
    tpot = a["tpot_mean_s"]
    assert b["ttft_mean_s"] - a["ttft_mean_s"] == pytest.approx(3 * tpot, rel=1e-9)
    assert b["e2e_mean_s"] - a["e2e_mean_s"] == pytest.approx(3 * tpot, rel=1e-9)
    assert b["tpot_mean_s"] == pytest.approx(tpot, rel=1e-12)
    assert b["itl_mean_s"] == pytest.approx(a["itl_mean_s"], rel=1e-12)


def test_a_one_token_request_lags_k_steps_of_its_prefill() -> None:
    """GIVEN one request of one output token (no interval of its own) WHEN k = 2 THEN it lags two of the last
    step, its prefill: TTFT = 3 × the prefill step."""
    kw = ONE | {"output_len": 1}
    a = simulate(M, HW, **kw).summary["ttft_mean_s"]
    b = simulate(M, HW, engine_overrides={"output_lag_steps": 2}, **kw).summary["ttft_mean_s"]
    assert b == pytest.approx(3 * a, rel=1e-9)


def test_closed_loop_with_a_lag_obeys_littles_law() -> None:
    """GIVEN 16 closed-loop clients that send their next request when they received the last token WHEN k = 4
    THEN concurrency = throughput × mean E2E within 1 % (E2E measured at the client, lag included)."""
    over = {"output_lag_steps": 4, "request_overhead_s": 0.01, "request_overhead_cv": 1.0}
    s = simulate(M, HW, concurrency=16, prompt_len=1024, output_len=128, num_requests=1600, engine_overrides=over)
    r = s.requests
    span = float(r.finish_s.max() - r.arrival_s.min())
    assert len(r) / span * float(r.e2e_s.mean()) == pytest.approx(16, rel=0.01)


def test_screening_tier_carries_the_overhead_and_the_lag() -> None:
    """GIVEN Poisson arrivals at 30 % load with a mean request overhead of 20 ms and k = 4 WHEN both tiers run
    THEN the screening tier's TTFT and E2E (+ y + k·τ̄) agree with the simulator's within 10 %."""
    p, o = 1024, 256
    m, hw, prof = resolve(M, HW, None)
    sm = StepModel(m, make_scenario(hw, tp=1, engine="vllm"), hw, prof, 8192, 1024)
    kv = simulate(M, HW, qps=1.0, prompt_len=p, output_len=o, num_requests=1).config["kv_blocks"] * 16
    sus = screen(sm, np.array([1.0]), p, o, 8192, 1024, kv).sustainable_qps
    over = {"request_overhead_s": 0.02, "output_lag_steps": 4}
    r = screen(sm, np.array([0.3 * sus]), p, o, 8192, 1024, kv, request_overhead_s=0.02, output_lag_steps=4)
    base = screen(sm, np.array([0.3 * sus]), p, o, 8192, 1024, kv)
    assert r.ttft_mean_s[0] - base.ttft_mean_s[0] == pytest.approx(0.02 + 4 * base.tpot_mean_s[0], rel=1e-12)
    s = simulate(
        M,
        HW,
        qps=0.3 * sus,
        prompt_len=p,
        output_len=o,
        num_requests=3000,
        seed=1,
        engine_overrides={"async_scheduling": False} | over,
    ).summary
    for key in ("ttft_mean_s", "tpot_mean_s", "e2e_mean_s"):
        assert getattr(r, key)[0] == pytest.approx(s[key], rel=0.10), key


def test_disaggregated_lag_is_the_decode_servers() -> None:
    """GIVEN a disaggregated run WHEN the engines carry k = 2 THEN every request's TTFT and E2E grow by 2 of its
    own TPOT and TPOT is unchanged (the hand-off still starts when the prefill engine finished)."""
    spec = "prefill=h100-sxm:tp1x1,decode=h100-sxm:tp1x1,link=50GB/s"
    kw = dict(qps=2.0, prompt_len=1024, output_len=64, num_requests=50, seed=0)
    a = simulate(M, disagg=spec, **kw).requests  # type: ignore[arg-type]
    b = simulate(M, disagg=spec, engine_overrides={"output_lag_steps": 2}, **kw).requests  # type: ignore[arg-type]
    np.testing.assert_allclose(b.tpot_s, a.tpot_s, rtol=1e-12)
    np.testing.assert_allclose(b.ttft_s - a.ttft_s, 2 * a.tpot_s, rtol=1e-9)
    np.testing.assert_allclose(b.e2e_s - a.e2e_s, 2 * a.tpot_s, rtol=1e-9)
    np.testing.assert_allclose(b.prefill_done_s, a.prefill_done_s, rtol=1e-12)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), "many"])
def test_a_bad_lag_names_the_field(bad: object) -> None:
    """GIVEN a negative, NaN or non-numeric lag THEN a RooflineError names ``output_lag_steps``."""
    with pytest.raises(RooflineError, match="output_lag_steps"):
        simulate(M, HW, engine_overrides={"output_lag_steps": bad}, **ONE)
