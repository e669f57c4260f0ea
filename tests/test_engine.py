"""One engine definition for every entry point: memory semantics by hand, max batch invariance, conservation.

Hand derivations use Llama-2-7B (6,738,415,616 parameters, 32 layers × 32 KV heads × 128 head dim,
so 2·32·32·128·2 B = 524,288 B of bf16 KV per token) on an H100 SXM (80 GiB = 85,899,345,920 B).
"""

from __future__ import annotations

import numpy as np
import pytest

import roofline
from roofline.engine import PRESETS, EngineConfig, engine_preset, resolve_engine
from roofline.errors import ScenarioError, UnknownNameError
from roofline.memory import activation_peak_bytes, kv_bytes_per_sequence_per_gpu, memory_budget, weight_bytes_per_gpu
from roofline.ops import decode_ops, prefill_ops
from roofline.prediction import make_scenario

H100 = "h100-sxm"
KV_PER_TOKEN = 524_288
CAPACITY = 81_559 * 2**20  # h100-sxm visible capacity (nvidia-smi 81559 MiB), used by every memory decision
WEIGHTS = 2 * 6_738_415_616


def _parts(engine: str) -> tuple[EngineConfig, float, float]:
    """(engine, weights, reserve) for Llama-2-7B bf16 on H100: reserve = activation peak + runtime reserve."""
    m, hw = roofline.model("llama-2-7b"), roofline.hardware(H100)
    sc = make_scenario(hw, engine=engine)
    eng = sc.engine
    assert eng is not None
    act = float(
        activation_peak_bytes(m, sc, eng.max_num_batched_tokens, min(eng.max_num_seqs, eng.max_num_batched_tokens))
    )
    assert weight_bytes_per_gpu(m, sc) == WEIGHTS
    return eng, WEIGHTS, act + eng.runtime_reserve_bytes


def test_vllm_budget_is_a_fraction_of_total_memory() -> None:
    # vLLM: KV = 0.9·C − W − (A + R); at context 4096 one sequence holds 4096 × 524,288 B = 2 GiB.
    eng, w, reserve = _parts("vllm")
    assert (eng.memory_fraction, eng.memory_fraction_of, eng.max_num_batched_tokens) == (0.9, "total", 8192)
    expected = int((0.9 * CAPACITY - w - reserve) // (4096 * KV_PER_TOKEN))
    # A = 8192 tokens × (4·4096 + 2·11008) × 2 B + 1024 logits × 32000 × 4 B = 760,217,600 B; R = 2 GiB:
    # (0.9 × 85,899,345,920 − 13,476,831,232 − 760,217,600 − 2,147,483,648) / 2,147,483,648 = 28.4 → 28
    assert roofline.max_batch("llama-2-7b", H100, 4096, engine="vllm") == expected == 28


def test_sglang_budget_is_a_static_pool_of_weights_and_kv() -> None:
    # SGLang 0.5: KV = min(f·C − W, C − W − (A + R)), f = round((M − 10 GiB) / M, 3) below 90 GiB (9.5 + p/2 GiB
    # reserved at p = 1: 0.874 on the H100's 79.65 GiB); page size 1.
    eng, w, reserve = _parts("sglang")
    f = round((CAPACITY / 2**30 - 10.0) / (CAPACITY / 2**30), 3)
    assert (eng.memory_fraction, eng.memory_fraction_of, eng.kv_block_tokens) == (f, "static_pool", 1)
    assert f == 0.874 and eng.max_num_batched_tokens == 8192
    budget = min(f * CAPACITY - w, CAPACITY - w - reserve)
    assert roofline.max_batch("llama-2-7b", H100, 4096, engine="sglang") == int(budget // (4096 * KV_PER_TOKEN))


def test_trtllm_budget_is_a_fraction_of_what_is_free_after_loading() -> None:
    # TensorRT-LLM: KV = 0.9·(C − W − (A + R)); blocks of 32 tokens.
    eng, w, reserve = _parts("trtllm")
    assert (eng.memory_fraction_of, eng.kv_block_tokens, eng.chunked_prefill) == ("free_after_load", 32, False)
    budget = 0.9 * (CAPACITY - w - reserve)
    assert roofline.max_batch("llama-2-7b", H100, 4096, engine="trtllm") == int(budget // (4096 * KV_PER_TOKEN))


def test_kv_is_allocated_in_whole_blocks() -> None:
    # context 1,000 on vLLM's 16-token blocks holds ceil(1000/16)·16 = 1,008 tokens per sequence
    m, hw = roofline.model("llama-2-7b"), roofline.hardware(H100)
    sc = make_scenario(hw, 1, 999, 1, engine="vllm")
    mem = memory_budget(m, hw, sc)
    assert float(mem.kv_bytes_per_sequence) == 1008 * KV_PER_TOKEN


def test_vllm_defaults_follow_the_device_as_vllm_does() -> None:
    # vLLM raises its token budget and sequence cap on >= 70 GiB GPUs other than A100
    assert engine_preset("vllm", roofline.hardware("h100-sxm")).max_num_batched_tokens == 8192
    small = engine_preset("vllm", roofline.hardware("a100-80gb-sxm"))
    assert (small.max_num_batched_tokens, small.max_num_seqs) == (2048, 256)


def test_every_preset_value_is_cited() -> None:
    for name in PRESETS:
        eng = engine_preset(name, roofline.hardware(H100))
        for field in ("memory_fraction", "max_num_batched_tokens", "runtime_reserve_bytes"):
            assert eng.sources.get(field), f"{name}.{field} has no source"


def test_overrides_accept_engine_option_names_and_reject_unknown_ones() -> None:
    hw = roofline.hardware(H100)
    eng = resolve_engine("vllm", hw, {"gpu_memory_utilization": 0.8, "max_num_seqs": 64})
    assert (eng.memory_fraction, eng.max_num_seqs, eng.sources["memory_fraction"]) == (0.8, 64, "user override")
    with pytest.raises(ScenarioError, match="not known"):
        resolve_engine("vllm", hw, {"gpu_mem": 0.8})
    with pytest.raises(ScenarioError, match="memory_fraction"):
        resolve_engine("vllm", hw, {"gpu_memory_utilization": 1.5})
    with pytest.raises(UnknownNameError, match="did you mean vllm"):
        resolve_engine("vlm", hw)


@pytest.mark.parametrize("hardware", ["h100-sxm", "a100-80gb-sxm", "l40s"])
@pytest.mark.parametrize("engine", sorted(PRESETS))
def test_max_batch_never_depends_on_the_batch_asked_for(hardware: str, engine: str) -> None:
    """max_batch is the memory count; a batch above the engine's max_num_seqs is refused, not priced."""
    cap = engine_preset(engine, roofline.hardware(hardware)).max_num_seqs
    for name in roofline.list_models():
        ref = roofline.max_batch(name, hardware, 1024 + 128, engine=engine)
        got = {roofline.predict(name, hardware, b, 1024, 128, engine=engine).max_batch for b in (1, 8, 256)}
        assert got == {ref}, (name, got, ref)
        for b, fits in ((ref, True), (ref + 1, False)):
            if b > cap:
                with pytest.raises(ScenarioError, match=f"max_num_seqs {cap}"):
                    roofline.predict(name, hardware, b, 1024, 128, engine=engine)
            elif b >= 1:
                assert roofline.predict(name, hardware, b, 1024, 128, engine=engine).fits is fits, (name, b)


def test_chunked_engine_serves_a_batch_an_unchunked_reserve_would_refuse() -> None:
    # 256 × 1,024 prompt tokens prefilled at once would need ~24 GB of activations; vLLM chunks them.
    r = roofline.predict("llama-3.1-8b", H100, batch=256, prompt_len=1024, output_len=64)
    assert r.fits and r.max_batch >= 256


# ---- conservation: copies that must agree ------------------------------------------------------


@pytest.mark.parametrize("name", ["llama-2-7b", "llama-3.1-70b", "gemma-2-9b", "qwen2.5-7b", "phi-3-mini-4k"])
@pytest.mark.parametrize("tp", [1, 4])
def test_weight_bytes_read_equal_weight_bytes_held(name: str, tp: int) -> None:
    """A batch-1 decode step streams every weight it holds once, except the input-embedding table of an
    untied model, of which it gathers one h-wide row per token:
    Σ op weight bytes = weight bytes per GPU − untied table bytes + h · embedding bytes."""
    m, hw = roofline.model(name), roofline.hardware(H100)
    sc = make_scenario(hw, 1, 512, 2, tp=tp)
    read = sum(op.count * float(op.weight_bytes) for op in decode_ops(m, sc, hw, np.asarray(513.0)))
    emb_b = sc.embedding_bytes_per_element
    table = 0.0 if m.tie_word_embeddings else m.vocab_size * m.hidden_size / tp * emb_b
    assert read == pytest.approx(weight_bytes_per_gpu(m, sc) - table + m.hidden_size * emb_b, rel=1e-12)


def test_moe_weight_bytes_read_at_large_batch_equal_held() -> None:
    # at batch 4096 every expert is touched, so the step reads every held weight (but the embedding table)
    m, hw = roofline.model("mixtral-8x7b"), roofline.hardware("h200-sxm")
    sc = make_scenario(hw, 4096, 512, 2, tp=2)
    read = sum(op.count * float(op.weight_bytes) for op in decode_ops(m, sc, hw, np.asarray(513.0)))
    table, gather = m.vocab_size * m.hidden_size / 2 * 2.0, 4096 * m.hidden_size * 2.0
    assert read == pytest.approx(weight_bytes_per_gpu(m, sc) - table + gather, rel=1e-6)


@pytest.mark.parametrize("name", sorted(roofline.list_models()))
def test_kv_bytes_written_by_prefill_equal_kv_held(name: str) -> None:
    """Prefill of P tokens writes the K/V the memory model holds for a P-token sequence (P below every
    sliding window, so no layer drops tokens): Σ prefill kv_write bytes = KV per sequence per GPU."""
    m, hw = roofline.model(name), roofline.hardware(H100)
    tp = 8 if m.param_count() > 100e9 else 1
    sc = make_scenario(hw, 1, 96, 2, tp=tp)
    written = sum(op.count * float(op.kv_write_bytes) for op in prefill_ops(m, sc, hw))
    assert written == pytest.approx(float(kv_bytes_per_sequence_per_gpu(m, sc, 96)), rel=1e-12)
