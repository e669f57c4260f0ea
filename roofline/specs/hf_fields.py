"""Readers of the standard config.json sections (attention incl. MLA and sliding windows, MoE,
dtype) shared by every architecture the importer (:mod:`roofline.specs.hf_import`) accepts.

Each reads its keys explicitly through :class:`roofline.specs.hf_config.HfConfig`, so an unknown
or malformed value is an error naming the key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roofline.errors import SpecError
from roofline.specs.hf_config import HfConfig

if TYPE_CHECKING:
    from roofline.specs.jsontypes import JsonObject

DEEPSEEK_ARCHS = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM")
#: Phi-3.5-MoE: the remote-code class name (its config.json) and the transformers one
PHIMOE_ARCHS = ("PhiMoEForCausalLM", "PhimoeForCausalLM")
#: DeepSeek-V2 routers (HF ``DeepseekV2MoEGate``/``MoEGate``): both choose ``num_experts_per_tok`` experts per token
#: from a softmax over one ``hidden x n_routed_experts`` gate; group limiting only restricts which experts
_V2_TOPK = ("greedy", "group_limited_greedy")
_QWEN = ("Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "MiMoForCausalLM")
_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
_LAYER_TYPES = {"sliding_attention": "local", "full_attention": "global"}
_ATTENTION_BIAS = (
    "LlamaForCausalLM",
    "Qwen3ForCausalLM",
    "Qwen3MoeForCausalLM",
    "Gemma2ForCausalLM",
    "GptOssForCausalLM",
    *PHIMOE_ARCHS,
)
_ALL_MOE = ("MixtralForCausalLM", "GptOssForCausalLM", *PHIMOE_ARCHS)  # every layer MoE, num_local_experts


def _mla(c: HfConfig) -> dict[str, Any] | None:
    """MLA ranks for DeepSeek-V3, else None."""
    if c.arch not in DEEPSEEK_ARCHS:
        return None
    if c.typed("attention_bias", bool, False):
        raise c.fail("attention_bias", "true is not supported for MLA (no MLA bias terms in the spec)")
    return {
        "q_lora_rank": c.opt_int("q_lora_rank"),
        "kv_lora_rank": c.integer("kv_lora_rank"),
        "qk_rope_head_dim": c.integer("qk_rope_head_dim"),
        "qk_nope_head_dim": c.integer("qk_nope_head_dim"),
        "v_head_dim": c.integer("v_head_dim"),
    }


def attention_fields(c: HfConfig, hidden: int, num_layers: int) -> JsonObject:
    """The ``attention`` block: heads, head_dim, biases, sinks, MLA and sliding window."""
    heads = c.integer("num_attention_heads")
    kv_heads = c.opt_int("num_key_value_heads") or heads
    mla = _mla(c)
    if mla is not None:
        kind, head_dim = "mla", mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]
    else:
        kind = "mha" if kv_heads == heads else "mqa" if kv_heads == 1 else "gqa"
        head_dim = c.opt_int("head_dim") or hidden // heads
        if c.data.get("head_dim") is None and hidden % heads:
            raise c.fail("head_dim", f"is absent and num_attention_heads ({heads}) does not divide {hidden}")
    bias = c.typed("attention_bias", bool, False) and c.arch in _ATTENTION_BIAS
    window, pattern = _window(c, num_layers)
    return {
        "kind": kind,
        "num_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": head_dim,
        "qkv_bias": bias
        or c.arch == "Qwen2ForCausalLM"
        or (c.arch == "MiMoForCausalLM" and c.typed("attention_bias", bool, True)),
        "o_bias": bias,
        "sinks": c.arch == "GptOssForCausalLM",
        "qk_norm": c.arch in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM"),
        "sliding_window": window,
        "layer_pattern": pattern,
        "mla": mla,
    }


def _layer_kinds(c: HfConfig, num_layers: int) -> list[str]:
    """'local'/'global' per layer, per the architecture's sliding-window semantics."""
    if c.arch in DEEPSEEK_ARCHS:  # GLM-5.2's layer_types say 'deepseek_sparse_attention'; the sparsity is in layers
        return ["global"] * num_layers
    qwen = c.arch in _QWEN
    if qwen and not (c.typed("use_sliding_window", bool, False) and c.data.get("sliding_window") is not None):
        return ["global"] * num_layers  # never from sliding_window alone
    if c.data.get("layer_types") is not None or c.arch == "GptOssForCausalLM":
        types = c.raw("layer_types")
        ok = isinstance(types, list) and len(types) == num_layers
        if not ok or any(not isinstance(t, str) or t not in _LAYER_TYPES for t in types):
            raise c.fail("layer_types", f"must list {num_layers} entries of {sorted(_LAYER_TYPES)}")
        return [_LAYER_TYPES[t] for t in types]
    if qwen:
        first = c.integer("max_window_layers", default=num_layers, minimum=0)
        return ["global" if i < first else "local" for i in range(num_layers)]
    if c.arch == "Gemma2ForCausalLM":
        return ["local" if i % 2 == 0 else "global" for i in range(num_layers)]
    if c.arch in ("MistralForCausalLM", "MixtralForCausalLM", "Phi3ForCausalLM", *PHIMOE_ARCHS):
        return ["global" if c.data.get("sliding_window") is None else "local"] * num_layers
    return ["global"] * num_layers


def _period(kinds: list[str]) -> tuple[str, ...]:
    """Shortest prefix that repeats cyclically into ``kinds``."""
    n = len(kinds)
    for p in range(1, n + 1):
        if all(kinds[i] == kinds[i % p] for i in range(n)):
            return tuple(kinds[:p])
    return tuple(kinds)


def _window(c: HfConfig, num_layers: int) -> tuple[int | None, tuple[str, ...] | None]:
    """``(sliding_window, layer_pattern)``: both None for all-global attention."""
    kinds = _layer_kinds(c, num_layers)
    if "local" not in kinds:
        return None, None
    window = c.integer("sliding_window")
    return window, None if "global" not in kinds else _period(kinds)


def _moe_layers(c: HfConfig, num_layers: int) -> list[bool]:
    """Whether each layer's FFN is a mixture of experts."""
    if c.arch in _ALL_MOE:
        return [True] * num_layers
    if c.arch == "Qwen3MoeForCausalLM":
        dense = set(c.int_list("mlp_only_layers"))
        step = c.integer("decoder_sparse_step", default=1)
        return [i not in dense and (i + 1) % step == 0 for i in range(num_layers)]
    if c.arch in DEEPSEEK_ARCHS:
        first = c.integer("first_k_dense_replace", minimum=0)
        freq = c.integer("moe_layer_freq", default=1)
        return [i >= first and i % freq == 0 for i in range(num_layers)]
    return [False] * num_layers


def _first_dense(c: HfConfig, is_moe: list[bool]) -> int | None:
    """Number of leading dense layers, None without MoE; error if dense layers are not leading."""
    if not any(is_moe):
        return None
    k = is_moe.index(True)
    if not all(is_moe[k:]):
        dense = [i for i, m in enumerate(is_moe) if not m]
        raise SpecError(
            f"{c.origin} ({c.arch}): dense FFN layers {dense} are not a leading block; roofline can only model "
            "the first N layers dense and the rest MoE (check mlp_only_layers, decoder_sparse_step, moe_layer_freq)"
        )
    return k


def _top_k(c: HfConfig) -> int:
    """``num_experts_per_tok`` (or gpt-oss ``experts_per_token``; both must agree)."""
    values = {c.integer(k) for k in ("num_experts_per_tok", "experts_per_token") if k in c.data}
    if not values:
        c.raw("num_experts_per_tok")  # raises: missing
    if len(values) > 1:
        raise c.fail("experts_per_token", f"disagrees with num_experts_per_tok ({sorted(values)})")
    return values.pop()


def moe_fields(c: HfConfig, num_layers: int) -> JsonObject | None:
    """The ``moe`` block, or None for a dense model."""
    first = _first_dense(c, _moe_layers(c, num_layers))
    if first is None:
        return None
    moe: dict[str, Any] = {"top_k": _top_k(c), "first_dense_layers": first}
    if c.arch in _ALL_MOE:
        moe["num_experts"] = c.integer("num_local_experts")
        moe["expert_intermediate_size"] = c.integer("intermediate_size")
    else:
        moe["num_experts"] = c.integer("num_experts" if c.arch == "Qwen3MoeForCausalLM" else "n_routed_experts")
        moe["expert_intermediate_size"] = c.integer("moe_intermediate_size")
    if c.arch in DEEPSEEK_ARCHS:
        shared = c.integer("n_shared_experts", minimum=0)
        if shared:
            moe["num_shared_experts"] = 1
            moe["shared_intermediate_size"] = shared * moe["expert_intermediate_size"]
        # e_score_correction_bias (V3 and successors); DeepSeek-V2's gate is one bias-free matrix
        moe["router_bias"] = c.arch != "DeepseekV2ForCausalLM" or _v2_routing(c)
    if c.arch == "GptOssForCausalLM":
        moe["router_bias"] = moe["expert_bias"] = True
    return moe


def _v2_routing(c: HfConfig) -> bool:
    """DeepSeek-V2 routing: ``topk_method`` greedy or group_limited_greedy with a softmax score (no router bias,
    returns False); anything else (e.g. V3's noaux_tc with its correction bias) is refused, naming the key."""
    method = c.typed("topk_method", str, "greedy")
    if method not in _V2_TOPK:
        raise c.fail(
            "topk_method",
            f"is {method!r}: DeepSeek-V2's router supports {', '.join(_V2_TOPK)}; another router may carry weights "
            "or FLOPs (V3's noaux_tc has a correction bias) that this importer does not count; write the spec by hand",
        )
    scoring = c.typed("scoring_func", str, "softmax")
    if scoring != "softmax":
        raise c.fail("scoring_func", f"is {scoring!r}: DeepSeek-V2's router is softmax only; write the spec by hand")
    return False


def config_dtype(c: HfConfig) -> str:
    key = "torch_dtype" if "torch_dtype" in c.data else "dtype"
    raw = c.typed(key, str, "bfloat16")
    if raw not in _DTYPES:
        raise c.fail(key, f"is {raw!r}; supported: {', '.join(_DTYPES)}")
    return _DTYPES[raw]
