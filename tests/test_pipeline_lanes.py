"""Pipeline parallelism with micro-batches in flight: the fill, the lanes, and predict = simulate for one request."""

from __future__ import annotations

import pytest

import roofline
from roofline.pipeline import bubble_fraction, fill_factor, lane_rows, micro_batches
from roofline.prediction import make_scenario, resolve
from roofline.serving.sim.ranks import LanedStepModel
from roofline.serving.sim.steptime import StepModel
from roofline.serving.simulate import simulate

M, HW = "llama-3.1-70b", "h100-sxm"
ONE_AT_A_TIME = {"pipeline_micro_batches": 1}


def test_hand_counts() -> None:
    """Four micro-batches through four stages: 7 stage-times, 3 of them idle per stage (3/7); a batch of 64 on
    4 lanes is 4 micro-batches of 16, a batch of 3 is 3 of 1; 10 rows on 4 lanes: the largest lane has 3."""
    assert bubble_fraction(4, 4) == pytest.approx(3 / 7)
    assert bubble_fraction(1, 1) == 0.0
    assert float(fill_factor(4, 4)) == pytest.approx(7 / 4)
    assert [float(x) for x in micro_batches(64, 4)] == [4.0, 16.0]
    assert [float(x) for x in micro_batches(3, 4)] == [3.0, 1.0]
    assert (lane_rows(10, 4), lane_rows(3, 4), lane_rows(0, 4), lane_rows(7, 1)) == (3, 1, 0, 7)
    with pytest.raises(ValueError, match="must be >= 1"):
        bubble_fraction(0, 4)


def test_decode_runs_at_the_largest_lane_and_prefill_takes_the_fill() -> None:
    """GIVEN pp = 4 (4 lanes, every engine's default) and a batch of 64 WHEN predicted THEN TPOT is the pass of one
    micro-batch of 16 (predicted with one batch in flight), the batch's prefill (7/4) of that micro-batch's, the
    throughput the whole batch's, and the work per step four micro-batches'."""
    kw = {"tp": 4, "pp": 4, "engine": "ideal"}
    laned = roofline.predict(M, HW, 64, 2048, 256, **kw)
    lane = roofline.predict(M, HW, 16, 2048, 256, engine_overrides=ONE_AT_A_TIME, **kw)
    assert laned.tpot_s == pytest.approx(lane.tpot_s, rel=1e-12)
    assert laned.ttft_s == pytest.approx(7 / 4 * lane.ttft_s, rel=1e-12)
    assert laned.throughput_tok_s == pytest.approx(64 * 256 / laned.e2e_s, rel=1e-12)
    assert laned.decode_flops_per_step == pytest.approx(4 * lane.decode_flops_per_step, rel=1e-12)
    whole = roofline.predict(M, HW, 64, 2048, 256, engine_overrides=ONE_AT_A_TIME, **kw)
    assert laned.tpot_s < whole.tpot_s and laned.ttft_s < whole.ttft_s  # the lanes never cost time
    assert roofline.predict(M, HW, 64, 2048, 256, tp=4, engine="ideal").tpot_s == pytest.approx(
        roofline.predict(
            M, HW, 64, 2048, 256, tp=4, engine="ideal", engine_overrides={"max_concurrent_batches": 3}
        ).tpot_s
    )  # without pipeline parallelism the option changes nothing (alias accepted)


@pytest.mark.parametrize("pp", [2, 4])
def test_one_request_simulated_is_predicted(pp: int) -> None:
    """One request: a lane of one row in both, so simulate's TTFT and TPOT equal predict's."""
    r = roofline.predict(M, HW, 1, 2048, 64, tp=4, pp=pp)
    s = simulate(M, HW, tp=4, pp=pp, qps=0.01, prompt_len=2048, output_len=64, num_requests=1)
    assert s.summary["ttft_mean_s"] == pytest.approx(r.ttft_s, rel=1e-9)
    assert s.summary["tpot_mean_s"] == pytest.approx(r.tpot_s, rel=1e-9)


def test_the_simulated_step_is_the_largest_lanes() -> None:
    """A step of 8 decode rows on 4 lanes costs the one-batch step of 2 rows with a quarter of the attended tokens;
    a prefill chunk rides in one lane with its decode rows."""
    m, hw, prof = resolve(M, HW, None)
    sc = make_scenario(hw, tp=4, pp=4, engine="vllm")
    one = StepModel(m, sc, hw, prof, 2048, 256)
    laned = LanedStepModel(m, sc, hw, prof, 2048, 256, lanes=4)
    assert laned.step_time(8, (8 * 3000.0,)) == pytest.approx(one.step_time(2, (2 * 3000.0,)), rel=1e-12)
    assert laned.chunk_step_s(8, (8 * 3000.0,), [(0.0, 512.0)]) == pytest.approx(
        one.chunk_step_s(2, (2 * 3000.0,), [(0.0, 512.0)]), rel=1e-12
    )
    st, ref = laned.decode_affine(8, (8 * 3000.0,), (8.0,)), one.decode_affine(2, (2 * 3000.0,), (2.0,))
    assert st.total(5) == pytest.approx(ref.total(5), rel=1e-12)
