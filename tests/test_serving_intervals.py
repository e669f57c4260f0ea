"""Intervals on simulated figures: model error from public rows (by regime) combined with the spread
over seeded replicas, derived from the same combination rule as predict's intervals."""

from __future__ import annotations

import math

import pytest

import roofline
from roofline.errors import ScenarioError
from roofline.published.uncertainty import figure_interval, replica_sigma_log

KW = {"qps": 8.0, "num_requests": 300, "prompt_len": 512, "output_len": 64}


def test_single_run_interval_is_the_model_error_of_the_figures_regime() -> None:
    """GIVEN one run WHEN asked for the TTFT p99 interval THEN it is exactly the static TTFT interval
    scaled to that value (no replica spread to fold in), and contains the value."""
    s = roofline.simulate("llama-3.1-8b", "h100-sxm", seed=0, **KW)
    v = s.summary["ttft_p99_s"]
    lo, hi = s.interval("ttft_p99_s")
    ref = figure_interval("ttft_s", v)
    assert (lo, hi) == pytest.approx((ref.low, ref.high), rel=1e-12) and lo < v < hi


def test_replicas_fold_their_spread_into_the_interval() -> None:
    """GIVEN 4 seeded replicas THEN the first equals the single run of the same seed, and the interval is
    value·exp(±√(q² + (z·σ)²)) with σ the log-sd of the figure over the replicas, never narrower."""
    one = roofline.simulate("llama-3.1-8b", "h100-sxm", seed=3, **KW)
    rep = roofline.simulate("llama-3.1-8b", "h100-sxm", seed=3, replicas=4, **KW)
    assert rep.summary == one.summary
    name = "e2e_p90_s"
    values = [s[name] for s in rep.config["replica_summaries"]]
    assert len(values) == 4 and len(set(values)) > 1
    sigma = replica_sigma_log(values)
    ref = figure_interval("e2e_s", rep.summary[name], extra_sigma_log=sigma)
    lo, hi = rep.interval(name)
    assert (lo, hi) == pytest.approx((ref.low, ref.high), rel=1e-12)
    lo1, hi1 = one.interval(name)
    assert lo <= lo1 and hi >= hi1 and math.isfinite(hi)


def test_unknown_figure_and_bad_replica_counts_are_project_errors() -> None:
    s = roofline.simulate("llama-3.1-8b", "h100-sxm", seed=0, **KW)
    with pytest.raises(ScenarioError, match="no simulated figure"):
        s.interval("ttft_p42_s")
    for bad in (0, 65, 1.5, True):
        with pytest.raises(ScenarioError, match="replicas"):
            roofline.simulate("llama-3.1-8b", "h100-sxm", replicas=bad, **KW)  # type: ignore[arg-type]
