"""Intervals on simulated figures: the simulator's error on public serving rows of its engine (latencies) or the
static throughput regime (throughputs), combined with the spread over seeded replicas."""

from __future__ import annotations

import math

import pytest

import roofline
from roofline.errors import ScenarioError
from roofline.published.serving_error import serving_interval
from roofline.published.uncertainty import figure_interval, replica_sigma_log

KW = {"qps": 8.0, "num_requests": 300, "prompt_len": 512, "output_len": 64}


def test_single_run_latency_interval_is_the_engines_serving_error() -> None:
    """GIVEN one vLLM run WHEN asked for the TTFT p99 interval THEN it is exactly the serving interval of vLLM's
    public rows scaled to that value (no replica spread), above the value (the simulated TTFT runs short); a
    throughput keeps the static throughput regime."""
    s = roofline.simulate("llama-3.1-8b", "h100-sxm", seed=0, **KW)
    v = s.summary["ttft_p99_s"]
    lo, hi = s.interval("ttft_p99_s")
    ref = serving_interval("ttft_p99_s", v, engine="vllm")
    assert ref.pool == "vllm" and (lo, hi) == pytest.approx((ref.low, ref.high), rel=1e-12) and lo < v < hi
    assert hi / v > 2.0 > v / lo  # asymmetric: measured TTFT is mostly longer than simulated
    t = s.summary["output_throughput_tok_s"]
    ref_t = figure_interval("throughput_tok_s", t)
    assert s.interval("output_throughput_tok_s") == pytest.approx((ref_t.low, ref_t.high), rel=1e-12)


def test_replicas_fold_their_spread_into_the_interval() -> None:
    """GIVEN 4 seeded replicas THEN the first equals the single run of the same seed, and each side of the
    interval widens around the pool's median residual m by z·σ in quadrature (σ the log-sd of the figure over
    the replicas), never narrower than the single run's."""
    one = roofline.simulate("llama-3.1-8b", "h100-sxm", seed=3, **KW)
    rep = roofline.simulate("llama-3.1-8b", "h100-sxm", seed=3, replicas=4, **KW)
    assert rep.summary == one.summary
    name = "e2e_p90_s"
    values = [s[name] for s in rep.config["replica_summaries"]]
    assert len(values) == 4 and len(set(values)) > 1
    sigma = replica_sigma_log(values)
    ref = serving_interval(name, rep.summary[name], engine="vllm", extra_sigma_log=sigma)
    lo, hi = rep.interval(name)
    assert (lo, hi) == pytest.approx((ref.low, ref.high), rel=1e-12)
    lo1, hi1 = one.interval(name)
    assert lo < lo1 and hi > hi1 and math.isfinite(hi)


def test_unknown_figure_and_bad_replica_counts_are_project_errors() -> None:
    s = roofline.simulate("llama-3.1-8b", "h100-sxm", seed=0, **KW)
    with pytest.raises(ScenarioError, match="no simulated figure"):
        s.interval("ttft_p42_s")
    for bad in (0, 65, 1.5, True):
        with pytest.raises(ScenarioError, match="replicas"):
            roofline.simulate("llama-3.1-8b", "h100-sxm", replicas=bad, **KW)  # type: ignore[arg-type]
