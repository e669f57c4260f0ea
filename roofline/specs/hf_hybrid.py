"""Importer adapters for hybrid and heterogeneous layer stacks: Qwen3.5/3.6 (Gated DeltaNet),
Nemotron-H (Mamba-2) and DeciLM / Llama-Nemotron-Super (per-layer blocks).

Same contract as :mod:`roofline.specs.hf_families`: each adapter reads its keys explicitly and
returns the spec fields; a key that switches on an unmodelled feature is an error naming it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from roofline.specs.hf_config import HfConfig
from roofline.specs.hf_families import Spec, gqa_layer, head_fields, layer_list, runs, state_dtype_of


def qwen3_5(c: HfConfig, hidden: int, num_layers: int) -> Spec:
    """Qwen3.5 / Qwen3.6 text model (HF ``Qwen3_5TextModel``, as Qwen3-Next): Gated DeltaNet layers and
    gated full attention (``attn_output_gate``: q_proj also emits a sigmoid gate; QK-norm) from
    ``layer_types``; MoE with one shared expert (``shared_expert_intermediate_size``) or a dense MLP.
    The recurrent state is kept in ``mamba_ssm_dtype``. The 1-wide shared_expert_gate is not counted."""
    heads, kv, d = head_fields(c, hidden)
    kinds = layer_list(c, "layer_types", num_layers, {"linear_attention": "linear", "full_attention": "global"})
    la = {
        "kind": "gated_deltanet",
        "num_heads": c.integer("linear_num_value_heads"),
        "num_k_heads": c.integer("linear_num_key_heads"),
        "head_k_dim": c.integer("linear_key_head_dim"),
        "head_v_dim": c.integer("linear_value_head_dim"),
        "conv_kernel": c.integer("linear_conv_kernel_dim"),
        "chunk_size": 64,
        "state_dtype": state_dtype_of(c, "mamba_ssm_dtype"),
    }
    moe = None
    if "num_experts" in c.data:
        if c.int_list("mlp_only_layers") or c.integer("decoder_sparse_step", default=1) != 1:
            raise c.fail("mlp_only_layers", "dense layers inside a Qwen3.5 MoE stack are not supported")
        moe = {
            "num_experts": c.integer("num_experts"),
            "top_k": c.integer("num_experts_per_tok"),
            "expert_intermediate_size": c.integer("moe_intermediate_size"),
        }
        shared = c.integer("shared_expert_intermediate_size", default=0, minimum=0)
        if shared:
            moe |= {"num_shared_experts": 1, "shared_intermediate_size": shared}
    width = c.integer("intermediate_size") if moe is None else c.integer("moe_intermediate_size")
    bias = c.typed("attention_bias", bool, False)
    mtp = c.integer("mtp_num_hidden_layers", default=0, minimum=0)
    return {
        "attention": gqa_layer(
            heads, kv, d, qk_norm=True, qkv_bias=bias, o_bias=bias, output_gate=c.typed("attn_output_gate", bool, False)
        ),
        "ffn": {"kind": "gated", "intermediate_size": width},
        "moe": moe,
        "linear_attention": la,
        "layers": runs([{"mixer": k, "ffn": "dense" if moe is None else "moe"} for k in kinds]),
        "mtp_layers": mtp,
        "notes": [f"Gated DeltaNet state in {la['state_dtype']}; chunk 64 assumed for the prefill scan (fla default)."],
    }


def nemotron_h(c: HfConfig, hidden: int, num_layers: int) -> Spec:
    """Nemotron-H / Nemotron-3 (HF ``NemotronHForCausalLM``): one block per layer from
    ``hybrid_override_pattern`` (M Mamba-2, * attention, - MLP, E MoE), one norm each. relu2 MLPs
    (2 matrices); MoE with a shared expert, e_score_correction_bias and, with ``moe_latent_size``,
    routed experts in a latent width (fc1/fc2_latent_proj). The SSM state is kept in
    ``mamba_ssm_cache_dtype`` (bf16 when absent)."""
    kinds = {"M": ("linear", "none"), "*": ("global", "none"), "-": ("none", "dense"), "E": ("none", "moe")}
    if "hybrid_override_pattern" not in c.data and "layers_block_type" in c.data:  # Nemotron-3 Ultra / 3.5
        named = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}
        pattern = layer_list(c, "layers_block_type", num_layers, named)
    else:
        pattern = layer_list(c, "hybrid_override_pattern", num_layers, {k: k for k in kinds})
    heads, kv, _ = head_fields(c, hidden)
    d = c.opt_int("head_dim") or c.opt_int("attention_head_dim") or hidden // heads
    la = {
        "kind": "mamba2",
        "num_heads": c.integer("mamba_num_heads"),
        "num_k_heads": c.integer("n_groups"),
        "head_k_dim": c.integer("ssm_state_size"),
        "head_v_dim": c.integer("mamba_head_dim"),
        "conv_kernel": c.integer("conv_kernel"),
        "chunk_size": c.integer("chunk_size", default=128),
        "state_dtype": state_dtype_of(c, "mamba_ssm_cache_dtype"),
        "conv_bias": c.typed("use_conv_bias", bool, True),
        "proj_bias": c.typed("use_bias", bool, False),
    }
    moe = None
    if "E" in pattern:
        shared = c.integer("n_shared_experts", default=0, minimum=0)
        moe = {
            "num_experts": c.integer("n_routed_experts"),
            "top_k": c.integer("num_experts_per_tok"),
            "expert_intermediate_size": c.integer("moe_intermediate_size"),
            "expert_kind": "mlp",
            "router_bias": True,
            "latent_size": c.opt_int("moe_latent_size"),
        }
        if shared:
            moe |= {
                "num_shared_experts": 1,
                "shared_intermediate_size": shared * c.integer("moe_shared_expert_intermediate_size"),
            }
    bias = c.typed("attention_bias", bool, False)
    act = c.typed("mlp_hidden_act", str, "relu2")
    width = c.opt_int("intermediate_size") or c.integer("moe_intermediate_size")
    mtp = c.integer("num_nextn_predict_layers", default=0, minimum=0)
    return {
        "attention": gqa_layer(heads, kv, d, qkv_bias=bias, o_bias=bias),
        "ffn": {"kind": "mlp", "intermediate_size": width, "activation": act, "bias": c.typed("mlp_bias", bool, False)},
        "moe": moe,
        "linear_attention": la,
        "layers": runs([{"mixer": kinds[p][0], "ffn": kinds[p][1]} for p in pattern]),
        "mtp_layers": mtp,
        "notes": [f"Mamba-2 SSM state in {la['state_dtype']}."],
    }


def _find_multiple(n: int, k: int) -> int:
    return n if n % k == 0 else n + k - n % k


_DECI_ATTN = {"n_heads_in_group", "no_op", "replace_with_linear", "num_sink_tokens", "sparsify", "unshifted_sink",
              "use_prefill_window_in_sink_attention", "window_length"}  # fmt: skip
_DECI_FFN = {"ffn_mult", "no_op", "replace_with_linear", "sparsify"}


def decilm(c: HfConfig, hidden: int, num_layers: int) -> Spec:
    """DeciLM / Llama-Nemotron (NAS) (``modeling_decilm.py`` on the HF repo): per-layer ``block_configs``.
    Attention has num_heads / ``n_heads_in_group`` KV heads or is skipped (``no_op``); the FFN width
    is ``_find_multiple(int(2·ffn_mult·h/3), 256)`` or skipped. ``replace_with_linear``, sinks,
    windows and sparsify are not modelled."""
    blocks = c.raw("block_configs")
    if not isinstance(blocks, list) or len(blocks) != num_layers:
        raise c.fail("block_configs", f"must list {num_layers} layer configs")
    heads = c.integer("num_attention_heads")
    per_layer = []
    for i, b in enumerate(blocks):
        att, ffn = (b.get("attention"), b.get("ffn")) if isinstance(b, dict) else (None, None)
        if not isinstance(att, dict) or not isinstance(ffn, dict):
            raise c.fail(f"block_configs[{i}]", "must hold 'attention' and 'ffn' mappings")
        for section, known, cfg in (("attention", _DECI_ATTN, att), ("ffn", _DECI_FFN, ffn)):
            unknown = set(cfg) - known
            if unknown:
                raise c.fail(f"block_configs[{i}].{section}", f"has unknown keys {sorted(unknown)}")
            for key in (
                "replace_with_linear",
                "sparsify",
                "num_sink_tokens",
                "window_length",
                "unshifted_sink",
                "use_prefill_window_in_sink_attention",
            ):
                if cfg.get(key) not in (None, False):
                    raise c.fail(f"block_configs[{i}].{section}.{key}", f"is {cfg[key]!r}: not modelled by roofline")
        layer: dict[str, Any] = {"mixer": "none", "ffn": "none"}
        if not att.get("no_op"):
            group = att.get("n_heads_in_group")
            if not isinstance(group, int) or group <= 0 or heads % group:
                raise c.fail(f"block_configs[{i}].attention.n_heads_in_group", f"must divide {heads}, got {group!r}")
            layer |= {"mixer": "global", "num_kv_heads": heads // group}
        if not ffn.get("no_op"):
            mult = ffn.get("ffn_mult")
            if isinstance(mult, bool) or not isinstance(mult, int | float) or mult <= 0:
                raise c.fail(f"block_configs[{i}].ffn.ffn_mult", f"must be a positive number, got {mult!r}")
            layer |= {"ffn": "dense", "intermediate_size": _find_multiple(int(2 * mult * hidden / 3), 256)}
        per_layer.append(layer)
    kv = Counter(x["num_kv_heads"] for x in per_layer if "num_kv_heads" in x).most_common(1)
    width = Counter(x["intermediate_size"] for x in per_layer if "intermediate_size" in x).most_common(1)
    default_kv, default_width = (kv[0][0] if kv else heads), (width[0][0] if width else hidden)
    for x in per_layer:  # keep only the overrides
        if x.get("num_kv_heads") == default_kv:
            del x["num_kv_heads"]
        if x.get("intermediate_size") == default_width:
            del x["intermediate_size"]
    bias = c.typed("attention_bias", bool, False)
    return {
        "attention": gqa_layer(heads, default_kv, hidden // heads, qkv_bias=bias, o_bias=bias),
        "ffn": {"kind": "gated", "intermediate_size": default_width, "bias": c.typed("mlp_bias", bool, False)},
        "layers": runs(per_layer),
        "notes": [
            f"Heterogeneous DeciLM layers: {sum(x['mixer'] == 'none' for x in per_layer)} without attention, "
            f"{sum(x['ffn'] == 'none' for x in per_layer)} without FFN."
        ],
    }
