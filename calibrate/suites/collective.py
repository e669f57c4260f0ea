"""Collectives suite: all-reduce and all-gather over torch.distributed (NCCL on GPU, gloo on CPU).

Runs only when started under ``torchrun`` with WORLD_SIZE > 1; otherwise it records one
skipped case with the reason. For p ranks and a message (result) of S bytes, the wire
bytes each rank sends per direction (ring algorithms, as ``roofline.ops.comm`` counts):

* all-reduce: 2(p − 1)/p · S;     * all-gather: (p − 1)/p · S.

Every rank must issue the same calls, so the calls per round are fixed from the size
(never from a local timing), and rank 0 decides for all whether a case runs.
"""

from __future__ import annotations

from collections.abc import Iterator

from calibrate.measure.context import SuiteContext
from calibrate.measure.records import Bench, Case, Skip

MIN_MSG = 4096
MAX_MSG_GPU, MAX_MSG_CPU = 256 * 2**20, 16 * 2**20
CALL_BYTES = 64 * 2**20  # calls per round = clamp(CALL_BYTES / S, 2, 50)


def not_distributed_case(world_size: int) -> Case:
    """The single skipped case of a run without torchrun."""
    reason = (
        f"not started under torchrun with several processes (WORLD_SIZE={world_size}); "
        "run `torchrun --nproc_per_node N -m calibrate ...` to measure all-reduce and all-gather"
    )

    def build() -> Bench:
        raise Skip(reason)

    return Case("collective", f"collective/ws{world_size}/skipped", {"kind": "skipped"}, build)


def _case(ctx: SuiteContext, kind: str, msg: int) -> Case:
    import torch.distributed as dist

    torch = ctx.torch
    p = ctx.world.size
    dtype = ctx.act_dtype
    tdt = ctx.torch_dtype(dtype)
    e = torch.empty((), dtype=tdt).element_size()
    wire = (2 if kind == "all_reduce" else 1) * (p - 1) / p * msg
    calls = max(2, min(50, CALL_BYTES // msg))
    params = {
        "kind": kind,
        "dtype": dtype,
        "world": p,
        "message_bytes": msg,
        "bytes": msg,
        "wire_bytes": wire,
        "flops": 0,
        "kernels": 1,
    }

    def build() -> Bench:
        if kind == "all_reduce":
            buf = torch.ones(msg // e, dtype=tdt, device=ctx.device)
            return Bench(lambda i: dist.all_reduce(buf), capturable=False, fixed_calls=calls)
        inp = torch.ones(msg // e // p, dtype=tdt, device=ctx.device)
        out = torch.empty(inp.numel() * p, dtype=tdt, device=ctx.device)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor  # renamed in torch 2.13
        return Bench(lambda i: gather(out, inp), capturable=False, fixed_calls=calls)

    return Case("collective", f"collective/{kind}/{dtype}/ws{p}/{msg}", params, build, rate_key="comm")


def cases(ctx: SuiteContext) -> Iterator[Case]:
    """All-reduce and all-gather from 4 KiB to 256 MiB (GPU) or 16 MiB (CPU), ×4 steps (×16 quick)."""
    if ctx.world.size <= 1:
        yield not_distributed_case(ctx.world.size)
        return
    top = MAX_MSG_GPU if ctx.is_cuda else MAX_MSG_CPU
    step = 16 if ctx.quick else 4
    msg = MIN_MSG
    while msg <= top:
        for kind in ("all_reduce", "all_gather"):
            yield _case(ctx, kind, msg * ctx.world.size)
        msg *= step
