"""Serving-simulator intervals from its error on public serving rows (roofline.published.serving_error):
hand-derived conformal ranks, the pool an engine draws on, the shipped residuals derived again from the
committed validation results, and the coverage they promise measured with whole model families held out."""

from __future__ import annotations

import math
import statistics

import pytest

from roofline.errors import ScenarioError
from roofline.published.serving_error import (
    POOLED,
    conformal_bounds,
    derive_serving_error,
    engine_pool,
    load_serving_error,
    serving_coverage,
    serving_figure,
    serving_interval,
    serving_upper_factor,
)

R9 = [-0.3, -0.1, 0.0, 0.2, 0.5, 0.9, 1.2, 1.5, 2.0]
#: A tiny document: engine "a" with families f (R9) and g, engine "b" with family f.
DOC = {"engines": {"a": {"f": {"ttft": R9, "tpot": [0.0], "e2e": [0.0]},
                         "g": {"ttft": [0.1, 0.4], "tpot": [0.1], "e2e": [0.1]}},
                   "b": {"f": {"ttft": [3.0], "tpot": [0.2], "e2e": [0.2]}}}}  # fmt: skip


def test_conformal_ranks_by_hand() -> None:
    """n = 9: at 80 % α/2 = 0.1, k_lo = ⌊10·0.1⌋ = 1, k_hi = ⌈10·0.9⌉ = 9; at 60 % k = 2 and 8; at 90 % the
    ranks 0 and 10 fall outside 1 … 9: the extremes, flagged unsupported."""
    assert conformal_bounds(R9, 0.8) == (-0.3, 2.0, True)
    assert conformal_bounds(R9, 0.6) == (-0.1, 1.5, True)
    assert conformal_bounds(R9, 0.9) == (-0.3, 2.0, False)
    for bad in (0.0, 1.0, -0.5, math.nan):
        with pytest.raises(ScenarioError, match="interval level"):
            conformal_bounds(R9, bad)


def test_interval_pool_and_spread_by_hand() -> None:
    """Engine 'a' pools its two families (11 residuals: k = ⌊12·0.2⌋ = 2 → −0.1, ⌈12·0.8⌉ = 10 → 1.5 at 60 %);
    any other engine pools every row; a spread σ widens each side around the median m = r_(6) = 0.4 by z·σ in
    quadrature."""
    iv = serving_interval("ttft_p99_s", 0.2, engine="a", level=0.6, doc=DOC)
    assert (iv.pool, iv.n_rows, iv.n_families) == ("a", 11, 2)
    assert (iv.low, iv.high) == pytest.approx((0.2 * math.exp(-0.1), 0.2 * math.exp(1.5)), rel=1e-12)
    z = 0.8416212335729143  # Φ⁻¹(0.8)
    w = serving_interval("ttft_mean_s", 1.0, engine="a", level=0.6, extra_sigma_log=0.5, doc=DOC)
    assert w.low == pytest.approx(math.exp(0.4 - math.hypot(0.5, z * 0.5)), rel=1e-12)
    assert w.high == pytest.approx(math.exp(0.4 + math.hypot(1.1, z * 0.5)), rel=1e-12)
    assert engine_pool("ideal", DOC) == POOLED and engine_pool("b 1.0", DOC) == "b"
    assert serving_interval("ttft_p90_s", 1.0, engine="zzz", level=0.5, doc=DOC).n_rows == 12
    assert serving_interval("itl_p90_s", 1.0, engine="a", level=0.5, doc=DOC).n_rows == 2  # TPOT residuals
    assert [serving_figure(n) for n in ("ttft_p50_s", "itl_mean_s", "tpot_s", "e2e_p99_s", "mean_batch")] == [
        "ttft",
        "tpot",
        "tpot",
        "e2e",
        None,
    ]
    with pytest.raises(ScenarioError, match="not a simulated latency"):
        serving_interval("mean_batch", 1.0, doc=DOC)


def test_held_out_coverage_by_hand() -> None:
    """Engine 'a' at 60 %: holding out f leaves g's [0.1, 0.4] (n = 2: ranks ⌊3·0.2⌋ = 0 and ⌈3·0.8⌉ = 3 fall
    outside, so the extremes 0.1 … 0.4), which covers R9's 0.2 only; holding out g leaves R9 (−0.1 … 1.5),
    which covers both of g's: 3 of 11."""
    cov = serving_coverage(0.6, DOC)
    assert cov["a"]["ttft"] == [3, 11]
    assert cov["b"]["ttft"] == [0, 0]  # one family: no fold to hold it out of


def test_shipped_residuals_are_rederived() -> None:
    """GIVEN the committed preset validation results WHEN the residuals are derived again THEN they equal
    roofline/data/serving_error.json (regenerate: python -m roofline.published.serving_error)."""
    assert derive_serving_error() == load_serving_error(), "roofline/data/serving_error.json is stale"


def test_shipped_intervals_cover_held_out_families() -> None:
    """The promise measured: at 80 % every engine's TTFT, TPOT and E2E intervals, built without a model family,
    hold 65–95 % of that family's rows (measured 67–81 %), and each engine's TTFT interval brackets the median of its
    residuals (the simulator runs 11–17 % long on the median under the run-ahead eager launch, short before)."""
    doc = load_serving_error()
    assert set(doc["engines"]) == {"sglang", "trtllm", "vllm"}
    for pool, figs in serving_coverage(0.8).items():
        for fig, (hit, n) in figs.items():
            assert n > 300 and 0.65 <= hit / n <= 0.95, (pool, fig, hit, n)
    for eng in doc["engines"]:
        iv = serving_interval("ttft_p99_s", 1.0, engine=eng)
        assert iv.supported and iv.high > 1.0 > iv.low
        med = statistics.median(r for fam in doc["engines"][eng].values() for r in fam["ttft"])
        assert iv.low < math.exp(med) < iv.high
        assert serving_upper_factor("ttft_s", 0.8, eng) == pytest.approx(iv.high)
    assert serving_upper_factor("ttft_s", 0.9, "vllm") > serving_upper_factor("ttft_s", 0.8, "vllm")
