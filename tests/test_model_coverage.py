"""Issue 17: every deployed architecture imports (or names what is missing), and the physics of the new layer kinds.

Hand-derived goldens: a hybrid linear-attention model (Qwen3.5-397B-A17B), a sparse-attention model
(DeepSeek-V3.2), a heterogeneous-layer model (Llama-3.3-Nemotron-Super-49B) and chunked attention (Llama-4 Scout).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import roofline
from roofline.errors import RooflineError, SpecError
from roofline.evaluate import op_time, op_time_summed_over_context
from roofline.memory import (
    kv_bytes_per_sequence,
    kv_bytes_per_sequence_per_gpu,
    kv_bytes_per_token,
    weight_bytes_per_gpu,
    weight_params_per_gpu,
)
from roofline.ops import decode_ops, prefill_ops
from roofline.ops.attention import chunked_pairs
from roofline.prediction import make_scenario, resolve
from roofline.specs.hf_import import model_from_hf_config
from roofline.specs.library import bundled_dir

DEPLOYED = Path(__file__).parent / "fixtures" / "deployed"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "reference" / "configs" / "deployed"

#: deployed configs roofline rejects, with the missing feature the error must name (none since issue 30: DeepSeek-V4
#: and Kimi-K3 import, see tests/test_deepseek_v4_kimi_k3.py)
NOT_MODELLED: dict[str, str] = {}
DEPLOYED_FILES = sorted(p.name for p in DEPLOYED.glob("*_config.json"))


def test_deployed_copy_is_complete() -> None:
    """85 of the 86 deployed config.json files are vendored (see fixtures/deployed/SOURCES.md)."""
    assert len(DEPLOYED_FILES) == 85
    if SHARED.is_dir():  # the reference folder is present: the vendored copies are byte-identical
        ref = sorted(p.name for p in SHARED.glob("*_config.json") if not p.name.endswith("_hf_quant_config.json"))
        assert sorted(set(ref) - set(DEPLOYED_FILES)) == ["nvidia--MiniMax-M3-NVFP4_config.json"]
        assert all((SHARED / n).read_bytes() == (DEPLOYED / n).read_bytes() for n in DEPLOYED_FILES)
        big = model_from_hf_config(SHARED / "nvidia--MiniMax-M3-NVFP4_config.json")  # the one left out (3.1 MB)
        assert big.param_count() == model_from_hf_config(DEPLOYED / "MiniMaxAI--MiniMax-M3_config.json").param_count()


@pytest.mark.parametrize("name", DEPLOYED_FILES)
def test_every_deployed_config_imports_or_names_the_missing_feature(name: str) -> None:
    stem = name.removesuffix("_config.json")
    if stem in NOT_MODELLED:
        with pytest.raises(SpecError, match=f"recognised but not modelled: roofline lacks .*{NOT_MODELLED[stem]}"):
            model_from_hf_config(DEPLOYED / name)
        return
    spec = model_from_hf_config(DEPLOYED / name)
    assert spec.param_count() >= spec.active_param_count() > 0
    assert sum(1 for _ in spec.resolved_layers()) == spec.num_layers


def test_all_text_models_import() -> None:
    """All 86 deployed configs import, DeepSeek-V4 (6 checkpoints) and Kimi-K3 included."""
    assert len(DEPLOYED_FILES) + 1 - len(NOT_MODELLED) == 86
    for stem in ("deepseek-ai--DeepSeek-V4-Flash", "sgl-project--DeepSeek-V4-Pro-FP8", "moonshotai--Kimi-K3"):
        assert model_from_hf_config(DEPLOYED / f"{stem}_config.json").param_count() > 0


def test_multimodal_wrapper_is_said() -> None:
    spec = model_from_hf_config(DEPLOYED / "Qwen--Qwen3-VL-8B-Instruct_config.json")
    assert spec.architecture == "Qwen3ForCausalLM"
    assert "Multimodal wrapper Qwen3VLForConditionalGeneration" in spec.notes and "not counted" in spec.notes


# ---- hybrid linear attention: Qwen3.5-397B-A17B --------------------------------------------------
def test_hybrid_linear_attention_state_golden() -> None:
    """Qwen3.5-397B-A17B: 45 Gated DeltaNet layers + 15 full-attention layers (every 4th).

    GDN state per sequence per layer: 64 value heads × 128 (d_k) × 128 (d_v) × 4 B (fp32, mamba_ssm_dtype)
        = 4,194,304 B; conv state: conv_dim = 2·16·128 + 64·128 = 12,288 channels × (4 − 1) taps × 2 B = 73,728 B.
    45 layers × 4,268,032 B = 192,061,440 B per sequence, whatever the context.
    Full attention: 15 layers × 2 KV heads × 256 × (K + V) × 2 B = 30,720 B per token.
    So at 4,096 tokens: 192,061,440 + 4,096 × 30,720 = 317,890,560 B.
    """
    m = roofline.model("qwen3.5-397b-a17b")
    assert sum(la.mixer == "linear" for la in m.resolved_layers()) == 45
    assert kv_bytes_per_token(m, 2.0) == 30_720
    assert float(kv_bytes_per_sequence(m, 0, 2.0)) == 192_061_440
    assert float(kv_bytes_per_sequence(m, 4096, 2.0)) == 317_890_560


def test_linear_layers_decode_flat_in_context() -> None:
    """Decode ops of the linear layers are the same at 1k and 100k context: the scan reads and writes the
    fixed state (B × 4,268,032 B each way at tp = 1) and does 7·128·128 = 114,688 FLOPs per token per head."""
    m, hw, _ = resolve("qwen3.5-397b-a17b", "h200-sxm", None)
    sc = make_scenario(hw, 4, 1024, 16)
    short, long = decode_ops(m, sc, hw, 1_000), decode_ops(m, sc, hw, 100_000)
    linear = [(a, b) for a, b in zip(short, long, strict=True) if a.layer_kind.startswith("linear")]
    assert linear and all(not a.context_dependent for a, _ in linear)
    assert all(float(a.flops) == float(b.flops) and float(a.memory_bytes) == float(b.memory_bytes) for a, b in linear)
    scan = next(a for a, _ in linear if a.name == "linear.scan")
    assert float(scan.kv_read_bytes) == float(scan.kv_write_bytes) == 4 * 4_268_032
    assert float(scan.flops) == 4 * 64 * 114_688
    full = [(a, b) for a, b in zip(short, long, strict=True) if a.name == "attn.core"]
    assert full and all(float(b.kv_read_bytes) > 90 * float(a.kv_read_bytes) for a, b in full)
    # so the linear layers' share of a decode step's time is the same at 1k and 100k tokens
    _, _, prof = resolve("qwen3.5-397b-a17b", "h200-sxm", None)
    t_short = sum(a.count * float(op_time(a, hw, prof).time_s) for a, _ in linear)
    t_long = sum(b.count * float(op_time(b, hw, prof).time_s) for _, b in linear)
    assert t_short == t_long > 0


def test_prefill_scan_linear_in_tokens() -> None:
    """Chunked-scan prefill FLOPs and bytes of a linear layer double when the prompt doubles (no T² term)."""
    m, hw, _ = resolve("qwen3.5-397b-a17b", "h200-sxm", None)
    one = {o.name: o for o in prefill_ops(m, make_scenario(hw, 1, 8192, 2), hw) if o.layer_kind.startswith("linear")}
    two = {o.name: o for o in prefill_ops(m, make_scenario(hw, 1, 16384, 2), hw) if o.layer_kind.startswith("linear")}
    scan1, scan2 = one["linear.scan"], two["linear.scan"]
    assert float(scan2.flops) == 2 * float(scan1.flops)
    assert float(scan2.act_bytes) == 2 * float(scan1.act_bytes)


# ---- sparse attention: DeepSeek-V3.2 -------------------------------------------------------------
def test_sparse_attention_golden() -> None:
    """DeepSeek-V3.2 (DSA, top-k 2048, 61 MLA layers, latent 512 + 64, indexer 64 heads × 128).

    Cache per token: 61 × (576 × 2 B + 132 B indexer keys (128 FP8 + one FP32 scale)) = 78,324 B.
    Decode attention at context L reads min(L, 2048) latents: 2048 × 576 × 2 B = 2,359,296 B per sequence at
    any L ≥ 2048, with 2·(576 + 512)·128 = 278,528 FLOPs per attended token; the indexer reads L × 132 B and
    does 2·64·128 + 2·64 = 16,512 FLOPs per cached token.
    """
    m, hw, _ = resolve("deepseek-v3.2", "h200-sxm", None)
    assert kv_bytes_per_token(m, 2.0) == 78_324
    sc = make_scenario(hw, 1, 1024, 16)
    for ctx in (2_048, 50_000, 100_000):
        ops = {o.name: o for o in decode_ops(m, sc, hw, ctx) if o.layer_kind == "sparse_moe"}
        core, idx = ops["attn.core"], ops["indexer.score"]
        assert float(core.kv_read_bytes) == 2_359_296
        assert float(core.flops) == 2048 * 278_528
        assert float(idx.kv_read_bytes) == ctx * 132
        assert float(idx.flops) == ctx * 16_512
    short = {o.name: o for o in decode_ops(m, sc, hw, 1_024) if o.layer_kind == "sparse_moe"}["attn.core"]
    assert float(short.kv_read_bytes) == 1024 * 576 * 2
    # the KV cache still holds every token
    assert float(kv_bytes_per_sequence(m, 100_000, 2.0)) == 100_000 * 78_324


def test_block_sparse_gqa_minimax_m3() -> None:
    """MiniMax-M3: 3 dense-attention layers, 57 MSA layers attending (16 + 1 local) × 128 = 2,176 tokens.

    Decode attention on a sparse layer at any context ≥ 2,176 reads 2,176 × 4 KV heads × 128 × 2 × 2 B
    = 4,456,448 B per sequence (tp = 1); the index branch reads context × 256 B (128 dims, 16-bit).
    """
    m = model_from_hf_config(DEPLOYED / "MiniMaxAI--MiniMax-M3_config.json")
    assert sum(la.mixer == "sparse" for la in m.resolved_layers()) == 57
    hw = roofline.hardware("h200-sxm")
    for ctx in (4_096, 65_536):
        ops = {o.name: o for o in decode_ops(m, make_scenario(hw, 1, 1024, 2), hw, ctx) if o.layer_kind == "sparse_moe"}
        assert float(ops["attn.core"].kv_read_bytes) == 4_456_448
        assert float(ops["indexer.score"].kv_read_bytes) == ctx * 256


# ---- heterogeneous layers: Llama-3.3-Nemotron-Super-49B (DeciLM) ---------------------------------
def test_heterogeneous_layers_golden() -> None:
    """Nemotron-Super-49B: h = 8192, 64 heads, 80 layers from block_configs.

    49 layers have attention with 64/8 = 8 KV heads: q,o 8192² each + k,v 8192×1024 each = 150,994,944 per layer
    (7,398,752,256); 31 have none (no_op). FFN widths find_multiple(int(2·mult·8192/3), 256):
    5.25 → 28672 (49 layers), 2.625 → 14336 (6), 1.3125 → 7168 (10), 1.0 → 5632 (8), 0.5 → 2816 (6),
    3.28125 → 17920 (1): Σ widths 1,642,496, × 3·8192 = 40,365,981,696. Norms: 49 × 2 + 31 × 1 = 129 × 8192
    = 1,056,768. Embedding + head 2·128256·8192 = 2,101,346,304; final norm 8192. Total 49,867,145,216.
    KV per token: 49 × 8 × 128 × 2 × 2 B = 200,704 B.
    """
    m = roofline.model("llama-3.3-nemotron-super-49b")
    assert m.param_count() == 49_867_145_216
    assert kv_bytes_per_token(m, 2.0) == 200_704
    widths = sorted({la.intermediate_size for la in m.resolved_layers()})
    assert widths == [2816, 5632, 7168, 14336, 17920, 28672]
    hw = roofline.hardware("h200-sxm")
    ops = decode_ops(m, make_scenario(hw, 1, 1024, 2), hw, 2048)
    kinds = {o.layer_kind for o in ops if o.name == "attn.core"}
    assert all(k.startswith("global_dense") for k in kinds)
    assert sum(o.count for o in ops if o.name == "attn.core") == 49
    assert sum(o.count for o in ops if o.name == "ffn.down_proj") == 80


# ---- chunked attention: Llama-4 Scout --------------------------------------------------------------
def test_chunked_attention_golden() -> None:
    """Llama-4 Scout: 36 chunked layers (chunk 8192) + 12 global NoPE layers; 8 KV heads × 128.

    A 20,000-token prefill on a chunked layer has 2 full chunks of 8192·8193/2 pairs and a last one of 3616:
    67,117,056 + 6,539,536 = 73,656,592 pairs. KV at 20,000 tokens: (12 × 20,000 + 36 × 8,192) token-layers ×
    4,096 B = 2,190,999,552 B.
    """
    m = roofline.model("llama-4-scout")
    assert float(chunked_pairs(np.asarray(0.0), np.asarray(20_000.0), 8192.0)) == 73_656_592
    assert float(kv_bytes_per_sequence(m, 20_000, 2.0)) == 2_190_999_552


def test_chunked_decode_closed_form_equals_loop() -> None:
    """The closed-form decode sum over a chunked op equals the step-by-step sum across chunk boundaries."""
    m, hw, prof = resolve("llama-4-scout", "h200-sxm", None)
    op = next(
        o
        for o in decode_ops(m, make_scenario(hw, 8, 1024, 2), hw, 8000)
        if o.name == "attn.core" and o.layer_kind.startswith("chunked")
    )
    lo, hi = 8000, 17_000
    loop = sum(float(op_time(op.at_context(np.asarray(float(L))), hw, prof).time_s) for L in range(lo, hi + 1))
    closed = float(op_time_summed_over_context(op, hw, prof, np.asarray(float(lo)), np.asarray(float(hi))))
    assert closed == pytest.approx(loop, rel=1e-9)
    assert float(op.at_context(np.asarray(8193.0)).n) == 1.0  # a new chunk starts empty


# ---- every bundled spec predicts -----------------------------------------------------------------
BUNDLED = sorted(p.stem for p in bundled_dir("model").glob("*.yaml"))


@pytest.mark.parametrize("slug", BUNDLED)
def test_predict_every_bundled_spec(slug: str) -> None:
    """Up to 8 × B200 in fp8 holds every bundled model; TTFT/TPOT are finite and positive, memory per GPU fits."""
    m = roofline.model(slug)
    tp = max(t for t in (8, 4, 2, 1) if m.attention.num_heads % t == 0)
    r = roofline.predict(slug, "b200", batch=4, prompt_len=2048, output_len=64, tp=tp, weight_dtype="fp8")
    s = r.summary()
    assert s["fits"], slug
    assert 0 < s["ttft_s"] < 60 and 0 < s["tpot_s"] < 1
    sc = make_scenario(roofline.hardware("b200"), 4, 2048, 64, tp=tp, weight_dtype="fp8")
    assert float(kv_bytes_per_sequence_per_gpu(m, sc, 2112)) > 0


NEW_BUNDLED = ["qwen3-8b", "qwen3-32b", "qwen3-235b-a22b", "qwen3.5-397b-a17b", "deepseek-v3.2", "glm-5",
               "minimax-m2.5", "kimi-k2.5", "llama-4-scout", "llama-4-maverick", "gemma-4-31b",
               "nemotron-3-super-120b-a12b", "gpt-oss-20b", "llama-3.3-nemotron-super-49b"]  # fmt: skip


@pytest.mark.parametrize("slug", NEW_BUNDLED)
def test_planner_recommends_a_deployment(slug: str) -> None:
    """The serving planner finds a feasible H200 deployment for every issue-17 bundled spec (fp8 weights)."""
    from roofline.serving.plan.planner import plan

    r = plan(
        slug,
        qps=1.0,
        prompt_len=2048,
        output_len=256,
        ttft_slo_s=10.0,
        tpot_slo_s=0.2,
        hardware=["h200-sxm"],
        precisions=("fp8",),
    )
    assert r.recommended is not None, slug
    assert r.recommended.feasible


@pytest.mark.parametrize("slug", NEW_BUNDLED)
def test_weights_per_gpu_conserve_param_count(slug: str) -> None:
    """At tp = pp = ep = 1 the per-GPU weight components sum to param_count(); at tp = 2 no GPU holds more."""
    m, hw = roofline.model(slug), roofline.hardware("h200-sxm")
    one = weight_params_per_gpu(m, make_scenario(hw, 1, 128, 2))
    assert sum(one.values()) == pytest.approx(m.param_count(), rel=1e-12)
    tp = 2 if all(la.num_heads % 2 == 0 for la in m.resolved_layers() if la.has_attention) else 1
    two = weight_params_per_gpu(m, make_scenario(hw, 1, 128, 2, tp=tp))
    assert sum(two.values()) <= sum(one.values())


def test_sparse_decode_closed_form_equals_loop() -> None:
    """Closed-form decode sums of the DSA ops equal step-by-step sums across the top-k cap (2048)."""
    m, hw, prof = resolve("deepseek-v3.2", "h200-sxm", None)
    sc = make_scenario(hw, 16, 1024, 2)
    ops = [o for o in decode_ops(m, sc, hw, 1500) if o.name in ("attn.core", "indexer.score")]
    lo, hi = 1500, 3000
    for op in ops:
        loop = sum(float(op_time(op.at_context(np.asarray(float(L))), hw, prof).time_s) for L in range(lo, hi + 1))
        closed = float(op_time_summed_over_context(op, hw, prof, np.asarray(float(lo)), np.asarray(float(hi))))
        assert closed == pytest.approx(loop, rel=1e-9), op.name


# ---- bad input fails loudly and kindly -----------------------------------------------------------
def _deployed(name: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((DEPLOYED / f"{name}_config.json").read_text())
    return data


def test_bad_hybrid_pattern_names_the_key() -> None:
    cfg = _deployed("nvidia--Nemotron-H-56B-Base-8K")
    cfg["hybrid_override_pattern"] = "X" + str(cfg["hybrid_override_pattern"])[1:]
    with pytest.raises(SpecError, match="hybrid_override_pattern"):
        model_from_hf_config(cfg)


def test_unknown_decilm_block_key_is_an_error() -> None:
    cfg = _deployed("nvidia--Llama-3_3-Nemotron-Super-49B-v1")
    blocks = cfg["block_configs"]
    assert isinstance(blocks, list)
    blocks[3]["ffn"]["moe"] = {"num_experts": 8}
    with pytest.raises(SpecError, match=r"block_configs\[3\].ffn.*unknown keys \['moe'\]"):
        model_from_hf_config(cfg)
    blocks[3]["ffn"].pop("moe")
    blocks[3]["attention"]["replace_with_linear"] = True
    with pytest.raises(SpecError, match=r"replace_with_linear.*not modelled"):
        model_from_hf_config(cfg)


def test_gemma4_per_layer_embeddings_are_refused() -> None:
    cfg = _deployed("google--gemma-4-26B-A4B")
    text = cfg["text_config"]
    assert isinstance(text, dict)
    text["hidden_size_per_layer_input"] = 256
    with pytest.raises(SpecError, match="per-layer input embeddings is not modelled"):
        model_from_hf_config(cfg)


def test_layer_runs_must_cover_the_layers() -> None:
    m = roofline.model("qwen3.5-397b-a17b")
    data = m.model_dump()
    data["layers"] = data["layers"][:-1]
    with pytest.raises(ValueError, match="layers repeat to 59 layers but num_layers is 60"):
        type(m).model_validate(data)
    data = m.model_dump()
    data["linear_attention"] = None
    with pytest.raises(ValueError, match="'linear' mixers but linear_attention is not set"):
        type(m).model_validate(data)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mutated_deployed_configs_only_raise_roofline_errors(data: st.DataObject) -> None:
    """Every adapter fails with a RooflineError (never a TypeError/KeyError) on a mutated deployed config."""
    cfg = json.loads((DEPLOYED / data.draw(st.sampled_from(DEPLOYED_FILES))).read_text())
    target = cfg["text_config"] if "text_config" in cfg and data.draw(st.booleans()) else cfg
    for _ in range(data.draw(st.integers(1, 4))):
        key = data.draw(st.sampled_from(sorted(target)))
        action = data.draw(st.sampled_from(["replace", "int", "delete"]))
        if action == "delete":
            del target[key]
        else:
            target[key] = data.draw(_JSON if action == "replace" else st.integers(-3, 200))
    with contextlib.suppress(RooflineError):
        model_from_hf_config(cfg)


@pytest.mark.parametrize("slug", BUNDLED)
@pytest.mark.parametrize("tp", [1, 4])
def test_decode_reads_every_weight_held(slug: str, tp: int) -> None:
    """A decode step streams every weight a GPU holds once (all experts touched at batch 10⁵), except the
    input-embedding table of an untied model, of which it gathers one h-wide row per distinct token; and a prefill
    writes exactly the KV/state the memory model holds for the sequence (conservation, every bundled spec:
    vectors such as QK-norm weights, sinks, MLA layernorms, router and expert biases, conv taps included)."""
    m, hw = roofline.model(slug), roofline.hardware("h200-sxm")
    if any(la.has_attention and la.num_heads % tp for la in m.resolved_layers()):
        tp = 1
    b = 1 if m.moe is None else 100_000
    sc = make_scenario(hw, b, 512, 2, tp=tp)
    read = sum(op.count * float(op.weight_bytes) for op in decode_ops(m, sc, hw, np.asarray(513.0)))
    emb_b = sc.embedding_bytes_per_element
    table = 0.0 if m.tie_word_embeddings else m.vocab_size * m.hidden_size / tp * emb_b
    gather = min(b, m.vocab_size) * m.hidden_size * emb_b  # distinct rows gathered (at most the vocabulary)
    assert read == pytest.approx(weight_bytes_per_gpu(m, sc) - table + gather, rel=1e-12)
    one = make_scenario(hw, 1, 96, 2, tp=tp)
    written = sum(op.count * float(op.kv_write_bytes) for op in prefill_ops(m, one, hw))
    assert written == pytest.approx(float(kv_bytes_per_sequence_per_gpu(m, one, 96)), rel=1e-12)


def test_kimi_delta_attention_by_hand() -> None:
    """A hand-written KDA hybrid (Kimi Linear layout; no deployed config uses the low-rank-gate KDA yet).

    h = 256, H = 4 heads of d_k = d_v = 32, conv 4 taps: conv_dim = 2·4·32 + 4·32 = 384.
    Weights (fla ``KimiDeltaAttention``): q/k/v 256·384 = 98,304; q/k/v conv 384·4 = 1,536; f_a 256·32 = 8,192;
    f_b 32·128 = 4,096; b 256·4 = 1,024; A_log 4; dt_bias 128; g_a 256·32 = 8,192; g_b 32·128 = 4,096;
    o_norm 32; o_proj 128·256 = 32,768: 158,372. State per sequence: 4·32·32 = 4,096 elements × 4 B (fp32)
    + conv state 384·3 × 2 B = 16,384 + 2,304 = 18,688 B per KDA layer.
    """
    from roofline.memory import state_bytes_per_sequence_per_layer
    from roofline.specs.model import ModelSpec

    spec = ModelSpec.model_validate(
        {
            "name": "tiny-kda",
            "display_name": "tiny KDA hybrid",
            "architecture": "hand",
            "num_layers": 4,
            "hidden_size": 256,
            "vocab_size": 1000,
            "attention": {"kind": "mha", "num_heads": 4, "num_kv_heads": 4, "head_dim": 64},
            "ffn": {"kind": "gated", "intermediate_size": 512},
            "linear_attention": {
                "kind": "kda",
                "num_heads": 4,
                "num_k_heads": 4,
                "head_k_dim": 32,
                "head_v_dim": 32,
                "conv_kernel": 4,
                "state_dtype": "fp32",
            },
            "layers": [{"mixer": "linear", "ffn": "dense", "repeat": 3}, {"mixer": "global", "ffn": "dense"}],
            "sources": [{"fields": "all", "ref": "hand-written test spec"}],
        }
    )
    assert spec.linear_attention is not None and spec.linear_attention.params(256) == 158_372
    assert state_bytes_per_sequence_per_layer(spec) == 18_688
    assert float(kv_bytes_per_sequence(spec, 100, 2.0)) == 3 * 18_688 + 100 * 2 * 4 * 64 * 2
    hw = roofline.hardware("h200-sxm")
    sc = make_scenario(hw, 1, 64, 2)
    read = sum(op.count * float(op.weight_bytes) for op in decode_ops(spec, sc, hw, np.asarray(65.0)))
    held = weight_bytes_per_gpu(spec, sc) - spec.vocab_size * 256 * 2.0 + 256 * 2.0
    assert read == pytest.approx(held, rel=1e-12)


def _simulate_deployment(name: str) -> tuple[int, str]:
    """(tp, weights) on H200 that the spec fits: the shipped checkpoint at the smallest tp, else fp8 at tp 8."""
    spec = roofline.model(name)
    for weights in ("checkpoint", "fp8"):
        for tp in (1, 2, 4, 8):
            if roofline.max_batch(spec, "h200-sxm", 2048, tp=tp, weight_dtype=weights) >= 4:
                return tp, weights
    raise AssertionError(f"{name} fits no H200 deployment up to tp 8 with fp8 weights")


@pytest.mark.parametrize("name", roofline.list_models())
def test_simulator_serves_every_bundled_spec(name: str) -> None:
    """GIVEN any bundled spec on a deployment it fits WHEN 40 requests are simulated THEN every request
    finishes with finite, ordered latencies and the output tokens are conserved (Σ generated = Σ outputs)."""
    tp, weights = _simulate_deployment(name)
    s = roofline.simulate(
        name, "h200-sxm", tp=tp, qps=2.0, prompt_len=512, output_len=32, num_requests=40, seed=1, weight_dtype=weights
    )
    r = s.requests
    assert s.saturated is None and len(r) == 40
    assert (r["ttft_s"] > 0).all() and (r["e2e_s"] >= r["ttft_s"]).all()
    assert s.config["generated_tokens"] == int(r["output_tokens"].sum())
