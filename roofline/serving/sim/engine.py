"""The event-driven engine simulation: continuous batching, paged KV, preemption, prefix caching.

Time advances by *events* (an arrival the scheduler can act on, a prefill chunk, a completion,
the KV pool running out, a decode row reaching a sliding window). Between events every step is
decode-only with a fixed set of rows whose contexts all grow by one per step, so a whole
stretch of k steps is summed in closed form (:class:`~roofline.serving.sim.steptime.DecodeStretch`):
the cost of a run grows with events, not tokens.

Decode rows are kept in aggregate on a global decode clock G (the number of decode steps run):
a row that joins with context c at clock g has context off + G with off = c − g, so
Σ contexts = Σ off + |D|·G; it finishes when G reaches g + remaining tokens (a heap); it needs a
new KV block at the step where (off + G) mod bs = 1 mod bs, so the blocks needed by k steps
follow from a count of rows per residue off mod bs.

Asynchronous scheduling (``EngineConfig.async_scheduling``: vLLM ≥ 0.14 ``--async-scheduling``, SGLang's overlap
scheduler, TensorRT-LLM's overlap scheduler) forms step k + 1's batch on the CPU while step k runs on the
GPU, so a request that reaches the queue after step k started can join step k + 2 at the earliest:
arrivals are admitted against the start time of the step that just ended (``_cut``), not its end.
An idle engine schedules at once.

Closed-loop resends: a client sends its next request when it received the last token of the previous one,
which the engine emitted at the end of a step, the instant it formed its next step; the request then travels
back and is tokenised, so it reaches the queue strictly after that instant even with no request overhead
(``_entry``: the next float after the send when the overhead is 0). Physics only (``request_overhead_s`` = 0)
is thus the limit of a vanishing overhead, y → 0⁺, not the tie in which a resend joins the step that starts
as its predecessor finishes (one step early; the convention and its sign are named in AIConfigurator's
queueing model, ``docs/design/queueing_model.md`` §6.13 @ 093fe28f).

Output lag (``output_lag_steps``): :meth:`~roofline.serving.sim.lifecycle.RequestLifecycle._done`.

Token and block accounting (checked by the tests): a request of P prompt and O output tokens
emits O tokens; its prefill writes P tokens (P + g when recomputed after a preemption with g
tokens generated) and each decode step one; it holds ceil(tokens in cache / bs) blocks.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import deque
from collections.abc import Hashable

import numpy as np

from roofline.errors import ScenarioError
from roofline.serving.sim.admission import Admission
from roofline.serving.sim.kvpool import BlockPool
from roofline.serving.sim.lifecycle import DECODE, Req
from roofline.serving.sim.metrics import GapHistogram
from roofline.serving.sim.policy import Policy
from roofline.serving.sim.runstats import RunStats
from roofline.serving.sim.sends import ClientSends
from roofline.serving.sim.steptime import StepModel


class EngineSim(Admission, RunStats):
    """One engine replica serving a request stream (see the module docstring)."""

    def __init__(
        self,
        step: StepModel,
        policy: Policy,
        *,
        block_tokens: int,
        total_blocks: int,
        max_tokens: int,
        max_seqs: int,
        chunked: bool,
        max_partial: int,
        prompt: np.ndarray,
        output: np.ndarray,
        hashes: list[tuple[Hashable, ...]] | None,
        send_s: np.ndarray | None,
        concurrency: int | None,
        request_overhead_s: float = 0.0,
        output_lag_steps: float = 0.0,
        entry_extra_s: np.ndarray | None = None,
        saturation_queue: int = 2000,
        timeline_rows: int = 200_000,
        release_s: np.ndarray | None = None,
        warmup: int = 0,
        warmup_drained: bool = False,
    ) -> None:
        self.step, self.pol = step, policy
        self.bs, self.max_tokens, self.max_seqs = block_tokens, max_tokens, min(max_seqs, max_tokens)
        self.chunked, self.max_partial = chunked, max_partial
        self.pool = BlockPool(total_blocks)
        self.prompt, self.output, self.hashes = prompt, output, hashes
        self.n = len(prompt)
        self.req_overhead = request_overhead_s
        self.lag_steps = float(output_lag_steps)  # output pipeline lag, in the request's own token intervals
        self.extra = entry_extra_s  # per-request addition to the overhead (its variability), or None
        self.closed = concurrency is not None  # client-driven sends (roofline.serving.sim.sends)
        self.warmup = warmup if self.closed else 0
        self.client = ClientSends(self.n, concurrency or 0, release_s, self.warmup, warmup_drained)
        self.send: list[float] = list(send_s) if send_s is not None and not self.closed else []
        self.arrived = 0
        self.span = 0  # 1 + the highest index that reached the queue (= arrived when entries keep send order)
        # requests sent but not yet in the queue, by entry time: a sorted array (open loop, all known) or a heap
        self.pending: list[tuple[float, int]] = []
        self.order = np.zeros(0, dtype=np.int64)
        self.entry_at = np.zeros(0)
        if self.closed:
            for i, t in self.client.start():
                self._send(i, t)
        else:
            self.entry_at = np.asarray(self.send, dtype=np.float64) + request_overhead_s
            if self.extra is not None:
                self.entry_at = self.entry_at + self.extra[: len(self.send)]
            self.order = np.argsort(self.entry_at, kind="stable")
        # the same in arrival order, as arrays of Python numbers for the event loop's lookups
        self._order_q = array("q", self.order.astype(np.int64).tobytes())
        self._entry_q = array("d", self.entry_at[self.order].astype(np.float64).tobytes())
        self._entries = len(self._entry_q)
        # token counts as machine integers (int() of each, 8 bytes a request): cheaper to index than numpy's
        self._prompt_l = array("q", np.asarray(prompt).astype(np.int64).tobytes())
        self._output_l = array("q", np.asarray(output).astype(np.int64).tobytes())
        self.rec_first, self.rec_finish = array("d", [math.nan]) * self.n, array("d", [math.nan]) * self.n
        self.rec_cached, self.rec_preempt = array("q", [0]) * self.n, array("q", [0]) * self.n
        self.generated = 0
        self.waiting: deque[Req] = deque()
        self.running: list[Req] = []
        self.prefilling: list[Req] = []
        self.heap: list[tuple[int, int, Req]] = []
        self.d_count = self.d_sumoff = self.G = self.seq = 0
        self.cnt = [0] * self.bs
        self.dec: dict[int, Req] = {}
        self.keys: dict[float, int] = {}
        self.dec_time = 0.0
        self.hist = GapHistogram()
        self.preemptions = self.completed = 0
        self.decode_tokens = self.prefill_tokens = self.prefill_completions = 0
        self._init_stats(saturation_queue, timeline_rows, float(np.mean(output)))
        self.now = 0.0
        self._cut = 0.0  # arrivals up to this time can join the next step (see the module docstring)

    # ---- arrivals -------------------------------------------------------------------------
    def _entry(self, i: int, t: float) -> float:
        """When closed-loop request i, sent at t, reaches the queue: t + the request overhead (+ its variable
        part), and strictly after t (the module docstring: a resend never joins the step that starts as the
        previous request finishes)."""
        e = t + self.req_overhead + (float(self.extra[i]) if self.extra is not None else 0.0)
        return e if e > t else math.nextafter(t, math.inf)

    def _freed(self, t: float, rid: int) -> None:
        """Request ``rid`` reached its client at t: send what its free slot allows (:class:`ClientSends`). When
        the last warm-up request is done, the inter-token gaps start over: ITL counts the measured requests' gaps
        from then on (all of them after a drained warm-up)."""
        for i, ts in self.client.freed(t, rid):
            self._send(i, ts)
        if rid < self.warmup and self.client.warm_done == self.warmup:
            self.hist = GapHistogram()

    def _send(self, i: int, t: float) -> None:
        """The client sends request i (the next in order) at t."""
        self.send.append(t)
        heapq.heappush(self.pending, (self._entry(i, t), i))

    def _admit_arrivals(self, now: float) -> None:
        """Move the requests that reached the queue by ``now`` (s) into ``waiting``, in entry order."""
        closed = self.closed
        if closed:
            pending = self.pending
            if not pending or pending[0][0] > now:
                return
        else:
            a, entries = self.arrived, self._entry_q
            if a >= self._entries or entries[a] > now:
                return
        with_hashes = self.hashes is not None and self.pol.prefix_caching
        prompt, output = self._prompt_l, self._output_l
        while True:
            if closed:
                if not pending or pending[0][0] > now:
                    return
                entry, i = heapq.heappop(pending)
            else:
                a = self.arrived
                if a >= self._entries or entries[a] > now:
                    return
                i, entry = self._order_q[a], entries[a]
            h = self.hashes[i] if with_hashes else ()  # type: ignore[index]
            self.waiting.append(Req(i, int(prompt[i]), int(output[i]), entry, h))
            self.arrived += 1
            if i >= self.span:
                self.span = i + 1
            if self.arrived == self.n and not closed:
                self.last_send = (now, len(self.waiting), self._work())

    def _next_entry(self) -> float:
        if self.closed:
            return self.pending[0][0] if self.pending else math.inf
        i = self.arrived
        return self._entry_q[i] if i < len(self._entry_q) else math.inf

    # ---- main loop ------------------------------------------------------------------------
    def run(self, progress: object | None = None) -> None:
        """Simulate until every request finished (or saturation is detected)."""
        now = 0.0
        tick = max(self.n // 100, 1)
        last = 0
        lag = self.pol.async_scheduling
        closed, pending, entries = self.closed, self.pending, self._entry_q
        while True:
            t = self._cut if lag else now  # admit whoever reached the queue by t (checked here: most steps none)
            if closed:
                if pending and pending[0][0] <= t:
                    self._admit_arrivals(t)
            elif self.arrived < self._entries and entries[self.arrived] <= t:
                self._admit_arrivals(t)
            if not self.running and not self.waiting:
                nxt = self._next_entry()
                if nxt == math.inf:
                    break
                now = self._cut = max(now, nxt)
                continue
            if self.prefilling or (self.waiting and not self._blocked()):
                now = self._general(now)
            else:
                k = self._stretch_limit()
                now = self._stretch(now, k) if k > 0 else self._general(now)
            if progress is not None and self.completed - last >= tick:
                last = self.completed
                progress(self.completed)  # type: ignore[operator]
            if not self.closed:
                if len(self.waiting) <= self.sat_queue // 2:
                    self.sat_mark = None
                elif self._saturation(now):
                    break
        self.final_check()
        self.now = now

    # ---- admission checks ---------------------------------------------------------------------
    # ---- decode stretches -------------------------------------------------------------------
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
        span, slope, lim = self._spans()
        k = min(k, lim)
        st = self.step.decode_affine(self.d_count, span, slope)
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
        d, d0 = self.d_count, st.first_s
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

    # ---- one general step -------------------------------------------------------------------
    def _general(self, now: float) -> float:
        pol = self.pol
        prefill_mode = False
        if pol.prefill_first:  # a partial prefill continues first, if its next chunk finds KV room (else decode)
            if self.prefilling:
                prefill_mode = not self.d_count or self._partial_fits()
            else:
                prefill_mode = bool(self.waiting and self._can_prefill())
        with_decodes = not prefill_mode or pol.mixed_chunk
        chunks, need, left, preempted = self._plan_running(with_decodes)
        if need:
            self.pool.allocate(need)
        for r, c in chunks:
            if not pol.reserve_full:
                r.blocks = -(-(r.computed + c) // self.bs)
        if not preempted and (prefill_mode or not pol.prefill_first):
            left = self._admit_waiting(chunks, left)
        d = self.d_count if with_decodes else 0
        if not chunks and not d:
            raise ScenarioError(
                "the engine cannot schedule any request: the head of the queue needs more KV blocks or tokens than "
                "the engine has even when idle; raise gpu_memory_utilization / max_num_batched_tokens or shorten it"
            )
        span = self._spans()[0] if d else (0.0,) * len(self.step.windows)
        new = [c for _, c in chunks]
        if chunks:
            dt = self.step.step_time(d, span, new, [r.computed for r, _ in chunks])
        else:
            dt = self.step.step_time(d, span)
        end = now + dt
        self._cut = now
        self.last_step_s = dt  # before the chunks complete: a one-token request lags k of this step
        used0 = self.pool.used - need
        if d:
            self.G += 1
            self.decode_tokens += d
            for key, c in self.keys.items():
                self.hist.add(end - key, c)
            self.keys = {end: d}
            self.dec_time = end
        for r, c in chunks:
            self._progress(r, c, end)
        self._account(end, dt, d + len(chunks), sum(new), 1, used0)
        if d and self.heap[0][0] <= self.G:
            self._finish_decodes(end)
        return end
