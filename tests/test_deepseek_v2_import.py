"""DeepSeek-V2 (``DeepseekV2ForCausalLM``): MLA with or without a query low-rank projection, DeepSeek-MoE with shared
experts, imported from the real configs and counted against the authors' figures (issue #30: an architecture that
was refused).

Stated: DeepSeek-V2 paper (arXiv 2405.04434) abstract, "236B total parameters, of which 21B are activated for each
token"; DeepSeek-V2-Lite "15.7B total parameters" (same paper, appendix). The configs are DeepSeek-Coder-V2's, which
share those architectures (tests/fixtures/hf_configs/SOURCES.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import roofline
from roofline.memory import kv_bytes_per_token
from roofline.specs.hf_import import SUPPORTED, model_from_hf_config

CONFIGS = Path(__file__).parent / "fixtures" / "hf_configs"
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
