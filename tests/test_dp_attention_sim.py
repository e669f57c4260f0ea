"""Attention data parallelism in the serving simulator: the busiest rank's step plus the experts at all tokens."""

from __future__ import annotations

import pytest

import roofline
from roofline.errors import ScenarioError
from roofline.memory import kv_bytes_per_sequence_per_gpu, memory_budget
from roofline.prediction import make_scenario, resolve
from roofline.serving.sim.ranks import DPStepModel
from roofline.serving.simulate import simulate

M, HW = "qwen3-30b-a3b", "h100-sxm"  # 128 experts, top-8: 4 ranks of one GPU, wide EP 4
DP = {"tp": 1, "dp": 4, "ep": 4}


@pytest.mark.parametrize("rows", [1, 4, 16, 100])
def test_a_decode_step_is_predicts(rows: int) -> None:
    """GIVEN d decode rows at context 1,025 WHEN the DP step model prices the step THEN it is predict's first decode
    step of a batch of d (the busiest rank's ⌈d/4⌉ rows and its own ops, the experts at all d tokens)."""
    m, hw, prof = resolve(M, HW, None)
    sc = make_scenario(hw, 1, 1024, 2, weight_dtype="checkpoint", engine="vllm", **DP)
    sm = DPStepModel(m, sc, hw, prof, 8192 + 256, 256)
    r = roofline.predict(M, HW, rows, 1024, 2, **DP)
    assert sm.step_time(rows, (rows * 1025.0,)) == pytest.approx(r.tpot_first_s, rel=1e-12)


def test_one_request_simulated_is_predicted() -> None:
    """One request: one rank busy, the experts at its tokens, in both tiers."""
    r = roofline.predict(M, HW, 1, 2048, 64, **DP)
    s = simulate(M, HW, qps=0.01, prompt_len=2048, output_len=64, num_requests=1, **DP)
    assert s.summary["ttft_mean_s"] == pytest.approx(r.ttft_s, rel=1e-9)
    assert s.summary["tpot_mean_s"] == pytest.approx(r.tpot_s, rel=1e-9)


def test_each_rank_prefills_its_own_request() -> None:
    """Two 6,000-token prompts sent together: one rank (8,192-token budget, one partial prefill) takes them one
    after the other; two ranks each take one in the same step, which costs the busiest rank's prefill plus the
    experts at both prompts' tokens: more than one prompt alone, less than two in turn."""
    runs = {}
    for dp in (1, 2):
        s = simulate(M, HW, tp=1, dp=dp, ep=dp, concurrency=2, prompt_len=6000, output_len=4, num_requests=2)
        runs[dp] = s.requests["ttft_s"].tolist()
    alone = simulate(M, HW, tp=1, dp=2, ep=2, concurrency=1, prompt_len=6000, output_len=4, num_requests=1)
    solo = float(alone.requests["ttft_s"].iloc[0])
    assert runs[1][1] > 1.9 * runs[1][0]  # in turn on one rank
    assert runs[2][0] == runs[2][1]  # together on two
    assert solo < runs[2][0] < 2 * solo


def test_ranks_hold_their_own_kv_and_sequences() -> None:
    """Each rank its own KV pool: the replica's blocks are 4 × one rank's (its experts a quarter of one GPU's)."""
    s4 = simulate(M, HW, qps=0.01, prompt_len=512, output_len=8, num_requests=1, **DP)
    m, hw, _ = resolve(M, HW, None)
    sc = make_scenario(hw, 1, 512, 8, weight_dtype="checkpoint", engine="vllm", **DP)
    per_rank = memory_budget(m, hw, sc).kv_budget_bytes
    per_block = float(kv_bytes_per_sequence_per_gpu(m, sc, 528)) / 528 * 16
    assert s4.config["kv_blocks"] == 4 * int(per_rank // per_block)


def test_dp_on_a_dense_model_is_refused_kindly() -> None:
    with pytest.raises(ScenarioError, match="dense"):
        simulate("llama-3.1-8b", HW, dp=2, qps=1.0, num_requests=4)
