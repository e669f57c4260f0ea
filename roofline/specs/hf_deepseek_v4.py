"""Importer adapter for DeepSeek-V4 (``DeepseekV4ForCausalLM``; model_type ``deepseek_v4`` or SGLang's
``deepseek_ref``), read as HF ``transformers`` ``modeling_deepseek_v4.py`` builds it (see
:mod:`roofline.specs.compressed` for the attention and hyper-connection shapes):

* ``compress_ratios``: one ratio per layer (0 sliding window only, 4 CSA, 128 HCA), plus one per MTP layer
  when the list is longer (the released configs list num_hidden_layers + num_nextn_predict_layers).
* ``num_key_value_heads`` must be 1 (shared K=V head of ``head_dim``); ``qk_rope_head_dim`` rotary dims;
  ``q_lora_rank``, ``o_groups``/``o_lora_rank``, ``sliding_window``, ``index_n_heads``/``index_head_dim``/
  ``index_topk``, ``hc_mult``.
* MoE on every layer (dense before ``first_k_dense_replace`` when given): ``n_routed_experts`` of
  ``moe_intermediate_size``, ``n_shared_experts`` shared, router with e_score_correction_bias. The first
  ``num_hash_layers`` route by a token-id table instead (same expert work; the table is a buffer, not a weight).
"""

from __future__ import annotations

from typing import Any

from roofline.specs.compressed import CSA_RATIO, HCA_RATIO
from roofline.specs.hf_config import HfConfig
from roofline.specs.hf_families import Spec, runs


def deepseek_v4(c: HfConfig, hidden: int, num_layers: int) -> Spec:
    """DeepSeek-V4 Flash/Pro (module docstring)."""
    mtp = c.integer("num_nextn_predict_layers", default=0, minimum=0)
    ratios = c.raw("compress_ratios")
    allowed = (0, CSA_RATIO, HCA_RATIO)
    if (
        not isinstance(ratios, list)
        or len(ratios) not in (num_layers, num_layers + mtp)
        or any(isinstance(r, bool) or r not in allowed for r in ratios)
    ):
        raise c.fail("compress_ratios", f"must list {num_layers} (+ {mtp} MTP) ratios of {allowed}, got {ratios!r:.80}")
    if c.integer("num_key_value_heads", default=1) != 1:
        raise c.fail("num_key_value_heads", "must be 1: DeepSeek-V4 attention has one shared K=V head")
    heads, d = c.integer("num_attention_heads"), c.integer("head_dim")
    width = c.integer("moe_intermediate_size")
    first = c.integer("first_k_dense_replace", default=0, minimum=0)
    shared = c.integer("n_shared_experts", default=0, minimum=0)
    moe: dict[str, Any] = {
        "num_experts": c.integer("n_routed_experts"),
        "top_k": c.integer("num_experts_per_tok"),
        "expert_intermediate_size": width,
        "router_bias": True,
    }
    if shared:
        moe |= {"num_shared_experts": 1, "shared_intermediate_size": shared * width}
    per_layer = [
        {"mixer": "compressed", "ffn": "dense" if i < first else "moe", "compress_ratio": r or None}
        for i, r in enumerate(ratios[:num_layers])
    ]
    hash_layers = c.integer("num_hash_layers", default=0, minimum=0)
    return {
        "attention": {"kind": "mqa" if heads > 1 else "mha", "num_heads": heads, "num_kv_heads": 1, "head_dim": d},
        "compressed_attention": {
            "head_dim": d,
            "rope_head_dim": c.integer("qk_rope_head_dim"),
            "q_lora_rank": c.integer("q_lora_rank"),
            "o_groups": c.integer("o_groups"),
            "o_lora_rank": c.integer("o_lora_rank"),
            "sliding_window": c.integer("sliding_window"),
            "index_heads": c.integer("index_n_heads"),
            "index_head_dim": c.integer("index_head_dim"),
            "index_topk": c.integer("index_topk"),
            "hc_mult": c.integer("hc_mult"),
        },
        "ffn": {"kind": "gated", "intermediate_size": c.integer("intermediate_size", default=width)},
        "moe": moe,
        "layers": runs(per_layer),
        "mtp_layers": mtp,
        "notes": [
            f"DeepSeek-V4: the first {hash_layers} MoE layers route by a token-id hash table (tid2eid, a buffer) and "
            f"have no e_score_correction_bias ({hash_layers}×{moe['num_experts']} bias values counted anyway). "
            "Hyper-connection weights (fp32 in the checkpoint) are held and read at 16 bits; the compressor's open "
            "window buffer is not counted; KV entries are priced at the KV dtype (engines' FP8-nope/BF16-rope cache "
            "layouts are not modelled); swiglu_limit clamps and sqrtsoftplus routing cost nothing extra. "
            + (f"expert_dtype {c.data['expert_dtype']!r} is recorded only. " if c.data.get("expert_dtype") else "")
        ],
    }
