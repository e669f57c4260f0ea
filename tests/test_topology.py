"""Collectives priced on the path they take, and visible memory: goldens derived by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

import roofline
from roofline.evaluate import comm_time_s
from roofline.memory import kv_bytes_per_sequence_per_gpu, memory_budget
from roofline.ops.comm import all_reduce
from roofline.prediction import make_scenario
from roofline.profile import datasheet_profile, default_profile
from roofline.specs.topology import comm_path, slow_link_notes

S = 64e6  # 64 MB: above vLLM's 8 MiB custom all-reduce limit, so NCCL's ring


def test_h100_pcie_tp4_all_reduce_runs_at_the_pcie_hop() -> None:
    """The NVLink bridge joins a pair; a 4-GPU ring has two PCIe Gen5 x16 hops (64 GB/s per direction).

    Ring wire bytes per GPU = 2·(p−1)/p·S = 2·(3/4)·S; at the slowest hop the time is at least
    2·(3/4)·S / 64 GB/s = 1.5 ms for S = 64 MB (the datasheet profile reaches it exactly).
    """
    hw = roofline.hardware("h100-pcie")
    floor = 2 * (3 / 4) * S / 64e9
    op = all_reduce("ar", "comm", "x", 1, "bf16", S, 4, hw)
    assert float(comm_time_s(op, hw, datasheet_profile())) == pytest.approx(floor)
    assert float(comm_time_s(op, hw, default_profile())) >= floor
    # the pair itself uses the bridge: 2 GPUs, S over 300 GB/s
    pair = all_reduce("ar", "comm", "x", 1, "bf16", S, 2, hw)
    assert float(comm_time_s(pair, hw, datasheet_profile())) == pytest.approx(S / 300e9)


def test_mi300x_tp2_all_reduce_gets_one_xgmi_link() -> None:
    """Full mesh: one 64 GB/s xGMI link per peer pair. tp 2: wire 2·(1/2)·S = S over one link ≥ S / 64 GB/s.

    tp 8: each GPU reaches 7 peers at 7 × 64 = 448 GB/s, wire 2·(7/8)·S → 2·(7/8)·S / 448 GB/s = S / 256 GB/s.
    """
    hw = roofline.hardware("mi300x")
    t2 = all_reduce("ar", "comm", "x", 1, "bf16", S, 2, hw)
    assert float(comm_time_s(t2, hw, datasheet_profile())) == pytest.approx(S / 64e9)
    assert float(comm_time_s(t2, hw, default_profile())) >= S / 64e9
    t8 = all_reduce("ar", "comm", "x", 1, "bf16", S, 8, hw)
    assert float(comm_time_s(t8, hw, datasheet_profile())) == pytest.approx(S / 256e9)


def test_tp16_on_an_hgx_board_crosses_to_the_network_and_is_flagged() -> None:
    """h100-sxm: 8-GPU NVSwitch domain; tp 16 runs its ring at the 50 GB/s NIC (one 400 Gb/s NIC per GPU)."""
    hw = roofline.hardware("h100-sxm")
    path = comm_path(hw, 16)
    assert (path.link, path.bandwidth_bytes_per_s, path.slow) == ("network", 50e9, True)
    assert "scale-out" in path.note
    assert not comm_path(hw, 8).slow
    op = all_reduce("ar", "comm", "x", 1, "bf16", S, 16, hw)
    assert float(comm_time_s(op, hw, datasheet_profile())) == pytest.approx(2 * 15 / 16 * S / 50e9)
    assert [f for f, _ in slow_link_notes(hw, {"tp": 16, "ep": 8})] == ["tp scale-out"]


def test_pcie_only_cards_flag_every_collective() -> None:
    hw = roofline.hardware("l40s")
    assert hw.interconnect is None
    path = comm_path(hw, 2)
    assert (path.link, path.bandwidth_bytes_per_s, path.slow) == ("pcie", 32e9, True)


def test_small_message_all_reduce_follows_vllm_custom_kernel_choice() -> None:
    """vLLM custom_all_reduce.cuh: full NVLink, p ≤ 8 and S < 256 KiB → one-shot (wire (p−1)·S, 1 hop);
    256 KiB ≤ S ≤ 8 MiB at p = 8 → two-shot (wire 2(p−1)/p·S, 2 hops); larger → NCCL ring, 2(p−1) hops.

    Default-profile latency of the one-shot on h100-sxm tp 8 with S = 16 KiB:
    3.6 µs base + 1 hop × 0.47 µs (NCCL LL, NVLink), bandwidth term 7·16384 / (0.8·450 GB/s).
    """
    hw = roofline.hardware("h100-sxm")
    kib = 1024.0
    one = all_reduce("ar", "comm", "x", 1, "bf16", 16 * kib, 8, hw)
    assert (float(one.comm_bytes), float(one.comm_hops)) == (7 * 16 * kib, 1.0)
    two = all_reduce("ar", "comm", "x", 1, "bf16", 1024 * kib, 8, hw)
    assert (float(two.comm_bytes), float(two.comm_hops)) == (2 * 7 / 8 * 1024 * kib, 2.0)
    ring = all_reduce("ar", "comm", "x", 1, "bf16", 16 * 1024 * kib, 8, hw)
    assert float(ring.comm_hops) == 14.0
    want = 3.6e-6 + 0.47e-6 + 7 * 16 * kib / (0.8 * 450e9)
    assert float(comm_time_s(one, hw, default_profile())) == pytest.approx(want)
    # a bridged card beyond its pair always rings over PCIe: 2(p−1) hops at the PCIe hop latency
    pcie = roofline.hardware("h100-pcie")
    small = all_reduce("ar", "comm", "x", 1, "bf16", 16 * kib, 4, pcie)
    assert float(small.comm_hops) == 6.0
    want_pcie = 3.6e-6 + 6 * 1.0e-6 + 2 * 3 / 4 * 16 * kib / (0.8 * 64e9)
    assert float(comm_time_s(small, pcie, default_profile())) == pytest.approx(want_pcie)


def test_l4_max_batch_uses_the_visible_23034_mib() -> None:
    """L4 with ECC: nvidia-smi shows 23,034 MiB. Under vLLM (fraction 0.9 of total):
    max_batch = floor((0.9·23,034 MiB − W − reserve) / KV per sequence), never the 24 GiB label.
    """
    m, hw = roofline.model("mistral-7b"), roofline.hardware("l4")
    sc = make_scenario(hw, 1, 4096, 1)
    mem = memory_budget(m, hw, sc, context=4096)
    assert mem.capacity_bytes == 23_034 * 2**20
    assert hw.memory.capacity_bytes == 24 * 2**30  # the datasheet figure is kept for display
    assert mem.engine.memory_fraction_of == "total"
    budget = mem.engine.memory_fraction * 23_034 * 2**20 - mem.weight_bytes - float(mem.reserve_bytes)
    per_seq = float(kv_bytes_per_sequence_per_gpu(m, sc, 4096))
    assert int(mem.max_batch) == math.floor(budget / per_seq)
    assert roofline.max_batch("mistral-7b", "l4", 4096) == int(mem.max_batch)


def test_plan_says_so_when_tp_collectives_cross_a_slow_link() -> None:
    from roofline.serving.plan.planner import plan

    res = plan(
        "llama-3.1-8b",
        qps=1.0,
        prompt_len=512,
        output_len=64,
        ttft_slo_s=5.0,
        tpot_slo_s=1.0,
        hardware=["h100-pcie"],
        tp_options=[2, 4],
    )
    by_tp = {c.tp: c for c in res.candidates}
    assert by_tp[2].link_flag == ""
    assert by_tp[4].link_flag == "tp PCIe hop" and "PCIe Gen5 x16" in by_tp[4].link_note
    assert np.isfinite(by_tp[4].tpot_s)


def test_cross_node_ring_latency_charges_only_the_inter_node_hops_to_the_network() -> None:
    """NCCL tuning.cc: ring latency = baseLat + (nsteps − nInterSteps)·intraLat + nInterSteps·interLat, with
    nsteps = 2(p − 1) = 30 and nInterSteps = 2(nNodes − 1) = 2 for tp 16 over two 8-GPU NVLink boards:
    3.6 + 28 × 0.47 + 2 × 2.7 = 22.16 µs for a message whose wire time is negligible (16 B)."""
    hw = roofline.hardware("h100-sxm")
    op = all_reduce("ar", "comm", "x", 1, "bf16", 16.0, 16, hw)
    wire = 2 * 15 / 16 * 16.0 / (0.8 * 50e9)
    assert float(comm_time_s(op, hw, default_profile())) == pytest.approx(3.6e-6 + 28 * 0.47e-6 + 2 * 2.7e-6 + wire)
