"""Attention suite: ``scaled_dot_product_attention`` in prefill (causal) and decode (one query).

With B sequences, H query heads, H_kv KV heads (GQA through ``enable_gqa``), head dim d,
and the counting of ``roofline.ops.attention.attention_kernel`` (flash-style: scores never
reach memory; a and kv are bytes per element):

* prefill of S tokens: FLOPs = 4·d·H·B·S(S+1)/2;  bytes = B·S·H·2d·a + B·S·2·H_kv·d·kv
* decode at context L: FLOPs = 4·d·H·B·L;         bytes = B·H·2d·a + B·L·2·H_kv·d·kv

``kv_bytes`` (the K/V part, read once) and ``q_per_kv`` = H / H_kv are recorded so the fit
can tell how often the kernel really reads K/V per GQA group (``attention.gqa_kv_reuse``);
decode is therefore measured both with the model's GQA and without it (H_kv = H).
Decode KV caches rotate over pool views so each call streams its cache from memory.
"""

from __future__ import annotations

from collections.abc import Iterator

from calibrate.measure.context import AttnShape, SuiteContext
from calibrate.measure.records import Bench, Case

PREFILL_GPU: tuple[int, ...] = (1024, 2048, 4096, 8192)
PREFILL_GPU_QUICK: tuple[int, ...] = (1024, 4096)
PREFILL_CPU: tuple[int, ...] = (256, 512, 1024)
PREFILL_CPU_QUICK: tuple[int, ...] = (256, 512)
DECODE_GPU: tuple[int, ...] = (1024, 4096, 16384)
DECODE_GPU_QUICK: tuple[int, ...] = (1024, 16384)
DECODE_CPU: tuple[int, ...] = (512, 2048, 8192)
DECODE_CPU_QUICK: tuple[int, ...] = (1024, 8192)


def _prefill(ctx: SuiteContext, s: int) -> Case:
    a = ctx.attn
    dtype = ctx.act_dtype
    tdt = ctx.torch_dtype(dtype)
    e = ctx.torch.empty((), dtype=tdt).element_size()
    b = 1
    flops = 4 * a.head_dim * a.heads * b * s * (s + 1) // 2
    nbytes = b * s * a.heads * 2 * a.head_dim * e + b * s * 2 * a.kv_heads * a.head_dim * e
    params = {
        "kind": "prefill",
        "dtype": dtype,
        "batch": b,
        "seq": s,
        "heads": a.heads,
        "kv_heads": a.kv_heads,
        "head_dim": a.head_dim,
        "flops": flops,
        "bytes": nbytes,
        "kernels": 1,
        "kv_bytes": b * s * 2 * a.kv_heads * a.head_dim * e,
        "q_per_kv": a.heads / a.kv_heads,
    }

    def build() -> Bench:
        torch = ctx.torch
        q = torch.randn((b, a.heads, s, a.head_dim), device=ctx.device).to(tdt)
        k = torch.randn((b, a.kv_heads, s, a.head_dim), device=ctx.device).to(tdt)
        v = torch.randn((b, a.kv_heads, s, a.head_dim), device=ctx.device).to(tdt)
        sdpa = torch.nn.functional.scaled_dot_product_attention
        gqa = a.heads != a.kv_heads
        return Bench(lambda i: sdpa(q, k, v, is_causal=True, enable_gqa=gqa))

    key = f"attention/prefill/{dtype}/h{a.heads}_kv{a.kv_heads}_d{a.head_dim}/s{s}"
    return Case("attention", key, params, build, rate_key=f"attn_flops:{dtype}")


def _decode(ctx: SuiteContext, ctxlen: int, b: int, mha: bool = False) -> Case:
    a = AttnShape(ctx.attn.heads, ctx.attn.heads, ctx.attn.head_dim) if mha else ctx.attn
    dtype = ctx.act_dtype
    tdt = ctx.torch_dtype(dtype)
    e = ctx.torch.empty((), dtype=tdt).element_size()
    kv_bytes = b * a.kv_heads * ctxlen * a.head_dim * e  # one of K or V
    views = ctx.pool.views_needed(kv_bytes, sets=2, max_views=256)
    flops = 4 * a.head_dim * a.heads * b * ctxlen
    nbytes = b * a.heads * 2 * a.head_dim * e + 2 * kv_bytes
    params = {
        "kind": "decode",
        "dtype": dtype,
        "batch": b,
        "context": ctxlen,
        "heads": a.heads,
        "kv_heads": a.kv_heads,
        "head_dim": a.head_dim,
        "flops": flops,
        "bytes": nbytes,
        "kernels": 1,
        "views": views,
        "dram": ctx.pool.is_dram(kv_bytes, views, sets=2),
        "kv_bytes": 2 * kv_bytes,
        "q_per_kv": a.heads / a.kv_heads,
    }

    def build() -> Bench:
        torch = ctx.torch
        shape = (b, a.kv_heads, ctxlen, a.head_dim)
        kv = ctx.pool.views(shape, tdt, 2 * views)
        ks, vs = kv[0::2], kv[1::2]
        n = len(vs)
        q = torch.randn((b, a.heads, 1, a.head_dim), device=ctx.device).to(tdt)
        sdpa = torch.nn.functional.scaled_dot_product_attention
        gqa = a.heads != a.kv_heads
        return Bench(lambda i: sdpa(q, ks[i % n], vs[i % n], enable_gqa=gqa), min_calls=n if ctx.is_cuda else 1)

    key = f"attention/decode/{dtype}/h{a.heads}_kv{a.kv_heads}_d{a.head_dim}/b{b}/ctx{ctxlen}"
    return Case("attention", key, params, build, rate_key="bytes")


def cases(ctx: SuiteContext) -> Iterator[Case]:
    """Prefill and decode cases, alternating so a short budget gets both."""
    if ctx.is_cuda:
        pre = PREFILL_GPU_QUICK if ctx.quick else PREFILL_GPU
        dec = DECODE_GPU_QUICK if ctx.quick else DECODE_GPU
        batch = 8
    else:
        pre = PREFILL_CPU_QUICK if ctx.quick else PREFILL_CPU
        dec = DECODE_CPU_QUICK if ctx.quick else DECODE_CPU
        batch = 1
    gqa = ctx.attn.heads != ctx.attn.kv_heads
    for i in range(max(len(pre), len(dec))):
        if i < len(pre):
            yield _prefill(ctx, pre[i])
        if i < len(dec):
            yield _decode(ctx, dec[-1 - i], batch)
            if gqa and i < 2:  # the same contexts without GQA identify the K/V reuse
                yield _decode(ctx, dec[-1 - i], batch, mha=True)
