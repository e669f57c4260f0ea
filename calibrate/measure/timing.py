"""Timers: perf_counter over many calls on CPU, CUDA events or CUDA-graph replays on GPU.

Every timer warms up first (the first calls pay for allocation, page faults, kernel
selection, and the first write to each rotated buffer), then runs ``rounds`` rounds of
``n`` calls each, with n chosen so that one round lasts about ``target_round_s``; the
time of a round divided by n is one sample.
The result is the median over rounds and the spread (inter-quartile range / median).

On a GPU, "device" benchmarks are timed with CUDA events around n calls captured into a
CUDA graph when possible (one replay issues n kernels with no launch gaps, so small
kernels are not hidden behind CPU launch cost); otherwise around an eager loop.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from calibrate.measure.records import Bench


@dataclass(frozen=True)
class Timing:
    """Samples (seconds per call, one per round), calls per round, method and a note."""

    samples_s: tuple[float, ...]
    calls_per_round: int
    method: str
    note: str = ""

    @property
    def median_s(self) -> float:
        """Median seconds per call over rounds."""
        return float(np.median(self.samples_s))

    @property
    def spread(self) -> float:
        """(q75 − q25) / median of the per-round samples (NaN-safe: NaN when undefined)."""
        q75, q25 = np.percentile(self.samples_s, [75, 25])
        med = self.median_s
        return float((q75 - q25) / med) if med > 0 and math.isfinite(med) else math.nan


class Timer(Protocol):
    """Anything that turns a Bench into a Timing."""

    def measure(self, bench: Bench) -> Timing:
        """Warm up, then time ``bench`` over rounds."""
        ...


#: The ``method`` a :class:`HostTimer` records (its clock).
HOST_METHOD = "perf_counter"


@dataclass
class HostTimer:
    """time.perf_counter over n calls per round; ``sync`` (e.g. cuda.synchronize) ends each round."""

    rounds: int = 5
    target_round_s: float = 0.02
    max_calls: int = 20000
    sync: Any = None
    warmup_s: float = 0.5

    def measure(self, bench: Bench) -> Timing:
        """Warm up (at least two calls, and one visit of every rotated buffer within
        ``warmup_s``), size n from the last warm-up call, then time ``rounds`` rounds."""
        fn = bench.fn
        with bench.context():
            i, t1 = 0, 0.0
            t_start = time.perf_counter()
            while i < 2 or (i < bench.min_calls and time.perf_counter() - t_start < self.warmup_s):
                t0 = time.perf_counter()
                fn(i)
                self._sync()
                t1 = time.perf_counter() - t0
                i += 1
            if bench.fixed_calls is not None:
                n = bench.fixed_calls
            else:  # call i keeps rotating across rounds, so n needs no minimum
                n = max(1, min(math.ceil(self.target_round_s / max(t1, 1e-9)), self.max_calls))
            samples = []
            for _ in range(self.rounds):
                t0 = time.perf_counter()
                for _ in range(n):
                    fn(i)
                    i += 1
                self._sync()
                samples.append((time.perf_counter() - t0) / n)
        return Timing(tuple(samples), n, HOST_METHOD, bench.note)

    def _sync(self) -> None:
        if self.sync is not None:
            self.sync()


@dataclass
class CudaTimer:
    """CUDA events around CUDA-graph replays (or an eager loop when capture is off or fails)."""

    torch: Any
    rounds: int = 5
    target_round_s: float = 0.002
    max_calls: int = 512
    graphs: bool = True

    def measure(self, bench: Bench) -> Timing:
        """Warm up eagerly, size n from an event-timed loop, capture n calls, replay ``rounds`` times."""
        torch = self.torch
        fn = bench.fn
        with bench.context():
            for i in range(2):
                fn(i)
            torch.cuda.synchronize()
            if bench.fixed_calls is not None:
                n = bench.fixed_calls
            else:
                t1 = self._time(lambda: [fn(i) for i in range(3)]) / 3
                n = max(bench.min_calls, math.ceil(self.target_round_s / max(t1, 1e-9)))
                n = max(1, min(n, self.max_calls))
            run, method, note = self._runner(bench, n)
            run()
            torch.cuda.synchronize()
            samples = tuple(self._time(run) / n for _ in range(self.rounds))
        return Timing(samples, n, method, "; ".join(x for x in (bench.note, note) if x))

    def _time(self, run: Any) -> float:
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3

    def _runner(self, bench: Bench, n: int) -> tuple[Any, str, str]:
        """(callable issuing n calls, method name, note)."""
        fn = bench.fn

        def eager() -> None:
            for i in range(n):
                fn(i)

        if not (self.graphs and bench.capturable):
            return eager, "cuda_event", ""
        torch = self.torch
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for i in range(min(n, 3)):
                    fn(i)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for i in range(n):
                    fn(i)
        except RuntimeError as exc:
            torch.cuda.synchronize()
            return eager, "cuda_event", f"graph capture failed ({str(exc).splitlines()[0][:120]}); eager loop timed"
        return graph.replay, "cuda_graph", ""


def check_timing(t: Timing, flops: float, nbytes: float, max_flops: float, max_bytes_per_s: float) -> str | None:
    """Why a timing is unusable, or None.

    Rejects non-finite or non-positive samples (a broken timer), and rates above
    ``max_flops`` FLOP/s or ``max_bytes_per_s`` (physically absurd for the device:
    e.g. a lazily skipped kernel or a cache-served repeat).
    """
    bad = [s for s in t.samples_s if not (math.isfinite(s) and s > 0)]
    if bad or not t.samples_s:
        return f"absurd timing rejected: samples {list(t.samples_s)!r} include non-finite or non-positive values"
    med = t.median_s
    if flops > 0 and flops / med > max_flops:
        return f"absurd timing rejected: {flops / med:.3g} FLOP/s exceeds the plausible limit {max_flops:.3g}"
    if nbytes > 0 and nbytes / med > max_bytes_per_s:
        return f"absurd timing rejected: {nbytes / med:.3g} B/s exceeds the plausible limit {max_bytes_per_s:.3g}"
    return None
