"""The collectors' balanced MoE rows under DeepSeek-V3's grouped top-k: which experts the measured rank computes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibrate.aic.collector_routing import balanced_picks, collector_routing, grouped_top_k, rank_load
from calibrate.aic.moe import moe_ops_for_rows, moe_table
from calibrate.aic.tables import load_table
from roofline.ops.ffn import routed_rows
from roofline.specs.library import hardware

DS = {"hidden_size": 7168.0, "inter_size": 2048.0, "num_experts": 256.0, "topk": 8.0, "moe_tp_size": 1.0}
EPS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: Hand-derived (module docstring of calibrate.aic.collector_routing), M ≥ 32: groups 0-3 kept (one pick each),
#: the 4 free slots on experts 0-3 (0-4 when one of them is the token's own pick). The rank with experts
#: 0 … 256/ep − 1 computes: ep 4 (groups 0-1): 2 picks + 4 fills = 6M; ep 8 (group 0): 1 + 4 = 5M; ep 16: every
#: token's 4 fills + the half of its group-0 picks below 16 = 4.5M; ep 32: 4.25M; ep 64 (experts 0-3): 4M.
ASSIGNMENTS_PER_TOKEN = {1: 8, 2: 8, 4: 6, 8: 5, 16: 4.5, 32: 4.25, 64: 4, 128: 2, 256: 1}
TOUCHED = {1: 128, 2: 128, 4: 64, 8: 32, 16: 16, 32: 8, 64: 4, 128: 2, 256: 1}


def _cols(tokens: float, ep: float) -> dict[str, np.ndarray]:
    return {c: np.array([v]) for c, v in {**DS, "num_tokens": tokens, "moe_ep_size": ep}.items()}


def test_balanced_picks_are_the_collectors_stride_pattern() -> None:
    """helper.py balanced_logits: token t picks (t + 32 j) mod 256 from 32 tokens up, ⌊t·32/M⌋ + 32 j below."""
    picks = balanced_picks(64, 256, 8)
    assert picks[5].tolist() == [5, 37, 69, 101, 133, 165, 197, 229]
    assert picks[40].tolist() == [40, 72, 104, 136, 168, 200, 232, 8]
    assert balanced_picks(4, 256, 8)[3].tolist() == [24 + 32 * j for j in range(8)]  # ⌊3·32/4⌋ = 24


def test_grouped_top_k_keeps_groups_0_to_3_and_fills_the_lowest_experts() -> None:
    """One pick per group: the group scores tie, groups 0-3 stay; the 4 free slots go to the lowest indices."""
    ids = grouped_top_k(balanced_picks(64, 256, 8), 256, 8, 8, 4)
    assert sorted(ids[5].tolist()) == [0, 1, 2, 3, 5, 37, 69, 101]
    assert sorted(ids[2].tolist()) == [0, 1, 2, 3, 4, 34, 66, 98]  # its own pick 2, fills 0, 1, 3, 4
    assert (ids < 128).all()


@pytest.mark.parametrize("tokens", [32, 64, 1024, 16384])
def test_rank_load_matches_the_hand_derived_counts(tokens: int) -> None:
    for ep in EPS:
        touched, assignments = rank_load(tokens, 256, 8, ep, 8, 4)
        assert touched == TOUCHED[ep]
        assert assignments == pytest.approx(ASSIGNMENTS_PER_TOKEN[ep] * tokens)


def test_only_balanced_rows_of_a_grouped_case_leave_uniform_routing() -> None:
    """vLLM / SGLang DeepSeek-V3 balanced rows replay the grouped routing; power-law rows, TensorRT-LLM (its
    tables use Renormalize routing) and other shapes keep routed_rows exactly."""
    cols = _cols(64.0, 1.0)
    uniform = routed_rows(256.0, 8.0, 1.0, np.array([64.0]))
    for engine, dist in (("trtllm", "balanced"), ("sglang", "power_law"), ("vllm", None)):
        got = collector_routing(engine, cols, None if dist is None else np.array([dist]))
        assert all(np.array_equal(g, u) for g, u in zip(got, uniform, strict=True))
    touched, assignments, rows = collector_routing("sglang", cols, np.array(["balanced"]))
    assert (touched[0], assignments[0], rows[0]) == (128.0, 512.0, 4.0)  # uniform: 221 experts, 2.3 rows each
    other = {**cols, "num_experts": np.array([384.0])}  # Kimi-K2's 384 experts: one group, plain top-k
    assert collector_routing("vllm", other, np.array(["balanced"]))[0][0] == pytest.approx(
        routed_rows(384.0, 8.0, 1.0, 64.0)[0]
    )


def test_the_ops_stream_the_touched_experts_weights_only() -> None:
    """DeepSeek-V3 fp8-block, 64 tokens, ep 1 on SGLang: gate_up streams 128 experts × 2·2048·7168 bytes."""
    hw = hardware("h200-sxm")
    rows = {**_cols(64.0, 1.0), "distribution": np.array(["balanced"])}
    ops = moe_ops_for_rows(rows, hw, "fp8_block", engine="sglang")
    plain = moe_ops_for_rows({k: v for k, v in rows.items() if k != "distribution"}, hw, "fp8_block", engine="sglang")
    assert ops is not None and plain is not None
    assert float(ops.gate_up.weight_bytes[0]) == pytest.approx(128 * 2 * 2048 * 7168, rel=1e-3)  # + block scales
    assert float(plain.gate_up.weight_bytes[0]) > 1.7 * float(ops.gate_up.weight_bytes[0])  # ~221 experts


def _ds_times(framework: str) -> pd.Series:
    """Median seconds of h200_sxm DeepSeek-V3 fp8-block balanced rows at moe_tp 1 by (kernel, tokens, ep)."""
    df = load_table(moe_table("h200_sxm", framework))
    sel = (
        (df["hidden_size"] == 7168)
        & (df["num_experts"] == 256)
        & (df["moe_tp_size"] == 1)
        & (df["moe_dtype"] == "fp8_block")
        & (df["distribution"] == "balanced")
    )
    return df[sel].groupby(["kernel", "num_tokens", "moe_ep_size"])["time_s"].median()


def test_the_measured_expert_parallel_scaling_follows_the_replayed_assignments() -> None:
    """h200_sxm vLLM fp8-block, DeepSeek-V3 at moe_tp 1, 16,384 tokens (compute-bound), its FlashInfer-CUTLASS
    kernel (ep ≥ 2): each ep's time over the ep-256 row's is its replayed assignments over M within 8 % (uniform
    routing would say 256/ep: 32× at ep 8, not 5×)."""
    t = _ds_times("vllm").loc["vllm_fp8moe_flashinfer_cutlass_flashinferexperts"].loc[16384.0]
    for ep in EPS[1:]:
        assert t[float(ep)] / t[256.0] == pytest.approx(ASSIGNMENTS_PER_TOKEN[ep], rel=0.08)


def test_ep_1_and_ep_2_time_alike_where_they_route_alike() -> None:
    """SGLang's one Triton kernel on h200_sxm: ep 1 (256 experts held, 128 touched) and ep 2 (128 held, all
    touched) run the same 128 experts and 8·M assignments, and time within 4 % of each other at every M, where
    uniform routing would halve ep 2's weights and assignments."""
    assert rank_load(1024, 256, 8, 1, 8, 4) == rank_load(1024, 256, 8, 2, 8, 4)
    t = _ds_times("sglang").loc["sglang_fused_moe_triton"]
    ratio = (t.xs(2.0, level="moe_ep_size") / t.xs(1.0, level="moe_ep_size")).dropna()
    assert len(ratio) >= 20 and ratio.between(0.96, 1.04).all()
