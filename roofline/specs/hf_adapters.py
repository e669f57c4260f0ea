"""The registry of per-architecture importer adapters (:mod:`roofline.specs.hf_families`,
:mod:`roofline.specs.hf_hybrid`), keyed by the ``architectures`` entry of a config.json."""

from __future__ import annotations

from collections.abc import Callable

from roofline.specs.hf_config import HfConfig
from roofline.specs.hf_deepseek_v4 import deepseek_v4
from roofline.specs.hf_families import Spec, gemma4, llama4, mimo_v2, minimax_m2, minimax_m3, step3p7
from roofline.specs.hf_hybrid import decilm, nemotron_h, qwen3_5
from roofline.specs.hf_kimi import kimi_linear

ADAPTERS: dict[str, Callable[[HfConfig, int, int], Spec]] = {
    "MiniMaxM2ForCausalLM": minimax_m2,
    "MiniMaxM3ForCausalLM": minimax_m3,
    "MiniMaxM3SparseForCausalLM": minimax_m3,
    "Llama4ForCausalLM": llama4,
    "Gemma4ForCausalLM": gemma4,
    "Qwen3_5ForCausalLM": qwen3_5,
    "Qwen3_5MoeForCausalLM": qwen3_5,
    "NemotronHForCausalLM": nemotron_h,
    "DeciLMForCausalLM": decilm,
    "MiMoV2FlashForCausalLM": mimo_v2,
    "Step3p7FlashForCausalLM": step3p7,
    "KimiLinearForCausalLM": kimi_linear,
    "DeepseekV4ForCausalLM": deepseek_v4,
}
