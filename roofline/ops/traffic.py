"""Memory traffic every engine pays outside the GEMMs and the attention kernel, as named ops.

M = tokens in the pass, h = hidden size, a = activation bytes per element (≥ 2), per GPU:

* ``residual_add_norm`` — fused residual add + RMSNorm (vLLM ``fused_add_rms_norm``,
  TensorRT-LLM ``residual + rmsnorm``): reads the sublayer output and the residual, writes the
  new residual and the normed input of the next sublayer: 4·M·h·a bytes, plus the h·a norm
  weight; ≈ 5 FLOPs per element (add, square, accumulate, scale, weight). The first two norms
  of each layer are fused with a residual add; further norms (Gemma-2's post-norms) are plain
  2-pass norms (read, write).
* ``attn.rope`` — rotary embedding applied in place to the new queries and keys: read + write of
  M·(h_q + h_kv)·d_rot elements, 2·M·(h_q + h_kv)·d_rot·a bytes, 3 FLOPs per element
  (x·cos + rotate(x)·sin). d_rot = head_dim (MHA/GQA), qk_rope_head_dim with one shared
  rope key (MLA).
* ``comm.embedding_all_reduce`` — a vocab-parallel embedding (tp > 1) looks up only its V/tp rows
  and all-reduces the M·h·a result across tp ranks.
* ``attn.mla_prefill_kv`` — MLA prefill runs attention on the expanded per-head K/V
  (kv_b_proj output plus the shared rope key), not on the latent: the kernel reads
  B·span·h_q·(d_qk + d_v)·a bytes; the attention kernel op already charges the latent
  B·span·(kv_lora_rank + rope)·kv bytes, so this op carries the difference.
* ``attn_res.mix`` — attention residuals (Kimi-K3 ``attn_res_block_size`` S; see
  :func:`attention_residual_op`): before each sublayer and at the output, every token takes a softmax over
  depth of the n block values it has so far: reads n·h·a bytes, writes h·a, ≈ 7 FLOPs per value element
  (RMSNorm of the value 3, score dot 2, weighted sum 2).
"""

from __future__ import annotations

import numpy as np

from roofline.ops import comm
from roofline.ops.context import BuildContext
from roofline.ops.records import Op, elementwise, with_fields
from roofline.specs.layers import ResolvedLayer
from roofline.specs.scenario import kv_heads_per_gpu

FUSED_NORMS_PER_LAYER = 2  # pre-attention and pre-FFN norms take the residual add


def residual_add_norm_ops(c: BuildContext, layer_kind: str, count: int, norms: int) -> list[Op]:
    """Fused residual add + norm (4 passes) for the first two of a layer's ``norms``, plain norms (2 passes) after."""
    h, M, ab, dt = c.model.hidden_size, c.tokens, c.a_bytes, c.gemm_dtype
    fused = min(norms, FUSED_NORMS_PER_LAYER)
    ops = [elementwise("residual_add_norm", "norm", layer_kind, count * fused, dt, M * h, 4.0, ab, 5.0, h * ab)]
    if norms > fused:
        ops.append(elementwise("norm", "norm", layer_kind, count * (norms - fused), dt, M * h, 2.0, ab, 4.0, h * ab))
    return [op for op in ops if op.count > 0]


def rope_op(c: BuildContext, layer_kind: str, count: int, layer: ResolvedLayer) -> Op:
    """Rotary embedding on the new tokens' queries and keys: 2·M·(h_q + h_kv)·d_rot·a bytes
    (this layer's heads, sharded by tp; KV heads replicated when tp > H_kv)."""
    a = c.model.attention
    if a.mla is not None:
        heads, d_rot = layer.num_heads / c.tp + 1.0, float(a.mla.qk_rope_head_dim)
    else:
        heads, d_rot = layer.num_heads / c.tp + kv_heads_per_gpu(layer.num_kv_heads, c.tp), float(layer.head_dim)
    return elementwise(
        "attn.rope", "attention", layer_kind, count, c.attn_dtype, c.tokens * heads * d_rot, 2.0, c.a_bytes, 3.0
    )


def embedding_all_reduce(c: BuildContext) -> Op:
    """All-reduce of the vocab-parallel embedding output (M·h·a bytes) over tp ranks."""
    msg = c.tokens * c.model.hidden_size * c.a_bytes
    return comm.all_reduce("comm.embedding_all_reduce", "comm", "model", 1, c.gemm_dtype, msg, c.tp, c.hw)


def mla_prefill_kv_op(c: BuildContext, layer_kind: str, count: int) -> Op:
    """Extra bytes of MLA prefill attention reading expanded per-head K/V instead of the latent."""
    a = c.model.attention
    assert a.mla is not None
    m = a.mla
    hq = a.num_heads / c.tp
    span = c.past + c.new_tokens
    expanded = hq * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim) * c.a_bytes
    latent = (m.kv_lora_rank + m.qk_rope_head_dim) * c.kv_bytes
    extra = c.batch * span * np.maximum(expanded - latent, 0.0)
    op = elementwise(
        "attn.mla_prefill_kv", "attention", layer_kind, count, c.attn_dtype, extra / c.a_bytes, 1.0, c.a_bytes, 0.0
    )
    return with_fields(op, kernels=0)  # traffic of the attention kernel, not a launch of its own


def attention_residual_values(num_layers: int, block: int) -> tuple[int, int]:
    """(Σ values read, mixes) of one token's attention residuals over ``num_layers`` layers in blocks of ``block``.

    Layer i (0-based) holds ⌊i/S⌋ + 1 closed block values (a new block opens at i mod S = 0, starting with the
    embedding) plus its running partial sum. Its pre-attention mix reads ⌊i/S⌋ + 2 values (⌊i/S⌋ + 1 at a block
    start, none at i = 0), its pre-FFN mix ⌊i/S⌋ + 2, and the output mix ⌈L/S⌉ + 1: 2L mixes in all (Kimi-K3:
    93 layers, S = 12: 8 blocks, 9 values at the output).
    """
    s = block
    attn = sum(0 if i == 0 else i // s + (1 if i % s == 0 else 2) for i in range(num_layers))
    ffn = sum(i // s + 2 for i in range(num_layers))
    return attn + ffn + -(-num_layers // s) + 1, 2 * num_layers


def attention_residual_op(c: BuildContext) -> Op:
    """All attention-residual mixes of one pass (model level): M·h·(V + 2L) elements moved (V values read,
    one h-wide output per mix), 7·M·h·V FLOPs, and the (4L + 2)·h scorer and norm weights read once."""
    m = c.model
    assert m.attn_res_block_size is not None
    values, mixes = attention_residual_values(m.num_layers, m.attn_res_block_size)
    elems = c.tokens * m.hidden_size * (values + mixes)
    per_elem = 7.0 * values / (values + mixes)
    w = m.residual_params() * c.a_bytes
    return elementwise("attn_res.mix", "norm", "model", 1, c.gemm_dtype, elems, 1.0, c.a_bytes, per_elem, w)
