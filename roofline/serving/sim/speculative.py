"""Speculative decoding in the serving simulator: verify steps, sampled acceptance, lumpy ITL.

Every decode row of a step is a speculative row: the target verifies V = ``verify_tokens`` query
tokens after its ``past`` cached ones and the drafter runs its passes for the batch
(:mod:`roofline.speculation.decode`). The step time is the compiled step model's, with

* per-token ops at M = V·d, per-sequence ops (lm_head, logits) at V·d rows (every verified position
  needs its logits), recurrent-state ops at V·d tokens of d rows;
* attention over pairs V·Σpast + d·V(V + 1)/2 and span Σpast + V·d (full attention; under a sliding
  window W each row's pairs Σ_{i=p+1}^{p+V} min(i, W) and span min(p + V, W + V − 1));
* a step that also carries prefill chunks: the base model's mixed step (see ``SpecStepModel.step_time``);
* plus the draft seconds of d rows (tabulated for d = 0 … max rows at the workload's mean context)
  and the option's per-step overhead.

Acceptance is sampled per request and step: a step emits 1 + min(X, k) tokens with
P(X ≥ j) = α^j (a chain with per-token acceptance α; a given τ is turned into the α with the same
mean at this k). When a request's prefill completes, the number of steps it needs for its remaining
tokens is drawn from that distribution, which fixes the decode clock at which it finishes; so each
request's TPOT varies, and its ITL is lumpy: each step's first token arrives after the step time,
the other accepted tokens of the step with a zero gap. Between events every row's cache grows by τ
tokens per step on average (the attention sums use that mean). KV blocks are reserved for the whole
request at admission (prompt + output), as under ``reserve_full``, so no mid-decode preemption.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from roofline.errors import ScenarioError
from roofline.ops.attention import causal_pairs
from roofline.profile import CalibrationProfile
from roofline.serving.replica import Replica, compiled_step
from roofline.serving.sim.engine import EngineSim
from roofline.serving.sim.lifecycle import DECODE, Req
from roofline.serving.sim.result import SimulationResult, build_result
from roofline.serving.sim.steptime import StepModel
from roofline.serving.sim.stretch import Stretch
from roofline.serving.workload.stream import Requests, Workload
from roofline.specs.hardware import HardwareSpec
from roofline.specs.model import ModelSpec
from roofline.specs.scenario import Scenario
from roofline.specs.speculative import SpeculativeConfig, tokens_per_step
from roofline.speculation.decode import draft_step_s


def chain_alpha(cfg: SpeculativeConfig) -> float:
    """α of the chain with cfg's mean tokens per step at cfg.k (cfg.alpha itself when given; bisection on τ)."""
    if cfg.alpha is not None:
        return float(cfg.alpha)
    tau = cfg.tokens_per_step
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if tokens_per_step(mid, cfg.k) < tau else (lo, mid)
    return (lo + hi) / 2


def draft_seconds(
    model: ModelSpec,
    sc: Scenario,
    hw: HardwareSpec,
    prof: CalibrationProfile,
    cfg: SpeculativeConfig,
    draft: ModelSpec | None,
    max_rows: int,
    past: float,
) -> np.ndarray:
    """Draft seconds of one speculative step for d = 0 … max_rows rows (all passes, no per-step overhead)."""
    out = np.zeros(max_rows + 1)
    if max_rows < 1:
        return out
    rows = np.arange(1, max_rows + 1, dtype=np.float64)
    out[1:] = draft_step_s(model, sc.with_shape(batch=rows), hw, prof, cfg, draft, np.full_like(rows, past))
    return out


class SpecStepModel:
    """Step time with every decode row a speculative row (formulas in the module docstring).

    ``max_rows`` decode rows at most; ``base`` is compiled for max_tokens = max_rows = the engine budget
    + (V − 1)·max_rows (a full chunk budget next to V·d verify tokens and logits rows).
    """

    def __init__(self, base: StepModel, cfg: SpeculativeConfig, draft_s: np.ndarray, max_rows: int) -> None:
        self.base, self.cfg, self.draft_s = base, cfg, draft_s
        self.v = cfg.verify_tokens
        self.max_tokens = base.max_tokens
        self.max_rows = min(max_rows, len(draft_s) - 1)
        self.windows, self.has_window = base.windows, base.has_window
        self.extra_s = cfg.overhead_s

    def step_time(
        self,
        decode_rows: int,
        decode_span: tuple[float, ...],
        prefill_new: np.ndarray | None = None,
        prefill_past: np.ndarray | None = None,
    ) -> float:
        """Seconds of one step. ``decode_span`` = (Σpairs_a …, Σspan_a …, Σpast) over the speculative rows
        (n attention terms a; see :meth:`SpecEngineSim._spans`).

        Verify-only steps use the decode-phase op list (as the static model prices them). A step with
        prefill chunks is the base model's step over the chunks plus the verify rows as V-token chunks at
        their mean past (exact for full attention: pairs and span are linear in the past), with the
        (V − 1)·d further logits rows and the draft added; the engine's CPU part is combined once, with the
        whole step's GPU seconds (:func:`~roofline.engine.config.step_seconds`).
        """
        b, v, d = self.base, self.v, decode_rows
        if prefill_new is not None and len(prefill_new):
            new = np.asarray(prefill_new, dtype=np.float64)
            past = np.asarray(prefill_past, dtype=np.float64)
            if d:
                mean_past = decode_span[-1] / d
                new = np.concatenate((np.full(d, float(v)), new))
                past = np.concatenate((np.full(d, mean_past), past))
            gpu = b.gpu_time(0, (0.0,) * len(self.windows), new, past)
            if d:
                rows = len(new)
                pm = b.prefill
                gpu += float(pm.seq_s[rows + (v - 1) * d]) - float(pm.seq_s[rows]) + float(self.draft_s[d])
                gpu += self.extra_s
            return b.finish(gpu)
        m = v * d
        if m > self.max_tokens:
            raise ValueError(f"step of {m} tokens exceeds the compiled {self.max_tokens}")
        pm = b.decode
        gpu = pm.overhead_s + float(pm.token_s[m]) + float(pm.seq_s[m]) + pm.state_s(m, d, d)
        n = len(pm.attn)
        for a, term in enumerate(pm.attn):
            if d:
                gpu += term.time_s(m, decode_span[a], decode_span[n + a])
            else:
                gpu += term.time_s(0.0, 0.0, 0.0)
        if d:
            gpu += float(self.draft_s[d]) + self.extra_s
        return b.finish(gpu)

    def decode_affine(self, rows: int, span0: tuple[float, ...], slope: tuple[float, ...]) -> Stretch:
        """A run of speculative-only steps whose Σpairs_a and Σspan_a grow linearly in the step j
        (``span0``/``slope`` encoded as in :meth:`step_time`): the base model's stretch with V tokens per row
        and the draft added to every step."""
        n = len(self.base.decode.attn)
        return self.base.decode_affine(
            rows,
            span0[:n],
            slope[:n],
            tokens_per_row=self.v,
            kv_span0=span0[n : 2 * n],
            kv_slope=slope[n : 2 * n],
            extra_s=float(self.draft_s[rows]) + self.extra_s,
        )


class SpecEngineSim(EngineSim):
    """:class:`EngineSim` whose decode rows are speculative (see the module docstring).

    A decode row's off is float: past = off + τ·G on the decode clock G.
    """

    plain_rows = False  # verify rows: their own spans and step model (no one-line stretches or chunk fast path)

    def __init__(self, step: SpecStepModel, *args: Any, alpha: float, k: int, seed: int = 0, **kw: Any) -> None:
        super().__init__(step, *args, **kw)  # type: ignore[arg-type]
        self.spec_step = step
        if not self.pol.reserve_full:
            raise ScenarioError("the speculative simulator reserves full KV per request; give a reserve_full policy")
        self.alpha, self.k = alpha, k
        self.tau = tokens_per_step(alpha, k)
        self.rng = np.random.default_rng(seed + 7919)
        self.zero_gaps = 0.0

    def _steps_for(self, tokens: int) -> int:
        """Sampled steps to emit ``tokens`` tokens: each step 1 + min(X, k) with P(X ≥ j) = α^j."""
        if tokens <= 0:
            return 0
        if self.alpha <= 0.0:
            return tokens
        total, steps = 0, 0
        while True:
            n = math.ceil((tokens - total) / self.tau * 1.25) + 8
            if self.alpha < 1.0:
                x = np.minimum(self.rng.geometric(1.0 - self.alpha, n) - 1, self.k) + 1
            else:
                x = np.full(n, self.k + 1)
            c = np.cumsum(x) + total
            i = int(np.searchsorted(c, tokens))
            if i < n:
                return steps + i + 1
            total, steps = int(c[-1]), steps + n

    def _spans(self) -> tuple[tuple[float, ...], tuple[float, ...], int]:
        """((Σpairs_a …, Σspan_a …, Σpast), their growth per step, steps before a row nears a window).

        A verify row with p cached tokens attends pairs(p) = Σ_{i=p+1}^{p+V} min(i, W) and span
        min(p + V, W + V − 1): V·p + V(V + 1)/2 and p + V below the window (growing by V·τ and τ per step),
        V·W and W + V − 1 once p ≥ W (constant). A row with W − V < p < W is neither: stretches stop
        before a row enters that band and advance one step at a time while one is in it.
        """
        v, tau, d, g = self.spec_step.v, self.tau, self.d_count, self.G
        s = self.d_sumoff + tau * d * g
        windows = self.step.windows
        n = len(windows)
        pairs, span, dp, ds = [0.0] * n, [0.0] * n, [0.0] * n, [0.0] * n
        lim = 1 << 62
        past = (
            np.fromiter((r.off + tau * g for r in self.dec.values()), np.float64, d) if self.step.has_window else None
        )
        for a, w in enumerate(windows):
            if math.isinf(w) or past is None:
                pairs[a], span[a] = v * s + d * v * (v + 1) / 2, s + v * d
                dp[a], ds[a] = v * tau * d, tau * d
                continue
            pairs[a] = float(causal_pairs(past, np.full(d, float(v)), w).sum())
            span[a] = float(np.minimum(past + v, w + v - 1).sum())
            below = past[past + v <= w]
            dp[a], ds[a] = v * tau * len(below), tau * len(below)
            if np.any((past > w - v) & (past < w)):
                lim = 1
            elif len(below):
                lim = min(lim, int((w - v - float(below.max())) // tau) + 1)
        return (*pairs, *span, float(s)), (*dp, *ds, tau * d), max(lim, 1)

    def _progress(self, r: Req, c: int, end: float) -> None:
        was = r.state
        super()._progress(r, c, end)
        if r.state != DECODE or was == DECODE:
            return
        self.cnt[r.off % self.bs] -= 1  # block residues unused: KV is reserved in full
        self.d_sumoff -= r.off
        r.off = r.target - self.tau * self.G  # type: ignore[assignment]
        self.d_sumoff += r.off
        self.seq += 1
        r.seq = self.seq
        r.gfin = self.G + self._steps_for(r.output - r.gen)
        heapq.heappush(self.heap, (r.gfin, r.seq, r))

    def _leave_decode(self, r: Req) -> None:
        """As the base class, but a row emits τ tokens per step: its generated count from the steps left."""
        self._drop_decode_row(r)
        left = r.gfin - self.G
        r.gen = r.output if left <= 0 else max(r.gen, r.output - round(left * self.tau))
        r.computed = r.target + r.gen - 1

    def _stretch(self, now: float, k: int) -> float:
        d, g0 = self.d_count, self.G
        end = super()._stretch(now, k)
        self._extra_tokens(d * (self.G - g0))
        return end

    def _general(self, now: float) -> float:
        d, g0 = self.d_count, self.G
        end = super()._general(now)
        self._extra_tokens(d * (self.G - g0))
        return end

    def _extra_tokens(self, row_steps: int) -> None:
        """The (τ − 1) further tokens per row-step arrive with the step's first: zero gaps (expected count)."""
        if row_steps:
            extra = (self.tau - 1.0) * row_steps
            self.hist.add(0.0, extra)
            self.zero_gaps += extra
            self.decode_tokens += round(extra)


def run_speculative(
    rep: Replica,
    cfg: SpeculativeConfig,
    wl: Workload,
    req: Requests,
    progress: Callable[[int, int], None] | None = None,
) -> SimulationResult:
    """Serve the drawn requests ``req`` of ``wl`` on ``rep`` with speculative decoding (``roofline.simulate(...,
    speculative=cfg)``).

    The engine's token budget bounds the prefill chunks, and its decode rows are limited to budget // V so the
    verify tokens fit the budget.
    """
    from roofline.specs.library import model as load_model

    if cfg.method == "mtp" and not rep.model.mtp_layers:
        raise ScenarioError(f"speculative decoding: {rep.model.name} ships no MTP layers; use eagle, draft or ngram")
    eng, prof = rep.engine, rep.profile
    budget, v = eng.max_num_batched_tokens, cfg.verify_tokens
    max_rows = min(eng.max_num_seqs, budget // v)
    if max_rows < 1:
        raise ScenarioError(f"the token budget {budget} is smaller than the {v} tokens one speculative row verifies")
    prompt, output = req.prompt, req.output
    table = budget + (v - 1) * max_rows
    base = compiled_step(rep.model, rep.scenario, rep.hardware, prof, eng, table, table, eng.async_scheduling)
    draft = load_model(cfg.draft_model) if cfg.draft_model else None
    past = float(prompt.mean() + output.mean() / 2)
    dsec = draft_seconds(rep.model, rep.scenario, rep.hardware, prof, cfg, draft, max_rows, past)
    step = SpecStepModel(base, cfg, dsec, max_rows)
    rep.check_requests(prompt, output, budget)
    policy = dataclasses.replace(rep.policy, reserve_full=True)
    sim = rep.engine_sim(
        prompt,
        output,
        req.send_s,
        concurrency=req.slots,
        release_s=req.release_s,
        warmup=req.warmup,
        warmup_drained=req.warmup_drained,
        cls=SpecEngineSim,
        step=step,
        policy=policy,
        max_seqs=max_rows,
        alpha=chain_alpha(cfg),
        k=cfg.k,
        seed=wl.seed,
        overhead_seed=wl.seed,
    )
    assert isinstance(sim, SpecEngineSim)
    t0 = time.perf_counter()
    sim.run(None if progress is None else (lambda done: progress(done, len(prompt))))
    wall = time.perf_counter() - t0
    config = rep.run_config(sim, policy=policy, wall_s=wall, seed=wl.seed, workload=wl.describe())
    config["label"] += f", spec {cfg.label()}"
    config |= {
        "speculative": cfg.label(),
        "spec_method": cfg.method,
        "spec_k": cfg.k,
        "spec_tokens_per_step": sim.tau,
        "spec_alpha": sim.alpha,
    }
    return build_result(sim, req.send_s if req.send_s is not None else np.zeros(0), config)
