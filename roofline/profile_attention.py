"""The attention part of a CalibrationProfile: multipliers, prefill curves and per-call floors per kernel family."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from pydantic import Field

from roofline.profile_curve import Curve
from roofline.specs._base import Frozen

if TYPE_CHECKING:
    from roofline.ops.records import Op


class Attention(Frozen):
    """Multipliers on the GEMM compute ceiling and the memory ceiling for attention kernels.

    A prefill (causal, flash-style) attention kernel computes at
    min(GEMM ceiling × ``compute_efficiency``, datasheet peak × ``prefill_compute_efficiency[d](L)``):
    short contexts leave the kernel's tiles and pipeline underused, so it reaches a smaller fraction
    of peak than a large GEMM (FlashAttention-3 on H100, head dim 128: 30 % at 512 tokens, 62 % at 16k).

    ``gqa_kv_reuse`` says how the attention kernel of the serving stack loads K/V for a GQA
    group of g query heads: HBM K/V reads = cached K/V bytes × (1 + (1 − gqa_kv_reuse)·(g − 1)).
    1 = each K/V head is streamed once per group (XQA, FlashInfer, FlashAttention pack-GQA);
    0 = once per query head (TensorRT-LLM < 0.8 masked-MHA decode kernel, one block per query head).
    A decode attention call also pays ``decode_fixed_s`` (its per-call floor) on top of the roofline max, a
    prefill (context) attention call ``prefill_fixed_s``. Multi-head latent attention (``Op.mla``: DeepSeek-V3's
    kernels, their own in every engine) takes ``mla_prefill_efficiency`` for its prefill curve and
    ``mla_decode_fixed_s`` for its decode floor where a profile measured them (the head-dim curve and
    ``decode_fixed_s`` otherwise); a GQA decode call from a cache of a format in ``decode_fixed_by_kv`` takes that
    floor (an fp8 cache's kernel dequantises it). A decode kernel moves its bytes at ``decode_rate`` of the memory
    ceiling for its KV format (and family): an fp8 cache read by a kernel that dequantises it is slower than its
    bytes say.
    """

    compute_efficiency: float = Field(default=1.0, gt=0, le=1.5)
    memory_efficiency: float = Field(default=1.0, gt=0, le=1.5)
    gqa_kv_reuse: float = Field(default=1.0, ge=0, le=1)
    decode_fixed_s: float = Field(
        default=0.0,
        ge=0,
        le=1e-3,
        description="seconds each decode attention call costs beyond its bytes, FLOPs "
        "and per-kernel launch cost (split-KV combine, scheduling prologue): the per-call floor",
    )
    prefill_fixed_s: float = Field(
        default=0.0, ge=0, le=1e-3, description="the same floor of each prefill (context) attention call"
    )
    decode_fixed_by_kv: dict[str, float] = Field(
        default_factory=dict,
        description="KV format -> the floor of a GQA decode call reading that cache where its kernel's differs "
        "from decode_fixed_s (an fp8 cache's dequantising kernel); decode_fixed_s where unset",
    )
    prefill_compute_efficiency: dict[int, Curve] = Field(
        default_factory=dict,
        description="head_dim -> fraction of the datasheet peak a causal flash-attention prefill reaches "
        "against the attended context (tokens); the nearest head_dim is used",
    )
    prefill_kv_rate: dict[str, float] = Field(
        default_factory=dict,
        description="KV format ('mla:' + format for MLA) -> its prefill kernel's rate vs the curve (1 if unset)",
    )
    mla_prefill_efficiency: Curve | None = Field(
        default=None, description="an MLA prefill kernel's fraction of the datasheet peak against the context"
    )
    mla_decode_fixed_s: float | None = Field(default=None, ge=0, le=1e-3, description="an MLA decode call's floor")
    decode_rate: dict[str, float] = Field(
        default_factory=dict,
        description="decode kernel (its KV format, 'mla:' + format for MLA) -> the fraction of the memory ceiling "
        "it moves its bytes at, beyond memory_efficiency (1 if unset)",
    )
    sources: tuple[str, ...] = ()

    def prefill_curve(self, head_dim: float) -> Curve | None:
        """The prefill curve of the head_dim nearest ``head_dim`` (ties to the larger), None when none is set."""
        if not self.prefill_compute_efficiency:
            return None
        key = min(self.prefill_compute_efficiency, key=lambda d: (abs(d - head_dim), -d))
        return self.prefill_compute_efficiency[key]

    def kernel_curve(self, op: Op) -> Curve | None:
        """The prefill curve of attention kernel ``op`` (:meth:`prefill_curve` of its head dim, an MLA kernel's own
        where measured); None for a decode kernel or where the profile has none."""
        if op.context_dependent:
            return None
        if op.mla and self.mla_prefill_efficiency is not None:
            return self.mla_prefill_efficiency
        return self.prefill_curve(float(np.max(op.k)))

    def prefill_rate(self, op: Op) -> float:
        """``prefill_kv_rate`` of prefill kernel ``op``'s KV format (``mla:`` + format for MLA); 1 where unset."""
        return self.prefill_kv_rate.get(f"{'mla:' if op.mla else ''}{op.kv_format}", 1.0) if op.kv_format else 1.0

    def memory_rate(self, op: Op) -> float:
        """Multiplier on the memory ceiling of attention kernel ``op``: ``memory_efficiency`` × the decode kernel's
        ``decode_rate`` for its KV format (and MLA family) where measured."""
        if not op.context_dependent or not self.decode_rate:
            return self.memory_efficiency
        fmt = "bf16" if op.kv_format in ("", "fp16") else op.kv_format  # a 16-bit cache streams alike
        key = f"{'mla:' if op.mla else ''}{fmt}"
        return self.memory_efficiency * self.decode_rate.get(key, 1.0)

    def floor_s(self, op: Op) -> float:
        """Per-call floor of attention kernel ``op``: ``decode_fixed_s`` (an MLA kernel's own where measured) for
        decode, ``prefill_fixed_s`` for prefill."""
        if not op.context_dependent:
            return self.prefill_fixed_s
        if op.mla:
            return self.mla_decode_fixed_s if self.mla_decode_fixed_s is not None else self.decode_fixed_s
        return self.decode_fixed_by_kv.get(op.kv_format, self.decode_fixed_s)
