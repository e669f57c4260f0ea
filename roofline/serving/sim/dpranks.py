"""Attention data parallelism as the engines run it: R ranks, each with its own scheduler and KV pool, behind a
load balancer, stepping together through every MoE layer.

SGLang ``--enable-dp-attention`` (and vLLM's and TensorRT-LLM's attention DP) runs one scheduler per DP rank, each
with its own waiting queue, running batch, token budget, ``max_running_requests`` and KV pool (the ranks' pools are
not shared: a request's KV lives on its rank). A controller hands each new request to one rank by the engine's rule
(``EngineConfig.dp_load_balance``, each preset's cited): ``round_robin`` (SGLang's default, request k to rank
k mod R), ``shortest_queue`` (SGLang's other method: the fewest running + waiting requests), ``waiting_weighted``
(vLLM: the lowest 4 × waiting + running), ``fewest_tokens`` (TensorRT-LLM: among the ranks below ⌈(held + 1) / R⌉
requests, the fewest held prompt tokens); ties go to the lowest rank. The engines count from state a moment old
(vLLM refreshes every 100 ms); the simulator counts the state at arrival.

The ranks run their forward passes together: every MoE layer exchanges tokens with every rank, so a step lasts as
long as its busiest rank's own work plus the experts' at all ranks' tokens, and a rank with nothing to run joins
with an idle batch (SGLang ``dp_attention.py`` pads the ranks to the largest; TensorRT-LLM runs a dummy request).
:class:`DPReplicaSim` drives this: the replica's arrivals (open loop or closed-loop clients, request overheads,
warm-up) are its own, as in :class:`~roofline.serving.sim.engine.EngineSim`; each arrival goes to a
:class:`RankSim` by the balancer; every step each rank with work plans its batch (``EngineSim._plan_step``: its
own chunked-prefill admission, preemption, prefix cache), the step costs

    step = finish(max over ranks of the rank's own GPU seconds + experts(Σ tokens of all ranks))

(:class:`~roofline.serving.sim.ranks.DPStepModel`: the rank's own ops, :func:`~roofline.serving.sim.ranks.rank_ops`,
at its rows and chunks; the routed experts, :func:`~roofline.serving.sim.ranks.expert_ops`, at every rank's tokens;
``finish`` joins the engine's CPU part), and every rank runs it (``EngineSim._apply_step``) with that duration.
The ranks' request records and inter-token histogram are the replica's, so the result is built as for one engine.
Every step is simulated one by one (no closed-form decode stretches: the busiest rank can change from step to
step). ``dp_load_balance="pooled"`` keeps the pooled model (one running set of R budgets, the busiest of ⌈d/R⌉
rows: every rank evenly loaded, which no balancer guarantees); one request gets the same steps in both.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from typing import Any

from roofline.engine.config import DPLoadBalance
from roofline.errors import ScenarioError
from roofline.serving.sim.engine import EngineSim
from roofline.serving.sim.lifecycle import Req
from roofline.serving.sim.policy import Policy
from roofline.serving.sim.ranks import DPStepModel
from roofline.serving.sim.steptime import StepModel

#: Limits each rank has of its own (the replica reports their sums)
PER_RANK = ("total_blocks", "max_tokens", "max_seqs", "max_partial")
#: The balancers a :class:`DPReplicaSim` runs (``pooled`` is the pooled model: one :class:`EngineSim`).
RANK_BALANCES: tuple[str, ...] = ("round_robin", "shortest_queue", "waiting_weighted", "fewest_tokens")


class RankSim(EngineSim):
    """One DP rank's scheduler: its queue, running set and KV pool; no arrivals of its own (the replica hands them
    over), its records and histogram the replica's (``owner``), its finished requests' clients the replica's."""

    def __init__(self, owner: DPReplicaSim, step: StepModel, policy: Policy, **kw: Any) -> None:
        super().__init__(step, policy, send_s=None, concurrency=None, **kw)
        self.owner = owner
        self.closed, self.lag_steps = owner.closed, owner.lag_steps  # resends and output lag as the replica's
        self.rec_first, self.rec_finish = owner.rec_first, owner.rec_finish
        self.rec_cached, self.rec_preempt = owner.rec_cached, owner.rec_preempt
        self.hist = owner.hist
        self.held_tokens = 0  # prompt tokens of the requests it holds (TensorRT-LLM's balance)

    def _done(self, r: Req, end: float) -> None:
        super()._done(r, end)
        self.held_tokens -= r.prompt

    def _freed(self, t: float, rid: int) -> None:
        self.owner._freed(t, rid)


_RANK_CLASSES: dict[str, type[RankSim]] = {}
#: The keywords EngineSim itself takes (a variant's others go to its ranks only)
_ENGINE_KW = frozenset(inspect.signature(EngineSim.__init__).parameters) - {"self"}


def rank_class(engine_cls: type[EngineSim]) -> type[RankSim]:
    """The rank scheduler of an engine variant (e.g. a disaggregated decode pool's
    :class:`~roofline.serving.sim.disagg.DecodeSideSim`): :class:`RankSim` before it in the method order (one class
    per variant, made once)."""
    if engine_cls is EngineSim:
        return RankSim
    key = f"{engine_cls.__module__}.{engine_cls.__qualname__}"
    if key not in _RANK_CLASSES:
        _RANK_CLASSES[key] = type(f"{engine_cls.__name__}Rank", (RankSim, engine_cls), {})
    return _RANK_CLASSES[key]


class DPReplicaSim(EngineSim):
    """An attention-DP replica of ``step.ranks`` ranks behind a load balancer (module docstring). ``step`` is the
    replica's :class:`DPStepModel`; ``total_blocks``, ``max_tokens``, ``max_seqs`` and ``max_partial`` are each
    rank's (the replica reports their sums); ``engine_cls``: the engine variant each rank runs (:func:`rank_class`),
    whose own keywords go to the ranks."""

    def __init__(
        self,
        step: DPStepModel,
        policy: Policy,
        *,
        balance: DPLoadBalance,
        engine_cls: type[EngineSim] = EngineSim,
        **kw: Any,
    ) -> None:
        if balance not in RANK_BALANCES:
            raise ScenarioError(
                f"dp_load_balance {balance!r} has no per-rank simulation; give one of {', '.join(RANK_BALANCES)} "
                "(or 'pooled' for one pooled running set)"
            )
        r = int(step.ranks)
        own = ("block_tokens", "chunked", "max_chunk", *PER_RANK)
        variant = {k: kw.pop(k) for k in list(kw) if k not in _ENGINE_KW}  # the variant's own (e.g. pre), the ranks'
        ranks_kw: dict[str, Any] = {k: kw[k] for k in own if k in kw} | variant
        # a rank reads its requests from their Req records (the replica admits them): no per-request arrays of its own
        ranks_kw |= {"prompt": kw["prompt"][:1], "output": kw["output"][:1], "hashes": None}
        summed = {k: int(kw[k]) * r for k in PER_RANK}
        super().__init__(step, policy, **(kw | summed))
        self.dp_step, self.balance, self.next_rank = step, balance, 0
        cls = rank_class(engine_cls)
        self.ranks = [cls(self, step, policy, **ranks_kw) for _ in range(r)]

    # ---- arrivals -----------------------------------------------------------------------------
    def _freed(self, t: float, rid: int) -> None:
        """A client's slot is free again (EngineSim); a warm-up's end restarts every rank's gap histogram too."""
        hist = self.hist
        super()._freed(t, rid)
        if self.hist is not hist:
            for rank in self.ranks:
                rank.hist = self.hist

    def _queued(self) -> int:
        return len(self.waiting) + sum(len(rank.waiting) for rank in self.ranks)

    def _pick(self) -> int:
        """The rank the balancer hands the next request to (module docstring; ties: the lowest rank)."""
        ranks, n = self.ranks, len(self.ranks)
        if self.balance == "round_robin":
            k = self.next_rank
            self.next_rank = (k + 1) % n
            return k
        if self.balance == "shortest_queue":
            return min(range(n), key=lambda i: len(ranks[i].running) + len(ranks[i].waiting))
        if self.balance == "waiting_weighted":
            return min(range(n), key=lambda i: 4 * len(ranks[i].waiting) + len(ranks[i].running))
        held = [len(rank.running) + len(rank.waiting) for rank in ranks]  # fewest_tokens
        cap = -(-(sum(held) + 1) // n)
        room = [i for i in range(n) if held[i] < cap] or list(range(n))
        return min(room, key=lambda i: ranks[i].held_tokens)

    def _dispatch(self) -> None:
        """Hand every request that reached the replica's queue to a rank, in arrival order."""
        waiting, ranks = self.waiting, self.ranks
        while waiting:
            req = waiting.popleft()
            rank = ranks[self._pick()]
            rank.held_tokens += req.prompt
            rank.waiting.append(req)

    # ---- main loop ------------------------------------------------------------------------------
    def run(self, progress: object | None = None) -> None:
        """Simulate until every request finished (or saturation is detected): one step of all ranks at a time."""
        now, tick, last = 0.0, max(self.n // 100, 1), 0
        lag, half = self.pol.async_scheduling, self.sat_queue // 2
        while True:
            self._admit_arrivals(self._cut if lag else now)
            self._dispatch()
            active = [rank for rank in self.ranks if rank.running or rank.waiting]
            if not active:
                nxt = self._next_entry()
                if nxt == math.inf:
                    break
                now = self._cut = max(now, nxt)
                continue
            end = self._decode_stretch(now, active, lag)
            now = self._step(now, active) if end is None else end
            if progress is not None:
                self._sync_counts()
                if self.completed - last >= tick:
                    last = self.completed
                    progress(self.completed)  # type: ignore[operator]
            if not self.closed:
                if self._queued() <= half:
                    self.sat_mark = None
                else:
                    self._sync_counts()
                    if self._saturation(now):
                        break
        self._sync_counts()
        self.final_check()
        self.now = now

    def _stretch_steps(self, active: Sequence[RankSim]) -> int:
        """Decode-only steps every rank may run before one of its rows finishes or its KV runs out (0: none, as
        some rank has a queue or a partial prefill, or the model has a sliding window)."""
        if self.dp_step.has_window:
            return 0
        k = 1 << 62
        for rank in active:
            if rank.waiting or rank.prefilling or not rank.d_count:
                return 0
            k = min(k, rank._kv_steps(rank._top_gfin() - rank.G))
        return k

    def _decode_stretch(self, now: float, active: Sequence[RankSim], lag: bool) -> float | None:
        """Run decode-only steps of every rank in one go while nothing else can happen (no queue, no partial
        prefill, no finish, no KV shortage, no arrival that could join); their end (s), or None when fewer than two
        steps may run. Step j lasts max over ranks of the rank's stretch step j (:meth:`StepModel.decode_affine` of
        its rows, the experts at all ranks' rows added to each: finish(max own + experts) = max of finish(own +
        experts)); every gap goes to the replica's histogram exactly."""
        k_max = self._stretch_steps(active)
        if k_max < 2:
            return None
        nxt = self._next_entry()
        if lag and nxt <= now:
            return None  # it arrived during the last step: the step now starting was formed before it
        rows = sum(rank.d_count for rank in active)
        extra = self.dp_step._shared_s(rows, False)
        lines = []
        for rank in active:
            span, slope, _ = rank._spans()
            lines.append(StepModel.decode_affine(self.dp_step, rank.d_count, span, slope, extra_s=extra))
        gaps: list[float] = []
        total, target = 0.0, nxt - now
        while len(gaps) < k_max:
            j = len(gaps)
            dt = max(line.step(j) for line in lines)
            gaps.append(dt)
            total += dt
            if total >= target:  # it reaches the queue by this step's end: it joins the next (async: the one after)
                if lag and len(gaps) < k_max:
                    dt = max(line.step(j + 1) for line in lines)
                    gaps.append(dt)
                    total += dt
                break
        if len(gaps) < 2:
            return None
        return self._run_stretch(now, active, gaps, total, rows)

    def _run_stretch(self, now: float, active: Sequence[RankSim], gaps: list[float], total: float, rows: int) -> float:
        """Apply k = len(gaps) decode-only steps of these durations to every active rank; their end (s)."""
        k, end, hist = len(gaps), now + total, self.hist
        used0 = self.pool.used
        for rank in active:
            d = rank.d_count
            grow = rank._blocks_for(k)
            if grow:
                rank.pool.allocate(grow)
            for key, c in rank.keys.items():
                hist.add(now + gaps[0] - key, c)
            rank.keys, rank.dec_time = {end: d}, end
            rank.G += k
            rank.decode_tokens += d * k
            rank.last_step_s, rank._cut = gaps[-1], end - gaps[-1]
        for dt in gaps[1:]:
            hist.add(dt, rows)
        for rank in active:
            if rank.heap[0][0] <= rank.G:
                rank._finish_decodes(end)
        self._account_ranks(end, total, rows, used0, 0, steps=k)
        self._cut, self.last_step_s = end - gaps[-1], gaps[-1]
        return end

    def _step(self, now: float, active: Sequence[RankSim]) -> float:
        """One step of every rank with work (module docstring); its end (s)."""
        plans = [rank._plan_step() for rank in active]
        own_s, rows, decode_rows, prefill_tokens = 0.0, 0, 0, 0
        news = []
        for chunks, _, d, span in plans:
            if chunks:
                new = [float(c) for _, c in chunks]
                gpu = StepModel.gpu_time(self.dp_step, d, span, new, [float(q.computed) for q, _ in chunks])
                n_new = int(sum(new))
            else:
                gpu, n_new = StepModel.gpu_time(self.dp_step, d, span), 0
            own_s = gpu if gpu > own_s else own_s
            news.append(n_new)
            rows += d + len(chunks)
            decode_rows += d
            prefill_tokens += n_new
        shared = self.dp_step._shared_s(decode_rows + prefill_tokens, prefill_tokens > 0)
        dt = self.dp_step.finish(own_s + shared)
        used0 = self.pool.used  # the ranks' blocks at the last step's end (planning allocated the step's own)
        for rank, (chunks, need, d, _), n_new in zip(active, plans, news, strict=True):
            rank._apply_step(now, dt, chunks, need, d, n_new)
        self._account_ranks(now + dt, dt, rows, used0, prefill_tokens)
        self._cut, self.last_step_s = now, dt
        return now + dt

    def _account_ranks(self, end: float, dt: float, rows: int, used0: int, prefill: int, steps: int = 1) -> None:
        """The replica's integrals, counters and timeline row after a step of ``rows`` rows and ``prefill`` prefill
        tokens (or ``steps`` decode-only steps of ``dt`` seconds in all): its ranks' sums."""
        ranks = self.ranks
        used = self.pool.used = sum(rank.pool.used for rank in ranks)
        self.busy_s += dt
        self.batch_int += rows * dt
        self.kv_int += (used0 + used) / 2 * dt
        skip = self.tl_skip + 1
        if skip < self.tl_stride:
            self.tl_skip = skip
            return
        running, d = sum(len(rank.running) for rank in ranks), sum(rank.d_count for rank in ranks)
        self._tl_values(end, running, self._queued(), used, d, prefill, steps)

    def _sync_counts(self) -> None:
        """The replica's request and token counters: its ranks' sums (read where they are needed, not every step)."""
        ranks = self.ranks
        self.completed = sum(rank.completed for rank in ranks)
        self.generated = sum(rank.generated for rank in ranks)
        self.preemptions = sum(rank.preemptions for rank in ranks)
        self.decode_tokens = sum(rank.decode_tokens for rank in ranks)
        self.prefill_tokens = sum(rank.prefill_tokens for rank in ranks)
        self.prefill_completions = sum(rank.prefill_completions for rank in ranks)
        self.d_count = sum(rank.d_count for rank in ranks)

    def _work(self) -> float:
        return float(sum(rank.decode_tokens + rank.prefill_completions for rank in self.ranks))
