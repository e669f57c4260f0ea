"""Requests in the engine simulation and the state changes they go through.

A mixin of :class:`~roofline.serving.sim.engine.EngineSim` (like :mod:`roofline.serving.sim.runstats`), so
the scheduler reads alone: a prefill chunk finishing (:meth:`RequestLifecycle._progress`), a decode row
leaving the aggregate decode clock, completion, release of KV blocks and preemption with recompute.
Token and block accounting is the module docstring of :mod:`roofline.serving.sim.engine`.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import deque
from collections.abc import Hashable, Sequence

from roofline.engine.config import output_lag_s
from roofline.serving.sim.kvpool import BlockPool
from roofline.serving.sim.metrics import GapHistogram
from roofline.serving.sim.policy import Policy

WAITING, PREFILL, DECODE, DONE = 0, 1, 2, 3
#: the state changes :meth:`RequestLifecycle._finish_row` writes out (a subclass overriding one turns it off)
_FINISH_STEPS = ("_leave_decode", "_drop_decode_row", "_release", "_done")


class Req:
    """Mutable state of one request (times in seconds, counts in tokens)."""

    __slots__ = (
        "admitted",
        "blocks",
        "cached",
        "computed",
        "entry",
        "finish",
        "first",
        "gen",
        "gfin",
        "hashes",
        "last_tok",
        "named",
        "off",
        "output",
        "preempt",
        "prompt",
        "rid",
        "seq",
        "state",
        "target",
    )

    def __init__(self, rid: int, prompt: int, output: int, entry: float, hashes: Sequence[Hashable]) -> None:
        self.rid, self.prompt, self.output, self.entry, self.hashes = rid, prompt, output, entry, hashes
        self.gen = self.computed = self.blocks = self.preempt = self.cached = self.seq = self.off = self.gfin = 0
        self.target = prompt
        self.named: list[Hashable] = []
        self.state = WAITING
        self.first = self.finish = self.last_tok = math.nan
        self.admitted = False


class RequestLifecycle:
    """State changes of requests (state initialised by ``EngineSim.__init__``)."""

    bs: int
    pol: Policy
    pool: BlockPool
    running: list[Req]
    waiting: deque[Req]
    prefilling: list[Req]
    heap: list[tuple[int, int, Req]]
    dec: dict[int, Req]
    keys: dict[float, int]
    cnt: list[int]
    hist: GapHistogram
    rec_first: array[float]
    rec_finish: array[float]
    rec_cached: array[int]
    rec_preempt: array[int]
    d_count: int
    d_sumoff: int
    G: int
    dec_time: float
    n: int
    closed: bool
    lag_steps: float
    last_step_s: float
    generated: int
    completed: int
    preemptions: int
    prefill_tokens: int
    prefill_completions: int
    #: :meth:`_finish_decodes` may complete rows with :meth:`_finish_row` (:meth:`_owns_finish`)
    inline_finish: bool = False

    # ---- state changes ----------------------------------------------------------------------
    def _progress(self, r: Req, c: int, end: float) -> None:
        """A prefill chunk of c tokens finished at ``end``: name its full blocks; emit a token when complete."""
        before, bs = r.computed, self.bs
        r.computed = computed = before + c
        self.prefill_tokens += c
        if r.hashes and computed // bs > before // bs:
            for b in range(max(before // bs, len(r.named)), min(computed // bs, len(r.hashes))):
                if len(r.named) == b and self.pool.register(r.hashes[b]):
                    r.named.append(r.hashes[b])
        if computed < r.target:
            return
        self.prefilling.remove(r)
        self.prefill_completions += 1
        r.gen = gen = r.gen + 1
        if gen == 1:
            r.first = end
        else:
            self.hist.add(end - r.last_tok, 1)
        r.last_tok = end
        if gen >= r.output:
            self._release(r)
            self._done(r, end)
            return
        r.state = DECODE
        g = self.G
        r.off = off = r.target + 1 - g
        self.d_count += 1
        self.d_sumoff += off
        self.cnt[off % bs] += 1
        self.dec[r.rid] = r
        r.gfin = gfin = g + r.output - gen
        heapq.heappush(self.heap, (gfin, r.seq, r))
        keys = self.keys
        keys[end] = keys.get(end, 0) + 1

    def _drop_decode_row(self, r: Req) -> None:
        """Take r out of the decode aggregate (count, Σ offsets, row, last-token key) and restore its last
        token time; what it generated meanwhile is the caller's accounting."""
        self.d_count -= 1
        self.d_sumoff -= r.off
        del self.dec[r.rid]
        key = r.last_tok if r.last_tok > self.dec_time else self.dec_time
        c = self.keys[key] - 1
        if c:
            self.keys[key] = c
        else:
            del self.keys[key]
        r.last_tok = key

    def _leave_decode(self, r: Req) -> None:
        """Remove a decode row from the aggregate (its generated count and last token time restored)."""
        self._drop_decode_row(r)
        self.cnt[r.off % self.bs] -= 1
        r.gen = r.output - (r.gfin - self.G)
        r.computed = r.off + self.G - 1
        if not self.pol.reserve_full:
            r.blocks = -(-r.computed // self.bs)

    def _finish_decodes(self, end: float) -> None:
        """Complete the decode rows whose last token the step ending at ``end`` emitted (finish clock ≤ G)."""
        heap, g = self.heap, self.G
        inline = self.inline_finish
        pop = heapq.heappop
        while heap:
            gfin, seq, r = heap[0]
            if r.state != DECODE or r.seq != seq:
                pop(heap)
                continue
            if gfin > g:
                break
            pop(heap)
            if inline and not r.named:
                self._finish_row(r, end)
                continue
            self._leave_decode(r)
            self._release(r)
            self._done(r, end)

    def _owns_finish(self) -> bool:
        """True when this class keeps the state changes :meth:`_finish_row` writes out (no subclass overrides)."""
        cls = type(self)
        return all(getattr(cls, m) is getattr(RequestLifecycle, m) for m in _FINISH_STEPS)

    def _finish_row(self, r: Req, end: float) -> None:
        """:meth:`_leave_decode`, :meth:`_release` and :meth:`_done` of a decode row holding no named blocks, written
        out in one (the same state changes in the same order)."""
        g, bs = self.G, self.bs
        self.d_count -= 1
        off = r.off
        self.d_sumoff -= off
        del self.dec[r.rid]
        keys, last = self.keys, r.last_tok
        key = last if last > self.dec_time else self.dec_time
        c = keys[key] - 1
        if c:
            keys[key] = c
        else:
            del keys[key]
        r.last_tok = key
        self.cnt[off % bs] -= 1
        r.gen = gen = r.output - (r.gfin - g)
        r.computed = off + g - 1
        self.pool.used -= -(-r.computed // bs) if not self.pol.reserve_full else r.blocks
        r.blocks = 0
        self.running.remove(r)
        if self.lag_steps or self.closed:
            self._done(r, end)
            return
        r.state = DONE
        r.finish = end
        self.completed += 1
        i = r.rid
        self.rec_first[i], self.rec_finish[i], self.rec_cached[i], self.rec_preempt[i] = (
            r.first,
            end,
            r.cached,
            r.preempt,
        )
        self.generated += gen

    def _release(self, r: Req) -> None:
        self.pool.release(r.blocks - len(r.named), r.named)
        r.named = []
        r.blocks = 0
        self.running.remove(r)

    def _done(self, r: Req, end: float) -> None:
        """r finished at ``end`` (engine time): record it, and resend for a closed-loop client.

        Output lag (``output_lag_steps`` = k): the client receives every token of a request k of that request's
        own mean inter-token intervals after the engine computed it (the server's output pipeline: a frontend
        detokenises and streams one step's outputs while the engine runs the next ones). The shift is the same
        for all tokens of a request, so TTFT and E2E grow by k·TPOT while TPOT and every inter-token gap stay as
        computed; a closed-loop client resends when it received the last token. A request of one output token
        (no interval of its own) lags k times the last step.
        """
        r.state = DONE
        r.finish = end
        self.completed += 1
        i = r.rid
        lag = 0.0
        if self.lag_steps:
            lag = output_lag_s(self.lag_steps, (end - r.first) / (r.gen - 1) if r.gen > 1 else self.last_step_s)
        self.rec_first[i], self.rec_finish[i], self.rec_cached[i], self.rec_preempt[i] = (
            r.first + lag,
            end + lag,
            r.cached,
            r.preempt,
        )
        self.generated += r.gen
        if self.closed:
            self._freed(end + lag, i)

    def _freed(self, t: float, rid: int) -> None:  # the client's slot is free again (EngineSim)
        raise NotImplementedError

    def _preempt(self, r: Req) -> None:
        """Free all of r's blocks and put it first in the queue; it recomputes prompt + generated tokens."""
        if r.state == DECODE:
            self._leave_decode(r)
        else:
            self.prefilling.remove(r)
        self._release(r)
        r.state = WAITING
        r.target = r.prompt + r.gen
        r.computed = 0
        r.preempt += 1
        self.preemptions += 1
        self.waiting.appendleft(r)
