"""The one memory function: weights, KV cache, activations and the engine's budget.

Everything that asks "does it fit / how many sequences fit" (predict, max_batch, sweep,
plan, report) calls :func:`memory_budget`. Infeasible is a result with the missing
bytes, never an exception.

KV bytes per token (whole model) = Σ_layers kv_elements_per_token_per_layer × kv bytes,
with 2·kv_heads·head_dim elements for MHA/GQA/MQA and kv_lora_rank + rope dim for MLA.
A sequence at context L holds min(L, W) tokens on sliding-window layers, min(L, C) on
chunked layers, L on sparse (DSA) layers plus the indexer keys, and a fixed recurrent
state on linear-attention/SSM layers (no tokens).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from roofline.engine.config import EngineConfig, check_engine_options
from roofline.engine.presets import DEFAULT_ENGINE, engine_preset
from roofline.ops.expert_parallel import dp_rank_batch
from roofline.specs.hardware import HardwareSpec
from roofline.specs.layers import ResolvedLayer
from roofline.specs.library import hardware as load_hardware
from roofline.specs.library import model as load_model
from roofline.specs.model import ModelSpec
from roofline.specs.moe_layout import expert_slots
from roofline.specs.scenario import Scenario, kv_heads_per_gpu, make_scenario

NORM_BYTES = 2.0  # norm vectors and routers stay in 16-bit
ACTIVATION_PEAK_SOURCE = (
    "assumed: tokens × (4·h + widest sharded intermediate) × activation bytes + sampled sequences × V/tp × 4 B; "
    "vLLM, SGLang and TensorRT-LLM measure the peak with a profiling forward pass of their token budget instead"
)


def weight_params_per_gpu(model: ModelSpec, sc: Scenario) -> dict[str, float]:
    """Parameters held by one GPU of the largest pipeline stage, by component.

    tp shards heads, FFN width, linear-attention heads and vocabulary; KV heads are
    replicated when tp > kv heads; MLA's q_a/kv_a projections and the DSA indexer are
    replicated; experts (+ redundant slots) are split over ep GPUs (else tp-sharded); with attention data
    parallelism each DP rank holds the attention, dense and embedding weights sharded by its tp. Summed layer by layer
    (``model.resolved_layers()``). At tp = pp = ep = 1 the components sum to
    ``model.param_count()``.
    """
    h, tp = model.hidden_size, sc.tp
    stage = sc.layers_per_stage(model) / model.num_layers
    parts = {"attention": 0.0, "ffn": 0.0, "norms": float(h + model.residual_params())}
    moe = model.moe
    if moe is not None:
        parts["moe_experts"] = parts["moe_shared_experts"] = parts["router"] = 0.0
    for layer, count in model.layer_counts():
        n = count * stage
        parts["attention"] += n * _mixer_params_per_gpu(model, layer, tp)
        parts["norms"] += n * model.norms_per_layer * h * ((layer.mixer != "none") + (layer.ffn != "none")) // 2
        if layer.ffn == "dense":
            parts["ffn"] += n * model.ffn_params(layer.intermediate_size, model.ffn.kind, model.ffn.bias) / tp
        elif layer.ffn == "moe" and moe is not None:
            slots = expert_slots(model, sc.redundant_experts)  # routed experts + redundant copies
            experts = slots / sc.ep * model.expert_params() / (1 if sc.ep > 1 else tp * sc.dp)
            shared = (
                moe.num_shared_experts
                * model.ffn_params(moe.shared_intermediate_size or 0, moe.expert_kind, False)
                / tp
            )
            latent = 2 * h * moe.latent_size / tp if moe.latent_size else 0.0
            parts["moe_experts"] += n * (experts + latent)
            parts["moe_shared_experts"] += n * shared
            parts["norms"] += n * (moe.latent_size or 0) * moe.latent_norm  # replicated latent RMSNorm
            parts["router"] += n * (h * moe.num_experts + moe.num_experts * moe.router_bias)
    emb = model.vocab_size * h / tp
    head = 0.0 if model.tie_word_embeddings else emb
    parts["embedding"] = (emb + head) if sc.pp == 1 else max(emb, head)
    return parts


def _mixer_params_per_gpu(model: ModelSpec, layer: ResolvedLayer, tp: int) -> float:
    """One layer's mixer weights on one GPU of a tp group (see :func:`weight_params_per_gpu`)."""
    if layer.mixer == "linear":
        return model.mixer_params(layer) / tp
    a, h = model.attention, model.hidden_size
    ca = model.compressed_attention
    if layer.mixer == "compressed" and ca is not None:  # heads (q_b, o_a, o_b's groups, sinks) sharded, rest replicated
        full = model.mixer_params(layer)
        sharded = a.num_heads * ca.head_dim * (ca.q_lora_rank + ca.o_lora_rank) + ca.o_groups * ca.o_lora_rank * h
        sharded += a.num_heads
        return full - sharded + sharded / tp
    if not layer.has_attention:
        return 0.0
    indexer = model.mixer_params(layer) - model.attention_params_per_layer(layer)  # replicated DSA indexer
    if a.mla is not None:
        m = a.mla
        full = model.attention_params_per_layer(layer)
        replicated = h * (m.q_lora_rank or 0) + (m.q_lora_rank or 0) + h * (m.kv_lora_rank + m.qk_rope_head_dim)
        replicated += m.kv_lora_rank
        return replicated + (full - replicated) / tp + indexer
    # heads sharded, KV heads replicated when tp > kv heads; the o bias and QK-norm vectors stay whole
    shard = replace(layer, num_heads=layer.num_heads // tp, num_kv_heads=kv_heads_per_gpu(layer.num_kv_heads, tp))
    return float(model.attention_params_per_layer(shard)) + indexer


WEIGHT_PART_GROUP = {
    "attention": "attention", "ffn": "dense_ffn", "moe_experts": "routed_experts",
    "moe_shared_experts": "shared_experts", "embedding": "embeddings",
}  # fmt: skip


def weight_bytes_per_gpu(model: ModelSpec, sc: Scenario) -> float:
    """Bytes of weights on one GPU: Σ parts × bytes per element of its module group's format
    (:meth:`Scenario.weight_formats`, scales included), norms/router in 16-bit."""
    parts = weight_params_per_gpu(model, sc)
    fmts = sc.weight_formats(model)
    small = parts.get("norms", 0.0) + parts.get("router", 0.0)
    big = sum(v * fmts.get(WEIGHT_PART_GROUP[k]).bytes_per_element for k, v in parts.items() if k in WEIGHT_PART_GROUP)
    return big + small * NORM_BYTES


def kv_bytes_per_token(model: ModelSpec, kv_bytes_per_element: float = 2.0) -> float:
    """Whole-model cache bytes per cached token (no window cap): Σ attention layers elems × bytes
    (+ the DSA indexer's key cache on sparse layers). Linear layers add none: their state is per sequence."""
    total = 0.0
    for layer, count in model.layer_counts():
        if layer.mixer == "compressed":  # the window's token + its share of a compressed entry
            total += count * float(compressed_cache_bytes(model, layer, np.asarray(1.0), kv_bytes_per_element, True))
        else:
            total += count * _token_bytes(model, layer, kv_bytes_per_element, 1)
    return total


def compressed_cache_bytes(
    model: ModelSpec, layer: ResolvedLayer, ctx: np.ndarray, kv_bytes: float, per_token: bool = False
) -> np.ndarray:
    """Cache of one DeepSeek-V4 layer for one sequence at ``ctx`` tokens (the one K=V head, replicated over tp).

    min(ctx, W)·d·kv bytes (sliding window) + ⌊ctx/m⌋·d·kv bytes (compressed entries, ratio m > 0)
    + ⌊ctx/4⌋·(d_i + d_i/128·4) B on CSA layers (FP8 indexer keys, as DSA). ``per_token``: the uncapped per-token
    rate d·kv·(1 + 1/m) + index bytes/4. The compressor's open window (< m source tokens of kv and gate) is not
    counted: the reference (HF ``DeepseekV4HCACache``) keeps it as a transient buffer, engines differ.
    """
    ca = model.compressed_attention
    assert ca is not None
    d, m = ca.head_dim * kv_bytes, layer.compress_ratio
    index = ca.index_cache_bytes() if m == 4 else 0.0
    if per_token:
        return np.asarray(d + ((d + index) / m if m else 0.0))
    entries = np.floor(ctx / m) if m else 0.0 * ctx
    return np.minimum(ctx, ca.sliding_window) * d + entries * (d + index)


def kv_bytes_per_sequence(model: ModelSpec, context: object, kv_bytes_per_element: float = 2.0) -> np.ndarray:
    """Whole-model cache bytes of one sequence at ``context`` tokens: KV (window/chunk-capped on
    local/chunked layers), indexer keys, and the fixed recurrent + conv state of linear layers."""
    return _cache_bytes(model, np.asarray(context, dtype=np.float64), kv_bytes_per_element, 1, 1.0)


def kv_bytes_per_sequence_per_gpu(model: ModelSpec, sc: Scenario, context: object) -> np.ndarray:
    """Cache bytes one GPU of the largest stage holds for one sequence at ``context``."""
    stage = sc.layers_per_stage(model) / model.num_layers
    ctx = np.asarray(context, dtype=np.float64)
    return _cache_bytes(model, ctx, sc.kv_dtype.bytes_per_element, sc.tp, stage)


def _tokens_held(layer: ResolvedLayer, ctx: np.ndarray) -> np.ndarray:
    """Cached tokens of one layer at context ``ctx``: ctx (global, sparse), min(ctx, W) (local),
    min(ctx, C) (chunked: vLLM ``ChunkedLocalAttentionSpec`` keeps at most the current chunk), 0 (linear, none)."""
    if not layer.has_attention:
        return 0.0 * ctx
    return np.minimum(ctx, layer.span_cap) if layer.mixer in ("local", "chunked") else ctx


def _token_bytes(model: ModelSpec, layer: ResolvedLayer, kv_bytes: float, tp: int) -> float:
    """Bytes one cached token costs in ``layer`` on one GPU of a tp group.

    GQA: max(1, kv_heads // tp) heads × (head_dim + v dim) elements (K only when k_eq_v);
    MLA: the kv_lora + rope latent, replicated on every rank; sparse layers add the indexer
    key cache (FP8 + scales, replicated).
    """
    if not layer.has_attention:
        return 0.0
    if model.attention.mla is not None:
        elems = float(model.kv_elements_per_token_per_layer(layer))
    else:
        elems = float(
            model.kv_elements_per_token_per_layer(replace(layer, num_kv_heads=kv_heads_per_gpu(layer.num_kv_heads, tp)))
        )
    extra = model.sparse_attention.cache_bytes_per_token if layer.has_indexer and model.sparse_attention else 0.0
    return elems * kv_bytes + extra


def state_bytes_per_sequence_per_layer(model: ModelSpec, tp: int = 1) -> float:
    """Recurrent state + conv state of one linear layer for one sequence on one GPU (heads sharded by tp).

    state_elements × state dtype bytes + conv_state_elements × 2 bytes (vLLM mamba/GDN cache
    layout; the state dtype is the config's mamba_ssm_dtype). Independent of context.
    """
    la = model.linear_attention
    if la is None:
        return 0.0
    return (la.state_elements * la.state_bytes_per_element + la.conv_state_elements * 2.0) / tp


def _cache_bytes(model: ModelSpec, ctx: np.ndarray, kv_bytes: float, tp: int, stage: float) -> np.ndarray:
    """Σ over layers of the cache one sequence holds at ``ctx`` (× the stage's share of layers)."""
    total = 0.0 * ctx
    for layer, count in model.layer_counts():
        if layer.mixer == "linear":
            total = total + count * state_bytes_per_sequence_per_layer(model, tp)
        elif layer.mixer == "compressed":
            total = total + count * compressed_cache_bytes(model, layer, ctx, kv_bytes)
        else:
            total = total + count * _tokens_held(layer, ctx) * _token_bytes(model, layer, kv_bytes, tp)
    return total * stage


def kv_bytes_per_sequence_all_gpus(model: ModelSpec, sc: Scenario, context: object) -> np.ndarray:
    """KV bytes one sequence occupies summed over every GPU of a replica, replication included.

    = tp × Σ_layers (cache one GPU holds for that layer): each tp rank holds H_kv/tp heads (the
    whole-model figure), or one replicated head when tp > H_kv (tp/H_kv copies), or the full MLA
    latent (tp copies); linear-layer state is sharded (no copies); pipeline stages split the layers
    without copies. DeepSeek-V3 at tp 8: 8 × the whole-model latent.
    """
    ctx = np.asarray(context, dtype=np.float64)
    return _cache_bytes(model, ctx, sc.kv_dtype.bytes_per_element, sc.tp, 1.0) * sc.tp


def engine_for(sc: Scenario, hw: HardwareSpec) -> EngineConfig:
    """The scenario's engine, or the default preset (``vllm``) resolved for ``hw``."""
    return sc.engine if sc.engine is not None else engine_preset(DEFAULT_ENGINE, hw)


def activation_peak_bytes(model: ModelSpec, sc: Scenario, tokens: object, sequences: object) -> np.ndarray:
    """Estimated transient activation peak of one forward step over ``tokens`` tokens on one GPU.

    ≈ tokens × (4·h + widest sharded intermediate) × act bytes (residual, normed input,
    attention output, FFN/QKV intermediate) + fp32 logits of the ``sequences`` sampled in the
    step (sequences · V/tp · 4 B). Activations are held in at least 16 bits
    (:meth:`Scenario.activation_memory_bytes_per_element`).

    Assumed formula (:data:`ACTIVATION_PEAK_SOURCE`): engines measure this peak with a profiling
    run; it moves max batch by (peak / KV per sequence), e.g. 0.76 GB for Llama-2-7B under the
    vllm preset on an H100 = 0.35 sequences at 4,096 tokens.
    """
    a, h, tp = model.attention, model.hidden_size, sc.tp
    width = max(
        (a.num_heads + 2 * a.num_kv_heads) * a.head_dim / tp,
        2 * model.ffn.intermediate_size / tp,
        2 * model.moe.expert_intermediate_size * model.moe.top_k if model.moe else 0,
    )
    t = np.asarray(tokens, dtype=np.float64)
    ab = sc.activation_memory_bytes_per_element
    return t * (4 * h + width) * ab + np.asarray(sequences, dtype=np.float64) * model.vocab_size / tp * 4.0


@dataclass(frozen=True)
class MemoryBudget:
    """Per-GPU memory accounting of one scenario under one engine (arrays broadcast over the grid).

    ``kv_budget_bytes`` follows the engine's semantics (see :mod:`roofline.engine.config`);
    fits when B · kv_per_seq ≤ kv_budget. ``max_batch`` depends on the context only, never on
    the batch asked for.
    """

    engine: EngineConfig
    capacity_bytes: float
    usable_bytes: float
    weight_bytes: float
    reserve_bytes: np.ndarray
    activation_peak_bytes: np.ndarray
    kv_budget_bytes: np.ndarray
    kv_bytes_per_sequence: np.ndarray
    kv_bytes: np.ndarray
    free_bytes: np.ndarray
    missing_bytes: np.ndarray
    fits: np.ndarray
    max_batch: np.ndarray


def kv_budget_bytes(eng: EngineConfig, capacity: float, weights: float, reserve: float) -> tuple[float, float]:
    """(usable bytes, KV budget bytes) per GPU under the engine's memory semantics.

    total:           usable = f·C; KV = f·C − W − reserve           (vLLM gpu_memory_utilization)
    static_pool:     usable = f·C; KV = min(f·C − W, C − W − reserve) (SGLang mem_fraction_static;
                     the pool shrinks if activations + runtime do not fit in (1 − f)·C)
    free_after_load: usable = C;   KV = f·(C − W − reserve)          (TensorRT-LLM free_gpu_memory_fraction)
    """
    f = eng.memory_fraction
    if eng.memory_fraction_of == "total":
        return f * capacity, f * capacity - weights - reserve
    if eng.memory_fraction_of == "static_pool":
        return f * capacity, min(f * capacity - weights, capacity - weights - reserve)
    left = capacity - weights - reserve
    return capacity, f * left if left > 0 else left


def memory_budget(model: ModelSpec, hw: HardwareSpec, sc: Scenario, context: object | None = None) -> MemoryBudget:
    """Memory of one GPU for ``sc`` at ``context`` tokens (default prompt_len + output_len).

    reserve = ``engine.reserve_bytes`` if set (it then covers activations and runtime), else the
    activation peak of one step of ``max_num_batched_tokens`` tokens and min(max_num_seqs, tokens)
    sampled sequences + ``runtime_reserve_bytes``. KV per sequence is rounded up to whole KV blocks
    (``kv_block_tokens``), as paged engines allocate it. With attention data parallelism (``sc.dp``) each DP
    rank holds the KV of its own ⌈B/dp⌉ sequences and ``max_batch`` counts all dp ranks' sequences.
    """
    eng = engine_for(sc, hw)
    ctx = np.asarray(sc.prompt_len if context is None else context, dtype=np.float64)
    if context is None:
        ctx = ctx + np.asarray(sc.output_len, dtype=np.float64)
    ctx = np.ceil(ctx / eng.kv_block_tokens) * eng.kv_block_tokens
    capacity = eng.capacity_bytes if eng.capacity_bytes is not None else hw.memory.usable_capacity_bytes
    weights = weight_bytes_per_gpu(model, sc)
    tokens = eng.max_num_batched_tokens
    act = activation_peak_bytes(model, sc, tokens, min(eng.max_num_seqs, tokens))
    reserve = float(eng.reserve_bytes) if eng.reserve_bytes is not None else float(act) + eng.runtime_reserve_bytes
    usable, budget = kv_budget_bytes(eng, capacity, weights, reserve)
    per_seq = kv_bytes_per_sequence_per_gpu(model, sc, ctx)
    kv = (np.asarray(sc.batch, dtype=np.float64) if sc.dp == 1 else dp_rank_batch(sc.batch, sc.dp)) * per_seq
    free = budget - kv
    max_b = np.floor(np.maximum(budget, 0) / per_seq) * sc.dp
    return MemoryBudget(
        eng,
        capacity,
        usable,
        weights,
        np.asarray(reserve),
        np.asarray(act),
        np.asarray(budget),
        per_seq,
        kv,
        free,
        np.maximum(-free, 0.0),
        free >= 0,
        max_b,
    )


def max_batch(
    model: ModelSpec | str | Path,
    hardware: HardwareSpec | str | Path,
    context_len: int,
    *,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    weight_dtype: str = "checkpoint",
    kv_dtype: str = "bf16",
    engine: EngineConfig | str | None = None,
    engine_overrides: Mapping[str, object] | None = None,
    dp: int = 1,
    redundant_experts: int = 0,
) -> int:
    """Largest number of sequences of ``context_len`` tokens whose KV fits next to the weights.

    The same function :func:`roofline.predict` reports as ``max_batch`` (the engine's memory
    semantics, see :func:`kv_budget_bytes`); 0 when not even one fits. The engine's ``max_num_seqs``
    enters through the activation peak (min(max_num_seqs, max_num_batched_tokens) rows); it also caps
    the batch an engine runs, which predict and sweep refuse to exceed. Options that move time, not
    memory, are refused (:func:`roofline.engine.config.check_engine_options`). Example (Llama-2-7B
    fp16, 4,096 tokens, capacity 80e9 B, reserve 10e9, fraction 1 of total):
    floor((80e9 − 13.48e9 − 10e9) / 2,147,483,648) = 26. With attention data parallelism (``dp``) it counts the
    sequences of all dp ranks, each holding its own.
    """
    check_engine_options(engine_overrides, "max_batch")
    m, hw = load_model(model), load_hardware(hardware)
    # prompt + output = the context checked
    sc = make_scenario(
        hw,
        1,
        max(context_len - 1, 1),
        1,
        tp=tp,
        pp=pp,
        ep=ep,
        dp=dp,
        redundant_experts=redundant_experts,
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        engine=engine,
        engine_overrides=engine_overrides,
    )
    sc.validate_for(m, hw)
    b = memory_budget(m, hw, sc, context=context_len)
    return int(b.max_batch) if math.isfinite(float(b.max_batch)) else 0
