"""Importer adapter for the Kimi Linear family (``KimiLinearForCausalLM``; Kimi-K3's text model inside
``KimiK3ForConditionalGeneration``).

Read from the architecture as Moonshot's ``modeling_kimi_linear.py`` defines it (via the ports that
mirror it: mlx-lm ``kimi_linear``/``kimi_k3``, NVIDIA NeMo AutoModel ``kimi_k3``):

* ``linear_attn_config``: 1-based ``kda_layers`` run Kimi Delta Attention (``num_heads`` heads of
  ``head_dim``, q/k/v short convs of ``short_conv_kernel_size`` taps), ``full_attn_layers`` run MLA.
  ``use_full_rank_gate`` (Kimi-K3): the KDA output gate is one g_proj h → H·d instead of the low-rank
  g_a/g_b pair (the decay gate f_a/f_b stays low-rank). ``gate_lower_bound`` only changes the decay formula.
* MLA with ``q_lora_rank``; ``mla_use_output_gate``: a sigmoid gate g_proj h → H·v on the heads' output;
  ``mla_use_nope``: no rotary (the rope dims are still projected and cached).
* MoE after ``first_k_dense_replace`` dense layers, sigmoid router with e_score_correction_bias, shared experts
  of ``num_shared_experts``·``moe_intermediate_size`` on the full hidden width; ``routed_expert_hidden_size``:
  a latent MoE (routed experts run at that width between routed_expert_down/up_proj), ``latent_moe_use_norm``:
  an RMSNorm of the latent output.
* ``attn_res_block_size``: attention residuals (Kimi-K3): each sublayer input is a softmax over depth of the
  block sums so far (two h-wide RMSNorms and h → 1 scorers per layer, one pair at the output).
* ``hidden_act`` ``situ`` (SiTU-GLU) is costed as a gated activation (same element count).
"""

from __future__ import annotations

from typing import Any

from roofline.specs.hf_config import HfConfig
from roofline.specs.hf_families import Spec, runs, state_dtype_of


def _kinds(c: HfConfig, num_layers: int) -> tuple[list[str], HfConfig]:
    """Per-layer mixer kinds ('linear' / 'global') from the 1-based layer lists of ``linear_attn_config``."""
    cfg = c.raw("linear_attn_config")
    if not isinstance(cfg, dict):
        raise c.fail("linear_attn_config", f"must be a mapping, got {type(cfg).__name__}")
    lc = HfConfig(cfg, c.arch, f"{c.origin} linear_attn_config")
    kda, full = set(lc.int_list("kda_layers")), set(lc.int_list("full_attn_layers"))
    if kda & full or kda | full != set(range(1, num_layers + 1)):
        raise lc.fail("kda_layers", f"and full_attn_layers must split the 1-based layers 1..{num_layers} between them")
    return ["linear" if i + 1 in kda else "global" for i in range(num_layers)], lc


def kimi_linear(c: HfConfig, hidden: int, num_layers: int) -> Spec:
    """Kimi Linear / Kimi-K3 text model (module docstring): KDA + gated MLA layers, latent MoE, attention residuals."""
    kinds, lc = _kinds(c, num_layers)
    heads, d = lc.integer("num_heads"), lc.integer("head_dim")
    state = state_dtype_of(c, "mamba_ssm_dtype") if c.data.get("mamba_ssm_dtype") is not None else "fp32"
    la = {
        "kind": "kda",
        "num_heads": heads,
        "num_k_heads": heads,
        "head_k_dim": d,
        "head_v_dim": d,
        "conv_kernel": lc.integer("short_conv_kernel_size"),
        "state_dtype": state,
        "full_rank_gate": lc.typed("use_full_rank_gate", bool, False),
    }
    if c.integer("moe_layer_freq", default=1) != 1:
        raise c.fail("moe_layer_freq", "other than 1 (MoE on every layer after the dense ones) is not modelled")
    first = c.integer("first_k_dense_replace", default=0, minimum=0)
    q_heads = c.integer("num_attention_heads")
    nope, rope = c.integer("qk_nope_head_dim"), c.integer("qk_rope_head_dim")
    mla = {
        "q_lora_rank": c.opt_int("q_lora_rank"),
        "kv_lora_rank": c.integer("kv_lora_rank"),
        "qk_rope_head_dim": rope,
        "qk_nope_head_dim": nope,
        "v_head_dim": c.integer("v_head_dim"),
        "nope": c.typed("mla_use_nope", bool, False),
    }
    moe: dict[str, Any] = {
        "num_experts": c.integer("num_experts"),
        "top_k": c.integer("num_experts_per_token"),
        "expert_intermediate_size": c.integer("moe_intermediate_size"),
        "router_bias": True,  # e_score_correction_bias (noaux_tc)
        "latent_size": c.opt_int("routed_expert_hidden_size"),
        "latent_norm": c.typed("latent_moe_use_norm", bool, False),
    }
    shared = c.integer("num_shared_experts", default=0, minimum=0)
    if shared:
        moe |= {"num_shared_experts": 1, "shared_intermediate_size": shared * moe["expert_intermediate_size"]}
    return {
        "attention": {
            "kind": "mla",
            "num_heads": q_heads,
            "num_kv_heads": q_heads,
            "head_dim": nope + rope,
            "mla": mla,
            "output_gate": c.typed("mla_use_output_gate", bool, False),
        },
        "ffn": {"kind": "gated", "intermediate_size": c.integer("intermediate_size")},
        "moe": moe,
        "linear_attention": la,
        "layers": runs([{"mixer": k, "ffn": "dense" if i < first else "moe"} for i, k in enumerate(kinds)]),
        "attn_res_block_size": c.opt_int("attn_res_block_size"),
        "mtp_layers": c.integer("num_nextn_predict_layers", default=0, minimum=0),
        "notes": [
            f"KDA recurrent state in {state} (fla/vLLM keep it in float32; assumed when the config names none); "
            "chunk 64 assumed for the prefill scan. SiTU activation costed as a gated (SwiGLU-like) activation. "
            "The KDA A_log is counted per head (the reference declares [num_heads]). Attention residuals' block "
            "values are held per token within a pass (not cached across tokens)."
        ],
    }
