"""Ops of DeepSeek-V4 layers (mixer ``compressed``) and of its hyper-connections; shapes in
:mod:`roofline.specs.compressed` (HF ``modeling_deepseek_v4.py``).

One GPU of a tp group holds H/tp query heads (q_b, o_a and o_b sharded by heads/groups, sinks); the KV
projection, the compressor and the indexer are replicated (one KV head), as MLA's kv_a. With d = head_dim,
W = sliding window, m = compress ratio, k = index_topk, a query at position i attends

    keys(i) = min(i, W) + e(i),   e(i) = ⌊i/m⌋ (HCA) or min(⌊i/m⌋, k) (CSA), 0 when m = 0,

at 2·(d + d) FLOPs per key and head (QKᵀ and PV over the shared K=V head). Entries, pairs, bytes:

* ``attn.core`` — the window part: ``causal_pairs`` with cap W, reading min(past + T, W + T − 1)·d·kv bytes.
* ``attn.compressed`` — the entries: Σ_i e(i) pairs (closed form :func:`entry_pairs`); reads ⌊(past + T)/m⌋
  entries (HCA, and CSA prefill) or min(⌊L/m⌋, k) gathered entries (CSA decode) × d·kv bytes. A decode step
  is built exactly at its context; at other contexts it moves 1/m entry per token (the floor's mean slope),
  up to k·m tokens on CSA.
* ``attn.o_a_proj`` — the grouped projection as one GEMM of the shard's g/tp groups: n = (g/tp)·r_o,
  k = H·d/g (FLOPs 2·M·H·d·r_o/tp, weights H·d·r_o/tp, sinks read with it); ``attn.rope`` — rotary on the
  rope dims of q, the K=V head and the output (de-rotation): 2·M·(2·H/tp + 1)·d_rope elements.
* ``indexer.score`` (CSA) — each query scores every causal entry, 2·n·d_i + 2·n FLOPs per (query, entry),
  reading the entries' FP8 keys (d_i + d_i/32 B).
* ``compress.kv_write`` — ⌊(past + T)/m⌋ − ⌊past/m⌋ new entries per sequence (d·kv bytes, + index key bytes
  on CSA) in prefill; one entry per m tokens on average in decode. ``attn.kv_write`` writes T window tokens.
* ``hc.*`` — per layer two mixers: a GEMM M × (2 + n)·n × n·h (count 2L) and the stream traffic (collapse
  reads n·h and writes h; expand + mix reads n·h + h and writes n·h: M·h·(3n + 2) elements, 2 FLOPs each);
  the head reads n·h per token and writes h. Sinkhorn iterations on n × n (≈ 3·n²·iters per token per mixer)
  are below the elementwise cost and not priced.
"""

from __future__ import annotations

import numpy as np

from roofline.ops.attention import attention_kernel
from roofline.ops.context import BuildContext
from roofline.ops.records import Op, elementwise, gemm, with_fields
from roofline.specs.compressed import CSA_RATIO, CompressedAttention
from roofline.specs.layers import ResolvedLayer


def entry_pairs(n: np.ndarray, m: float, cap: float) -> np.ndarray:
    """Σ_{i=1}^{n} min(⌊i/m⌋, cap): with q = ⌊n/m⌋, F(n) = m·q(q − 1)/2 + q·(n − q·m + 1) uncapped; past the cap
    (q > cap) it is F(m·(cap + 1) − 1) + cap·(n − m·(cap + 1) + 1)."""

    def f(x: np.ndarray) -> np.ndarray:
        q = np.floor(x / m)
        return m * q * (q - 1) / 2 + q * (x - q * m + 1)

    if not np.isfinite(cap):
        return f(n)
    edge = m * (cap + 1) - 1
    return np.where(np.floor(n / m) <= cap, f(n), f(np.asarray(edge)) + cap * (n - edge))


def _attention(c: BuildContext, ca: CompressedAttention, lk: str, count: int, m: int) -> list[Op]:
    hq, d, b, p, t = c.model.attention.num_heads / c.tp, ca.head_dim, c.batch, c.past, c.new_tokens
    ops = [attention_kernel(c, lk, count, float(ca.sliding_window), hq, 1, d, d, d)]
    if not m:
        return ops
    cap = float(ca.index_topk) if m == CSA_RATIO else float("inf")
    per_pair = 4.0 * d * hq
    pairs = entry_pairs(p + t, m, cap) - entry_pairs(p, m, cap)
    entries = np.floor((p + t) / m)
    held = np.minimum(entries, cap) if c.phase == "decode" else entries
    core = with_fields(
        ops[0],
        name="attn.compressed",
        n=held,
        flops=per_pair * b * pairs,
        act_bytes=0.0 * held,
        kv_read_bytes=b * held * d * c.kv_bytes,
        ctx_cap=cap * m,
    )
    if c.phase == "decode":
        core = with_fields(core, flops_per_ctx=per_pair * b / m, kv_read_bytes_per_ctx=b * d * c.kv_bytes / m)
    return [*ops, core]


def _indexer(c: BuildContext, ca: CompressedAttention, lk: str, count: int) -> list[Op]:
    h, M, wb, ab, dt = c.model.hidden_size, c.tokens, c.w_bytes, c.a_bytes, c.gemm_dtype
    b, p, t = c.batch, c.past, c.new_tokens
    n, di, m = ca.index_heads, ca.index_head_dim, CSA_RATIO
    per_pair = 2.0 * n * di + 2.0 * n
    entries = np.floor((p + t) / m)
    score = Op(
        name="indexer.score",
        group="attention",
        kind="attention",
        layer_kind=lk,
        count=count,
        dtype=c.attn_dtype,
        m=M,
        n=entries + 0 * M,
        k=np.asarray(float(di)) + 0 * M,
        flops=per_pair * b * (entry_pairs(p + t, m, np.inf) - entry_pairs(p, m, np.inf)),
        act_bytes=M * n * (di + 1) * ab,
        kv_read_bytes=b * entries * ca.index_cache_bytes(),
        ctx_ref=c.context,
    )
    if c.phase == "decode":
        score = with_fields(
            score,
            flops_per_ctx=per_pair * b / m,
            kv_read_bytes_per_ctx=b * ca.index_cache_bytes() / m + 0 * M,
            context_dependent=True,
        )
    vectors = (m * 2 * di + di) * wb  # position bias and kv_norm of the indexer's compressor
    return [
        gemm("indexer.wq_b", "attention", lk, count, dt, M, n * di, ca.q_lora_rank, wb, ab),
        gemm("indexer.kv_gate_weights", "attention", lk, count, dt, M, 4 * di + n, h, wb, ab, bias_bytes=vectors),
        score,
    ]


def compressed_ops(c: BuildContext, lk: str, count: int, layer: ResolvedLayer) -> list[Op]:
    """Projections, compressor, indexer, attention and cache writes of one DeepSeek-V4 layer (module docstring)."""
    ca = c.model.compressed_attention
    assert ca is not None
    h, M, wb, ab, dt, tp = c.model.hidden_size, c.tokens, c.w_bytes, c.a_bytes, c.gemm_dtype, c.tp
    heads, d, q, m = c.model.attention.num_heads, ca.head_dim, ca.q_lora_rank, layer.compress_ratio
    hq = heads / tp
    ops = [
        gemm("attn.q_a_proj", "attention", lk, count, dt, M, q, h, wb, ab, bias_bytes=q * wb),
        gemm("attn.q_b_proj", "attention", lk, count, dt, M, hq * d, q, wb, ab),
        gemm("attn.kv_proj", "attention", lk, count, dt, M, d, h, wb, ab, bias_bytes=d * wb),
    ]
    new_entries = np.floor((c.past + c.new_tokens) / m) - np.floor(c.past / m) if m else 0.0 * M
    if m:
        width = (2 if m == CSA_RATIO else 1) * d
        vectors = (m * width + d) * wb  # position bias and kv_norm
        ops.append(gemm("compress.kv_gate", "attention", lk, count, dt, M, 2 * width, h, wb, ab, bias_bytes=vectors))
        ops += _indexer(c, ca, lk, count) if m == CSA_RATIO else []
        new_entries = c.batch / m + 0 * M if c.phase == "decode" else c.batch * new_entries
    ops += _attention(c, ca, lk, count, m)
    rope = M * (2 * hq + 1) * ca.rope_head_dim  # q, the K=V head, and the output's inverse rotation
    ops.append(elementwise("attn.rope", "attention", lk, count, c.attn_dtype, rope, 2.0, ab, 3.0))
    write = elementwise("attn.kv_write", "attention", lk, count, c.attn_dtype, M * d, 0.0, ab, flops_per_elem=0.0)
    ops.append(with_fields(write, kv_write_bytes=M * d * c.kv_bytes))
    if m:
        entry_b = d * c.kv_bytes + (ca.index_cache_bytes() if m == CSA_RATIO else 0.0)
        pool = elementwise("compress.kv_write", "attention", lk, count, c.attn_dtype, M * 2 * d, 1.0, ab, 4.0)
        ops.append(with_fields(pool, kv_write_bytes=new_entries * entry_b))
    o_in = ca.o_groups * ca.o_lora_rank / tp  # the shard's groups
    ops += [
        gemm("attn.o_a_proj", "attention", lk, count, dt, M, o_in, heads * d / ca.o_groups, wb, ab, bias_bytes=hq * wb),
        gemm("attn.o_b_proj", "attention", lk, count, dt, M, h, o_in, wb, ab),
    ]
    return ops


def hyper_connection_ops(c: BuildContext) -> list[Op]:
    """The model's hyper-connection mixers and head (module docstring); weights read at activation bytes."""
    ca = c.model.compressed_attention
    assert ca is not None
    h, n, M, ab, L = c.model.hidden_size, ca.hc_mult, c.tokens, c.a_bytes, c.model.num_layers
    coeffs = (2 + n) * n
    fn = gemm("hc.fn", "norm", "model", 2 * L, c.gemm_dtype, M, coeffs, n * h, ab, ab, bias_bytes=(coeffs + 3) * ab)
    mix = elementwise("hc.mix", "norm", "model", 2 * L, c.gemm_dtype, M * h * (3 * n + 2), 1.0, ab, 2.0)
    head_w = (n * n * h + n + 1) * ab
    head = elementwise("hc.head", "norm", "model", 1, c.gemm_dtype, M * h * (n + 1), 1.0, ab, 2.0 * n, head_w)
    return [fn, mix, head]
