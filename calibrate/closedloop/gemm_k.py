"""Time large-M GEMMs against their inner dimension K, in CUDA graphs: how much a short K costs.

Tensor parallelism shortens K of the row-parallel GEMMs (attention output, FFN down, MoE down: K =
width / tp), and a GEMM with a short K spends a larger share of each output tile on its prologue and
epilogue. For M in ``MS``, N in ``NS`` and K in ``KS`` this times ``x @ w`` (bf16, and fp8 through
``torch._scaled_mm`` where the device has it) replayed in a CUDA graph and writes the FLOP rate, so
the rate at each K can be set against the rate at the largest K of the same (M, N).

Run on a GPU: ``python -m calibrate.closedloop.gemm_k -o gemm_k.csv`` (well under a minute).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TypedDict

from calibrate.closedloop.moe_stream import gpu_main, graph_seconds

MS = (2048, 8192, 32768)
NS = (4096, 7168)
KS = (128, 256, 384, 512, 1024, 2048, 4096, 8192)


class GemmKRow(TypedDict):
    """One (dtype, M, N, K) case: seconds per GEMM and FLOP rate."""

    dtype: str
    m: int
    n: int
    k: int
    seconds: float
    flops_per_s: float


def measure(device: str = "cuda:0") -> list[GemmKRow]:
    """One row per (dtype, M, N, K): seconds per GEMM and FLOP rate."""
    import torch

    rows: list[GemmKRow] = []
    fp8 = getattr(torch, "float8_e4m3fn", None)
    for dtype in ("bf16", "fp8"):
        if dtype == "fp8" and (fp8 is None or torch.cuda.get_device_capability(device) < (8, 9)):
            continue
        for m in MS:
            for n in NS:
                for k in KS:
                    x = torch.randn(m, k, device=device, dtype=torch.bfloat16)
                    w = torch.randn(n, k, device=device, dtype=torch.bfloat16) * 0.02
                    if dtype == "bf16":
                        t = graph_seconds(torch, lambda j, x=x, w=w: x @ w.t(), calls=10)
                    else:
                        xq, wq = x.to(fp8), w.to(fp8)
                        one = torch.ones((), device=device, dtype=torch.float32)
                        t = graph_seconds(
                            torch,
                            lambda j, xq=xq, wq=wq, one=one: torch._scaled_mm(
                                xq, wq.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16
                            ),
                            calls=10,
                        )
                    flops = 2.0 * m * n * k
                    rows.append({"dtype": dtype, "m": m, "n": n, "k": k, "seconds": t, "flops_per_s": flops / t})
                    del x, w
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m calibrate.closedloop.gemm_k -o FILE.csv``."""

    def line(r: GemmKRow) -> str:
        return f"{r['dtype']:5s} M={r['m']:6d} N={r['n']:5d} K={r['k']:5d} {r['flops_per_s'] / 1e12:7.1f} TFLOP/s"

    return gpu_main("python -m calibrate.closedloop.gemm_k", __doc__ or "", lambda d, _: measure(d), line, argv)


if __name__ == "__main__":
    sys.exit(main())
