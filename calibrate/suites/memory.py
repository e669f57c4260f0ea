"""Memory-bandwidth suite: copy, read-only reduction and GEMV over transfer sizes.

Bytes moved per call (what the evaluator's memory term divides by the bandwidth):

* copy      ``dst.copy_(src)`` of S bytes: 2·S (read + write);
* read      a reduction of S bytes to a scalar: S bytes. On a GPU ``torch.sum``; on a CPU
            ``torch.dot(src, src)`` (BLAS), because torch's single-thread float sum is a
            cascade summation limited by arithmetic, not memory (≈ 0.5× the dot's rate here);
* GEMV      y = x·Wᵀ with x of 1×K and W of N×K (``torch.mm``, as ``nn.Linear`` runs a
            decode step): N·K·w + K·a + N·a bytes (weights dominate).

Every case rotates over pool views whose total exceeds twice the last-level cache when
the pool allows, so no call re-reads cached data; those cases are marked ``dram`` and
only they set the bandwidth ceiling. Smaller, overhead-bound sizes shape the
transfer-size curve.
"""

from __future__ import annotations

from collections.abc import Iterator

from calibrate.measure.context import SuiteContext, coarse_to_fine
from calibrate.measure.records import Bench, Case

MIN_SIZE = 4096
GEMV_K = 4096


def sizes(ctx: SuiteContext) -> list[int]:
    """Buffer sizes S: 4 KiB × 4^i up to the largest a copy (two buffers) fits in the pool;
    quick runs take every other size, always keeping the largest."""
    top = ctx.pool.nbytes // 2
    out = []
    s = MIN_SIZE
    while s <= top:
        out.append(s)
        s *= 4
    if ctx.quick:
        out = out[::-2][::-1]
    return out


def _copy(ctx: SuiteContext, size: int) -> Case:
    views = ctx.pool.views_needed(size, sets=2)
    n = size // 4
    params = {
        "kind": "copy",
        "dtype": "fp32",
        "size": size,
        "bytes": 2 * size,
        "flops": 0,
        "kernels": 1,
        "views": views,
        "dram": ctx.pool.is_dram(size, views, sets=2),
    }

    def build() -> Bench:
        vs = ctx.pool.views((n,), ctx.torch.float32, 2 * views)
        src, dst = vs[0::2], vs[1::2]
        k = len(dst)
        return Bench(lambda i: dst[i % k].copy_(src[i % k]), min_calls=k)

    return Case("memory", f"memory/copy/{size}", params, build, rate_key="bytes")


def _read(ctx: SuiteContext, size: int) -> Case:
    views = ctx.pool.views_needed(size)
    n = size // 4
    params = {
        "kind": "read",
        "dtype": "fp32",
        "size": size,
        "bytes": size,
        "flops": n if ctx.is_cuda else 2 * n,  # sum: one add per element; dot: multiply + add
        "kernels": 1,
        "views": views,
        "dram": ctx.pool.is_dram(size, views),
    }

    def build() -> Bench:
        torch = ctx.torch
        vs = ctx.pool.views((n,), torch.float32, views)
        out = torch.empty((), dtype=torch.float32, device=ctx.device)
        k = len(vs)
        if ctx.is_cuda:
            return Bench(lambda i: torch.sum(vs[i % k], dim=0, out=out), min_calls=k)
        return Bench(lambda i: torch.dot(vs[i % k], vs[i % k], out=out))  # read-only: no warm visit

    return Case("memory", f"memory/read/{size}", params, build, rate_key="bytes")


def _gemv(ctx: SuiteContext, size: int) -> Case:
    dtype = ctx.act_dtype
    tdt = ctx.torch_dtype(dtype)
    elem = ctx.torch.empty((), dtype=tdt).element_size()
    numel = size // elem
    kdim = min(GEMV_K, numel)
    ndim = numel // kdim
    views = ctx.pool.views_needed(size)
    nbytes = ndim * kdim * elem + (kdim + ndim) * elem
    params = {
        "kind": "gemv",
        "dtype": dtype,
        "size": size,
        "m": 1,
        "n": ndim,
        "k": kdim,
        "bytes": nbytes,
        "flops": 2 * ndim * kdim,
        "kernels": 1,
        "views": views,
        "dram": ctx.pool.is_dram(size, views),
    }

    def build() -> Bench:
        torch = ctx.torch
        ws = ctx.pool.views((ndim, kdim), tdt, views)
        x = torch.ones((1, kdim), dtype=tdt, device=ctx.device)
        y = torch.empty((1, ndim), dtype=tdt, device=ctx.device)
        k = len(ws)
        return Bench(lambda i: torch.mm(x, ws[i % k].t(), out=y), min_calls=k if ctx.is_cuda else 1)

    return Case("memory", f"memory/gemv/{dtype}/{size}", params, build, rate_key="bytes")


def cases(ctx: SuiteContext) -> Iterator[Case]:
    """Largest size first (it sets the ceiling), then coarse-to-fine over the rest."""
    for size in coarse_to_fine(sorted(sizes(ctx), reverse=True)):
        yield _copy(ctx, size)
        yield _read(ctx, size)
        yield _gemv(ctx, size)
