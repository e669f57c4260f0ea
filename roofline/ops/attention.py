"""Attention block ops: projections, the attention kernel itself, KV-cache write.

Attention is flash-style by default: scores never touch HBM, so the kernel moves Q, O
and the cached K/V only. Work per (query, key) pair and head is 2·d_qk (QKᵀ) + 2·d_v (PV)
FLOPs. Causal prefill of T tokens has T(T+1)/2 pairs per head; a sliding window W caps
each query's keys at W; DSA sparse layers cap them at top-k (the window formula with
W = k); chunked layers (Llama-4) let query i see the keys of its own chunk only,
((i − 1) mod C) + 1 of them.
"""

from __future__ import annotations

import numpy as np

from roofline.ops.context import BuildContext
from roofline.ops.records import Op, arr, elementwise, gemm
from roofline.specs.layers import ResolvedLayer
from roofline.specs.scenario import kv_heads_per_gpu


def causal_pairs(past: np.ndarray, new: np.ndarray, window: float) -> np.ndarray:
    """(query, key) pairs of ``new`` queries after ``past`` cached tokens: Σ_{i=past+1}^{past+new} min(i, W).

    With f(n) = Σ_{i=1}^{n} min(i, W) = n(n+1)/2 for n ≤ W, else W(W+1)/2 + (n−W)·W,
    pairs = f(past + new) − f(past).
    """

    def f(n: np.ndarray) -> np.ndarray:
        if np.isinf(window):
            return n * (n + 1) / 2
        w = window
        return np.where(n <= w, n * (n + 1) / 2, w * (w + 1) / 2 + (n - w) * w)

    return f(past + new) - f(past)


def chunked_pairs(past: np.ndarray, new: np.ndarray, chunk: float) -> np.ndarray:
    """(query, key) pairs with chunked attention: Σ_{i=past+1}^{past+new} (((i − 1) mod C) + 1).

    With g(n) = Σ_{i=1}^{n} (((i − 1) mod C) + 1) = ⌊n/C⌋·C(C+1)/2 + r(r+1)/2, r = n − C⌊n/C⌋
    (HF ``Llama4TextModel`` chunked causal mask: key j visible to query i iff
    ⌊i/C⌋ = ⌊j/C⌋ and j ≤ i), pairs = g(past + new) − g(past).
    """

    def g(n: np.ndarray) -> np.ndarray:
        full = np.floor(n / chunk)
        r = n - chunk * full
        return full * chunk * (chunk + 1) / 2 + r * (r + 1) / 2

    return g(past + new) - g(past)


def attention_kernel(
    c: BuildContext,
    layer_kind: str,
    count: int,
    window: float,
    q_heads: float,
    kv_heads: float,
    d_qk: float,
    d_v: float,
    kv_elems_per_token: float,
    chunk: float = float("inf"),
    sparse: bool = False,
    kv_format: str = "",
    mla: bool = False,
) -> Op:
    """The fused attention kernel of one layer on one GPU.

    FLOPs = 2·(d_qk + d_v)·q_heads·B·pairs. HBM bytes: Q read + O written
    (M·q_heads·(d_qk + d_v)·act bytes) + cached K/V read (B·span·kv_elems_per_token·kv bytes),
    span = min(past + T, W + T − 1); with chunks of C, span = (past mod C) + T (the keys of the
    chunks the new queries fall in). A sparse (DSA) prefill may touch any cached key, so its
    span is past + T (read once, the per-query gathers assumed to hit cache), while its FLOPs
    follow the top-k cap W. Decode (T = 1) grows linearly with the span, up to W; with chunks
    the span is periodic, ((L − 1) mod C) + 1 at context L. ``kv_format``: the cache format the kernel reads
    K/V in where that picks its kernel (``attention.prefill_kv_rate``); "" where it reads freshly projected K/V.
    ``mla``: a multi-head latent attention kernel (its own curve and floor where a profile measured them).
    """
    b, t, p = c.batch, c.new_tokens, c.past
    if np.isfinite(chunk):
        pairs = chunked_pairs(p, t, chunk)
        span = np.mod(p, chunk) + t
    else:
        pairs = causal_pairs(p, t, window)
        span = p + t if sparse and c.phase == "prefill" else np.minimum(p + t, window + t - 1)
    per_pair = 2.0 * (d_qk + d_v) * q_heads
    kv_per_span = kv_elems_per_token * c.kv_bytes
    op = Op(
        name="attn.core",
        group="attention",
        kind="attention",
        layer_kind=layer_kind,
        count=count,
        dtype=c.attn_dtype,
        m=c.tokens,
        n=span,
        k=arr(d_qk) + 0 * span,
        flops=per_pair * b * pairs,
        act_bytes=c.tokens * q_heads * (d_qk + d_v) * c.a_bytes,
        kv_read_bytes=b * span * kv_per_span,
        ctx_ref=c.context,
        ctx_cap=window,
        ctx_period=chunk,
        q_per_kv=float(q_heads / kv_heads),
        kv_format=kv_format,
        mla=mla,
    )
    if c.phase == "decode":
        op = Op(
            **{
                **op.__dict__,
                "flops_per_ctx": per_pair * b,
                "kv_read_bytes_per_ctx": b * kv_per_span,
                "context_dependent": True,
            }
        )
    return op


def _window(layer: ResolvedLayer) -> tuple[float, float]:
    """(window cap, chunk period) of a layer: local → (W, inf), sparse → (top-k, inf), chunked → (inf, C)."""
    if layer.mixer == "chunked":
        return float("inf"), layer.span_cap
    return (layer.span_cap if layer.mixer in ("local", "sparse") else float("inf")), float("inf")


def gqa_ops(c: BuildContext, layer_kind: str, count: int, layer: ResolvedLayer) -> list[Op]:
    """Q/K/V projection (one fused GEMM), attention, KV write, O projection for MHA/GQA/MQA.

    Sharded by tp over heads; KV heads are replicated when tp > num_kv_heads. The layer's own
    heads and head_dim are used (DeciLM, Gemma-4 global layers). An output gate doubles the
    q projection (Qwen3.5); ``k_eq_v`` drops the v projection and caches K only (Gemma-4).
    Projection biases (``qkv_bias``: one per output column; ``o_bias``: h, unsharded) are read
    with the weights, as many bytes as the memory model holds for them.
    """
    a, h, tp = c.model.attention, c.model.hidden_size, c.tp
    hq, hkv, d = layer.num_heads / tp, kv_heads_per_gpu(layer.num_kv_heads, tp), layer.head_dim
    dv = c.model.v_dim(d)
    q_mult = 2 if a.output_gate else 1
    v_out = 0 if c.model.k_is_v(layer) else hkv * dv
    kv_elems = hkv * d + v_out
    window, chunk = _window(layer)
    M, wb, ab, dt = c.tokens, c.w_bytes, c.a_bytes, c.gemm_dtype
    qkv_n = q_mult * hq * d + hkv * d + v_out
    # vectors read with the projection: q/k/v biases, QK-norm weights (head_dim each, or the shard's q and k
    # widths for a per-layer norm) and the attention sinks (one per local head)
    qk_norm = (2 * d if a.qk_norm_scope == "head" else hq * d + hkv * d) * a.qk_norm
    vectors = (hq * d + hkv * d + v_out) * a.qkv_bias + qk_norm + hq * a.sinks
    return [
        gemm("attn.qkv_proj", "attention", layer_kind, count, dt, M, qkv_n, h, wb, ab, bias_bytes=vectors * wb),
        attention_kernel(
            c, layer_kind, count, window, hq, hkv, d, dv, kv_elems, chunk, layer.mixer == "sparse", c.sc.kv_dtype.value
        ),
        _kv_write(c, layer_kind, count, kv_elems),
        gemm("attn.o_proj", "attention", layer_kind, count, dt, M, h, hq * dv, wb, ab, bias_bytes=h * wb * a.o_bias),
    ]


def mla_kernel(
    c: BuildContext,
    layer_kind: str,
    count: int,
    window: float,
    heads: tuple[float, float, float, float, float],
    sparse: bool = False,
) -> Op:
    """:func:`attention_kernel` of an MLA layer (``heads``: q heads, K/V heads, d_qk, d_v, cached elements per
    token): its own kernel family, its variant picked by the cache format."""
    hq, hkv, d_qk, d_v, elems = heads
    return attention_kernel(
        c, layer_kind, count, window, hq, hkv, d_qk, d_v, elems, sparse=sparse, kv_format=c.sc.kv_dtype.value, mla=True
    )


def mla_ops(c: BuildContext, layer_kind: str, count: int, layer: ResolvedLayer) -> list[Op]:
    """Multi-head latent attention (DeepSeek-V3). The cache holds the latent (kv_lora + rope).

    Prefill expands the latent to per-head K/V (kv_b_proj over the new tokens) and runs
    ordinary attention with d_qk = nope + rope, d_v = v. Decode absorbs W_UK into the
    query and W_UV into the output, so attention runs over the latent for every head:
    d_qk = kv_lora + rope, d_v = kv_lora, with one shared latent "KV head".
    q_a / kv_a projections are replicated across tp; head-wise ones are sharded. On sparse
    (DSA) layers the attention covers the top-k selected tokens (window = k). An output gate
    (``attention.output_gate``, Kimi-K3) adds g_proj, M × (H/tp)·v × h.
    """
    a, h, tp = c.model.attention, c.model.hidden_size, c.tp
    window, _ = _window(layer)
    sparse = layer.mixer == "sparse"
    m = a.mla
    assert m is not None
    hq = a.num_heads / tp
    qk = m.qk_nope_head_dim + m.qk_rope_head_dim
    latent = m.kv_lora_rank + m.qk_rope_head_dim
    M, wb, ab, dt = c.tokens, c.w_bytes, c.a_bytes, c.gemm_dtype
    ops: list[Op] = []
    if m.q_lora_rank:
        ops.append(
            gemm(
                "attn.q_a_proj",
                "attention",
                layer_kind,
                count,
                dt,
                M,
                m.q_lora_rank,
                h,
                wb,
                ab,
                bias_bytes=m.q_lora_rank * wb,
            )
        )  # q_a_layernorm
        ops.append(gemm("attn.q_b_proj", "attention", layer_kind, count, dt, M, hq * qk, m.q_lora_rank, wb, ab))
    else:
        ops.append(gemm("attn.q_proj", "attention", layer_kind, count, dt, M, hq * qk, h, wb, ab))
    ops.append(
        gemm("attn.kv_a_proj", "attention", layer_kind, count, dt, M, latent, h, wb, ab, bias_bytes=m.kv_lora_rank * wb)
    )  # kv_a_layernorm
    if c.phase == "prefill":
        kv_b_out = hq * (m.qk_nope_head_dim + m.v_head_dim)
        ops.append(gemm("attn.kv_b_proj", "attention", layer_kind, count, dt, M, kv_b_out, m.kv_lora_rank, wb, ab))
        ops.append(mla_kernel(c, layer_kind, count, window, (hq, hq, qk, m.v_head_dim, latent), sparse))
    else:
        ops.append(
            gemm(
                "attn.absorb_uk", "attention", layer_kind, count, dt, M, hq * m.kv_lora_rank, m.qk_nope_head_dim, wb, ab
            )
        )
        ops.append(mla_kernel(c, layer_kind, count, window, (hq, 1, latent, m.kv_lora_rank, latent), sparse))
        ops.append(
            gemm("attn.absorb_uv", "attention", layer_kind, count, dt, M, hq * m.v_head_dim, m.kv_lora_rank, wb, ab)
        )
    ops.append(_kv_write(c, layer_kind, count, latent))
    if a.output_gate:  # Kimi-K3 gated MLA: sigmoid(g_proj(x)) multiplies the heads' output, h -> H·v sharded
        ops.append(gemm("attn.g_proj", "attention", layer_kind, count, dt, M, hq * m.v_head_dim, h, wb, ab))
    ops.append(gemm("attn.o_proj", "attention", layer_kind, count, dt, M, h, hq * m.v_head_dim, wb, ab))
    return ops


def _kv_write(c: BuildContext, layer_kind: str, count: int, elems_per_token: float) -> Op:
    """Append the new tokens' K/V (or latent) to the cache: M·elems·kv bytes written."""
    M = c.tokens
    op = elementwise(
        "attn.kv_write",
        "attention",
        layer_kind,
        count,
        c.attn_dtype,
        M * elems_per_token,
        0.0,
        c.a_bytes,
        flops_per_elem=0.0,
    )
    return Op(**{**op.__dict__, "kv_write_bytes": M * elems_per_token * c.kv_bytes})
