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
    max_chunk: int  # the most new tokens one request runs in a step: max_tokens, or one rank's budget of several
    max_seqs: int
    chunked: bool
    max_partial: int
    seq: int
    #: :meth:`_admit_waiting` may cost a request without hashes itself (:meth:`_owns_cost`)
    inline_cost: bool = False

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
            new = r.target - h * bs
        else:
            h = hl = 0
            new = r.target
        cap = budget if budget <= self.max_chunk else self.max_chunk
        if new <= cap:
            c = new
        elif not self.chunked or len(self.prefilling) >= self.max_partial:  # it fits in no step / no partial left
            return None
        else:
            c = cap
        fresh = -(-(r.prompt + r.output) // bs) - h if self.pol.reserve_full else -(-(h * bs + c) // bs) - h
        return h, hl, c, fresh

    def _blocked(self) -> bool:
        """True when the head of the queue cannot be admitted at the next step (nor later without a completion)."""
        if len(self.running) >= self.max_seqs:
            return True
        pol, d = self.pol, self.d_count
        budget = self.max_tokens if pol.prefill_first else self.max_tokens - d
        if budget <= 0:
            return True
        budget = budget if budget <= self.max_chunk else self.max_chunk
        r = self.waiting[0]
        if self.inline_cost and not r.hashes:  # _head_cost of a request without block hashes, written out
            new = r.target
            if new > budget and (not self.chunked or len(self.prefilling) >= self.max_partial):
                return True
            bs = self.bs
            blocks = (
                -(-(r.prompt + r.output) // bs) if pol.reserve_full else -(-(new if new <= budget else budget) // bs)
            )
        else:
            cost = self._head_cost(r, budget)
            if cost is None:
                return True
            blocks = cost[3] + cost[1]
        pool = self.pool
        dec = 0 if pol.prefill_first or pol.reserve_full or not d else self.cnt[(1 - self.G) % self.bs]  # _dec_need
        return blocks > pool.total - pool.used - dec

    def _prefill_chunks(self, left: int) -> tuple[list[tuple[Req, int]], int, int]:
        """(next chunk of each running partial prefill within ``left`` budget tokens, the new KV blocks they
        need, the budget left)."""
        chunks, need = [], 0
        for r in self.prefilling:
            if left <= 0:
                break
            c = min(r.target - r.computed, left, self.max_chunk)
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
        pool = self.pool
        while True:
            left = self.max_tokens - (self.d_count if with_decodes else 0)
            chunks, need, left = self._prefill_chunks(left) if self.prefilling else ([], 0, left)
            if with_decodes:
                need += self._dec_need(self.G)
            if need <= pool.total - pool.used or not self.running:
                return chunks, need, left, preempted
            self._preempt(self.running[-1])
            preempted = True

    def _admit_waiting(self, chunks: list[tuple[Req, int]], left: int) -> int:
        """Admit the head of the queue while it fits (:meth:`_head_cost`), appending its first chunk to ``chunks``;
        the token budget left."""
        pool, bs, waiting, running, max_seqs = self.pool, self.bs, self.waiting, self.running, self.max_seqs
        inline = self.inline_cost
        while waiting and left > 0 and len(running) < max_seqs:
            r = waiting[0]
            if inline and not r.hashes:  # _head_cost of a request without block hashes, written out
                h = hl = 0
                new = r.target
                cap = left if left <= self.max_chunk else self.max_chunk
                if new <= cap:
                    c = new
                elif not self.chunked or len(self.prefilling) >= self.max_partial:
                    break
                else:
                    c = cap
                fresh = -(-(r.prompt + r.output) // bs) if self.pol.reserve_full else -(-c // bs)
            else:
                cost = self._head_cost(r, left)
                if cost is None:
                    break
                h, hl, c, fresh = cost
            if fresh + hl > pool.total - pool.used:
                break
            waiting.popleft()
            if h:
                hits = r.hashes[:h]
                pool.acquire(hits)
                r.named = list(hits)
            if pool.lru:
                pool.allocate(fresh)
            else:  # BlockPool.allocate without cached blocks to evict (fresh + hl ≤ free: checked above)
                pool.used += fresh
            r.blocks = h + fresh
            r.computed = h * bs
            if not r.admitted:
                r.cached = h * bs
                r.admitted = True
            r.state = PREFILL
            self.seq = seq = self.seq + 1
            r.seq = seq
            running.append(r)
            self.prefilling.append(r)
            chunks.append((r, c))
            left -= c
        return left

    def _owns_cost(self) -> bool:
        """True when this class keeps :meth:`_head_cost` (which :meth:`_admit_waiting` writes out)."""
        return type(self)._head_cost is Admission._head_cost
