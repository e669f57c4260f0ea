"""Decode stretches of the engine simulation: runs of decode-only steps between events, in closed form.

A mixin of :class:`~roofline.serving.sim.engine.EngineSim` (like :mod:`roofline.serving.sim.admission`), so the
scheduler reads alone. The decode rows are kept in aggregate on the global decode clock G (the module docstring of
:mod:`roofline.serving.sim.engine`): a stretch of k steps costs :meth:`StepModel.decode_affine`'s closed form
(:meth:`StepModel.decode_line` for one attention term without a window), takes the KV blocks the rows' residues
count, adds B·k inter-token gaps to the histogram and ends when the earliest row finishes, an arrival can join,
the KV pool runs out or a row reaches a sliding window.
"""

from __future__ import annotations

import heapq
import math
from array import array

from roofline.serving.sim.admission import Admission
from roofline.serving.sim.lifecycle import DECODE
from roofline.serving.sim.runstats import RunStats
from roofline.serving.sim.steptime import StepModel
from roofline.serving.sim.stretch import line_steps


class DecodeStretches(Admission, RunStats):
    """Decode-only stretches (state initialised by ``EngineSim.__init__``)."""

    step: StepModel
    #: decode stretches are one line: plain rows (:attr:`plain_rows`) and :attr:`StepModel.line_ok`
    line: bool
    #: decode rows are plain one-token rows whose aggregate spans are :meth:`_spans` (False in subclasses whose
    #: rows differ, e.g. speculative verify rows)
    plain_rows = True
    dec_time: float
    last_step_s: float
    closed: bool
    _entry_q: array[float]
    _entries: int

    def _next_entry(self) -> float:  # when the next request reaches the queue (EngineSim)
        raise NotImplementedError

    def _general(self, now: float) -> float:  # one step of any composition; its end (EngineSim)
        raise NotImplementedError

    def _top_gfin(self) -> int:
        heap = self.heap
        while heap and (heap[0][2].state != DECODE or heap[0][2].seq != heap[0][1]):
            heapq.heappop(heap)
        return heap[0][0]

    def _kv_steps(self, k: int) -> int:
        """Largest k' ≤ k such that decode steps G … G + k' − 1 find their new blocks free."""
        if self.pol.reserve_full:
            return k
        d, bs, free, cnt, g = self.d_count, self.bs, self.pool.free, self.cnt, self.G
        if free >= d * (k // bs + 1):
            return k
        k0 = (free // d) * bs
        rem = free - (free // d) * d
        j = 0
        while j < bs and rem >= cnt[(1 - g - j) % bs]:
            rem -= cnt[(1 - g - j) % bs]
            j += 1
        return min(k, k0 + j)

    def _blocks_for(self, k: int) -> int:
        """New blocks decode steps G … G + k − 1 take."""
        if self.pol.reserve_full:
            return 0
        d, bs, cnt = self.d_count, self.bs, self.cnt
        need, i, r = (k // bs) * d, (1 - self.G) % bs, k % bs  # residues i, i − 1, … (mod bs) of steps G + j, j < r
        if not r:
            return need
        if r <= i + 1:
            return need + sum(cnt[i - r + 1 : i + 1])
        return need + sum(cnt[: i + 1]) + sum(cnt[bs - (r - i - 1) :])

    def _spans(self) -> tuple[tuple[float, ...], tuple[float, ...], int]:
        """(Σ min(L, W_a) at clock G, rows still below W_a, steps until one reaches W_a) per attention term."""
        g = self.G
        if not self.step.has_window:
            s = float(self.d_sumoff + self.d_count * g)
            return (s,) * len(self.step.windows), (float(self.d_count),) * len(self.step.windows), 1 << 62
        span, slope, lim = [], [], 1 << 62
        ctx = [r.off + g for r in self.dec.values()]
        for w in self.step.windows:
            if math.isinf(w):
                span.append(float(sum(ctx)))
                slope.append(float(len(ctx)))
                continue
            below = [c for c in ctx if c < w]
            span.append(float(sum(below) + w * (len(ctx) - len(below))))
            slope.append(float(len(below)))
            if below:
                lim = min(lim, int(w - max(below)) + 1)
        return tuple(span), tuple(slope), lim

    def _stretch_limit(self) -> int:
        """Decode-only steps that may run before the next event (0: take a general step)."""
        if not self.d_count:
            return 0
        k = self._top_gfin() - self.G
        return self._kv_steps(k)

    def _stretch(self, now: float, k: int) -> float:
        """Run k decode-only steps (fewer when an arrival can join earlier) from ``now``; their end (s)."""
        d = self.d_count
        span, slope, lim = self._spans()
        k = min(k, lim)
        st = self.step.decode_affine(d, span, slope)
        if not self.waiting:
            nxt = self._next_entry()
            if nxt < math.inf:
                if not self.pol.async_scheduling:
                    k = st.steps_until(nxt - now, k)
                elif nxt <= now:  # arrived during the last step: the step now starting was formed before it
                    k = 1
                else:  # it arrives during step j − 1 and joins step j + 1
                    k = min(k, st.steps_until(nxt - now, k) + 1)
        total = st.total(k)
        d0 = st.first_s
        last = st.step(k - 1) if k > 1 else d0
        used0 = self.pool.used
        grow = self._blocks_for(k)
        if grow:  # allocating nothing changes nothing (used + cached ≤ total: no eviction)
            self.pool.allocate(grow)
        end = now + total
        self._cut = end - last
        hist = self.hist
        for key, c in self.keys.items():
            hist.add(now + d0 - key, c)
        if k > 1:
            hist.add_range(st.step(1) if k > 2 else last, last, d * (k - 1), d * (total - d0))
        self.keys = {end: d}
        self.dec_time = end
        self.G += k
        self.decode_tokens += d * k
        self._account(end, total, d, 0, k, used0)
        if self.heap[0][0] <= self.G:  # the earliest finish (or a stale entry) is due: nothing is, otherwise
            self._finish_decodes(end)
        return end

    def _line_stretch(self, now: float) -> float:
        """:meth:`_stretch_limit` and :meth:`_stretch` (or :meth:`_general` when no stretch may run) where the
        stretch is one line (:attr:`line`): the same steps, seconds and accounting, with the line's sums in one call
        (:func:`~roofline.serving.sim.stretch.line_steps`)."""
        d = self.d_count
        if not d:
            return self._general(now)
        if d > self.step.line_rows:  # beyond the captured graphs: the host's launches floor the steps
            k = self._stretch_limit()
            return self._stretch(now, k) if k > 0 else self._general(now)
        g, top, pool = self.G, self.heap[0], self.pool
        r = top[2]
        k = (top[0] if r.state == DECODE and r.seq == top[1] else self._top_gfin()) - g  # steps to the next finish
        if not self.pol.reserve_full and pool.total - pool.used < d * (k // self.bs + 1):
            k = self._kv_steps(k)  # the KV blocks run out first
        if k <= 0:
            return self._general(now)
        if self.waiting:
            dt = math.inf
        elif self.closed:
            dt = self._next_entry() - now  # an arrival can join at the step after dt
        else:
            a = self.arrived
            dt = self._entry_q[a] - now if a < self._entries else math.inf
        k, total, d0, d1, last = line_steps(*self.step.decode_line(d, float(self.d_sumoff + d * g), float(d)), dt, k)
        used0 = pool.used
        grow = self._blocks_for(k)
        if grow:  # allocating nothing changes nothing (used + cached ≤ total: no eviction)
            if pool.lru:
                pool.allocate(grow)
            else:  # BlockPool.allocate without cached blocks to evict (the k steps' blocks are free: _kv_steps)
                pool.used += grow
        end = now + total
        self._cut = end - last
        hist = self.hist
        for key, c in self.keys.items():
            hist.add(now + d0 - key, c)
        if k > 1:
            hist.add_range(d1, last, d * (k - 1), d * (total - d0))
        self.keys = {end: d}
        self.dec_time = end
        self.G = g = g + k
        self.decode_tokens += d * k
        self.busy_s += total  # RunStats._account, written out
        self.batch_int += d * total
        used = pool.used
        self.kv_int += (used0 + used) / 2 * total
        skip = self.tl_skip + 1
        if skip < self.tl_stride:
            self.tl_skip = skip
        else:
            self._tl_row(end, used, 0, k)
        if self.heap[0][0] <= g:  # the earliest finish (or a stale entry) is due: nothing is, otherwise
            self._finish_decodes(end)
        return end
