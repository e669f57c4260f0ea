"""Phi-3.5-MoE (``PhiMoEForCausalLM``): 16 experts top-2, GQA with q/k/v/o biases, LayerNorm, an lm_head bias,
imported from its real config.json and counted against the authors' figures (issue #30: an architecture that was
refused).

Stated: model card https://huggingface.co/microsoft/Phi-3.5-MoE-instruct, "16x3.8B parameters with 6.6B active
parameters when using 2 experts"; 41.9B total is the Hub's safetensors count (quoted with "6.6B active per token" at
https://huface.ru/MikeKuykendall/phi-3.5-moe-cpu-offload-gguf). Fixture: tests/fixtures/configs/SOURCES.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import roofline
from roofline.memory import kv_bytes_per_token
from roofline.specs.hf_import import SUPPORTED, model_from_hf_config

CONFIG = Path(__file__).parent / "fixtures" / "configs" / "Phi-3.5-MoE-instruct.json"
B = 1e9


def _config() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(CONFIG.read_text())
    return data


def test_phimoe_by_hand() -> None:
    """h=4096, 32 layers, 32 heads of 128, 8 KV heads, 16 experts of 6,400 (2 per token), V=32,064 untied.

    attention per layer: q,o 4096·4096 each + k,v 4096·1024 each = 41,943,040; biases 4096+1024+1024 (q,k,v) + 4096
                         (o) = 10,240 -> 41,953,280
    one expert: 3·4096·6400 = 78,643,200; gate 4096·16 = 65,536; norm weights 2·4096
    total  = 32·(41,953,280 + 16·78,643,200 + 65,536 + 8,192) + 2·32,064·4096 + 4096 = 41,872,855,040
             (41.9B: -0.07%)
    active = the same with 2 experts = 6,640,701,440 (6.6B: +0.6%)
    KV per token (GQA): 32 layers × 2·8·128 × 2 B = 131,072 B.
    Not counted (no spec field; 0.0007% together): the LayerNorm biases (2·4096 per layer + 4096) and the
    lm_head bias (32,064).
    """
    assert {"PhiMoEForCausalLM", "PhimoeForCausalLM"} <= set(SUPPORTED)
    spec = model_from_hf_config(CONFIG)
    a = spec.attention
    assert (a.kind, a.num_heads, a.num_kv_heads, a.head_dim, a.qkv_bias, a.o_bias) == ("gqa", 32, 8, 128, True, True)
    assert spec.norm == "layernorm" and spec.moe is not None
    assert (spec.moe.num_experts, spec.moe.top_k, spec.moe.expert_intermediate_size) == (16, 2, 6400)
    assert not spec.moe.router_bias and spec.moe.first_dense_layers == 0
    assert spec.attention_params_per_layer() == 41_953_280
    layer = 41_953_280 + 65_536 + 2 * 4096
    total = 32 * (layer + 16 * 78_643_200) + 2 * 32_064 * 4096 + 4096
    assert spec.param_count() == total == 41_872_855_040
    assert spec.active_param_count() == total - 32 * 14 * 78_643_200 == 6_640_701_440
    assert spec.param_count() == pytest.approx(41.9 * B, rel=0.02)
    assert spec.active_param_count() == pytest.approx(6.6 * B, rel=0.02)
    assert kv_bytes_per_token(spec) == 32 * 2 * 8 * 128 * 2 == 131_072
    # HF applies sliding_window (131072 = max_position_embeddings) to every layer, as for Mixtral
    assert a.sliding_window == 131_072 and a.layer_pattern is None
    assert "lm_head_bias" in spec.notes and "LayerNorm" in spec.notes


def test_phimoe_transformers_class_name_and_no_attention_bias() -> None:
    """The transformers class name imports the same; attention_bias false drops the q/k/v/o biases (10,240 a layer);
    without lm_head_bias the notes do not mention it."""
    raw = _config() | {"architectures": ["PhimoeForCausalLM"], "attention_bias": False, "lm_head_bias": False}
    spec = model_from_hf_config(raw)
    assert spec.architecture == "PhimoeForCausalLM"
    assert not spec.attention.qkv_bias and not spec.attention.o_bias
    assert spec.param_count() == 41_872_855_040 - 32 * 10_240
    assert "lm_head_bias" not in spec.notes


def test_phimoe_bundled_predicts() -> None:
    spec = roofline.model("phi-3.5-moe")
    assert spec.param_count() == 41_872_855_040
    r = roofline.predict(spec, "h100-sxm", batch=8, prompt_len=1024, output_len=64, tp=2)
    assert r.memory.fits and 0 < r.ttft_s < 10 and 0 < r.tpot_s < 1
