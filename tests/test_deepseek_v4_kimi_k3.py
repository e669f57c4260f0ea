"""Issue 30 item 5: DeepSeek-V4 (compressed attention, hyper-connections) and Kimi-K3 (full-rank-gate KDA,
gated NoPE MLA, latent MoE with a norm, attention residuals) import from their deployed config.json files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import roofline
from roofline.evaluate import op_time, op_time_summed_over_context
from roofline.memory import (
    kv_bytes_per_sequence,
    kv_bytes_per_sequence_per_gpu,
    kv_bytes_per_token,
    weight_bytes_per_gpu,
    weight_params_per_gpu,
)
from roofline.ops import decode_ops, prefill_ops
from roofline.ops.compressed import entry_pairs
from roofline.ops.traffic import attention_residual_values
from roofline.prediction import make_scenario
from roofline.specs.hf_import import model_from_hf_config
from roofline.specs.model import ModelSpec

DEPLOYED = Path(__file__).parent / "fixtures" / "deployed"
B = 1e9
V4 = [
    f"{org}--DeepSeek-V4-{size}{suffix}"
    for org, suffix in (("deepseek-ai", ""), ("nvidia", "-NVFP4"), ("sgl-project", "-FP8"))
    for size in ("Flash", "Pro")
]
K3 = "moonshotai--Kimi-K3"


def _spec(stem: str) -> ModelSpec:
    return model_from_hf_config(DEPLOYED / f"{stem}_config.json")


def test_deepseek_v4_flash_params_by_hand() -> None:
    """DeepSeek-V4-Flash: h = 4096, 43 layers (compress ratios: 2 × 0, 21 × 4 (CSA), 20 × 128 (HCA)), V = 129,280.

    Attention (every layer): q_a 4096·1024 + q_a_norm 1024 + q_b 1024·64·512 + kv_proj 4096·512 + kv_norm 512
    + o_a 64·512·1024 + o_b 8·1024·4096 + sinks 64 = 106,956,352.
    CSA compressor 2·4096·1024 + 4·1024 + 512 = 8,393,216; indexer 2·4096·256 + 4·256 + 128 + 1024·64·128
    + 4096·64 = 10,749,056: + 19,142,272. HCA compressor 2·4096·512 + 128·512 + 512 = 4,260,352.
    MoE: 256 experts × 3·4096·2048 + shared 3·4096·2048 + router 4096·256 + bias 256 = 6,468,665,600.
    Norms 2·4096; hyper-connections 2 × (24·16,384 + 24 + 3) = 786,486 per layer, head 4·16,384 + 5 = 65,541.
    Embedding + head 2·129,280·4096 = 1,059,061,760; final norm 4096.
    """
    m = _spec("deepseek-ai--DeepSeek-V4-Flash")
    attn, csa, hca, moe, hc = 106_956_352, 19_142_272, 4_260_352, 6_468_665_600, 786_486
    per_layer = attn + moe + 2 * 4096 + hc
    total = 43 * per_layer + 21 * csa + 20 * hca + 65_541 + 1_059_061_760 + 4096
    assert m.param_count() == total == 284_332_241_239
    assert m.active_param_count() == total - 43 * 250 * 3 * 4096 * 2048


def test_deepseek_v4_kv_by_hand() -> None:
    """DeepSeek-V4-Flash at 100,000 tokens, 16-bit KV: every layer keeps the 128-token window of the one 512-wide
    K=V head (43 × 128 × 512 × 2 B = 5,636,096 B); the 21 CSA layers add ⌊100,000/4⌋ = 25,000 entries ×
    (1,024 + 132 indexer bytes) = 28,900,000 B each; the 20 HCA layers ⌊100,000/128⌋ = 781 × 1,024 = 799,744 B
    each. Total 5,636,096 + 606,900,000 + 15,994,880 = 628,530,976 B."""
    m = _spec("deepseek-ai--DeepSeek-V4-Flash")
    assert float(kv_bytes_per_sequence(m, 100_000, 2.0)) == 628_530_976
    assert kv_bytes_per_token(m, 2.0) == pytest.approx(43 * 1024 + 21 * (1024 + 132) / 4 + 20 * 1024 / 128)


def test_entry_pairs_closed_form() -> None:
    """Σ_{i=1}^{n} min(⌊i/m⌋, cap) in closed form equals the loop, with and without the top-k cap."""
    for m, cap in ((4, np.inf), (4, 7.0), (128, np.inf)):
        for n in (0, 3, 4, 5, 31, 32, 33, 300, 1000):
            loop = sum(min(i // m, cap) for i in range(1, n + 1))
            assert float(entry_pairs(np.asarray(float(n)), m, cap)) == loop


@pytest.mark.parametrize(
    ("stem", "total", "active", "source"),
    [
        ("deepseek-ai--DeepSeek-V4-Flash", 284 * B, 13 * B, "https://huggingface.co/deepseek-ai/DeepSeek-V4-Flash"),
        ("deepseek-ai--DeepSeek-V4-Pro", 1600 * B, 49 * B, "https://huggingface.co/deepseek-ai/DeepSeek-V4-Pro"),
        (
            K3,
            2800 * B,
            104 * B,
            "https://docs.nvidia.com/nemo/automodel/model-coverage/large-language-models/"
            "moonshotai/kimi-k3.md (2.8T total / 104B activated; huggingface.co/moonshotai/Kimi-K3)",
        ),
    ],
)
def test_params_match_authors(stem: str, total: float, active: float, source: str) -> None:
    """Totals within 2 % of the authors' figures (MTP layers excluded, as DeepSeek-V3's 671B); active parameters
    without the input-embedding table (a lookup), within 0.5B of the whole-billion figure stated (13.27B for
    V4-Flash's "13B", 48.85B for V4-Pro's "49B", 104.19B for K3's "104B")."""
    m = _spec(stem)
    assert abs(m.param_count() / total - 1) < 0.02, source
    assert abs(m.active_param_count() - m.vocab_size * m.hidden_size - active) < 0.5 * B, source


def test_kimi_k3_by_hand() -> None:
    """Kimi-K3: h = 7168, 93 layers (69 KDA, 24 gated MLA), V = 163,840.

    KDA (96 heads × 128, P = 12,288): q/k/v 3·7168·P + convs 3·P·4 + f_a 7168·128 + f_b 128·P + b 7168·96
    + A_log 96 + dt_bias P + full-rank g_proj 7168·P + o_norm 128 + o_proj P·7168 = 443,740,384.
    MLA: q_a 7168·1536 + 1536 + q_b 1536·96·192 + kv_a 7168·576 + 512 + kv_b 512·96·256 + o 96·128·7168
    + g_proj 7168·96·128 = 232,196,096. Cache per token 24 × 576 × 2 B = 27,648 B; KDA state per sequence
    69 × (96·128·128·4 B + 3·12,288·3·2 B) = 449,372,160 B.
    """
    m = _spec(K3)
    kda = next(la for la in m.resolved_layers() if la.mixer == "linear")
    mla = next(la for la in m.resolved_layers() if la.mixer == "global")
    assert m.mixer_params(kda) == 443_740_384 and m.mixer_params(mla) == 232_196_096
    assert kv_bytes_per_token(m, 2.0) == 27_648
    assert float(kv_bytes_per_sequence(m, 0, 2.0)) == 449_372_160
    assert attention_residual_values(93, 12) == (1002, 186)
    assert "Multimodal wrapper KimiK3ForConditionalGeneration" in m.notes


@pytest.mark.parametrize("stem", ["deepseek-ai--DeepSeek-V4-Flash", "deepseek-ai--DeepSeek-V4-Pro", K3])
@pytest.mark.parametrize("tp", [1, 4])
def test_decode_reads_every_weight_held(stem: str, tp: int) -> None:
    """Conservation (as tests/test_model_coverage.py for bundled specs, 16-bit weights): a decode step at batch 10⁵
    reads every held weight (hyper-connections, compressors, indexers, attention-residual scorers, latent norm
    included), and a 96-token prefill writes exactly the cache the memory model holds."""
    m, hw = _spec(stem), roofline.hardware("h200-sxm")
    b = 100_000
    sc = make_scenario(hw, b, 512, 2, tp=tp, weight_dtype="bf16")
    read = sum(op.count * float(op.weight_bytes) for op in decode_ops(m, sc, hw, np.asarray(513.0)))
    emb = sc.embedding_bytes_per_element
    held = (
        weight_bytes_per_gpu(m, sc)
        - m.vocab_size * m.hidden_size / tp * emb
        + min(b, m.vocab_size) * m.hidden_size * emb
    )
    assert read == pytest.approx(held, rel=1e-12)
    one = make_scenario(hw, 1, 96, 2, tp=tp, weight_dtype="bf16")
    written = sum(op.count * float(op.kv_write_bytes) for op in prefill_ops(m, one, hw))
    assert written == pytest.approx(float(kv_bytes_per_sequence_per_gpu(m, one, 96)), rel=1e-12)
    if tp == 1:
        assert sum(weight_params_per_gpu(m, make_scenario(hw, 1, 128, 2)).values()) == pytest.approx(m.param_count())


def test_v4_decode_closed_form_equals_loop() -> None:
    """The closed-form decode sum of V4's context-dependent ops equals the step-by-step sum of the same ops."""
    m, hw = _spec("deepseek-ai--DeepSeek-V4-Flash"), roofline.hardware("h200-sxm")
    from roofline.prediction import resolve

    _, _, prof = resolve("deepseek-v3.2", "h200-sxm", None)
    ops = [o for o in decode_ops(m, make_scenario(hw, 8, 1024, 2), hw, 1500) if o.context_dependent]
    assert {o.name for o in ops} >= {"attn.core", "attn.compressed", "indexer.score"}
    lo, hi = 1500, 2600
    for op in ops:
        loop = sum(float(op_time(op.at_context(np.asarray(float(L))), hw, prof).time_s) for L in range(lo, hi + 1))
        closed = float(op_time_summed_over_context(op, hw, prof, np.asarray(float(lo)), np.asarray(float(hi))))
        assert closed == pytest.approx(loop, rel=1e-9), op.name


def test_v4_predicts() -> None:
    """V4-Flash on 8 × H200 in fp8: finite, positive latencies; the CSA decode attention is capped at top-k."""
    m = _spec("deepseek-ai--DeepSeek-V4-Flash")
    s = roofline.predict(m, "h200-sxm", batch=4, prompt_len=2048, output_len=64, tp=8, weight_dtype="fp8").summary()
    assert s["fits"] and 0 < s["ttft_s"] < 60 and 0 < s["tpot_s"] < 1
    hw = roofline.hardware("h200-sxm")
    sc = make_scenario(hw, 1, 1024, 2)
    for ctx in (4 * 512, 100_000):
        core = [o for o in decode_ops(m, sc, hw, ctx) if o.name == "attn.compressed" and o.ctx_cap == 2048]
        assert core and all(float(o.kv_read_bytes) == 512 * 512 * 2 for o in core)


def test_every_v4_checkpoint_imports_alike() -> None:
    """The six deployed V4 checkpoints (DeepSeek, NVIDIA NVFP4, SGLang FP8 'deepseek_ref') share two architectures."""
    counts = {stem: _spec(stem).param_count() for stem in V4}
    assert len(set(counts.values())) == 2
    assert all(
        counts[s] == counts[s.replace("nvidia", "deepseek-ai").replace("-NVFP4", "")] for s in V4 if "nvidia" in s
    )
