"""Large MoE deployments (issue #30, items 1-2): attention data parallelism, wide EP, redundant experts, overlap.

GIVEN the formulas of :mod:`roofline.ops.expert_parallel` and the layout rule of :mod:`roofline.specs.moe_layout`,
WHEN they are evaluated on small routings worked by hand (and on DeepSeek-V3 through ``predict``),
THEN they give the hand-derived numbers; the defaults (dp 1, no redundant experts, no overlap) change nothing.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

import roofline
from roofline.cli.app import app
from roofline.costs import scenario_costs
from roofline.errors import ScenarioError
from roofline.evaluate import comm_time_s, op_time
from roofline.memory import memory_budget, weight_params_per_gpu
from roofline.ops import decode_ops, prefill_ops
from roofline.ops import expert_parallel as xp
from roofline.pipeline import bubble_fraction
from roofline.profile import load_profile
from roofline.specs.scenario import make_scenario
from roofline.specs.topology import comm_path

H7168 = 7168.0  # DeepSeek-V3 hidden size


# ---- routing and the exchange ------------------------------------------------------------------------------


def test_distinct_ranks_of_a_small_routing_by_hand() -> None:
    # S = 8 slots on R = 4 ranks (2 each), k = 2. A token misses a given rank with C(6, 2)/C(8, 2) = 15/28, so it
    # reaches 4·(1 − 15/28) = 13/7 ranks. Check by counting: both experts on one rank with probability
    # 4·C(2, 2)/C(8, 2) = 1/7, else two ranks: 1·1/7 + 2·6/7 = 13/7.
    assert float(xp.miss_probability(8, 4, 2)) == pytest.approx(15 / 28, rel=1e-15)
    assert float(xp.distinct_ranks(8, 4, 2)) == pytest.approx(13 / 7, rel=1e-15)
    # the other 3 ranks are each hit with probability 13/28: 39/28 remote ranks, a (R − 1)/R = 3/4 share
    assert float(xp.remote_ranks(8, 4, 2)) == pytest.approx(39 / 28, rel=1e-15)
    # one rank: every expert is local
    assert float(xp.distinct_ranks(256, 1, 8)) == 1.0
    assert float(xp.remote_ranks(256, 1, 8)) == 0.0


def test_dispatch_and_combine_bytes_per_rank_by_hand() -> None:
    # normal kernel inside one node: T = 10 tokens per rank, S = 8, R = 4, k = 2, h = 7168 sent once per
    # destination rank: 10 · 13/7 · 7168 = 10 · 13 · 1024 = 133,120 elements;
    # fp8 dispatch at 1 + 4/128 = 1.03125 B (a fp32 scale per 128): 137,280 B; bf16 combine at 2 B: 266,240 B.
    disp = xp.exchange_bytes_per_rank(10, H7168, 2, 8, 4, 1, "normal", "fp8")
    comb = xp.exchange_bytes_per_rank(10, H7168, 2, 8, 4, 1, "normal", "bf16")
    assert float(disp) == pytest.approx(137_280.0, rel=1e-12)
    assert float(comb) == pytest.approx(266_240.0, rel=1e-12)
    # nvfp4 dispatch: 0.5 + 1/16 = 0.5625 B per element: 133,120 · 0.5625 = 74,880 B
    assert float(xp.exchange_bytes_per_rank(10, H7168, 2, 8, 4, 1, "normal", "nvfp4")) == pytest.approx(74_880.0)
    # across 2 nodes (4 slots each) a token goes once per node: C(4, 2)/C(8, 2) = 3/14 misses a node,
    # 2·(1 − 3/14) = 11/7 nodes; T = 7, h = 100, bf16: 7 · 11/7 · 100 · 2 = 2,200 B
    assert float(xp.exchange_bytes_per_rank(7, 100.0, 2, 8, 4, 2, "normal", "bf16")) == pytest.approx(2_200.0)
    # low-latency kernel: once per (token, expert): 10 · 2 · (7168 · 1.03125 + 16 B metadata) = 20 · 7,408 = 148,160;
    # bf16 combine 20 · 14,336 = 286,720
    assert float(xp.exchange_bytes_per_rank(10, H7168, 2, 8, 4, 1, "low_latency", "fp8")) == 148_160.0
    assert float(xp.exchange_bytes_per_rank(10, H7168, 2, 8, 4, 1, "low_latency", "bf16")) == 286_720.0


def test_kernel_bandwidths_follow_the_deepep_tables() -> None:
    hw = roofline.hardware("h200-sxm")  # NVLink 450 GB/s per direction, one 50 GB/s NIC per GPU
    # normal, EP 8 inside the NVLink domain: 153 GB/s of H800's 200 → × 450/200 = 344.25 GB/s
    assert xp.exchange_bandwidth_bytes_per_s(hw, "normal", "dispatch", 8) == pytest.approx(153e9 * 450 / 200)
    assert xp.exchange_bandwidth_bytes_per_s(hw, "normal", "combine", 8) == pytest.approx(158e9 * 450 / 200)
    # normal across nodes: the RDMA table at the NIC the measurement had (50 GB/s)
    assert xp.exchange_bandwidth_bytes_per_s(hw, "normal", "dispatch", 32) == pytest.approx(58e9)
    assert xp.exchange_bandwidth_bytes_per_s(hw, "normal", "combine", 64) == pytest.approx(50e9)
    # low latency: 98 GB/s at EP 8, 39 at EP 128; EP 11 is between 8 and 16 in log2
    assert xp.exchange_bandwidth_bytes_per_s(hw, "low_latency", "dispatch", 8) == pytest.approx(98e9)
    assert xp.exchange_bandwidth_bytes_per_s(hw, "low_latency", "dispatch", 128) == pytest.approx(39e9)
    assert 63e9 < xp.exchange_bandwidth_bytes_per_s(hw, "low_latency", "dispatch", 11) < 98e9
    assert xp.exchange_nodes(hw, 8) == 1 and xp.exchange_nodes(hw, 32) == 4


# ---- imbalance, overlap, bubble, DP sync ---------------------------------------------------------------------


def test_imbalance_is_one_under_perfect_balance_and_grows_with_ranks() -> None:
    assert float(xp.imbalance_factor(800, 8, "perfect")) == 1.0
    assert float(xp.imbalance_factor(800, 1)) == 1.0  # one rank holds everything: max = mean
    # N = 800 picks over R = 8: z_8 = Φ⁻¹(7.625/8.25) = 1.4342, 1 + 1.4342·√(7/800) = 1.1342
    assert float(xp.imbalance_factor(800, 8)) == pytest.approx(1 + 1.43420 * math.sqrt(7 / 800), rel=1e-4)
    f = xp.imbalance_factor(800, np.array([1, 2, 4, 8, 16, 64, 256]))
    assert f[0] == 1.0 and np.all(np.diff(f) > 0) and np.all(f[1:] > 1.0)
    assert float(xp.imbalance_factor(1e9, 8)) == pytest.approx(1.0, abs=1e-3)  # → 1 as N grows
    assert float(xp.imbalance_factor(2, 64)) <= 64.0  # never above R
    assert float(xp.imbalance_factor(800, 8, "balanced")) == xp.EPLB_RESIDUAL_IMBALANCE
    assert float(xp.imbalance_factor(1e9, 8, "balanced")) < xp.EPLB_RESIDUAL_IMBALANCE


@pytest.mark.parametrize(("picks", "ranks"), [(800, 8), (8000, 32), (64, 8)])
def test_imbalance_matches_multinomial_routing(picks: int, ranks: int) -> None:
    rng = np.random.default_rng(7)
    loads = [np.bincount(rng.integers(0, ranks, picks), minlength=ranks).max() for _ in range(3000)]
    measured = float(np.mean(loads)) / (picks / ranks)
    assert float(xp.imbalance_factor(picks, ranks)) == pytest.approx(measured, rel=0.05)


def test_two_batch_overlap_hides_min_of_compute_and_comm() -> None:
    assert float(xp.overlapped_time_s(3.0, 2.0, "two_batch")) == 3.0  # hides the 2 s exchange
    assert float(xp.overlapped_time_s(2.0, 5.0, "two_batch")) == 5.0  # hides the 2 s of compute
    assert float(xp.overlapped_time_s(3.0, 2.0, "none")) == 5.0
    np.testing.assert_array_equal(xp.hidden_s(np.array([1.0, 4.0]), 2.0, "two_batch"), [1.0, 2.0])


def test_overlap_in_predict_hides_the_layers_min_of_compute_and_exchange() -> None:
    m, hw, prof = roofline.model("deepseek-v3"), roofline.hardware("h200-sxm"), load_profile(None)
    kw = {"tp": 1, "dp": 16, "ep": 16}
    plain = make_scenario(hw, 64, 1024, 8, **kw)
    tbo = make_scenario(hw, 64, 1024, 8, moe_overlap="two-batch", **kw)
    assert tbo.moe_overlap == "two_batch"
    ops = prefill_ops(m, tbo, hw)
    cost_plain, cost_tbo = scenario_costs(m, plain, hw, prof).prefill, scenario_costs(m, tbo, hw, prof).prefill
    hidden = 0.0
    for lk in {op.layer_kind for op in ops if op.overlap}:
        mine = [op for op in ops if op.layer_kind == lk]
        compute = sum(op.count * float(op_time(op, hw, prof).time_s) for op in mine if op.kind != "comm")
        comm = sum(op.count * float(op_time(op, hw, prof).time_s) for op in mine if op.overlap)
        hidden += min(compute, comm)
    assert hidden > 0
    assert float(cost_plain.time_s) - float(cost_tbo.time_s) == pytest.approx(hidden, rel=1e-9)
    assert float(cost_tbo.hidden_s) == pytest.approx(hidden, rel=1e-12)


def test_pipeline_bubble() -> None:
    # p = 4 stages, m = 4 micro-batches: (4 − 1)/(4 + 4 − 1) = 3/7; one micro-batch: (p − 1)/p; one stage: none
    assert bubble_fraction(4, 4) == pytest.approx(3 / 7)
    assert bubble_fraction(1, 8) == pytest.approx(7 / 8)
    assert bubble_fraction(16, 1) == 0.0


def test_dp_attention_waits_for_the_slowest_rank() -> None:
    assert float(xp.dp_sync_time_s([1.0, 3.0, 2.0])) == 3.0
    np.testing.assert_array_equal(xp.dp_rank_batch(np.array([3, 4, 9]), 2), [2.0, 2.0, 5.0])
    m, hw = roofline.model("deepseek-v3"), roofline.hardware("h200-sxm")
    # batch 3 on 2 DP ranks: the busier rank runs 2 sequences, the same attention work as batch 4 (2 + 2);
    # the experts see the 3 sequences' tokens, fewer than batch 4's
    odd, even = (make_scenario(hw, b, 512, 8, tp=1, dp=2, ep=2) for b in (3, 4))
    att = {
        n: [op for op in decode_ops(m, sc, hw, 600.0) if op.group == "attention"]
        for n, sc in (("odd", odd), ("even", even))
    }
    assert [float(op.flops) for op in att["odd"]] == [float(op.flops) for op in att["even"]]
    exp = {
        n: next(op for op in decode_ops(m, sc, hw, 600.0) if op.name == "moe.experts_down")
        for n, sc in (("odd", odd), ("even", even))
    }
    assert float(exp["odd"].flops) < float(exp["even"].flops)


# ---- ops, memory and errors through the scenario -------------------------------------------------------------


def test_decode_dispatch_bytes_of_deepseek_v3_by_hand() -> None:
    m, hw = roofline.model("deepseek-v3"), roofline.hardware("h200-sxm")
    sc = make_scenario(hw, 64, 1024, 8, tp=1, dp=8, ep=8)
    ops = {op.name: op for op in decode_ops(m, sc, hw, 1030.0)}
    # 64 sequences / 8 DP ranks = 8 tokens per EP rank; decode uses the low-latency kernel, once per expert:
    # dispatch in fp8 (the fp8-block checkpoint's experts): 8 · 8 · (7168 · 1.03125 + 16) = 64 · 7,408 = 474,112 B;
    # combine in bf16: 64 · 14,336 = 917,504 B; one of each per MoE layer (58)
    disp, comb = ops["comm.moe_dispatch"], ops["comm.moe_combine"]
    assert float(disp.comm_bytes) == 474_112.0 and float(comb.comm_bytes) == 917_504.0
    assert disp.count == comb.count == m.num_layers - m.num_dense_layers == 58
    assert disp.exchange_kernel == "low_latency" and disp.group_size == 8
    assert "comm.ep_all_to_all" not in ops and "comm.tp_all_reduce" not in ops  # tp 1: no all-reduce
    pre = {op.name: op for op in prefill_ops(m, sc, hw)}
    assert pre["comm.moe_dispatch"].exchange_kernel == "normal"


def test_memory_per_gpu_with_dp_and_redundant_experts_by_hand() -> None:
    m, hw = roofline.model("deepseek-v3"), roofline.hardware("h200-sxm")
    sc = make_scenario(hw, 64, 1024, 128, tp=1, dp=32, ep=32, redundant_experts=32)
    parts = weight_params_per_gpu(m, sc)
    # 256 + 32 = 288 slots over 32 EP ranks = 9 experts per GPU, each 3 · 7168 · 2048 = 44,040,192 parameters,
    # on 58 MoE layers: 58 · 9 · 44,040,192 = 22,988,980,224
    assert parts["moe_experts"] == pytest.approx(58 * 9 * 44_040_192, rel=1e-12)
    # attention, dense FFN and embeddings are replicated on every DP rank (sharded by its tp = 1)
    alone = weight_params_per_gpu(m, make_scenario(hw, 64, 1024, 128))
    for k in ("attention", "ffn", "embedding", "moe_shared_experts", "router"):
        assert parts[k] == alone[k]
    # KV: each DP rank holds its own 64/32 = 2 sequences; max_batch counts all 32 ranks
    mem = memory_budget(m, hw, sc)
    assert float(mem.kv_bytes) == pytest.approx(2 * float(mem.kv_bytes_per_sequence), rel=1e-15)
    assert float(mem.max_batch) == 32 * math.floor(float(mem.kv_budget_bytes) / float(mem.kv_bytes_per_sequence))
    assert sc.gpus_per_replica == 32


def test_gpus_per_replica() -> None:
    hw = roofline.hardware("h200-sxm")
    assert make_scenario(hw, tp=2, pp=2, dp=8, ep=16).gpus_per_replica == 2 * 2 * 8
    assert make_scenario(hw, tp=4, ep=8).gpus_per_replica == 8  # dp 1: tp × pp × max(1, ep // tp) as before
    assert make_scenario(hw, tp=8, ep=4).gpus_per_replica == 8


@pytest.mark.parametrize(
    ("model", "kw", "needle"),
    [
        ("deepseek-v3", {"ep": 3}, "redundant_experts="),  # 256 % 3: pick another ep or add slots
        ("deepseek-v3", {"tp": 1, "dp": 4, "ep": 4, "redundant_experts": 30}, "286 expert slots"),
        ("deepseek-v3", {"tp": 2, "dp": 4, "ep": 4}, "set ep=8"),
        ("llama-3.1-8b", {"dp": 2}, "2 independent replicas"),
        ("deepseek-v3", {"redundant_experts": 8}, "with ep=1"),
        ("deepseek-v3", {"tp": 8, "ep": 8, "moe_overlap": "two_batch"}, "moe_overlap=none"),
        ("deepseek-v3", {"tp": 2, "dp": 16_384, "ep": 16_384}, "beyond the limit"),
        ("deepseek-v3", {"tp": 1, "dp": 0, "ep": 1}, "dp must be an integer"),
    ],
)
def test_impossible_layouts_are_refused_with_a_fix(model: str, kw: dict[str, object], needle: str) -> None:
    with pytest.raises(ScenarioError, match=needle):
        roofline.predict(model, "h200-sxm", 4, 256, 4, **kw)


def test_unknown_overlap_is_refused() -> None:
    with pytest.raises(ScenarioError, match="moe_overlap"):
        make_scenario(roofline.hardware("h200-sxm"), moe_overlap="three-batch")


@pytest.mark.parametrize(
    ("model", "kw"),
    [
        ("deepseek-v3", {"batch": 32, "prompt_len": 4096, "output_len": 30, "tp": 8}),
        ("qwen3-30b-a3b", {"batch": 16, "prompt_len": 512, "output_len": 20, "tp": 1, "ep": 8}),
    ],
)
def test_defaults_give_todays_numbers(model: str, kw: dict[str, object]) -> None:
    base = roofline.predict(model, "h200-sxm", **kw)
    same = roofline.predict(model, "h200-sxm", dp=1, redundant_experts=0, moe_overlap="none", **kw)
    assert same.summary() == base.summary()
    assert same.ops.to_csv(index=False) == base.ops.to_csv(index=False)
    assert base.fits and "dp" not in base.summary()


def test_cli_predict_takes_the_moe_layout() -> None:
    args = ["predict", "deepseek-v3", "h200-sxm", "--batch", "64", "--prompt", "512", "--output", "8", "--tp", "1"]
    args += ["--dp", "8", "--ep", "8", "--redundant-experts", "8", "--moe-overlap", "two-batch", "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    want = roofline.predict(
        "deepseek-v3", "h200-sxm", 64, 512, 8, tp=1, dp=8, ep=8, redundant_experts=8, moe_overlap="two-batch"
    )
    assert (doc["dp"], doc["redundant_experts"], doc["moe_overlap"]) == (8, 8, "two_batch")
    assert doc["ttft_s"] == want.ttft_s and doc["num_gpus"] == 8


def test_the_exchange_runs_at_the_kernel_familys_bandwidth() -> None:
    m, hw, prof = roofline.model("deepseek-v3"), roofline.hardware("h200-sxm"), load_profile(None)
    sc = make_scenario(hw, 64, 1024, 8, tp=1, dp=8, ep=8)
    disp = next(op for op in decode_ops(m, sc, hw, 1030.0) if op.name == "comm.moe_dispatch")
    # 474,112 B at DeepEP's low-latency 98 GB/s (EP 8) plus the profile's latency of one collective and one hop
    lat = prof.comm.latency_s + prof.comm.hop_latency(comm_path(hw, 8).link)
    assert float(comm_time_s(disp, hw, prof)) == pytest.approx(474_112.0 / 98e9 + lat, rel=1e-12)


def test_max_batch_counts_every_dp_rank() -> None:
    one = roofline.max_batch("deepseek-v3", "h200-sxm", 4096, tp=8)
    wide = roofline.max_batch("deepseek-v3", "h200-sxm", 4096, tp=1, dp=8, ep=8)
    per_rank = memory_budget(
        roofline.model("deepseek-v3"),
        roofline.hardware("h200-sxm"),
        make_scenario(roofline.hardware("h200-sxm"), 1, 4095, 1, tp=1, dp=8, ep=8),
        context=4096,
    )
    assert wide == 8 * math.floor(float(per_rank.kv_budget_bytes) / float(per_rank.kv_bytes_per_sequence))
    assert wide > one  # each DP rank holds its own sequences' MLA latent instead of 8 tp copies of every one
