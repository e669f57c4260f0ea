"""DeepSeek-V2 (``DeepseekV2ForCausalLM``): MLA with or without a query low-rank projection, DeepSeek-MoE with shared
experts, imported from the real configs and counted against the authors' figures (issue #30: an architecture that
was refused).

Stated: DeepSeek-V2 paper (arXiv 2405.04434, https://arxiv.org/abs/2405.04434) abstract, "236B total parameters, of
which 21B are activated for each token"; DeepSeek-V2-Lite "15.7B total parameters ... 2.4B activated" (same paper,
appendix B; model card https://huggingface.co/deepseek-ai/DeepSeek-V2-Lite). The configs are DeepSeek-V2's own
(tests/fixtures/hf_configs/deepseek-v2.json; the bundled V2-Lite's tests/fixtures/configs/DeepSeek-V2-Lite.json) and
DeepSeek-Coder-V2's, which share those architectures (tests/fixtures/hf_configs/SOURCES.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import roofline
from roofline.errors import SpecError
from roofline.memory import kv_bytes_per_token
from roofline.specs.hf_import import SUPPORTED, model_from_hf_config

CONFIGS = Path(__file__).parent / "fixtures" / "hf_configs"
BUNDLED = Path(__file__).parent / "fixtures" / "configs"
B = 1e9


def _model(name: str) -> roofline.ModelSpec:
    return model_from_hf_config(json.loads((CONFIGS / f"{name}.json").read_text()))


def test_deepseek_v2_counts_the_papers_totals() -> None:
    assert "DeepseekV2ForCausalLM" in SUPPORTED
    big = _model("deepseek-coder-v2-instruct")
    assert big.param_count() == pytest.approx(236 * B, rel=0.02)
    assert big.active_param_count() == pytest.approx(21 * B, rel=0.02)
    assert big.attention.mla is not None and big.attention.mla.q_lora_rank == 1536
    lite = _model("deepseek-coder-v2-lite-instruct")
    assert lite.param_count() == pytest.approx(15.7 * B, rel=0.02)
    assert lite.attention.mla is not None and lite.attention.mla.q_lora_rank is None  # a full q_proj


def test_deepseek_v2_predicts_with_the_mla_cache() -> None:
    """KV per token of MLA = layers × (kv_lora_rank + qk_rope_head_dim) × 2 bytes: 60 × 576 × 2 = 69,120 B."""
    big = _model("deepseek-coder-v2-instruct")
    r = roofline.predict(big, "h100-sxm", batch=8, prompt_len=1024, output_len=64, tp=8)
    assert r.memory.fits
    assert kv_bytes_per_token(big) == pytest.approx(60 * (512 + 64) * 2)
    assert 0 < r.ttft_s < 10 and 0 < r.tpot_s < 1


def _config(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_deepseek_v2_real_config_counts_and_cache() -> None:
    """DeepSeek-V2 (236B) from its own config.json: 235.74B total (-0.1% of 236B), 21.38B active (+1.8% of 21B;
    20.85B, -0.7%, without the input embedding). MLA caches kv_lora_rank + qk_rope_head_dim per layer per token:
    60 × (512 + 64) × 2 B = 69,120 B. The group-limited greedy router is one bias-free gate (no router bias)."""
    spec = model_from_hf_config(CONFIGS / "deepseek-v2.json")
    assert spec.param_count() == pytest.approx(236 * B, rel=0.02)
    assert spec.active_param_count() == pytest.approx(21 * B, rel=0.02)
    assert spec.moe is not None and not spec.moe.router_bias
    assert (spec.moe.num_experts, spec.moe.top_k, spec.moe.first_dense_layers) == (160, 6, 1)
    assert spec.moe.shared_intermediate_size == 2 * 1536
    assert kv_bytes_per_token(spec) == 60 * (512 + 64) * 2 == 69_120
    assert "group_limited_greedy" in spec.notes


def test_deepseek_v2_lite_by_hand() -> None:
    """DeepSeek-V2-Lite (h=2048, 27 layers, 16 heads, q_lora_rank null, kv_lora_rank 512, rope 64, nope 128, v 128;
    layer 0 dense of 10,944, then 64 routed experts of 1,408 (6 per token) + 2 shared; V=102,400 untied):

    attention per layer: q 2048·16·192 + kv_a 2048·576 + kv_a_norm 512 + kv_b 512·16·256 + o 16·128·2048 = 13,763,072
    dense FFN: 3·2048·10944 = 67,239,936; one expert 3·2048·1408 = 8,650,752; gate 2048·64 = 131,072
    total  = 27·13,763,072 + 67,239,936 + 26·(66·8,650,752 + 131,072) + 27·2·2048 + 2·102400·2048 + 2048
           = 15,706,484,224 (15.7B: -0.04%)
    active = the same with 8 experts (6 routed + 2 shared) = 2,661,150,208; 2,451,435,008 without the input
             embedding (the authors' 2.4B, tests/test_param_counts.py)
    KV per token: 27 × (512 + 64) × 2 B = 31,104 B.
    """
    spec = model_from_hf_config(BUNDLED / "DeepSeek-V2-Lite.json")
    assert spec.attention.mla is not None and spec.attention.mla.q_lora_rank is None
    assert spec.attention_params_per_layer() == 13_763_072
    assert spec.expert_params() == 8_650_752
    per_moe = 66 * 8_650_752 + 131_072
    total = 27 * 13_763_072 + 67_239_936 + 26 * per_moe + 27 * 2 * 2048 + 2 * 102_400 * 2048 + 2048
    assert spec.param_count() == total == 15_706_484_224
    assert spec.active_param_count() == total - 26 * 58 * 8_650_752 == 2_661_150_208
    assert kv_bytes_per_token(spec) == 27 * (512 + 64) * 2 == 31_104
    assert roofline.model("deepseek-v2-lite").param_count() == total


@pytest.mark.parametrize(
    ("key", "value"),
    [("topk_method", "noaux_tc"), ("topk_method", "sinkhorn"), ("scoring_func", "sigmoid")],
)
def test_deepseek_v2_refuses_a_router_it_cannot_count(key: str, value: str) -> None:
    """A V2 router other than greedy / group_limited_greedy over a softmax is refused, naming the key."""
    raw = _config(BUNDLED / "DeepSeek-V2-Lite.json") | {key: value}
    with pytest.raises(SpecError, match=f"key '{key}'.*{value}"):
        model_from_hf_config(raw)


def test_deepseek_v2_lite_predicts() -> None:
    r = roofline.predict("deepseek-v2-lite", "h100-sxm", batch=8, prompt_len=1024, output_len=64)
    assert r.memory.fits and 0 < r.ttft_s < 10 and 0 < r.tpot_s < 1
