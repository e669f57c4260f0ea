"""Importer adapters for architectures with per-layer structure (issue 17).

Each adapter reads its architecture's keys explicitly (semantics from the reference
modelling code named in its docstring) and returns the ``attention``, ``ffn``, ``moe``,
``layers``, ``linear_attention``/``sparse_attention``, ``mtp_layers`` and notes of the spec.
Keys that would switch on a feature roofline does not model are errors naming the feature.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from roofline.specs.hf_config import HfConfig

if TYPE_CHECKING:
    from roofline.specs.jsontypes import JsonObject, JsonValue

Spec = dict[str, Any]
_STATE_DTYPES = {None: "bf16", "bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def runs(per_layer: Sequence[Mapping[str, JsonValue]]) -> list[JsonObject]:
    """Run-length encode per-layer dicts into ``LayerRun`` entries (``repeat`` consecutive equal layers)."""
    out: list[dict[str, Any]] = []
    for layer in per_layer:
        clean = {k: v for k, v in layer.items() if v is not None}
        if out and {k: v for k, v in out[-1].items() if k != "repeat"} == clean:
            out[-1]["repeat"] += 1
        else:
            out.append({**clean, "repeat": 1})
    return out


def gqa_layer(heads: int, kv: int, head_dim: int, **flags: JsonValue) -> JsonObject:
    kind = "mha" if kv == heads else "mqa" if kv == 1 else "gqa"
    return {"kind": kind, "num_heads": heads, "num_kv_heads": kv, "head_dim": head_dim, **flags}


def layer_list(c: HfConfig, key: str, n: int, allowed: Mapping[str, str] | Mapping[int, str]) -> list[str]:
    """A per-layer list of ``n`` entries mapped through ``allowed``; anything else is an error."""
    v = c.raw(key)
    ok = isinstance(v, list | str) and len(v) == n
    if not ok or any(isinstance(x, bool) or not isinstance(x, str | int) or x not in allowed for x in v):
        raise c.fail(key, f"must list {n} entries of {sorted(map(str, allowed))}, got {str(v)[:80]}")
    return [allowed[x] for x in v]


def state_dtype_of(c: HfConfig, key: str) -> str:
    v = c.data.get(key)
    if not (v is None or isinstance(v, str)) or v not in _STATE_DTYPES:
        raise c.fail(key, f"is {v!r}; supported: {', '.join(k for k in _STATE_DTYPES if k)}")
    return _STATE_DTYPES[v]


def head_fields(c: HfConfig, hidden: int) -> tuple[int, int, int]:
    heads = c.integer("num_attention_heads")
    kv = c.opt_int("num_key_value_heads") or heads
    return heads, kv, c.opt_int("head_dim") or hidden // heads


# ---- adapters ---------------------------------------------------------------------------
def minimax_m2(c: HfConfig, hidden: int, num_layers: int) -> Spec:
    """MiniMax-M2 (HF ``MiniMaxM2ForCausalLM``): GQA with QK-norm over all heads ('per_layer') and an
    all-MoE stack with a sigmoid router and e_score_correction_bias (``use_routing_bias``)."""
    heads, kv, d = head_fields(c, hidden)
    scope = c.typed("qk_norm_type", str, "per_layer")
    if scope not in ("per_layer", "per_head"):
        raise c.fail("qk_norm_type", f"is {scope!r}; supported: per_layer, per_head")
    width = c.integer("intermediate_size")
    shared = c.integer("shared_intermediate_size", default=0, minimum=0)
    moe: dict[str, Any] = {
        "num_experts": c.integer("num_local_experts"),
        "top_k": c.integer("num_experts_per_tok"),
        "expert_intermediate_size": width,
        "router_bias": c.typed("use_routing_bias", bool, False),
    }
    if shared:
        moe |= {"num_shared_experts": 1, "shared_intermediate_size": shared}
    mtp = c.integer("num_mtp_modules", default=0, minimum=0) if c.typed("use_mtp", bool, False) else 0
    mtp *= c.integer("mtp_transformer_layers", default=1)
    return {
        "attention": gqa_layer(
            heads,
            kv,
            d,
            qk_norm=c.typed("use_qk_norm", bool, False),
            qk_norm_scope="layer" if scope == "per_layer" else "head",
        ),
        "ffn": {"kind": "gated", "intermediate_size": width},
        "moe": moe,
        "mtp_layers": mtp,
        "notes": [f"MTP modules ({mtp}) counted in mtp_param_count, not in param_count."] if mtp else [],
    }


_MSA_KEYS = {"use_sparse_attention", "sparse_attention_freq", "sparse_block_size", "sparse_topk_blocks",
             "sparse_local_block", "sparse_init_block", "sparse_num_index_heads", "sparse_index_dim",
             "sparse_score_type", "sparse_disable_index_value"}  # fmt: skip


def minimax_m3(c: HfConfig, hidden: int, num_layers: int) -> Spec:
    """MiniMax-M3 (TensorRT-LLM ``MiniMaxM3Attention``/``MiniMaxM3DecoderLayer``): GQA with per-head QK-norm;
    layers flagged in ``sparse_attention_config.sparse_attention_freq`` run MiniMax Sparse Attention over
    the top ``sparse_topk_blocks`` blocks of ``sparse_block_size`` tokens plus ``sparse_local_block`` local
    and ``sparse_init_block`` initial blocks, chosen by a K-only index branch; FFN per ``moe_layer_freq``:
    dense SwiGLU-OAI of ``dense_intermediate_size`` or MoE with a shared expert and routing bias."""
    heads, kv, d = head_fields(c, hidden)
    sac = c.raw("sparse_attention_config")
    if not isinstance(sac, dict) or set(sac) - _MSA_KEYS:
        raise c.fail(
            "sparse_attention_config",
            f"has unknown keys {sorted(set(sac) - _MSA_KEYS) if isinstance(sac, dict) else sac!r}",
        )
    sc = HfConfig(sac, c.arch, f"{c.origin} sparse_attention_config")
    sparse = (
        layer_list(sc, "sparse_attention_freq", num_layers, {0: "global", 1: "sparse"})
        if sc.typed("use_sparse_attention", bool, False)
        else ["global"] * num_layers
    )
    no_value = (
        layer_list(sc, "sparse_disable_index_value", num_layers, {0: "0", 1: "1"})
        if sc.data.get("sparse_disable_index_value") is not None
        else ["1"] * num_layers
    )
    if any(v != "1" for v, k in zip(no_value, sparse, strict=True) if k == "sparse"):
        raise sc.fail("sparse_disable_index_value", "must be 1 on sparse layers: an index value branch is not modelled")
    ffns = layer_list(c, "moe_layer_freq", num_layers, {0: "dense", 1: "moe"})
    block = sc.integer("sparse_block_size")
    blocks = sc.integer("sparse_topk_blocks") + sc.integer("sparse_local_block", default=0, minimum=0)
    blocks += sc.integer("sparse_init_block", default=0, minimum=0)
    width = c.integer("intermediate_size")  # the expert width when moe_intermediate_size is absent (NVFP4 config)
    moe: dict[str, Any] = {
        "num_experts": c.integer("num_local_experts"),
        "top_k": c.integer("num_experts_per_tok"),
        "expert_intermediate_size": c.integer("moe_intermediate_size", default=width),
        "router_bias": c.typed("use_routing_bias", bool, False),
    }
    shared = c.integer("n_shared_experts", default=0, minimum=0)
    if shared:
        moe |= {"num_shared_experts": 1, "shared_intermediate_size": shared * c.integer("shared_intermediate_size")}
    return {
        "attention": gqa_layer(
            heads,
            kv,
            d,
            qk_norm=c.typed("use_qk_norm", bool, False),
            output_gate=c.typed("attention_output_gate", bool, False),
        ),
        "ffn": {"kind": "gated", "intermediate_size": c.integer("dense_intermediate_size")},
        "moe": moe,
        "sparse_attention": {
            "kind": "msa",
            "index_heads": sc.integer("sparse_num_index_heads"),
            "index_head_dim": sc.integer("sparse_index_dim"),
            "top_k": blocks * block,
            "block_size": block,
        },
        "layers": runs([{"mixer": k, "ffn": f} for k, f in zip(sparse, ffns, strict=True)]),
        "mtp_layers": c.integer(
            "num_nextn_predict_layers", default=c.integer("num_mtp_modules", default=0, minimum=0), minimum=0
        ),
        "notes": [
            f"MiniMax Sparse Attention: {blocks} blocks of {block} tokens per query; index keys cached in "
            "16-bit (assumed); SwiGLU-OAI activation costed as SwiGLU."
        ],
    }


def llama4(c: HfConfig, hidden: int, num_layers: int) -> Spec:
    """Llama-4 text model (HF ``Llama4TextModel``): chunked attention (``attention_chunk_size``) on RoPE
    layers, global NoPE attention every ``no_rope_layer_interval`` (4) layers (``no_rope_layers``), MoE
    on ``moe_layers`` (default every ``interleave_moe_layer_step``-th) with one shared expert of
    ``intermediate_size``, dense layers of ``intermediate_size_mlp``. The QK L2-norm has no weights."""
    heads, kv, d = head_fields(c, hidden)
    chunk = c.opt_int("attention_chunk_size")
    interval = c.integer("no_rope_layer_interval", default=4)
    rope = c.data.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(num_layers)]
    if not isinstance(rope, list) or len(rope) != num_layers:
        raise c.fail("no_rope_layers", f"must list {num_layers} 0/1 flags")
    step = c.integer("interleave_moe_layer_step", default=1)
    moe_layers = set(c.int_list("moe_layers") or range(step - 1, num_layers, step))
    per_layer = [
        {"mixer": "chunked" if chunk and rope[i] else "global", "ffn": "moe" if i in moe_layers else "dense"}
        for i in range(num_layers)
    ]
    width = c.integer("intermediate_size")
    bias = c.typed("attention_bias", bool, False)
    return {
        "attention": gqa_layer(heads, kv, d, qkv_bias=bias, o_bias=bias, chunk_size=chunk),
        "ffn": {"kind": "gated", "intermediate_size": c.integer("intermediate_size_mlp", default=width)},
        "moe": {
            "num_experts": c.integer("num_local_experts"),
            "top_k": c.integer("num_experts_per_tok"),
            "expert_intermediate_size": width,
            "num_shared_experts": 1,
            "shared_intermediate_size": width,
        },
        "layers": runs(per_layer),
        "notes": [f"Chunked attention (chunk {chunk}) on RoPE layers, global NoPE attention every {interval}."],
    }


def gemma4(c: HfConfig, hidden: int, num_layers: int) -> Spec:
    """Gemma-4 text model: sliding/full layers from ``layer_types``; full layers have their own KV heads
    (``num_global_key_value_heads``) and head dim (``global_head_dim``) and, with ``attention_k_eq_v``,
    reuse K as V. With ``enable_moe_block`` every layer runs the dense MLP (counted as one shared
    expert) next to the routed experts. 4 norms per layer, QK-norm, tied embeddings."""
    for key, feature in (
        ("hidden_size_per_layer_input", "per-layer input embeddings"),
        ("num_kv_shared_layers", "KV sharing across layers"),
        ("use_double_wide_mlp", "double-wide MLP layers"),
    ):
        c.require_absent(key, feature)
    heads, kv, d = head_fields(c, hidden)
    kinds = layer_list(c, "layer_types", num_layers, {"sliding_attention": "local", "full_attention": "global"})
    g_kv, g_d = c.opt_int("num_global_key_value_heads") or kv, c.opt_int("global_head_dim") or d
    width = c.integer("intermediate_size")
    moe = None
    ffn = "dense"
    if c.typed("enable_moe_block", bool, False):
        moe = {
            "num_experts": c.integer("num_experts"),
            "top_k": c.integer("top_k_experts"),
            "expert_intermediate_size": c.integer("moe_intermediate_size"),
            "num_shared_experts": 1,
            "shared_intermediate_size": width,
        }
        ffn = "moe"
    per_layer: list[JsonObject] = [
        {"mixer": k, "ffn": ffn, **({"num_kv_heads": g_kv, "head_dim": g_d} if k == "global" else {})} for k in kinds
    ]
    return {
        "attention": gqa_layer(
            heads,
            kv,
            d,
            qk_norm=True,
            sliding_window=c.integer("sliding_window"),
            k_eq_v=c.typed("attention_k_eq_v", bool, False),
        ),
        "ffn": {"kind": "gated", "intermediate_size": width},
        "moe": moe,
        "layers": runs(per_layer),
        "norms_per_layer": 4,
        "notes": ["final_logit_softcapping is not costed."]
        + (
            ["MoE: the dense MLP runs next to the routed experts in every layer and is counted as one shared expert."]
            if moe
            else []
        ),
    }


def mimo_v2(c: HfConfig, hidden: int, num_layers: int) -> Spec:
    """MiMo-V2-Flash (``modeling_mimo_v2_flash.py``): sliding-window (``hybrid_layer_pattern`` 1) and full
    (0) layers with their own head counts (``swa_*``), qk head dim ``head_dim`` and value dim
    ``v_head_dim``, attention sinks, MoE per ``moe_layer_freq`` with e_score_correction_bias."""
    heads, kv, d = head_fields(c, hidden)
    kinds = layer_list(c, "hybrid_layer_pattern", num_layers, {0: "global", 1: "local"})
    moe_flags = layer_list(c, "moe_layer_freq", num_layers, {0: "dense", 1: "moe"})
    v = c.integer("v_head_dim")
    if c.integer("swa_v_head_dim", default=v) != v or c.integer("swa_head_dim", default=d) != d:
        raise c.fail("swa_v_head_dim", "differs from the full layers' head dims; not modelled")
    s_heads, s_kv = (
        c.integer("swa_num_attention_heads", default=heads),
        c.integer("swa_num_key_value_heads", default=kv),
    )
    per_layer: list[JsonObject] = [
        {"mixer": k, "ffn": f, **({"num_heads": s_heads, "num_kv_heads": s_kv} if k == "local" else {})}
        for k, f in zip(kinds, moe_flags, strict=True)
    ]
    sinks = c.typed("add_swa_attention_sink_bias", bool, False) or c.typed("add_full_attention_sink_bias", bool, False)
    return {
        "attention": gqa_layer(heads, kv, d, v_head_dim=v, sinks=sinks, sliding_window=c.integer("sliding_window")),
        "ffn": {"kind": "gated", "intermediate_size": c.integer("intermediate_size")},
        "moe": {
            "num_experts": c.integer("n_routed_experts"),
            "top_k": c.integer("num_experts_per_tok"),
            "expert_intermediate_size": c.integer("moe_intermediate_size"),
            "router_bias": True,
        },
        "layers": runs(per_layer),
        "mtp_layers": c.integer("num_nextn_predict_layers", default=0, minimum=0),
        "notes": ["Attention sinks counted on every attention layer."],
    }


def step3p7(c: HfConfig, hidden: int, num_layers: int) -> Spec:
    """Step-3.7-Flash (``step3p7``; no modelling code in transformers, read from the config as a
    DeepSeek-style MoE): full/sliding layers from ``layer_types``, the first
    ``first_k_dense_replace`` layers dense, routed experts plus ``n_shared_experts`` of
    ``share_expert_dim``, router bias ``use_moe_router_bias``."""
    heads, kv, d = head_fields(c, hidden)
    kinds = layer_list(c, "layer_types", num_layers, {"sliding_attention": "local", "full_attention": "global"})
    first = c.integer("first_k_dense_replace", default=0, minimum=0)
    moe: dict[str, Any] = {
        "num_experts": c.integer("num_experts"),
        "top_k": c.integer("num_experts_per_tok"),
        "expert_intermediate_size": c.integer("moe_intermediate_size"),
        "router_bias": c.typed("use_moe_router_bias", bool, False),
    }
    shared = c.integer("n_shared_experts", default=0, minimum=0)
    if shared:
        moe |= {"num_shared_experts": 1, "shared_intermediate_size": shared * c.integer("share_expert_dim")}
    return {
        "attention": gqa_layer(heads, kv, d, sliding_window=c.integer("sliding_window")),
        "ffn": {"kind": "gated", "intermediate_size": c.integer("intermediate_size")},
        "moe": moe,
        "layers": runs([{"mixer": k, "ffn": "dense" if i < first else "moe"} for i, k in enumerate(kinds)]),
        "mtp_layers": c.integer("num_nextn_predict_layers", default=0, minimum=0),
        "notes": ["Step-3.7: no reference modelling code checked; layout read from config keys."],
    }


# spec: Any-valued, as the partly built model spec's nested blocks (moe, attention.mla) are read unchecked
def dsa(c: HfConfig, spec: dict[str, Any], num_layers: int) -> JsonObject:
    """DSA models (DeepSeek-V3.2, GLM-5): every layer is a sparse MLA layer with the lightning indexer
    (``index_n_heads``, ``index_head_dim``, ``index_topk``); dense/MoE FFNs move into ``layers``."""
    moe = dict(spec["moe"]) if spec["moe"] is not None else None
    first = moe.pop("first_dense_layers", 0) if moe is not None else num_layers
    if moe is not None:
        moe["first_dense_layers"] = 0
    ffns = ["dense" if i < first else "moe" for i in range(num_layers)]
    declared = {"dense": "dense", "sparse": "moe"}
    if "mlp_layer_types" in c.data and layer_list(c, "mlp_layer_types", num_layers, declared) != ffns:
        raise c.fail("mlp_layer_types", f"disagrees with first_k_dense_replace={first}")
    shared = [False] * num_layers
    if "indexer_types" in c.data:  # GLM-5.2: 'shared' layers reuse the last full indexer's top-k selection
        shared = [
            t == "shared" for t in layer_list(c, "indexer_types", num_layers, {"full": "full", "shared": "shared"})
        ]
    layers = runs(
        [
            {"mixer": "sparse", "ffn": f, "shared_indexer": True if s else None}
            for f, s in zip(ffns, shared, strict=True)
        ]
    )
    if c.arch == "GlmMoeDsaForCausalLM" and "qk_head_dim" in c.data:
        mla = spec["attention"]["mla"]
        if c.integer("qk_head_dim") != mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]:
            raise c.fail("qk_head_dim", "must equal qk_nope_head_dim + qk_rope_head_dim")
    sparse: JsonObject = {
        "index_heads": c.integer("index_n_heads"),
        "index_head_dim": c.integer("index_head_dim"),
        "top_k": c.integer("index_topk"),
    }
    return {"moe": moe, "layers": layers, "sparse_attention": sparse}


#: architectures recognised but not modelled, with the missing features named
NOT_MODELLED: dict[str, str] = {}
