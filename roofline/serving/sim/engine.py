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
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from roofline.errors import ScenarioError
from roofline.serving.sim.decoding import DecodeStretches
from roofline.serving.sim.kvpool import BlockPool
from roofline.serving.sim.lifecycle import Req
from roofline.serving.sim.metrics import GapHistogram
from roofline.serving.sim.policy import Policy
from roofline.serving.sim.sends import ClientSends
from roofline.serving.sim.steptime import StepModel

#: The attributes of the event loop's state (EngineSim.__init__ and its mixins' init): slots, whose reads are
#: cheaper than a large instance dictionary's. Attributes not named here (subclasses') live in the instance dict.
_STATE = """
arrived batch_int bs busy_s chunk_fast chunked client closed cnt completed _cut d_count d_sumoff dec dec_time
decode_tokens _entries _entry_q extra G generated hashes heap hist inline_cost inline_finish keys kv_int
lag_steps last_send last_step_s line max_chunk max_partial max_seqs max_tokens n now _order_q output _output_l
pending pol pool preemptions prefill_completions prefill_tokens prefilling prompt _prompt_l rec_cached rec_finish
rec_first rec_preempt req_overhead running sat_mark sat_queue saturated send seq span step tl_blocks tl_count tl_flat
tl_rows tl_skip tl_stride waiting warmup work_per_req
"""


class EngineSim(DecodeStretches):
    """One engine replica serving a request stream (see the module docstring)."""

    __slots__ = tuple(_STATE.split())

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
        max_chunk: int | None = None,
    ) -> None:
        self.step, self.pol = step, policy
        self.line = self.plain_rows and step.line_ok  # decode stretches are one line (decoding)
        self.chunk_fast = self.plain_rows  # steps with prefill chunks by StepModel.chunk_step_s
        self.inline_finish = self._owns_finish()  # finished rows in one method (lifecycle)
        self.inline_cost = self._owns_cost()  # the queue head's cost written out (admission)
        self.bs, self.max_tokens, self.max_seqs = block_tokens, max_tokens, min(max_seqs, max_tokens)
        self.max_chunk = max_tokens if max_chunk is None else min(max_chunk, max_tokens)  # one rank's budget
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
        # send times: the open loop's all known (an array), a closed loop's appended as the clients send
        self.send: list[float] | np.ndarray = [] if send_s is None or self.closed else np.asarray(send_s, np.float64)
        self.arrived = 0
        self.span = 0  # 1 + the highest index that reached the queue (= arrived when entries keep send order)
        # requests sent but not yet in the queue, by entry time: a sorted array (open loop, all known) or a heap
        self.pending: list[tuple[float, int]] = []
        # the open loop's requests in entry order (None: in index order) and their entry times, as machine numbers
        self._order_q: array[int] | None = None
        self._entry_q: array[float] = array("d")
        if self.closed:
            for i, t in self.client.start():
                self._send(i, t)
        else:
            self._order_q, self._entry_q = entry_order(np.asarray(self.send), request_overhead_s, self.extra)
        self._entries = len(self._entry_q)
        # token counts as machine integers (int() of each, 8 bytes a request): cheaper to index than numpy's
        self._prompt_l, self._output_l = machine_array("q", prompt), machine_array("q", output)
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
        send = self.send
        assert isinstance(send, list)  # a closed loop's sends are appended as they happen
        send.append(t)
        heapq.heappush(self.pending, (self._entry(i, t), i))

    def _admit_arrivals(self, now: float) -> None:
        """Move the requests that reached the queue by ``now`` (s) into ``waiting``, in entry order."""
        hashes = self.hashes if self.pol.prefix_caching else None
        prompt, output, waiting = self._prompt_l, self._output_l, self.waiting
        if self.closed:
            pending = self.pending
            while pending and pending[0][0] <= now:
                entry, i = heapq.heappop(pending)
                waiting.append(Req(i, prompt[i], output[i], entry, () if hashes is None else hashes[i]))
                self.arrived += 1
                if i >= self.span:
                    self.span = i + 1
            return
        a0 = a = self.arrived
        entries, order, count, span = self._entry_q, self._order_q, self._entries, self.span
        while a < count and entries[a] <= now:
            i = a if order is None else order[a]
            waiting.append(Req(i, prompt[i], output[i], entries[a], () if hashes is None else hashes[i]))
            a += 1
            if i >= span:
                span = i + 1
        self.arrived, self.span = a, span
        if a == self.n and a > a0:  # the last request arrived (with those before it)
            self.last_send = (now, self._queued(), self._work())

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
        line = self.line and not lag  # one-line stretches (decoding): the synchronous scheduler's
        closed, pending, entries, count = self.closed, self.pending, self._entry_q, self._entries
        running, waiting, prefilling, half = self.running, self.waiting, self.prefilling, self.sat_queue // 2
        while True:
            t = self._cut if lag else now  # admit whoever reached the queue by t (checked here: most steps none)
            if closed:
                if pending and pending[0][0] <= t:
                    self._admit_arrivals(t)
            elif self.arrived < count and entries[self.arrived] <= t:
                self._admit_arrivals(t)
            if not running and not waiting:
                nxt = self._next_entry()
                if nxt == math.inf:
                    break
                now = self._cut = max(now, nxt)
                continue
            if prefilling or (waiting and not self._blocked()):
                now = self._general(now)
            elif line:
                now = self._line_stretch(now)
            else:
                k = self._stretch_limit()
                now = self._stretch(now, k) if k > 0 else self._general(now)
            if progress is not None and self.completed - last >= tick:
                last = self.completed
                progress(self.completed)  # type: ignore[operator]
            if not closed:
                if len(waiting) <= half:
                    self.sat_mark = None
                elif self._saturation(now):
                    break
        self.final_check()
        self.now = now

    # ---- one general step -------------------------------------------------------------------
    def _compose(self) -> tuple[list[tuple[Req, int]], int, int]:
        """The next step's prefill chunks, the KV blocks allocated for them and its decode rows, and its decode row
        count (0 when the prefill-first scheduler runs the chunks alone): running partial prefills first (the newest
        preempted on a shortage), then the queue's head while it fits."""
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
            self._admit_waiting(chunks, left)
        return chunks, need, self.d_count if with_decodes else 0

    def _general(self, now: float) -> float:
        """One step of any composition (:meth:`_compose`) from ``now``; its end (s): :meth:`_plan_step`, its
        seconds (:meth:`_price_step`) and :meth:`_apply_step`."""
        chunks, need, d, span = self._plan_step()
        dt, tokens = self._price_step(d, span, chunks)
        return self._apply_step(now, dt, chunks, need, d, tokens)

    def _plan_step(self) -> tuple[list[tuple[Req, int]], int, int, tuple[float, ...]]:
        """(prefill chunks, KV blocks allocated for them, decode rows, the decode rows' attended spans) of the next
        step, its blocks taken (:meth:`_compose`; decodes first with no partial prefill: without its calls)."""
        pol, pool = self.pol, self.pool
        d = self.d_count
        need = self.cnt[(1 - self.G) % self.bs] if d and not pol.reserve_full else 0  # the decodes' new blocks
        if pol.prefill_first or self.prefilling or (need > pool.total - pool.used and self.running):
            chunks, need, d = self._compose()
        else:  # decodes first, no partial prefill, the decodes' blocks free: _compose without its calls
            if need:
                pool.allocate(need)
            chunks = []
            self._admit_waiting(chunks, self.max_tokens - d)
        if not chunks and not d:
            raise ScenarioError(
                "the engine cannot schedule any request: the head of the queue needs more KV blocks or tokens than "
                "the engine has even when idle; raise gpu_memory_utilization / max_num_batched_tokens or shorten it"
            )
        if not d:
            return chunks, need, d, (0.0,) * len(self.step.windows)
        # one line: _spans()[0] without the call
        return chunks, need, d, (float(self.d_sumoff + d * self.G),) if self.line else self._spans()[0]

    def _price_step(self, d: int, span: tuple[float, ...], chunks: list[tuple[Req, int]]) -> tuple[float, int]:
        """(seconds, prefill tokens) of a step of ``d`` decode rows at ``span`` and the prefill ``chunks``."""
        if chunks and self.chunk_fast:
            if len(chunks) == 1:
                r0, tokens = chunks[0]
                return self.step.chunk_step_s(d, span, ((r0.computed, tokens),)), tokens
            tokens = sum(c for _, c in chunks)
            return self.step.chunk_step_s(d, span, [(r.computed, c) for r, c in chunks]), tokens
        new = [c for _, c in chunks]
        if chunks:
            return self.step.step_time(d, span, new, [r.computed for r, _ in chunks]), sum(new)
        return self.step.step_time(d, span), 0

    def _apply_step(
        self, now: float, dt: float, chunks: list[tuple[Req, int]], need: int, d: int, tokens: int
    ) -> float:
        """Run the planned step (:meth:`_plan_step`) of ``dt`` seconds from ``now``: its decode tokens, gaps and
        finishes, the chunks' progress, the run's integrals and timeline row; its end (s)."""
        pool = self.pool
        end = now + dt
        self._cut = now
        self.last_step_s = dt  # before the chunks complete: a one-token request lags k of this step
        used0 = pool.used - need
        if d:
            self.G += 1
            self.decode_tokens += d
            hist = self.hist
            for key, c in self.keys.items():
                hist.add(end - key, c)
            self.keys = {end: d}
            self.dec_time = end
        for r, c in chunks:
            self._progress(r, c, end)
        self.busy_s += dt  # RunStats._account, written out
        self.batch_int += (d + len(chunks)) * dt
        used = pool.used
        self.kv_int += (used0 + used) / 2 * dt
        skip = self.tl_skip + 1
        if skip < self.tl_stride:
            self.tl_skip = skip
        else:
            self._tl_row(end, used, tokens, 1)
        if d and self.heap[0][0] <= self.G:
            self._finish_decodes(end)
        return end


def machine_array(code: str, values: np.ndarray | Sequence[float]) -> array[Any]:
    """``values`` as an :class:`array.array` of type ``code`` ("d": float64, "q": int64), copied once."""
    out = array(code)
    out.frombytes(np.ascontiguousarray(values, dtype=np.float64 if code == "d" else np.int64).data.cast("B"))
    return out


def entry_order(
    send_s: np.ndarray, overhead_s: float, extra_s: np.ndarray | None
) -> tuple[array[int] | None, array[float]]:
    """(request indices in entry order, or None when that is index order; entry times in that order, s) of an open
    loop: entry = send + overhead (+ each request's extra), ordered by a stable sort (ties keep send order)."""
    entry = send_s + overhead_s
    if extra_s is not None:
        entry = entry + extra_s[: len(send_s)]
    if bool(np.all(entry[1:] >= entry[:-1])):  # already in order: a stable sort leaves it as it is
        return None, machine_array("d", entry)
    order = np.argsort(entry, kind="stable")
    return machine_array("q", order), machine_array("d", entry[order])
