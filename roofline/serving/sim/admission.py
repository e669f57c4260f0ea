"""Batch formation of the engine simulation: which waiting requests a step admits and which chunks it runs.

Under the engine's limits (``max_num_seqs``, the token budget ``max_num_batched_tokens``, the free KV blocks,
``chunked_prefill`` and ``max_partial_prefills``) and its policy (:mod:`roofline.serving.sim.policy`: prefill
first or decodes first, blocks reserved for the whole request or grown per block, prefix-cache hits by block
hash): the head of the queue is admitted when its chunk and its fresh blocks fit; running partial prefills take
their next chunks first; on a KV shortage the newest running request is preempted (recomputed later).
"""

from __future__ import annotations

from roofline.serving.sim.lifecycle import PREFILL, Req, RequestLifecycle


class Admission(RequestLifecycle):
    """The scheduler's admission and chunking (state initialised by ``EngineSim.__init__``)."""

    max_tokens: int
    max_seqs: int
    chunked: bool
    max_partial: int
    seq: int

    def _dec_need(self, g: int) -> int:
        """Blocks the decode rows need to run the step at clock g."""
        if self.pol.reserve_full or not self.d_count:
            return 0
        return self.cnt[(1 - g) % self.bs]

    def _head_cost(self, r: Req, budget: int) -> tuple[int, int, int, int] | None:
        """(cache-hit blocks, of those in the LRU, chunk tokens, fresh blocks) to admit r, or None."""
        bs = self.bs
        if r.hashes:
            h, hl = self.pool.lookup(r.hashes, (r.target - 1) // bs)
        else:
            h = hl = 0
        new = r.target - h * bs
        if not self.chunked and new > budget:
            return None
        c = new if new < budget else budget
        if c < new and len(self.prefilling) >= self.max_partial:
            return None
        fresh = -(-(r.prompt + r.output) // bs) - h if self.pol.reserve_full else -(-(h * bs + c) // bs) - h
        return h, hl, c, fresh

    def _blocked(self) -> bool:
        """True when the head of the queue cannot be admitted at the next step (nor later without a completion)."""
        if len(self.running) >= self.max_seqs:
            return True
        budget = self.max_tokens if self.pol.prefill_first else self.max_tokens - self.d_count
        if budget <= 0:
            return True
        cost = self._head_cost(self.waiting[0], budget)
        if cost is None:
            return True
        free = self.pool.free - (0 if self.pol.prefill_first else self._dec_need(self.G))
        return cost[3] + cost[1] > free

    def _prefill_chunks(self, left: int) -> tuple[list[tuple[Req, int]], int, int]:
        """(next chunk of each running partial prefill within ``left`` budget tokens, the new KV blocks they
        need, the budget left)."""
        chunks, need = [], 0
        for r in self.prefilling:
            if left <= 0:
                break
            c = min(r.target - r.computed, left)
            if not self.pol.reserve_full:
                need += -(-(r.computed + c) // self.bs) - r.blocks
            chunks.append((r, c))
            left -= c
        return chunks, need, left

    def _partial_fits(self) -> bool:
        """True when the running partial prefills' next chunks (within the token budget) find their KV blocks."""
        return self._prefill_chunks(self.max_tokens)[1] <= self.pool.free

    def _can_prefill(self) -> bool:
        if len(self.running) >= self.max_seqs:
            return False
        cost = self._head_cost(self.waiting[0], self.max_tokens)
        return cost is not None and cost[3] + cost[1] <= self.pool.free

    def _plan_running(self, with_decodes: bool) -> tuple[list[tuple[Req, int]], int, int, bool]:
        """Chunks of running prefills and the blocks the step needs, preempting the newest on a shortage."""
        preempted = False
        while True:
            chunks, need, left = self._prefill_chunks(self.max_tokens - (self.d_count if with_decodes else 0))
            if with_decodes:
                need += self._dec_need(self.G)
            if need <= self.pool.free or not self.running:
                return chunks, need, left, preempted
            self._preempt(self.running[-1])
            preempted = True

    def _admit_waiting(self, chunks: list[tuple[Req, int]], left: int) -> int:
        pool, bs, waiting = self.pool, self.bs, self.waiting
        while waiting and left > 0 and len(self.running) < self.max_seqs:
            r = waiting[0]
            cost = self._head_cost(r, left)
            if cost is None:
                break
            h, hl, c, fresh = cost
            if fresh + hl > pool.free:
                break
            waiting.popleft()
            if h:
                hits = r.hashes[:h]
                pool.acquire(hits)
                r.named = list(hits)
            pool.allocate(fresh)
            r.blocks = h + fresh
            r.computed = h * bs
            if not r.admitted:
                r.cached = h * bs
                r.admitted = True
            r.state = PREFILL
            self.seq += 1
            r.seq = self.seq
            self.running.append(r)
            self.prefilling.append(r)
            chunks.append((r, c))
            left -= c
        return left
