"""Fixed-cost suite: tiny kernels, a short op chain, CUDA-graph replay, one synchronisation.

* ``tiny``        ``a.add_(1)`` on a 1-element tensor, timed on the host: the eager cost of
                  dispatching (and on a GPU launching) one kernel.
* ``chain``       8 dependent elementwise ops on 1024 elements, host-timed: per-kernel
                  cost in a realistic eager sequence (t / 8).
* ``graph_chain`` (GPU) the same chain captured in a CUDA graph and replayed, timed with
                  CUDA events: the GPU-side fixed cost per kernel with no launch gaps.
* ``sync``        (GPU) one tiny kernel plus ``torch.cuda.synchronize()``, host-timed: the
                  floor of a forward pass's launch-and-wait cost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from calibrate.measure.context import SuiteContext
from calibrate.measure.records import Bench, Case

if TYPE_CHECKING:
    from torch import Tensor

CHAIN = 8


def _chain(ctx: SuiteContext) -> Callable[[int], Tensor]:
    torch = ctx.torch
    x = torch.ones(1024, device=ctx.device)
    w = torch.full((1024,), 0.5, device=ctx.device)

    def run(_: int) -> Tensor:
        y = x * w
        y = y + x
        y = torch.relu(y)
        y = y.neg()
        y = y.exp()
        y = y.abs()
        y = y * 0.5
        return y + 1.0

    return run


def _params(kind: str, kernels: int) -> dict[str, Any]:
    return {"kind": kind, "kernels": kernels, "flops": 0, "bytes": 0}


def cases(ctx: SuiteContext) -> Iterator[Case]:
    """tiny, chain and (GPU) graph_chain and sync cases."""
    torch = ctx.torch

    def tiny() -> Bench:
        a = torch.zeros(1, device=ctx.device)
        return Bench(lambda i: a.add_(1.0), timing="host")

    yield Case("overhead", "overhead/tiny", _params("tiny", 1), tiny)
    yield Case("overhead", "overhead/chain", _params("chain", CHAIN), lambda: Bench(_chain(ctx), timing="host"))
    if not ctx.is_cuda:
        return
    yield Case("overhead", "overhead/graph_chain", _params("graph_chain", CHAIN), lambda: Bench(_chain(ctx)))

    def sync() -> Bench:
        a = torch.zeros(1, device=ctx.device)

        def run(_: int) -> None:
            a.add_(1.0)
            torch.cuda.synchronize()

        return Bench(run, timing="host")

    yield Case("overhead", "overhead/sync", _params("sync", 1), sync)
