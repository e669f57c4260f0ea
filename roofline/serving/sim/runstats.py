"""Run statistics of the engine simulation: time integrals, a bounded timeline, saturation detection.

A mixin of :class:`~roofline.serving.sim.engine.EngineSim`, kept apart so the scheduler reads alone.
Time integrals: busy seconds, Σ rows·dt (mean batch), Σ KV blocks·dt (midpoint of each event's start and end
block counts). The timeline keeps one row per event until ``tl_rows`` rows, then drops every other row and
halves its sampling rate, so its memory stays bounded for any run length.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from roofline.serving.sim.kvpool import BlockPool

SAT_WARM, SAT_WINDOW = 100, 200  # completions before and inside the saturation measuring window
TIMELINE_COLUMNS = ("time_s", "running", "waiting", "kv_blocks_used", "decode_rows", "prefill_tokens", "steps")
#: Timeline values listed before they move into a float array (1,024 rows)
_TL_BLOCK_VALUES = 1024 * len(TIMELINE_COLUMNS)


class RunStats:
    """Integrals, timeline and saturation checks (state initialised by :meth:`_init_stats`)."""

    pool: BlockPool
    running: list[Any]
    waiting: deque[Any]
    d_count: int
    n: int
    arrived: int
    completed: int
    closed: bool
    prefill_tokens: int
    decode_tokens: int
    prefill_completions: int

    def _init_stats(self, saturation_queue: int, timeline_rows: int, work_per_req: float) -> None:
        self.busy_s = self.batch_int = self.kv_int = self.last_step_s = 0.0
        # the timeline, row after row of the TIMELINE_COLUMNS: the latest rows' values in a list (appending a number
        # to a list is cheaper than to an array), moved in blocks of TL_BLOCK rows into float arrays
        self.tl_flat: list[float] = []
        self.tl_blocks: list[np.ndarray] = []
        self.tl_rows, self.tl_stride, self.tl_skip, self.tl_count = timeline_rows, 1, 0, 0
        self.sat_queue = saturation_queue
        self.sat_mark: tuple[float, float, int, int, bool] | None = None
        self.last_send: tuple[float, int, float] | None = None
        self.work_per_req = work_per_req
        self.saturated: str | None = None

    def _account(self, end: float, dt: float, rows: int, prefill_tokens: int, steps: int, used0: int) -> None:
        """Integrals of one event of ``dt`` seconds ending at ``end`` (``rows`` rows, ``steps`` steps, KV blocks
        from ``used0`` to the pool's count now), and its timeline row (one in ``tl_stride`` kept)."""
        self.busy_s += dt
        self.batch_int += rows * dt
        used = self.pool.used
        self.kv_int += (used0 + used) / 2 * dt
        skip = self.tl_skip + 1
        if skip < self.tl_stride:
            self.tl_skip = skip
            return
        self._tl_row(end, used, prefill_tokens, steps)

    def _tl_row(self, end: float, used: int, prefill_tokens: int, steps: int) -> None:
        """Record the timeline row of the event ending at ``end`` (one kept in ``tl_stride``: this one)."""
        self._tl_values(end, len(self.running), len(self.waiting), used, self.d_count, prefill_tokens, steps)

    def _tl_values(
        self, end: float, running: int, waiting: int, used: int, decode_rows: int, prefill_tokens: int, steps: int
    ) -> None:
        """Append one timeline row of these values (:data:`TIMELINE_COLUMNS`), halving the rows kept past
        ``tl_rows``."""
        self.tl_skip = 0
        flat = self.tl_flat
        flat.extend((end, running, waiting, used, decode_rows, prefill_tokens, steps))
        self.tl_count += 1
        if len(flat) >= _TL_BLOCK_VALUES:
            self._tl_flush()
        if self.tl_count >= self.tl_rows:  # keep memory bounded: drop every other row, halve the rate
            kept = self._tl_table()[::2]
            self.tl_blocks, self.tl_flat, self.tl_count = [kept], [], len(kept)
            self.tl_stride *= 2

    def _tl_flush(self) -> None:
        """Move the listed timeline rows into a float array block."""
        self.tl_blocks.append(np.array(self.tl_flat, dtype=np.float64).reshape(-1, len(TIMELINE_COLUMNS)))
        self.tl_flat = []

    def _tl_table(self) -> np.ndarray:
        """The timeline so far as one (rows × columns) float array."""
        if self.tl_flat:
            self._tl_flush()
        if len(self.tl_blocks) != 1:
            self.tl_blocks = [np.concatenate(self.tl_blocks or [np.zeros((0, len(TIMELINE_COLUMNS)))])]
        return self.tl_blocks[0]

    @property
    def tl(self) -> tuple[np.ndarray, ...]:
        """The timeline's columns (:data:`TIMELINE_COLUMNS`: seconds, counts), as float arrays."""
        rows = self._tl_table()
        return tuple(rows[:, i].copy() for i in range(len(TIMELINE_COLUMNS)))

    def _queued(self) -> int:
        """Requests waiting to be scheduled (an attention-DP replica: over all its ranks)."""
        return len(self.waiting)

    def _work(self) -> float:
        """Output tokens emitted so far (decode-row steps + prefill completions); never recomputed."""
        return float(self.decode_tokens + self.prefill_completions)

    def _saturation(self, now: float) -> bool:
        """Detect an offered rate above what the engine serves while the queue keeps growing.

        Served rate = output tokens emitted per second / mean output tokens per request (emitted tokens are
        conserved; work lost to preemption is not counted). It is measured over a window that opens once
        ``SAT_WARM`` requests have completed since the queue grew long (so the ramp-up, all prefills and no
        output yet, is left out) and closes after ``SAT_WINDOW`` more completions: while the queue is long
        the engine is never idle, so this is its capacity at this mix.
        """
        arrived, work, done = self.arrived, self._work(), self.completed
        if self.sat_mark is None:
            self.sat_mark = (now, work, arrived, done, False)
            return False
        t0, w0, a0, d0, warm = self.sat_mark
        if not warm:
            if done - d0 >= SAT_WARM:
                self.sat_mark = (now, work, arrived, done, True)
            return False
        if done - d0 < SAT_WINDOW or now <= t0:
            return False
        offered, served = (arrived - a0) / (now - t0), (work - w0) / (now - t0) / self.work_per_req
        queued = self._queued()
        if queued >= self.sat_queue and offered > 1.05 * served:
            self.saturated = self._statement(offered, served, now, queued, early=True)
            return True
        self.sat_mark = (now, work, arrived, done, True)
        return False

    def _statement(self, offered: float, served: float, now: float, queued: int, early: bool) -> str:
        tail = (
            f"The run stopped early; its metrics cover the {self.completed} requests completed."
            if early
            else "Latencies of this run grow with its length and describe no steady state."
        )
        return (
            f"saturated: requests arrive at {offered:.3g}/s but the engine serves about {served:.3g}/s, so the "
            f"queue grows without bound ({queued} waiting at t = {now:.1f} s); the sustainable rate "
            f"of this configuration is about {served:.3g} requests/s. {tail}"
        )

    def final_check(self) -> None:
        """After an open-loop run: saturated when, at the last arrival, 5 % of the requests still waited
        and the engine served clearly less than the offered rate; the rate it states is the larger of that window's
        and the whole run's busy-time rate (output tokens / busy seconds / mean output tokens)."""
        if self.closed or self.saturated or self.last_send is None or self.n < 20:
            return
        t, queued, work = self.last_send
        if t <= 0 or queued < max(0.05 * self.n, 20):
            return
        offered, served = self.n / t, work / t / self.work_per_req
        if served < 0.95 * offered:
            # the rate to state is the engine's while busy over the whole run: the window up to the last arrival
            # can be far too short to measure it (every request sent within microseconds at --qps 1e9)
            capacity = self._work() / self.busy_s / self.work_per_req if self.busy_s > 0 else served
            self.saturated = self._statement(offered, max(served, capacity), t, queued, early=False)
