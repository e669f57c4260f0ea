"""GEMM suite: y = x · Wᵀ for every supported dtype over M = 1, 2, 4, … and the (N, K) shapes.

Work of one call: FLOPs = 2·M·N·K; bytes moved = M·K·a + N·K·w + M·N·o, with a, w and o
the bytes per element of activations, weights and output (fp8 → bf16 out, int8 → int32 out).
Weights rotate over pool views so small-M GEMMs stream them from memory as in decode.
fp8 uses ``torch._scaled_mm`` (per-tensor scales), int8 ``torch._int_mm``; fp32 runs with
TF32 off, tf32 with it on. Cases are ordered coarse-to-fine in M so a short budget still
spans the whole range.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from calibrate.measure.context import SuiteContext, coarse_to_fine
from calibrate.measure.records import Bench, Case, Skip

M_FULL = tuple(2**i for i in range(14))  # 1 … 8192
M_CPU = tuple(2**i for i in range(13))  # 1 … 4096
M_QUICK = (1, 4, 16, 64, 256, 1024, 4096)
OUT_BYTES = {"fp8": 2, "int8": 4}


def _tf32(torch: Any, on: bool) -> Callable[[], contextlib.AbstractContextManager[None]]:
    @contextlib.contextmanager
    def ctx() -> Iterator[None]:
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = on
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old

    return ctx


def unsupported_reason(ctx: SuiteContext, dtype: str) -> str | None:
    """Why ``dtype`` GEMMs cannot run on this device, or None (a failing probe also counts)."""
    torch = ctx.torch
    if dtype == "tf32" and not ctx.is_cuda:
        return "tf32 is an NVIDIA tensor-core mode; a CPU has no TF32 GEMM"
    if dtype == "tf32" and ctx.capability is not None and ctx.capability < (8, 0):
        return f"tf32 needs compute capability ≥ 8.0; this device is {ctx.capability}"
    if dtype == "fp8":
        if ctx.torch_dtype("fp8") is None or not hasattr(torch, "_scaled_mm"):
            return f"this torch ({torch.__version__}) has no float8 GEMM (torch._scaled_mm)"
        if ctx.is_cuda and ctx.capability is not None and ctx.capability < (8, 9) and not torch.version.hip:
            return f"fp8 GEMM needs compute capability ≥ 8.9 (Ada/Hopper or newer); this device is {ctx.capability}"
    if dtype == "int8" and not hasattr(torch, "_int_mm"):
        return f"this torch ({torch.__version__}) has no int8 GEMM (torch._int_mm)"
    try:
        fn, _ = _make_fn(ctx, dtype, [_weights(ctx, dtype, 32, 32)], _act(ctx, dtype, 32, 32), 32)
        fn(0)
        if ctx.is_cuda:
            torch.cuda.synchronize()
    except (RuntimeError, TypeError, ValueError) as exc:
        return f"{dtype} GEMM probe failed: {str(exc).splitlines()[0][:160]}"
    return None


def _weights(ctx: SuiteContext, dtype: str, n: int, k: int) -> Any:
    return ctx.torch.ones((n, k), device=ctx.device).to(ctx.torch_dtype(dtype))


def _act(ctx: SuiteContext, dtype: str, m: int, k: int) -> Any:
    return ctx.torch.ones((m, k), device=ctx.device).to(ctx.torch_dtype(dtype))


def _make_fn(ctx: SuiteContext, dtype: str, ws: list[Any], x: Any, n: int) -> tuple[Callable[[int], Any], str]:
    """(call i, note): the GEMM of x with weights ws[i mod len(ws)] transposed."""
    torch = ctx.torch
    nw = len(ws)
    if dtype == "fp8":
        one = torch.ones((), dtype=torch.float32, device=ctx.device)
        return (lambda i: torch._scaled_mm(x, ws[i % nw].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)), ""
    if dtype == "int8":
        return (lambda i: torch._int_mm(x, ws[i % nw].t())), ""
    out = torch.empty((x.shape[0], n), dtype=x.dtype, device=ctx.device)
    return (lambda i: torch.mm(x, ws[i % nw].t(), out=out)), ""


def _case(ctx: SuiteContext, dtype: str, m: int, n: int, k: int) -> Case:
    tdt = ctx.torch_dtype(dtype)
    elem = ctx.torch.empty((), dtype=tdt).element_size()
    w_bytes = n * k * elem
    nbytes = m * k * elem + w_bytes + m * n * OUT_BYTES.get(dtype, elem)
    views = ctx.pool.views_needed(w_bytes)
    params = {
        "dtype": dtype,
        "m": m,
        "n": n,
        "k": k,
        "flops": 2 * m * n * k,
        "bytes": nbytes,
        "kernels": 1,
        "views": views,
        "dram": ctx.pool.is_dram(w_bytes, views),
    }

    def build() -> Bench:
        if dtype == "int8" and ctx.is_cuda and m <= 16:
            raise Skip("torch._int_mm on CUDA needs M > 16")
        ws = ctx.pool.views((n, k), tdt, views)
        fn, note = _make_fn(ctx, dtype, ws, _act(ctx, dtype, m, k), n)
        tf = _tf32(ctx.torch, dtype == "tf32") if ctx.is_cuda else contextlib.nullcontext
        return Bench(fn, min_calls=len(ws) if ctx.is_cuda else 1, context=tf, note=note)

    return Case(
        "gemm", f"gemm/{dtype}/n{n}_k{k}/m{m}", params, build, alloc_bytes=m * (k + n) * 4, rate_key=f"flops:{dtype}"
    )


def _unsupported_case(dtype: str, reason: str) -> Case:
    def build() -> Bench:
        raise Skip(reason)

    return Case("gemm", f"gemm/{dtype}/unsupported", {"dtype": dtype}, build)


def cases(ctx: SuiteContext) -> Iterator[Case]:
    """GEMM cases: every dtype and shape at each M, M ordered coarse-to-fine."""
    ms = M_QUICK if ctx.quick else (M_FULL if ctx.is_cuda else M_CPU)
    dtypes = []
    for dtype in ctx.dtypes:
        reason = unsupported_reason(ctx, dtype)
        if reason:
            yield _unsupported_case(dtype, reason)
        else:
            dtypes.append(dtype)
    for m in coarse_to_fine(list(ms)):
        for dtype in dtypes:
            for n, k in ctx.shapes:
                yield _case(ctx, dtype, m, n, k)
