"""Ops of the non-softmax token mixers: linear attention / SSM layers and the DSA indexer.

Linear attention and state-space layers (Gated DeltaNet, Mamba-2, Kimi Delta Attention)
keep a fixed-size state S per head (d_k × d_v) instead of a KV cache. A decode step reads
and writes that state once per sequence: bytes and FLOPs are independent of the context.
Prefill runs the chunked scan (chunk C): within a chunk an attention-like C×C block, across
chunks the state is carried, so FLOPs and bytes are linear in the number of tokens.

FLOPs per token per state head (H heads on one GPU, d_k = head_k_dim, d_v = head_v_dim):

* Decode, Gated DeltaNet / KDA (delta rule S ← α·S·(I − β·k·kᵀ) + β·v·kᵀ, o = Sᵀq; Yang et al.,
  "Gated Delta Networks", ICLR 2025, eq. 10; fla ``fused_recurrent_gated_delta_rule``):
  decay α·S (d_k·d_v) + u = Sᵀk (2·d_k·d_v) + S += k·(β(v − u))ᵀ (2·d_k·d_v) + o = Sᵀq (2·d_k·d_v)
  = 7·d_k·d_v.
* Decode, Mamba-2 (h ← exp(Δ·A)·h + Δ·x·Bᵀ, y = h·C + D·x; Dao & Gu, "Transformers are SSMs",
  ICML 2024, §3; ``selective_state_update``): decay N·P + outer product 2·N·P + read-out 2·N·P
  = 5·N·P (N = d_state = d_k, P = head dim = d_v).
* Prefill, Mamba-2 SSD chunked algorithm (Dao & Gu 2024, §6): intra-chunk C·Bᵀ scores 2·C·N and
  their product with X 2·C·P (full C×C blocks, masked), chunk state Bᵀ·X 2·N·P, output from the
  carried state C·h 2·N·P: 2·C·(N + P) + 4·N·P.
* Prefill, Gated DeltaNet / KDA chunked WY form (Yang et al. 2025 §3.3; fla
  ``chunk_gated_delta_rule``): K·Kᵀ 2·C·d_k, W = A·(βK) 2·C·d_k, U = A·(βV) 2·C·d_v, Q·Kᵀ
  2·C·d_k, intra-chunk output 2·C·d_v, and W·S, Q·S, the state update Kᵀ·(U − W·S) 2·d_k·d_v each:
  6·C·d_k + 4·C·d_v + 6·d_k·d_v (the C×C triangular inverse, C²/3 per token, is also counted).

Bytes of the scan op: q, k, v read and o written (M·(conv_dim + H·d_v)·act bytes) plus the
state: a decode step reads and writes the recurrent state and the conv state of every
sequence; a prefill writes the final state (and reads the initial one when continuing
after ``past`` tokens). The state bytes sit in ``kv_read_bytes``/``kv_write_bytes``.
"""

from __future__ import annotations

import numpy as np

from roofline.ops.context import BuildContext
from roofline.ops.records import Op, arr, elementwise, gemm
from roofline.specs.layers import LinearAttention


def scan_flops_per_token_per_head(la: LinearAttention, phase: str) -> float:
    """FLOPs of the recurrence per token per state head (formulas in the module docstring)."""
    dk, dv, c = float(la.head_k_dim), float(la.head_v_dim), float(la.chunk_size)
    if la.kind == "mamba2":
        return 5.0 * dk * dv if phase == "decode" else 2.0 * c * (dk + dv) + 4.0 * dk * dv
    if phase == "decode":
        return 7.0 * dk * dv
    return 6.0 * c * dk + 4.0 * c * dv + 6.0 * dk * dv + c * c / 3.0


def linear_ops(c: BuildContext, layer_kind: str, count: int) -> list[Op]:
    """Input projections, short conv, the scan (state op), gated norm and output projection of one
    linear-attention / SSM layer on one GPU; all heads are sharded by tp.

    Input projection widths (the weights of ``LinearAttention.params``): gated_deltanet
    conv_dim + H·d_v (z gate) + 2H (β, decay); mamba2 2·H·P + 2·G·N + H (z, x, B, C, Δ); kda
    conv_dim + H (β) + the low-rank decay and output gates (h → d_k → H·d_k, h → d_v → H·d_v; with
    ``full_rank_gate`` the output gate is one h → H·d_v GEMM, Kimi-K3).
    """
    la = c.model.linear_attention
    assert la is not None
    h, tp, M, wb, ab, dt = c.model.hidden_size, c.tp, c.tokens, c.w_bytes, c.a_bytes, c.gemm_dtype
    heads = la.num_heads / tp
    conv_dim, v_dim = la.conv_dim / tp, la.num_heads * la.head_v_dim / tp
    ops: list[Op] = []
    if la.kind == "gated_deltanet":
        ops.append(
            gemm("linear.in_proj", "attention", layer_kind, count, dt, M, conv_dim + v_dim + 2 * heads, h, wb, ab)
        )
    elif la.kind == "mamba2":
        ops.append(gemm("linear.in_proj", "attention", layer_kind, count, dt, M, conv_dim + v_dim + heads, h, wb, ab))
    else:
        dk, dv = la.head_k_dim, la.head_v_dim
        ops.append(gemm("linear.in_proj", "attention", layer_kind, count, dt, M, conv_dim + heads, h, wb, ab))
        if la.full_rank_gate:  # Kimi-K3: f_a (h -> d_k) and the full-rank output gate g_proj (h -> H·d_v)
            ops.append(gemm("linear.gate_a_proj", "attention", layer_kind, count, dt, M, dk, h, wb, ab))
            ops.append(gemm("linear.f_b_proj", "attention", layer_kind, count, dt, M, heads * dk, dk, wb, ab))
            ops.append(gemm("linear.g_proj", "attention", layer_kind, count, dt, M, heads * dv, h, wb, ab))
        else:
            ops.append(gemm("linear.gate_a_proj", "attention", layer_kind, count, dt, M, dk + dv, h, wb, ab))
            ops.append(gemm("linear.f_b_proj", "attention", layer_kind, count, dt, M, heads * dk, dk, wb, ab))
            ops.append(gemm("linear.g_b_proj", "attention", layer_kind, count, dt, M, heads * dv, dv, wb, ab))
    ops.append(
        elementwise("linear.conv1d", "attention", layer_kind, count, dt, M * conv_dim, 2.0, ab, 2.0 * la.conv_kernel)
    )
    ops.append(_scan(c, la, layer_kind, count))
    ops.append(gemm("linear.out_proj", "attention", layer_kind, count, dt, M, h, v_dim, wb, ab))
    # the mixer's weights outside its GEMMs (conv taps and bias, Δ bias, A_log, D, KDA decay bias, the
    # gated norm, Mamba-2 projection biases), read once per step with the gated norm
    in_gemms = sum(float(np.max(op.weight_bytes)) for op in ops if op.kind == "gemm") / wb
    vectors = la.params(h) / tp - in_gemms
    ops.insert(
        -1, elementwise("linear.gated_norm", "attention", layer_kind, count, dt, M * v_dim, 3.0, ab, 6.0, vectors * wb)
    )
    return ops


def _scan(c: BuildContext, la: LinearAttention, layer_kind: str, count: int) -> Op:
    """The recurrence over the new tokens of B sequences (see the module docstring)."""
    tp, M, b = c.tp, c.tokens, c.batch
    heads = la.num_heads / tp
    state_b = (la.state_elements * la.state_bytes_per_element + la.conv_state_elements * 2.0) / tp
    flops = M * heads * scan_flops_per_token_per_head(la, c.phase)
    act = M * (la.conv_dim + la.num_heads * la.head_v_dim) / tp * c.a_bytes
    read = b * state_b * (1.0 if c.phase == "decode" else np.where(c.past > 0, 1.0, 0.0))
    return Op(
        name="linear.scan",
        group="attention",
        kind="attention",
        layer_kind=layer_kind,
        count=count,
        dtype=c.attn_dtype,
        m=M,
        n=arr(la.head_v_dim) + 0 * M,
        k=arr(la.head_k_dim) + 0 * M,
        flops=flops,
        act_bytes=act,
        kv_read_bytes=read + 0 * M,
        kv_write_bytes=b * state_b + 0 * M,
    )


def indexer_ops(c: BuildContext, layer_kind: str, count: int) -> list[Op]:
    """The lightning indexer of one sparse layer (DeepSeek-V3.2-Exp ``inference/model.py`` ``Indexer``;
    MiniMax-M3 MSA has the same scoring with its own projections, index q sharded over tp).

    Projections from the query latent (wq_b: q_lora → n·d), the hidden state (wk: h → d,
    weights_proj: h → n), the FP8 key write, and the scoring kernel: each new token scores
    every cached token with n heads, 2·n·d FLOPs (q·k) + 2·n (ReLU-weighted head sum) per pair,
    reading span × ``cache_bytes_per_token`` bytes per sequence, span = past + T (no cap: the
    indexer sees the whole context; decode grows linearly with it). Top-k selection is not
    costed separately. The indexer is replicated on every tp rank (one key head; vLLM runs
    it unsharded).
    """
    sa, mla = c.model.sparse_attention, c.model.attention.mla
    assert sa is not None
    h, M, wb, ab, dt = c.model.hidden_size, c.tokens, c.w_bytes, c.a_bytes, c.gemm_dtype
    n, d = sa.index_heads, sa.index_head_dim
    b, t, p = c.batch, c.new_tokens, c.past
    per_pair = 2.0 * n * d + 2.0 * n
    pairs = p * t + t * (t + 1) / 2  # Σ_{i=p+1}^{p+t} i
    span = p + t
    score = Op(
        name="indexer.score",
        group="attention",
        kind="attention",
        layer_kind=layer_kind,
        count=count,
        dtype=c.attn_dtype,
        m=M,
        n=span + 0 * M,
        k=arr(d) + 0 * M,
        flops=per_pair * b * pairs,
        act_bytes=M * n * (d + 1) * ab,
        kv_read_bytes=b * span * sa.cache_bytes_per_token,
        ctx_ref=c.context,
    )
    if c.phase == "decode":
        per_ctx = b * sa.cache_bytes_per_token + 0 * M
        score = Op(
            **{
                **score.__dict__,
                "flops_per_ctx": per_pair * b,
                "kv_read_bytes_per_ctx": per_ctx,
                "context_dependent": True,
            }
        )
    write = elementwise("indexer.k_write", "attention", layer_kind, count, c.attn_dtype, M * d, 0.0, ab, 0.0)
    write = Op(**{**write.__dict__, "kv_write_bytes": M * sa.cache_bytes_per_token})
    if sa.kind == "msa":  # index q sharded over tp with the heads, one replicated key head
        return [
            gemm("indexer.q_proj", "attention", layer_kind, count, dt, M, n * d / c.tp, h, wb, ab),
            gemm("indexer.k_proj", "attention", layer_kind, count, dt, M, d, h, wb, ab, bias_bytes=2 * d * wb),
            score,
            write,
        ]
    assert mla is not None and mla.q_lora_rank is not None
    return [
        gemm("indexer.wq_b", "attention", layer_kind, count, dt, M, n * d, mla.q_lora_rank, wb, ab),
        gemm("indexer.wk_weights", "attention", layer_kind, count, dt, M, d + n, h, wb, ab, bias_bytes=2 * d * wb),
        score,
        write,
    ]
