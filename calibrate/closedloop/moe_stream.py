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
import io
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, final

from roofline.errors import CalibrationError, RooflineError

if TYPE_CHECKING:
    from torch import Generator

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
#: a row of a measurement table (:func:`gpu_main`)
R = TypeVar("R", bound=Mapping[str, object])


@final  # (final: ``"tokens" in row`` then tells a prefill row from a decode row)
class DecodeRow(TypedDict):
    """One decode case (or the copy reference) of :func:`measure`: times in s, rates in bytes/s."""

    layout: str
    batch: int
    half: str
    touched: int
    rows: int
    k: int
    n: int
    weight_bytes: int
    grouped_s: float
    dense_same_bytes_s: float
    grouped_bytes_per_s: float
    dense_bytes_per_s: float


@final
class PrefillRow(TypedDict):
    """One prefill case of :func:`measure_prefill`: times in s, rates in FLOP/s."""

    layout: str
    tokens: int
    half: str
    touched: int
    rows: int
    k: int
    n: int
    flops: float
    weight_bytes: int
    grouped_s: float
    dense_all_rows_s: float
    grouped_flops_per_s: float
    dense_flops_per_s: float


def route(torch: ModuleType, experts_here: int, total: int, top_k: int, tokens: int, gen: Generator) -> list[int]:
    """Rows per touched local expert when ``tokens`` tokens each pick ``top_k`` of ``total`` experts uniformly
    (the top k of uniform random scores) and this GPU holds the first ``experts_here``."""
    chosen = torch.rand(tokens, total, generator=gen).topk(top_k, dim=1).indices.flatten()
    counts = torch.bincount(chosen, minlength=total)[:experts_here].tolist()
    return [c for c in counts if c > 0]


# fn: Callable[...] as the callers' lambdas bind their tensors as default arguments; it is called as fn(i)
def graph_seconds(torch: ModuleType, fn: Callable[..., object], calls: int) -> float:
    """Median seconds per call of ``fn(i)``, ``calls`` calls replayed as one CUDA graph (calibration's timer)."""
    from calibrate.measure.records import Bench
    from calibrate.measure.timing import CudaTimer

    t = CudaTimer(torch).measure(Bench(fn, fixed_calls=calls))
    if t.method != "cuda_graph":
        raise CalibrationError(f"CUDA-graph capture failed, so the case was not timed as a graph ({t.note})")
    return t.median_s


def save_rows(rows: Sequence[Mapping[str, object]], path: str, force: bool = False) -> None:
    """Write ``rows`` as a CSV table through the project's output checks."""
    from roofline.boundary.outputs import check_output, write_output

    target = check_output(path, force=force, what="CSV table")
    buf = io.StringIO()
    w = csv.DictWriter(buf, list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    write_output(target, buf.getvalue())


def _layout_cases(torch: Any, sizes: Sequence[int], device: str, seed: int) -> Iterator[tuple[Any, ...]]:
    """(label, size, half, rows per touched expert, offsets, k, n) for every layout, routed size and layer half."""
    gen = torch.Generator().manual_seed(seed)
    for label, here, h, i, top_k, total in LAYOUTS:
        for size in sizes:
            m = route(torch, here, total, top_k, size, gen)
            if not m:
                continue
            offs = torch.tensor(m, dtype=torch.int32, device=device).cumsum(0).to(torch.int32)
            for half, (k, n) in (("gate_up", (h, 2 * i)), ("down", (i, h))):
                yield label, size, half, m, offs, k, n


def measure_prefill(device: str = "cuda:0", seed: int = 1) -> list[PrefillRow]:
    """Prefill-sized grouped GEMMs: FLOP rate of the grouped GEMM vs one dense GEMM with all the rows."""
    import torch

    bf16 = torch.bfloat16
    rows: list[PrefillRow] = []
    for label, tokens, half, m, offs, k, n in _layout_cases(torch, PREFILL_TOKENS, device, seed):
        rows_total = sum(m)
        flops = 2.0 * rows_total * k * n
        w = torch.randn(len(m), k, n, dtype=bf16, device=device) * 0.02
        x = torch.randn(rows_total, k, dtype=bf16, device=device)
        t = graph_seconds(torch, lambda j, w=w, x=x, o=offs: torch._grouped_mm(x, w, offs=o), calls=5)
        wd = torch.randn(k, n, dtype=bf16, device=device) * 0.02
        td = graph_seconds(torch, lambda j, wd=wd, x=x: x @ wd, calls=5)
        rows.append(
            {
                "layout": label,
                "tokens": tokens,
                "half": half,
                "touched": len(m),
                "rows": rows_total,
                "k": k,
                "n": n,
                "flops": flops,
                "weight_bytes": len(m) * k * n * 2,
                "grouped_s": t,
                "dense_all_rows_s": td,
                "grouped_flops_per_s": flops / t,
                "dense_flops_per_s": flops / td,
            }
        )
        del w, wd, x
        torch.cuda.empty_cache()
    return rows


def measure(device: str = "cuda:0", seed: int = 0) -> list[DecodeRow]:
    """One row per (layout, batch, half) and the streaming references; see the module docstring."""
    import torch

    bf16 = torch.bfloat16
    rows: list[DecodeRow] = []
    for label, batch, half, m, offs, k, n in _layout_cases(torch, BATCHES, device, seed):
        rows_total = sum(m)
        wbytes = len(m) * k * n * 2
        copies = max(1, int(2 * L2_BYTES // wbytes) + 1)
        ws = [torch.randn(len(m), k, n, dtype=bf16, device=device) * 0.02 for _ in range(copies)]
        x = torch.randn(rows_total, k, dtype=bf16, device=device)
        t = graph_seconds(torch, lambda j, ws=ws, x=x, o=offs: torch._grouped_mm(x, ws[j % len(ws)], offs=o), 20)
        # reference: one bf16 GEMV-shaped mm streaming the same weight bytes
        wref = [torch.randn(len(m) * n, k, dtype=bf16, device=device) * 0.02 for _ in range(copies)]
        xr = torch.randn(max(1, min(rows_total, 16)), k, dtype=bf16, device=device)
        tr = graph_seconds(torch, lambda j, wref=wref, xr=xr: xr @ wref[j % len(wref)].t(), 20)
        rows.append(
            {
                "layout": label,
                "batch": batch,
                "half": half,
                "touched": len(m),
                "rows": rows_total,
                "k": k,
                "n": n,
                "weight_bytes": wbytes,
                "grouped_s": t,
                "dense_same_bytes_s": tr,
                "grouped_bytes_per_s": wbytes / t,
                "dense_bytes_per_s": wbytes / tr,
            }
        )
        del ws, wref
        torch.cuda.empty_cache()
    src = torch.empty(1 << 28, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    tc = graph_seconds(torch, lambda j: dst.copy_(src), 20)
    rows.append(
        {
            "layout": "copy 256 MiB",
            "batch": 0,
            "half": "copy",
            "touched": 0,
            "rows": 0,
            "k": 0,
            "n": 0,
            "weight_bytes": 2 * src.numel(),
            "grouped_s": tc,
            "dense_same_bytes_s": tc,
            "grouped_bytes_per_s": 2 * src.numel() / tc,
            "dense_bytes_per_s": 2 * src.numel() / tc,
        }
    )
    return rows


def gpu_main(
    prog: str,
    doc: str,
    run: Callable[[str, bool], Sequence[R]],
    line: Callable[[R], str],
    argv: Sequence[str] | None,
    flag: tuple[str, str] | None = None,
) -> int:
    """Command line shared by the GPU measurement scripts: run, save the CSV, print one line per row.

    ``flag`` (name, help) adds one boolean option passed to ``run`` as its second argument.
    Errors (no CUDA device, an output that exists, a failed capture) print one line and exit 2.
    """
    ap = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--force", action="store_true", help="replace an existing output file")
    if flag is not None:
        ap.add_argument(flag[0], action="store_true", help=flag[1])
    a = ap.parse_args(argv)
    try:
        import torch

        if not torch.cuda.is_available():
            raise CalibrationError(f"{prog} times CUDA kernels and this torch sees no CUDA device; run it on a GPU")
        from roofline.boundary.outputs import check_output

        check_output(a.output, force=a.force, what="CSV table")  # before the work
        rows = run(a.device, bool(getattr(a, flag[0].lstrip("-").replace("-", "_"))) if flag else False)
        save_rows(rows, a.output, force=a.force)
    except RooflineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    for r in rows:
        print(line(r))
    return 0


def _line(r: DecodeRow | PrefillRow) -> str:
    if "tokens" in r:
        return (
            f"{r['layout']:20s} T={r['tokens']:6d} {r['half']:8s} experts {r['touched']:3d} rows {r['rows']:6d} "
            f"grouped {r['grouped_flops_per_s'] / 1e12:6.1f} TFLOP/s dense {r['dense_flops_per_s'] / 1e12:6.1f}"
        )
    return (
        f"{r['layout']:20s} B={r['batch']:4d} {r['half']:8s} experts {r['touched']:3d} rows {r['rows']:5d} "
        f"{r['weight_bytes'] / 1e6:8.1f} MB grouped {r['grouped_bytes_per_s'] / 1e12:5.2f} TB/s "
        f"dense {r['dense_bytes_per_s'] / 1e12:5.2f} TB/s"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m calibrate.closedloop.moe_stream [--prefill] -o FILE.csv``."""

    def run(device: str, prefill: bool) -> Sequence[DecodeRow | PrefillRow]:
        return measure_prefill(device) if prefill else measure(device)

    flag = ("--prefill", "prefill-sized grouped GEMMs (FLOP rates) instead")
    return gpu_main("python -m calibrate.closedloop.moe_stream", __doc__ or "", run, _line, argv, flag)


if __name__ == "__main__":
    sys.exit(main())
