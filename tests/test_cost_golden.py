"""Hand-derived golden values for KV size, memory budget, FLOPs and bytes (derivations inline)."""

from __future__ import annotations

import numpy as np
import pytest

import roofline
from roofline.memory import kv_bytes_per_sequence, kv_bytes_per_token, weight_bytes_per_gpu
from roofline.ops.attention import attention_kernel
from roofline.ops.context import BuildContext
from roofline.ops.records import gemm
from roofline.prediction import make_scenario
from roofline.profile import datasheet_profile


def test_llama2_13b_kv_per_token_and_sequence() -> None:
    m = roofline.model("llama-2-13b")
    # 2 (K and V) x 40 layers x 40 KV heads x 128 head_dim x 2 bytes (fp16) = 819,200 bytes per token
    assert kv_bytes_per_token(m, 2.0) == 819_200
    # 2,048 tokens x 819,200 = 1,677,721,600 bytes = 1.68 GB per sequence
    per_seq = float(kv_bytes_per_sequence(m, 2048, 2.0))
    assert per_seq == 1_677_721_600
    assert round(per_seq / 1e9, 2) == 1.68
    # 16 sequences: 26,843,545,600 bytes = 26.8 GB
    assert round(16 * per_seq / 1e9, 1) == 26.8
    # bf16 is also 2 bytes: 8,192 tokens x 819,200 = 6,710,886,400 bytes = 6.7 GB
    assert round(float(kv_bytes_per_sequence(m, 8192, 2.0)) / 1e9, 1) == 6.7


def test_llama2_7b_max_batch_golden(llama7: roofline.ModelSpec) -> None:
    # KV per sequence at 4,096 tokens: 2 x 32 layers x 32 heads x 128 x 2 bytes x 4096 = 2^31 = 2,147,483,648 bytes
    assert float(kv_bytes_per_sequence(llama7, 4096, 2.0)) == 2_147_483_648
    # exact fp16 weights: 6,738,415,616 params x 2 bytes = 13,476,831,232 bytes (~13.48e9)
    sc = make_scenario(roofline.hardware("h100-sxm"), weight_dtype="fp16", kv_dtype="fp16")
    assert weight_bytes_per_gpu(llama7, sc) == 2 * llama7.param_count() == 13_476_831_232
    # (80e9 - 10e9 - 13.48e9) / 2,147,483,648 = 26.3 -> 26 sequences
    mb = roofline.max_batch(
        llama7,
        "h100-sxm",
        4096,
        weight_dtype="fp16",
        kv_dtype="fp16",
        engine_overrides={"capacity_bytes": 80e9, "reserve_bytes": 10e9, "memory_fraction": 1.0},
    )
    assert mb == 26


def test_llama2_7b_decode_reads_all_weights(llama7: roofline.ModelSpec) -> None:
    # A batch-1 decode step streams every weight once (all but the 32000x4096 embedding table, of which it
    # reads one row): 13.48e9 - 32000*4096*2 = 13.21e9 bytes, ~13.5 GB.
    hw = roofline.hardware("a100-80gb-sxm").model_copy()
    r = roofline.predict(
        llama7,
        hw,
        batch=1,
        prompt_len=1,
        output_len=2,
        weight_dtype="fp16",
        kv_dtype="fp16",
        calibration=datasheet_profile(),
    )
    assert r.decode_bytes_per_step == pytest.approx(13.48e9 - 32000 * 4096 * 2 * 0.99, rel=0.01)
    # 2 FLOPs per parameter per token: ~13.5 GFLOP (embedding lookup does no FLOPs)
    assert r.decode_flops_per_step == pytest.approx(2 * 6.47e9, rel=0.03)
    # at 2 TB/s that is 13.2e9 / 2.039e12 = 6.5 ms; with datasheet ceilings TPOT is exactly the byte time
    assert r.tpot_s == pytest.approx(r.decode_bytes_per_step / 2.039e12, rel=0.01)
    assert 6.3e-3 < r.tpot_s < 7.0e-3
    # compute: 13.5e9 / 312e12 = 43 us, under 0.005% of a second
    assert r.decode_flops_per_step / 312e12 == pytest.approx(43e-6, rel=0.05)
    assert r.bound_decode == "memory"


def test_prefill_gemm_flops() -> None:
    # (1024 x 4096) . (4096 x 16384): 2 x 1024 x 4096 x 16384 = 137,438,953,472 FLOPs = 137.4 GFLOP
    op = gemm("g", "ffn", "x", 1, "bf16", 1024, 16384, 4096, 2.0, 2.0)
    assert float(op.flops) == 137_438_953_472
    # bytes: weights 4096*16384*2 + activations (1024*4096 + 1024*16384)*2
    assert float(op.memory_bytes) == 4096 * 16384 * 2 + (1024 * 4096 + 1024 * 16384) * 2


def test_decode_attention_intensity_is_about_one(llama7: roofline.ModelSpec, h100: roofline.HardwareSpec) -> None:
    # One head, head_dim 128, context 1,024: QK^T is 2 x 128 x 1024 = 262,144 FLOPs over the 1024 x 128 x 2 bytes
    # = 256 KiB of fp16 K; PV doubles both, so FLOPs/byte ~ 1.
    sc = make_scenario(roofline.hardware("h100-sxm"), 1, 1024, 2, weight_dtype="fp16", kv_dtype="fp16")
    c = BuildContext.create(llama7, sc, h100, "decode", 1, 1, 1023)
    op = attention_kernel(c, "global_dense", 1, float("inf"), 1, 1, 128, 128, 2 * 128)
    assert float(op.flops) / 2 == 262_144
    assert float(op.kv_read_bytes) / 2 == 256 * 1024
    assert float(op.flops / op.memory_bytes) == pytest.approx(1.0, rel=0.01)


def test_causal_prefill_attention_pairs(llama7: roofline.ModelSpec, h100: roofline.HardwareSpec) -> None:
    # causal prefill of T tokens: T(T+1)/2 (query, key) pairs per head, 4*d FLOPs per pair and head
    t = 2048
    sc = make_scenario(roofline.hardware("h100-sxm"), 1, t, 2)
    c = BuildContext.create(llama7, sc, h100, "prefill", 1, t, 0)
    op = attention_kernel(c, "global_dense", 1, float("inf"), 32, 32, 128, 128, 2 * 32 * 128)
    assert float(op.flops) == 4 * 128 * 32 * t * (t + 1) / 2
    # a 512-token window: sum_i min(i, 512) = 512*513/2 + (2048-512)*512
    op_w = attention_kernel(c, "local_dense", 1, 512.0, 32, 32, 128, 128, 2 * 32 * 128)
    assert float(op_w.flops) == 4 * 128 * 32 * (512 * 513 / 2 + (t - 512) * 512)


def test_gqa_and_mla_kv_sizes() -> None:
    # Llama-3.1-70B: 80 layers x 2 x 8 KV heads x 128 x 2 bytes = 327,680 B/token
    assert kv_bytes_per_token(roofline.model("llama-3.1-70b"), 2.0) == 327_680
    # DeepSeek-V3 MLA latent: 61 layers x (512 + 64) x 2 bytes = 70,272 B/token
    assert kv_bytes_per_token(roofline.model("deepseek-v3"), 2.0) == 61 * 576 * 2
    # gemma-2-9b: 21 local layers capped at 4,096 tokens + 21 global layers
    g = roofline.model("gemma-2-9b")
    per_layer = 2 * 8 * 256 * 2
    assert float(kv_bytes_per_sequence(g, 8192, 2.0)) == 21 * per_layer * 4096 + 21 * per_layer * 8192


def test_tp_all_reduce_ring_cost(h100: roofline.HardwareSpec) -> None:
    # ring all-reduce of S bytes on p GPUs: 2(p-1)/p * S over the per-direction link (64 MB > vLLM's 8 MiB
    # custom all-reduce limit, so NCCL's ring); the datasheet profile has no latency
    from roofline.evaluate import op_time
    from roofline.ops.comm import all_reduce

    s = 64e6
    op = all_reduce("ar", "comm", "x", 1, "bf16", s, 4, h100)
    t = op_time(op, h100, datasheet_profile())
    assert float(t.time_s) == pytest.approx(2 * 3 / 4 * s / 450e9)
    assert str(t.bound) == "communication"


def test_moe_expected_distinct_experts() -> None:
    from roofline.ops.ffn import expected_distinct_experts

    # one token touches exactly k experts; many tokens touch all E
    assert float(expected_distinct_experts(8, 2, np.asarray(1.0))) == pytest.approx(2.0)
    assert float(expected_distinct_experts(8, 2, np.asarray(1000.0))) == pytest.approx(8.0)
    # two tokens: 8 * (1 - (6/8)^2) = 3.5
    assert float(expected_distinct_experts(8, 2, np.asarray(2.0))) == pytest.approx(3.5)
