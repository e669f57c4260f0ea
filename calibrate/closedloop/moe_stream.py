"""Time MoE expert GEMMs of decode steps as one grouped GEMM per layer half, in CUDA graphs.

For a per-GPU expert layout (experts on this GPU, hidden size, expert width after tensor-parallel
sharding, top-k) and a decode batch B, the B·top_k routed rows fall on uniformly drawn experts
(as :func:`roofline.ops.ffn.expected_distinct_experts` assumes); only touched experts run. Each
case times ``torch._grouped_mm`` (CUTLASS grouped GEMM on Hopper/Blackwell) for gate_up
(h → 2·i) and down (i → h) over the touched experts, replayed in a CUDA graph with weights
rotated over copies that exceed twice the L2, and records the weight bytes streamed. The
effective bandwidth against the streaming ceiling of the same run (a bf16 GEMV of equal bytes, and
a plain copy) says how far grouped expert GEMMs at a few rows per expert fall below it.

Run on a GPU: ``python -m calibrate.closedloop.moe_stream -o moe_stream.csv`` (about a minute).
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Sequence
from typing import Any

#: (label, experts on this GPU, hidden, expert width per GPU, top_k, total experts) — decode layouts of
#: the public serving rows: DeepSeek-V3 tp 8 (experts tp-sharded), Qwen3-235B ep 4, gpt-oss-120b tp 1,
#: MiniMax-M2.5 tp 4, Qwen3-30B-A3B tp 1.
LAYOUTS: tuple[tuple[str, int, int, int, int, int], ...] = (
    ("deepseek-v3 tp8", 256, 7168, 256, 8, 256),
    ("qwen3-235b ep4", 32, 4096, 1536, 8, 128),
    ("gpt-oss-120b tp1", 128, 2880, 2880, 4, 128),
    ("minimax-m2.5 tp4", 256, 3072, 384, 8, 256),
    ("qwen3-30b-a3b tp1", 128, 2048, 768, 8, 128),
)
BATCHES = (1, 8, 32, 128)
#: prefill: tokens routed in one step (a chunk of one prompt or several); the rows per expert reach
#: tens to hundreds, where the grouped GEMM's compute rate, not its streaming, sets the time
PREFILL_TOKENS = (1024, 4096, 16384)
L2_BYTES = 60e6


def _touched(torch: Any, experts_here: int, total: int, top_k: int, batch: int, gen: Any) -> list[int]:
    """Rows per touched local expert for ``batch`` tokens routed top_k of ``total`` uniformly."""
    counts = [0] * experts_here
    for _ in range(batch):
        chosen = torch.randperm(total, generator=gen)[:top_k].tolist()
        for e in chosen:
            if e < experts_here:
                counts[e] += 1
    return [c for c in counts if c > 0]


def _time_graph(torch: Any, fn: Any, calls: int = 20, rounds: int = 5) -> float:
    """Median seconds per call of ``fn(i)`` replayed ``calls`` times in one CUDA graph."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(3):
            fn(i)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(calls):
            fn(i)
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / 1e3 / calls)
    return sorted(times)[len(times) // 2]


def _touched_many(torch: Any, experts_here: int, total: int, top_k: int, tokens: int, gen: Any) -> list[int]:
    """Rows per touched local expert for ``tokens`` tokens (vectorised for prefill-sized counts)."""
    scores = torch.rand(tokens, total, generator=gen)
    chosen = scores.topk(top_k, dim=1).indices.flatten()
    counts = torch.bincount(chosen, minlength=total)[:experts_here].tolist()
    return [c for c in counts if c > 0]


def measure_prefill(device: str = "cuda:0", seed: int = 1) -> list[dict[str, Any]]:
    """Prefill-sized grouped GEMMs: FLOP rate of the grouped GEMM vs one dense GEMM with all the rows."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    bf16 = torch.bfloat16
    rows: list[dict[str, Any]] = []
    for label, here, h, i, top_k, total in LAYOUTS:
        for tokens in PREFILL_TOKENS:
            m = _touched_many(torch, here, total, top_k, tokens, gen)
            offs = torch.tensor(m, dtype=torch.int32, device=device).cumsum(0).to(torch.int32)
            rows_total = sum(m)
            for half, (k, n) in (("gate_up", (h, 2 * i)), ("down", (i, h))):
                flops = 2.0 * rows_total * k * n
                w = torch.randn(len(m), k, n, dtype=bf16, device=device) * 0.02
                x = torch.randn(rows_total, k, dtype=bf16, device=device)
                t = _time_graph(torch, lambda j, w=w, x=x, o=offs: torch._grouped_mm(x, w, offs=o), calls=5)
                wd = torch.randn(k, n, dtype=bf16, device=device) * 0.02
                td = _time_graph(torch, lambda j, wd=wd, x=x: x @ wd, calls=5)
                rows.append({"layout": label, "tokens": tokens, "half": half, "touched": len(m), "rows": rows_total,
                             "k": k, "n": n, "flops": flops, "weight_bytes": len(m) * k * n * 2, "grouped_s": t,
                             "dense_all_rows_s": td, "grouped_flops_per_s": flops / t,
                             "dense_flops_per_s": flops / td})  # fmt: skip
                del w, wd, x
                torch.cuda.empty_cache()
    return rows


def measure(device: str = "cuda:0", seed: int = 0) -> list[dict[str, Any]]:
    """One row per (layout, batch, half) and the streaming references; see the module docstring."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    bf16 = torch.bfloat16
    rows: list[dict[str, Any]] = []
    for label, here, h, i, top_k, total in LAYOUTS:
        for batch in BATCHES:
            m = _touched(torch, here, total, top_k, batch, gen)
            if not m:
                continue
            offs = torch.tensor(m, dtype=torch.int32, device=device).cumsum(0).to(torch.int32)
            rows_total = sum(m)
            for half, (k, n) in (("gate_up", (h, 2 * i)), ("down", (i, h))):
                wbytes = len(m) * k * n * 2
                copies = max(1, int(2 * L2_BYTES // wbytes) + 1)
                ws = [torch.randn(len(m), k, n, dtype=bf16, device=device) * 0.02 for _ in range(copies)]
                x = torch.randn(rows_total, k, dtype=bf16, device=device)
                t = _time_graph(
                    torch, lambda j, ws=ws, x=x, offs=offs: torch._grouped_mm(x, ws[j % len(ws)], offs=offs)
                )
                # reference: one bf16 GEMV-shaped mm streaming the same weight bytes
                wref = [torch.randn(len(m) * n, k, dtype=bf16, device=device) * 0.02 for _ in range(copies)]
                xr = torch.randn(max(1, min(rows_total, 16)), k, dtype=bf16, device=device)
                tr = _time_graph(torch, lambda j, wref=wref, xr=xr: xr @ wref[j % len(wref)].t())
                rows.append({"layout": label, "batch": batch, "half": half, "touched": len(m), "rows": rows_total,
                             "k": k, "n": n, "weight_bytes": wbytes, "grouped_s": t, "dense_same_bytes_s": tr,
                             "grouped_bytes_per_s": wbytes / t, "dense_bytes_per_s": wbytes / tr})  # fmt: skip
                del ws, wref
                torch.cuda.empty_cache()
    src = torch.empty(1 << 28, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    tc = _time_graph(torch, lambda j: dst.copy_(src))
    rows.append({"layout": "copy 256 MiB", "batch": 0, "half": "copy", "touched": 0, "rows": 0, "k": 0, "n": 0,
                 "weight_bytes": 2 * src.numel(), "grouped_s": tc, "dense_same_bytes_s": tc,
                 "grouped_bytes_per_s": 2 * src.numel() / tc, "dense_bytes_per_s": 2 * src.numel() / tc})  # fmt: skip
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m calibrate.closedloop.moe_stream", description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--prefill", action="store_true", help="prefill-sized grouped GEMMs (FLOP rates) instead")
    a = ap.parse_args(argv)
    if a.prefill:
        rows = measure_prefill(a.device)
        with open(a.output, "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        for r in rows:
            print(
                f"{r['layout']:20s} T={r['tokens']:6d} {r['half']:8s} experts {r['touched']:3d} rows {r['rows']:6d} "
                f"grouped {r['grouped_flops_per_s'] / 1e12:6.1f} TFLOP/s dense {r['dense_flops_per_s'] / 1e12:6.1f}"
            )
        return 0
    rows = measure(a.device)
    with open(a.output, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    for r in rows:
        print(f"{r['layout']:20s} B={r['batch']:4d} {r['half']:8s} experts {r['touched']:3d} rows {r['rows']:5d} "
              f"{r['weight_bytes'] / 1e6:8.1f} MB grouped {r['grouped_bytes_per_s'] / 1e12:5.2f} TB/s "
              f"dense {r['dense_bytes_per_s'] / 1e12:5.2f} TB/s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
