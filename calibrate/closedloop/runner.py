"""Timing a torch decoder at validation grid points, with calibration's timers and buffer hygiene.

:class:`Runner` builds the model once, then for each point allocates KV caches of exactly the
point's length and times one forward pass (prefill of B × P tokens, or one decode step at
context L) with :mod:`calibrate.measure.timing`: perf_counter over calls on CPU, CUDA events around
CUDA-graph replays on GPU. torch is imported when a Runner is created.
"""

from __future__ import annotations

import copy
import gc
import math
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from calibrate.closedloop.grid import Point
from calibrate.measure.records import Bench
from roofline.errors import ScenarioError
from roofline.specs.model import ModelSpec

if TYPE_CHECKING:  # (functions here name their torch module ``torch``, which would shadow the import)
    from torch import Tensor
    from torch import dtype as TorchDtype


@dataclass(frozen=True)
class Measured:
    """Median seconds of one forward pass, spread of the rounds, calls per round, timing method, note."""

    median_s: float
    spread: float
    calls_per_round: int
    rounds: int
    method: str
    note: str
    kernels: int | None = None


def torch_dtype(torch: ModuleType, name: str) -> TorchDtype:
    """torch dtype of ``fp32`` / ``bf16`` / ``fp16``."""
    table = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    if name not in table:
        raise ScenarioError(f"validation runs in fp32, bf16 or fp16, not '{name}'")
    return table[name]


ROTATE_MAX_COPIES = 64
ROTATE_MAX_BYTES_CPU = 1.5e9


class Runner:
    """Builds the model on ``device`` and times grid points with calibration's timers.

    Like calibration's rotating buffers, calls cycle through copies of the weights and the KV
    cache so that copies × (weights + cache) ≥ 2 × the last-level cache: every call streams its
    weights from memory as a full-size model does, instead of finding a small model in cache
    (a 2-layer model's 15 MB would otherwise stay in a CPU's LLC and run ~2× faster than any
    calibrated rate). A full-size model needs one copy.
    """

    def __init__(self, spec: ModelSpec, device: str, dtype: str, rounds: int = 5, graphs: bool = True) -> None:
        import torch

        from calibrate.closedloop.model import build_model, weight_bytes
        from calibrate.measure.timing import CudaTimer, HostTimer

        self.torch, self.spec, self.device, self.dtype_name = torch, spec, torch.device(device), dtype
        self.dtype = torch_dtype(torch, dtype)
        self.is_cuda = self.device.type == "cuda"
        if self.is_cuda:
            torch.cuda.set_device(self.device)
        self.models = [build_model(spec, self.device, self.dtype)]
        self.weight_bytes = weight_bytes(self.models[0])
        self.llc_bytes, self.max_bytes = self._cache_and_cap()
        # decode steps replay as CUDA graphs, as serving engines run them (MoE routing syncs with
        # the host, so it cannot be captured); prefill runs eagerly, as the cost model assumes
        self.decode_graphs = self.is_cuda and graphs and spec.moe is None
        self.timer: Any = (
            CudaTimer(torch, rounds=rounds, graphs=self.decode_graphs)
            if self.is_cuda
            else HostTimer(rounds=rounds, target_round_s=0.05)
        )

    def _cache_and_cap(self) -> tuple[int, float]:
        """(last-level cache bytes, bytes the rotation copies may take) on this device."""
        torch = self.torch
        if self.is_cuda:
            props = torch.cuda.get_device_properties(self.device)
            free, _ = torch.cuda.mem_get_info(self.device)
            return int(getattr(props, "L2_cache_size", 0) or 50 * 2**20), free / 4
        from calibrate.measure.env import last_level_cache_bytes

        return last_level_cache_bytes(), ROTATE_MAX_BYTES_CPU

    def copies_for(self, cache_bytes: int) -> int:
        """Copies of weights + cache a point rotates through (calibration's rule: together ≥ 2 × LLC)."""
        per = self.weight_bytes + cache_bytes
        if per >= 2 * self.llc_bytes:
            return 1
        want = math.ceil(2 * self.llc_bytes / per) + 1
        return max(1, min(want, int(self.max_bytes // per), ROTATE_MAX_COPIES))

    def measure(self, pt: Point) -> Measured:
        """Time one forward pass at ``pt`` (fresh caches sized to the point, freed afterwards)."""
        bench, copies = self._bench(pt)
        t = self.timer.measure(bench)
        kernels = self._count_kernels(bench) if self.is_cuda else None
        del bench
        gc.collect()  # the point's caches and any CUDA graph go before the next point allocates
        if self.is_cuda:
            self.torch.cuda.empty_cache()
        note = "; ".join(x for x in (t.note, f"{copies} rotating copies of weights + KV cache") if x)
        return Measured(t.median_s, t.spread, t.calls_per_round, len(t.samples_s), t.method, note, kernels)

    def _count_kernels(self, bench: Bench) -> int | None:
        """GPU kernels (and memcpy/memset) one eager forward pass launches, from torch.profiler; None if unavailable.

        Set against the cost model's op count it shows how many small kernels eager torch adds.
        """
        torch = self.torch
        from torch.profiler import ProfilerActivity, profile

        try:
            with bench.context(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                bench.fn(0)
                torch.cuda.synchronize()
        except (RuntimeError, AssertionError, ValueError):
            return None
        n = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
        return n or None  # no CUPTI: no device events at all

    def _bench(self, pt: Point) -> tuple[Bench, int]:
        """The forward pass of ``pt`` as a calibration Bench, and its number of rotating copies.

        Each cache holds exactly the point's length. Decode writes position L − 1 and attends
        0 … L − 1 on every call, so repeats do identical work.
        """
        from calibrate.closedloop.model import KVCache, Rope

        torch, spec = self.torch, self.spec
        new = pt.tokens if pt.phase == "prefill" else 1
        start = 0 if pt.phase == "prefill" else pt.tokens - 1
        caches = [KVCache(spec, pt.batch, pt.tokens, self.device, self.dtype)]
        n = self.copies_for(caches[0].nbytes)
        caches += [KVCache(spec, pt.batch, pt.tokens, self.device, self.dtype) for _ in range(n - 1)]
        while len(self.models) < n:
            self.models.append(copy.deepcopy(self.models[0]))
        models = self.models[:n]
        rope = Rope(spec.attention.head_dim, pt.tokens, self.device)
        tokens = torch.randint(0, spec.vocab_size, (pt.batch, new), device=self.device)

        def fn(i: int) -> Tensor:
            return models[i % n](tokens, caches[i % n], rope, start)

        # a CUDA-graph round replays a fixed set of calls, so it must visit every copy; the host
        # timer's call index runs on across rounds, so any round length rotates there.
        capturable = self.decode_graphs and pt.phase == "decode"
        bench = Bench(fn, capturable=capturable, min_calls=n if self.is_cuda else 1, context=torch.inference_mode)
        return bench, n
