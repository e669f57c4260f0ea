"""Quantisation formats with their scales, and checkpoint precision per module group: goldens by hand."""

from __future__ import annotations

import pytest

import roofline
from roofline.errors import ScenarioError, SpecError
from roofline.memory import weight_bytes_per_gpu
from roofline.ops import decode_ops
from roofline.prediction import make_scenario
from roofline.specs.precision import Precision
from roofline.specs.quant import checkpoint_from_quantization_config

H100 = roofline.hardware("h100-sxm")


def test_format_bytes_include_their_scales() -> None:
    """MXFP4 (4 + 8/32)/8; NVFP4 (4 + 8/16)/8; int4 g128 (4 + (16 + 4)/128)/8 = 4.15625 bits;
    fp8 128×128 blocks (8 + 32/16384)/8."""
    assert Precision.MXFP4.bytes_per_element == pytest.approx(4.25 / 8)  # +6.25 % over 4 bits
    assert Precision.NVFP4.bytes_per_element == pytest.approx(4.5 / 8)  # +12.5 %
    assert Precision.INT4_G128.bytes_per_element * 8 == pytest.approx(4.15625)  # +3.9 %
    assert Precision.FP8_BLOCK.bytes_per_element == pytest.approx(1 + 4 / 16384)
    assert Precision.parse("AWQ") is Precision.INT4_G128 and Precision.parse("mxfp4") is Precision.MXFP4


def test_gpt_oss_120b_default_weights_are_the_shipped_mxfp4_checkpoint() -> None:
    """The authors' figure: 60.8 GiB. By hand: experts 36 layers × 128 × (3·2880·2880 + 2·2880 + 2880 biases)
    = 114,714,132,480 params at 4.25 bits = 60.94 GB; everything else (attention with biases and sinks,
    embeddings + lm_head 2·201,088·2880, router) ≈ 2.115 B params at 2 bytes = 4.23 GB; total 65.19 GB
    = 60.71 GiB, within 2 % of 60.8 GiB. Forcing bf16 would need 233.66 GB."""
    m = roofline.model("gpt-oss-120b")
    w = weight_bytes_per_gpu(m, make_scenario(H100))
    assert w / 2**30 == pytest.approx(60.8, rel=0.02)
    assert weight_bytes_per_gpu(m, make_scenario(H100, weight_dtype="bf16")) == pytest.approx(233.658e9, rel=1e-4)
    assert make_scenario(H100).weight_label(m) == "checkpoint: routed_experts mxfp4"


def test_llama_70b_int4_group128_weighs_39_8_gb() -> None:
    """GPTQ/AWQ int4 g128: every linear weight at 4.156 bits, embeddings and lm_head 16-bit.
    Linear params 70,553,706,496 − 2·128,256·8192 (embeddings) − norms = 68,451,834,880 → ×0.51953 B
    = 35.56 GB; embeddings 2,101,346,304 × 2 B = 4.20 GB; norms ≈ 0 → 39.77 GB (39.8 GB ± 1.5 %)."""
    m = roofline.model("llama-3.1-70b")
    w = weight_bytes_per_gpu(m, make_scenario(H100, weight_dtype="int4-g128"))
    assert w / 1e9 == pytest.approx(39.8, rel=0.015)


def test_deepseek_v3_defaults_to_its_fp8_block_checkpoint() -> None:
    """config.json quantization_config: fp8, e4m3, weight_block_size [128, 128] → fp8-block on every linear
    layer; on H100 (fp8 peak) the GEMMs compute at FP8 (W8A8), embeddings stay bf16."""
    m = roofline.model("deepseek-v3")
    sc = make_scenario(H100)
    fmts = sc.weight_formats(m)
    assert fmts.routed_experts is Precision.FP8_BLOCK and fmts.attention is Precision.FP8_BLOCK
    assert fmts.embeddings is Precision.BF16
    ops = {op.name: op for op in decode_ops(m, sc, H100, 1024.0)}
    assert ops["moe.experts_gate_up"].dtype == "fp8"
    assert ops["lm_head"].dtype == "bf16"
    bf16 = weight_bytes_per_gpu(m, make_scenario(H100, weight_dtype="bf16"))
    assert weight_bytes_per_gpu(m, sc) < 0.51 * bf16
    # on A100 (no fp8 peak) the same checkpoint runs weight-only: 16-bit compute, fp8 bytes
    a100 = roofline.hardware("a100-80gb-sxm")
    a_ops = {op.name: op for op in decode_ops(m, make_scenario(a100), a100, 1024.0)}
    assert a_ops["moe.experts_gate_up"].dtype == "bf16"


def test_per_group_override_and_uniform_override() -> None:
    """{"routed_experts": "nvfp4"} over gpt-oss: expert bytes × 4.5/4.25, attention untouched."""
    m = roofline.model("gpt-oss-120b")
    base = make_scenario(H100)
    nv = make_scenario(H100, weight_dtype={"routed_experts": "nvfp4"})
    assert nv.weight_formats(m).routed_experts is Precision.NVFP4
    assert nv.weight_formats(m).attention is Precision.BF16
    experts = 36 * 128 * m.expert_params()
    delta = experts * (Precision.NVFP4.bytes_per_element - Precision.MXFP4.bytes_per_element)
    assert weight_bytes_per_gpu(m, nv) - weight_bytes_per_gpu(m, base) == pytest.approx(delta, rel=1e-9)
    with pytest.raises(ScenarioError, match="module group"):
        make_scenario(H100, weight_dtype={"experts": "nvfp4"})
    # nvfp4 computes at the fp4 peak on Blackwell only
    b200 = roofline.hardware("b200")
    ops = {op.name: op for op in decode_ops(m, make_scenario(b200, weight_dtype="nvfp4"), b200, 1024.0)}
    assert ops["moe.experts_gate_up"].dtype == "fp4"
    ops_h = {op.name: op for op in decode_ops(m, make_scenario(H100, weight_dtype="nvfp4"), H100, 1024.0)}
    assert ops_h["moe.experts_gate_up"].dtype == "bf16"


def test_importer_reads_awq_and_rejects_unknown_group_sizes() -> None:
    cp = checkpoint_from_quantization_config({"quant_method": "awq", "bits": 4, "group_size": 128}, "x.json")
    assert cp is not None and cp.attention == "int4-g128" and cp.embeddings == "bf16"
    with pytest.raises(SpecError, match="group_size=64"):
        checkpoint_from_quantization_config({"quant_method": "gptq", "bits": 4, "group_size": 64}, "x.json")
    assert checkpoint_from_quantization_config(None) is None


def test_context_beyond_the_model_limit_is_an_error_unless_allowed() -> None:
    """llama-3.1-8b: max_position_embeddings 131,072; 200,000 + 128 tokens is refused, naming the limit."""
    with pytest.raises(ScenarioError, match=r"131,072 context of llama-3\.1-8b"):
        roofline.predict("llama-3.1-8b", "h100-sxm", prompt_len=200_000)
    from dataclasses import replace

    sc = replace(make_scenario(H100, 1, 200_000, 128), allow_long_context=True)
    with pytest.warns(UserWarning, match="modelled anyway"):
        r = roofline.predict("llama-3.1-8b", "h100-sxm", scenario=sc)
    assert r.ttft_s > 0


def test_deepseek_v3_tp8_holds_the_full_latent_kv_on_every_gpu() -> None:
    """MLA caches kv_lora_rank + rope = 512 + 64 = 576 elements per token per layer, and every tp rank
    holds all of it: per GPU 61 layers × 576 × 2 B = 70,272 B per token, whole-model figure too; the
    all-GPU total at tp 8 is 8 × that. GQA with tp > kv heads replicates heads: llama-3.1-8b (8 KV heads)
    at tp 16 holds 1 head per GPU, 16 heads in all = 2 × the whole-model KV."""
    from roofline.memory import kv_bytes_per_sequence, kv_bytes_per_sequence_all_gpus, kv_bytes_per_sequence_per_gpu

    m = roofline.model("deepseek-v3")
    sc = make_scenario(H100, 1, 4096, 1, tp=8)
    whole = float(kv_bytes_per_sequence(m, 4096, 2.0))
    assert whole == 61 * 576 * 2 * 4096
    assert float(kv_bytes_per_sequence_per_gpu(m, sc, 4096)) == whole
    assert float(kv_bytes_per_sequence_all_gpus(m, sc, 4096)) == 8 * whole
    r = roofline.predict("deepseek-v3", "h200-sxm", batch=4, prompt_len=4000, output_len=96, tp=8)
    assert r.kv_cache_bytes == pytest.approx(4 * 8 * 61 * 576 * 2 * 4096)
    llama = roofline.model("llama-3.1-8b")
    sc16 = make_scenario(H100, 1, 4096, 1, tp=16)
    assert float(kv_bytes_per_sequence_all_gpus(llama, sc16, 4096)) == 2 * float(kv_bytes_per_sequence(llama, 4096))


@pytest.mark.parametrize(
    ("fixture", "want"),
    [
        # compressed-tensors int4 group 32 symmetric on routed experts only; ignore keeps attention, shared, dense
        ("configs/Kimi-K2.5.json", {"attention": "bf16", "routed_experts": "int4-g32", "shared_experts": "bf16"}),
        # modelopt NVFP4 with every self_attn ignored
        ("configs/Gemma-4-31B-IT-NVFP4.json", {"attention": "bf16", "dense_ffn": "nvfp4"}),
        # modelopt MIXED_PRECISION: FP8 linear/self attention, NVFP4 experts and shared expert
        (
            "deployed/nvidia--Qwen3.6-35B-A3B-NVFP4_config.json",
            {"attention": "fp8", "routed_experts": "nvfp4", "shared_experts": "nvfp4"},
        ),
        ("configs/MiniMax-M2.5.json", {"attention": "fp8-block", "routed_experts": "fp8-block"}),
    ],
)
def test_importer_reads_the_deployed_quantisation_schemes(fixture: str, want: dict[str, str]) -> None:
    import json
    from pathlib import Path

    data = json.loads((Path(__file__).parent / "fixtures" / fixture).read_text())
    qc = data.get("quantization_config") or data["text_config"]["quantization_config"]
    cp = checkpoint_from_quantization_config(qc, fixture)
    assert cp is not None
    assert {g: getattr(cp, g) for g in want} == want
    assert cp.embeddings == "bf16"


def test_int4_g32_carries_a_16_bit_scale_per_32() -> None:
    """Symmetric int4, one bf16 scale per 32 weights, no zero point: (4 + 16/32)/8 = 0.5625 B."""
    assert Precision.INT4_G32.bytes_per_element == pytest.approx(0.5625)
