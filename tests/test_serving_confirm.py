"""Plan finalists confirmed by the simulator with percentile SLOs; knee and sustainable rate per replica."""

from __future__ import annotations

from dataclasses import replace

import pytest

import roofline
from roofline.errors import ScenarioError
from roofline.serving.plan.confirm import confirm


@pytest.fixture(scope="module")
def plan_8b():
    return roofline.plan("llama-3.1-8b", qps=10, prompt_len=1024, output_len=256, ttft_slo_s=0.5, tpot_slo_s=0.05,
                         hardware=["h100-sxm"], tp_options=[1])  # fmt: skip


def test_confirmation_of_a_comfortable_plan(plan_8b) -> None:
    """GIVEN a plan at 10 req/s on one H100 (the screening tier sustains ~23 req/s for 1024/256) THEN the simulated
    p99 TTFT and p90 TPOT meet 0.5 s / 50 ms, load = rate / sustainable rate, and the knee (mean TTFT doubled)
    lies below the sustainable rate but above the operating rate."""
    (c,) = confirm(plan_8b, top=1)
    assert c.meets_slo and c.saturated is None
    assert c.ttft_s <= 0.5 and c.tpot_s <= 0.05
    assert c.load == pytest.approx(c.replica_qps / c.sustainable_qps)
    assert c.replica_qps < c.knee_qps < c.sustainable_qps


def test_a_percentile_slo_can_fail_where_the_mean_passes(plan_8b) -> None:
    """With a TTFT SLO between the simulated median and p99, p50 passes and p99 fails."""
    (c50,) = confirm(plan_8b, top=1, ttft_pct=50)
    (c99,) = confirm(plan_8b, top=1, ttft_pct=99)
    slo = (c50.ttft_s + c99.ttft_s) / 2
    strict = replace(plan_8b, ttft_slo_s=slo)
    assert confirm(strict, top=1, ttft_pct=50)[0].meets_slo
    assert not confirm(strict, top=1, ttft_pct=99)[0].meets_slo
    with pytest.raises(ScenarioError, match="percentile"):
        confirm(plan_8b, ttft_pct=0)
