"""Missing traffic as named ops: byte formulas derived by hand."""

from __future__ import annotations

import pytest

import roofline
from roofline.ops import decode_ops, prefill_ops
from roofline.prediction import make_scenario

H100 = roofline.hardware("h100-sxm")


def _ops(ops: list) -> dict:
    return {op.name: op for op in ops}


def test_residual_add_norm_moves_four_passes() -> None:
    """Llama-3.1-8B prefill of 1 × 1000 tokens, bf16: fused add + RMSNorm reads x and the residual and writes
    both: 4 · 1000 · 4096 · 2 B = 32.768 MB per instance (+ 4096 · 2 B norm weight), 2 per layer × 32 layers."""
    m = roofline.model("llama-3.1-8b")
    op = _ops(prefill_ops(m, make_scenario(H100, 1, 1000, 2, weight_dtype="bf16"), H100))["residual_add_norm"]
    assert float(op.act_bytes) == 4 * 1000 * 4096 * 2
    assert float(op.weight_bytes) == 4096 * 2
    assert op.count == 2 * 32


def test_rope_reads_and_writes_new_queries_and_keys() -> None:
    """Llama-3.1-8B at tp 2, decode of 8 sequences: (32/2 + 8/2) heads × 128 × 8 tokens, read + write, 2 B:
    2 · 8 · 20 · 128 · 2 = 81,920 B. MLA (DeepSeek-V3, tp 8): (128/8 + 1 shared key) × 64 rope dims."""
    m = roofline.model("llama-3.1-8b")
    op = _ops(decode_ops(m, make_scenario(H100, 8, 1000, 2, tp=2, weight_dtype="bf16"), H100, 1001.0))["attn.rope"]
    assert float(op.act_bytes) == 2 * 8 * 20 * 128 * 2
    ds = roofline.model("deepseek-v3")
    op = _ops(decode_ops(ds, make_scenario(H100, 8, 1000, 2, tp=8), H100, 1001.0))["attn.rope"]
    assert float(op.act_bytes) == 2 * 8 * 17 * 64 * 2


def test_vocab_parallel_embedding_all_reduces_its_output() -> None:
    """tp 4, 1000 prompt tokens, h 4096, bf16: message 1000 · 4096 · 2 B = 8.192 MB (> 8 MiB: NCCL ring),
    wire 2 · 3/4 · 8.192 MB per GPU; none at tp 1."""
    m = roofline.model("llama-3.1-8b")
    op = _ops(prefill_ops(m, make_scenario(H100, 1, 1000, 2, tp=4, weight_dtype="bf16"), H100))
    ar = op["comm.embedding_all_reduce"]
    assert float(ar.comm_bytes) == pytest.approx(2 * 3 / 4 * 1000 * 4096 * 2)
    assert (ar.group_size, ar.count) == (4, 1)
    assert "comm.embedding_all_reduce" not in _ops(prefill_ops(m, make_scenario(H100, 1, 1000, 2), H100))


def test_mla_prefill_reads_expanded_kv_not_the_latent() -> None:
    """DeepSeek-V3 prefill, tp 8, 1 × 512 tokens: the kernel reads 16 heads × (128 + 64 + 128) × 2 B = 10,240 B
    per attended token instead of the latent's 576 × 2 = 1,152 B: the extra op carries
    512 · (10,240 − 1,152) B per layer; decode (absorbed, latent only) has no such op."""
    m = roofline.model("deepseek-v3")
    sc = make_scenario(H100, 1, 512, 2, tp=8)
    op = _ops(prefill_ops(m, sc, H100))["attn.mla_prefill_kv"]
    assert float(op.act_bytes) == pytest.approx(512 * (16 * 320 * 2 - 576 * 2))
    assert op.kernels == 0
    assert "attn.mla_prefill_kv" not in _ops(decode_ops(m, sc, H100, 513.0))


def test_prefill_attention_runs_at_the_flash_attention_efficiency_of_its_context() -> None:
    """Default profile: FlashAttention-3 causal head dim 128 reaches 521 TFLOPS/s at 2k tokens on H100
    (0.5265 of 989.5). Llama-3.1-8B prefill of 2048 tokens: attention FLOPs = 2·(128 + 128)·32 heads
    · 2048·2049/2 pairs; compute time = FLOPs / (0.5265 · 989.5e12) (compute-bound), below the GEMM
    ceiling; decode attention keeps the memory path."""
    from roofline.evaluate import op_time
    from roofline.profile import default_profile

    m = roofline.model("llama-3.1-8b")
    op = _ops(prefill_ops(m, make_scenario(H100, 1, 2048, 2, weight_dtype="bf16"), H100))["attn.core"]
    flops = 2 * 256 * 32 * 2048 * 2049 / 2
    assert float(op.flops) == flops
    t = op_time(op, H100, default_profile())
    assert float(t.compute_s) == pytest.approx(flops / (round(521 / 989.5, 4) * 989.5e12))
    assert str(t.bound) == "compute"
