"""When a benchmark client sends each request: slots, release times, a warm-up that drains or does not.

The common benchmark clients send requests in one of two ways (:mod:`roofline.serving.workload.clients`):
C workers that each send their next request when the previous one finished (a closed loop), or requests
released at a rate and sent once one of ``max_concurrency`` slots is free (vLLM's and SGLang's
``--max-concurrency``: an asyncio semaphore, acquired in request order before the request's timer starts).
Both are one rule over requests j = 0, 1, … in order:

    send_j = max(release_j + shift_j, the time a slot is free for j)

with ``release_j`` the request's release time (0 for a closed loop, or i·ramp/C for worker i's first request of
a ramped start; the arrival time for a rate), at most ``slots`` requests in flight, and slots taken in request
order. A drained warm-up of W requests (aiperf waits for every warm-up request to come back before its measured
phase) holds request W until requests 0 … W − 1 have all finished at t_d; from then on ``shift_j`` = t_d −
release_W, so the measured phase starts at t_d with the releases it would have had from a cold start. Without
a drain the measured requests follow the warm-up straight on (shift 0). Warm-up requests are served like any
other and left out of the statistics (:func:`roofline.serving.sim.result.build_result`).
"""

from __future__ import annotations

import math

import numpy as np


class ClientSends:
    """The send rule of the module docstring for ``n`` requests; the engine calls :meth:`start` once and
    :meth:`freed` on every completion, and sends what they return, in order."""

    def __init__(
        self, n: int, slots: int, release_s: np.ndarray | None = None, warmup: int = 0, drained: bool = False
    ) -> None:
        self.n, self.free = n, min(slots, n)
        self.release = [0.0] * n if release_s is None else [float(x) for x in release_s]
        self.warmup, self.drained = warmup, drained and 0 < warmup < n
        self.sent = 0
        self.warm_done = 0
        self.shift = math.nan if self.drained else 0.0  # NaN: the drain has not happened yet

    def start(self) -> list[tuple[int, float]]:
        """The sends at the start: the first ``slots`` requests (up to the warm-up barrier)."""
        return self._dispatch(0.0)

    def freed(self, t: float, rid: int) -> list[tuple[int, float]]:
        """Request ``rid`` finished at ``t`` (its slot is free): the sends this allows, as (request, send time)."""
        self.free += 1
        if rid < self.warmup:
            self.warm_done += 1
            if self.drained and self.warm_done == self.warmup:
                self.shift = t - self.release[self.warmup]
        return self._dispatch(t)

    def _dispatch(self, t: float) -> list[tuple[int, float]]:
        out = []
        while self.free > 0 and self.sent < self.n:
            j = self.sent
            if j >= self.warmup and math.isnan(self.shift):
                break  # the measured phase waits for the warm-up to drain
            shift = self.shift if j >= self.warmup else 0.0
            out.append((j, max(t, self.release[j] + shift)))
            self.sent += 1
            self.free -= 1
        return out
