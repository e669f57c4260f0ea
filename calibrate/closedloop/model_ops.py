"""The kernels of the validation decoder as plain functions over tensors (torch).

:mod:`calibrate.closedloop.model` holds the parameters in ``nn.Module`` containers; its forward pass
gathers them once into the ``*Plan`` tuples here and calls these functions, so an eager
step pays no per-op module dispatch. Each function issues the kernels the cost model counts
for its op (see :mod:`calibrate.closedloop.model` for the list and the few extra small kernels).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from roofline.errors import SpecError
from roofline.specs.model import ModelSpec

ROPE_THETA = 500_000.0


def norm(x: torch.Tensor, weight: torch.Tensor, rms: bool, eps: float = 1e-5) -> torch.Tensor:
    """The one-kernel norm of :class:`Norm` over the last dimension."""
    if rms and x.is_cuda:
        return F.rms_norm(x, weight.shape, weight, eps)
    return F.layer_norm(x, weight.shape, weight, None, eps)


def activation(name: str, x: torch.Tensor) -> torch.Tensor:
    """``name`` applied to x (silu/swish, gelu, gelu_pytorch_tanh, relu)."""
    if name in ("silu", "swish"):
        return F.silu(x)
    if name.startswith("gelu"):
        return F.gelu(x, approximate="tanh" if "tanh" in name or "pytorch" in name else "none")
    if name == "relu":
        return F.relu(x)
    raise SpecError(f"activation '{name}' is not built by the validation model; use silu, gelu or relu")


class Rope:
    """Rotary position factors e^{i·pos·θ_j} (interleaved-pair convention) for positions 0 … max_len − 1."""

    def __init__(self, head_dim: int, max_len: int, device: torch.device) -> None:
        inv = 1.0 / (ROPE_THETA ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
        ang = torch.outer(torch.arange(max_len, device=device, dtype=torch.float32), inv)
        self.freqs = torch.polar(torch.ones_like(ang), ang)  # complex64 [max_len, head_dim / 2]

    def tables(self, start: int, length: int) -> torch.Tensor:
        """Factors [length, 1, head_dim / 2] for positions start … start + length − 1."""
        return self.freqs[start : start + length, None, :]


def apply_rope(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` [B, T, H, d] (any strides with a contiguous last dim) by ``freqs`` [T, 1, d/2].

    One complex multiply over all heads: one kernel in fp32 (plus two casts in bf16/fp16),
    where the rotate-half formulation takes five.
    """
    shape = x.shape
    pairs = x.unflatten(-1, (shape[-1] // 2, 2))
    if x.dtype in (torch.bfloat16, torch.float16):  # no complex bf16: rotate in fp32
        pairs = pairs.float()
    out = torch.view_as_real(torch.view_as_complex(pairs) * freqs).flatten(-2)
    return out if out.dtype == x.dtype else out.to(x.dtype)


class KVCache:
    """Preallocated per-layer K and V tensors [B, kv_heads, max_len, head_dim], written in place."""

    def __init__(self, spec: ModelSpec, batch: int, max_len: int, device: torch.device, dtype: torch.dtype) -> None:
        a = spec.attention
        shape = (batch, a.num_kv_heads, max_len, a.head_dim)
        # a constant fill touches every page now (no page faults while timing) and is fast for GB-sized caches
        self.k = [torch.full(shape, 0.01, device=device, dtype=dtype) for _ in range(spec.num_layers)]
        self.v = [torch.full(shape, 0.01, device=device, dtype=dtype) for _ in range(spec.num_layers)]

    @property
    def nbytes(self) -> int:
        """Bytes of all K and V tensors."""
        return sum(t.numel() * t.element_size() for t in self.k + self.v)


class AttnPlan(NamedTuple):
    """Weights and head sizes of one attention block."""

    qkv_w: torch.Tensor
    qkv_b: torch.Tensor | None
    o_w: torch.Tensor
    o_b: torch.Tensor | None
    q_norm: torch.Tensor | None
    k_norm: torch.Tensor | None
    hq: int
    hkv: int
    d: int


def linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, residual: torch.Tensor | None) -> torch.Tensor:
    """x·wᵀ (+ b), plus ``residual`` accumulated by the GEMM itself (``addmm``, β = 1): no separate add kernel."""
    if residual is None or b is not None:
        y = F.linear(x, w, b)
        return y if residual is None else residual + y
    out = torch.addmm(residual.reshape(-1, w.shape[0]), x.reshape(-1, w.shape[1]), w.t())
    return out.view(residual.shape)


def attention(
    p: AttnPlan,
    x: torch.Tensor,
    freqs: torch.Tensor,
    ck: torch.Tensor,
    cv: torch.Tensor,
    start: int,
    residual: torch.Tensor | None = None,
) -> torch.Tensor:
    """QKV GEMM, RoPE, KV write, SDPA and O GEMM (+ ``residual``) of one layer: x [B, T, h] → [B, T, h].

    Views are taken with ``narrow`` rather than indexing: on a CPU the Python cost of
    ``t[:, :, a:b]`` is a visible share of a small model's step.
    """
    b, t, _ = x.shape
    hq, hkv, d = p.hq, p.hkv, p.d
    qkv = F.linear(x, p.qkv_w, p.qkv_b)
    qk = qkv.narrow(2, 0, (hq + hkv) * d).unflatten(2, (hq + hkv, d))
    v = qkv.narrow(2, (hq + hkv) * d, hkv * d).unflatten(2, (hkv, d)).transpose(1, 2)
    if p.q_norm is not None and p.k_norm is not None:
        qn, kn = norm(qk.narrow(2, 0, hq), p.q_norm, True, 1e-6), norm(qk.narrow(2, hq, hkv), p.k_norm, True, 1e-6)
        qk = torch.cat([qn, kn], dim=2)
    qk = apply_rope(qk, freqs)  # Q and K rotated together
    q, k = qk.narrow(2, 0, hq).transpose(1, 2), qk.narrow(2, hq, hkv).transpose(1, 2)
    ck.narrow(2, start, t).copy_(k)
    cv.narrow(2, start, t).copy_(v)
    if start == 0:  # prefill from an empty cache: causal attention over the new tokens
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=hq != hkv)
        out = out.transpose(1, 2).reshape(b, t, hq * d)
    elif t == 1:  # decode: one query per sequence over the cache, the call calibration's attention suite times
        n = start + 1
        keys, values = (ck, cv) if n == ck.shape[2] else (ck.narrow(2, 0, n), cv.narrow(2, 0, n))
        out = F.scaled_dot_product_attention(q, keys, values, enable_gqa=hq != hkv)
        out = out.reshape(b, 1, hq * d)
    else:
        raise ValueError("chunked prefill (start > 0 and T > 1) is not part of the validation grid")
    return linear(out, p.o_w, p.o_b, residual)


class FFNPlan(NamedTuple):
    """Weights of one dense FFN (``up_w`` is the fused gate_up when ``gated``)."""

    up_w: torch.Tensor
    up_b: torch.Tensor | None
    down_w: torch.Tensor
    down_b: torch.Tensor | None
    gated: bool
    act: str


def ffn(p: FFNPlan, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
    """gate_up GEMM, act(gate)·up, down GEMM (+ ``residual``), or up, act, down: x [..., h] → [..., h]."""
    u = F.linear(x, p.up_w, p.up_b)
    if p.gated:
        gate, up = u.chunk(2, dim=-1)
        return linear(activation(p.act, gate) * up, p.down_w, p.down_b, residual)
    return linear(activation(p.act, u), p.down_w, p.down_b, residual)


class BlockPlan(NamedTuple):
    """One pre-norm layer: norm weights, attention, and a dense FFN plan or the MoE module."""

    attn_norm: torch.Tensor
    attn: AttnPlan
    ffn_norm: torch.Tensor
    ffn: FFNPlan | nn.Module
    rms: bool


def block(
    p: BlockPlan, x: torch.Tensor, freqs: torch.Tensor, ck: torch.Tensor, cv: torch.Tensor, start: int
) -> torch.Tensor:
    """x + attention(norm(x)), then + ffn(norm(·)); the residual adds ride on the O and down GEMMs."""
    x = attention(p.attn, norm(x, p.attn_norm, p.rms), freqs, ck, cv, start, residual=x)
    y = norm(x, p.ffn_norm, p.rms)
    return ffn(p.ffn, y, residual=x) if isinstance(p.ffn, FFNPlan) else x + p.ffn(y)
