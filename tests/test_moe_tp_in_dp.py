"""Attention DP with the experts tensor-parallel over every rank's GPUs (ep = 1): gather, shard, scatter."""

from __future__ import annotations

import pytest

import roofline
from roofline.errors import ScenarioError
from roofline.memory import weight_params_per_gpu
from roofline.ops import build_ops
from roofline.prediction import make_scenario, resolve
from roofline.serving.sim.ranks import DPStepModel

M, HW = "qwen3-30b-a3b", "h100-sxm"  # hidden 2048, 48 layers, 128 experts
TP_IN_DP = {"tp": 1, "dp": 4, "ep": 1}


def test_experts_are_sharded_over_every_rank_gpu() -> None:
    """4 DP ranks of one GPU with tp-sharded experts hold the experts as a tp 4 replica does: a quarter each."""
    m, hw, _ = resolve(M, HW, None)
    dp = weight_params_per_gpu(m, make_scenario(hw, **TP_IN_DP))
    tp4 = weight_params_per_gpu(m, make_scenario(hw, tp=4))
    assert dp["moe_experts"] == pytest.approx(tp4["moe_experts"], rel=1e-12)


def test_gather_and_scatter_bytes_by_hand() -> None:
    """Decode of 64 sequences on 4 ranks: every GPU gathers the 64 tokens × 2,048 × 2 B = 262,144 B of all ranks,
    3/4 of it over the wire (196,608 B), and scatters the same back; 48 MoE layers each."""
    m, hw, _ = resolve(M, HW, None)
    ops = build_ops(m, make_scenario(hw, 64, 1024, 2, **TP_IN_DP), hw, "decode", 64.0, 1.0, 1024.0)
    by = {op.name: op for op in ops if op.name.startswith("comm.moe_")}
    assert set(by) == {"comm.moe_gather", "comm.moe_scatter"}
    for op in by.values():
        assert float(op.comm_bytes) == pytest.approx(0.75 * 64 * 2048 * 2.0) and op.count == 48


def test_a_decode_step_simulated_is_predicts() -> None:
    """The simulator's step at d rows equals predict's decode step at batch d (the gather and scatter with the
    experts at all ranks' tokens, the rest at the busiest rank's)."""
    m, hw, prof = resolve(M, HW, None)
    sc = make_scenario(hw, 1, 1024, 2, weight_dtype="checkpoint", engine="vllm", **TP_IN_DP)
    sm = DPStepModel(m, sc, hw, prof, 8192 + 256, 256)
    for rows in (1, 16, 100):
        r = roofline.predict(M, HW, rows, 1024, 2, **TP_IN_DP)
        assert sm.step_time(rows, (rows * 1025.0,)) == pytest.approx(r.tpot_first_s, rel=1e-12)


def test_a_mix_of_ep_and_tp_is_refused_by_name() -> None:
    with pytest.raises(ScenarioError, match=r"set ep=4.*or with every expert tensor-parallel over them"):
        roofline.predict(M, HW, 8, 1024, 64, tp=1, dp=4, ep=2)
