"""Fast screening tier: closed-form mean latencies of an open-loop Poisson stream, vectorised over rates.

For planning over many configurations before the simulator confirms the finalists. Steady state of
a continuous-batching engine with chunked prefill (prompt P, output O tokens, Poisson rate λ):

* decode steps with N decode rows at mean context L̄ = P + O/2 take d(max(N, 1)); a step that also carries a
  prefill chunk of c = min(P, budget − N) tokens takes S(N); a prompt needs n = ⌈P / c⌉ such steps; d and S
  are the compiled step model's own steps (:meth:`~roofline.serving.sim.steptime.StepModel.mean_step_s`, equal
  to the simulator's step time at whole rows; real-valued N interpolates its tables);
* the fraction of steps carrying a prefill is q = λ·n·τ̄, so the mean step time is
  τ̄ = (1 − q)·d + q·S, i.e. τ̄ = d / (1 − λ·n·(S − d));
* Little's law for the decode population: N = λ·(O − 1)·τ̄ (each request spends O − 1 steps decoding);
  N and τ̄ are solved together as a fixed point;
* TTFT as an M/G/1 queue of prefills (Pollaczek–Khinchine): service X = n·S, ρ = λ·X,
  W_q = λ·E[X²] / (2(1 − ρ)) with deterministic X, plus the residual of the decode step in progress
  at arrival, (1 − ρ)·d/2, plus X: TTFT = W_q + (1 − ρ)·d/2 + X; under asynchronous scheduling the step
  after the one in progress was formed before the arrival, so an arrival that finds requests decoding
  (probability 1 − e^(−N): the decode population of an M/G/∞ stage is Poisson) waits one more step, a
  mean one (decode-only or carrying another request's chunk): + (1 − e^(−N))·τ̄;
* TPOT = τ̄; ITL is the two-mass mixture {d with probability 1 − q, S with q} (mean τ̄);
  E2E = TTFT + (O − 1)·τ̄; the engine's request overhead y and output lag k add y + k·τ̄ to both.

Capacity: the fixed point exists only while λ·n·(S − d) < 1, N ≤ max_num_seqs and the KV pool holds
(N + 1)·(P + O) tokens; the largest such λ is the sustainable rate and load = λ / that rate. Beyond it
the tier reports NaN; ``in_range`` is False from load 0.8 on and where the running set's Poisson
swings (N + 3√N + 1 requests) would exhaust the KV pool (an engine then preempts). Measured against
the simulator (tests/test_serving_screening.py): means within 10 % below load 0.8 for prompts that
fit one step; prompts of thousands of tokens make TPOT 10–30 % low (the mixed steps' share is then
larger than the mean-value formula gives). Scheduler differences between engines and the tails of
the distributions are the simulator's job; this tier gives means.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline.engine.config import output_lag_s
from roofline.serving.sim.steptime import StepModel

#: Loads (rate / sustainable rate) above which the tier says it is out of range: near the knee the
#: queue is dominated by fluctuations a mean-value model does not carry (the simulator's job).
RANGE_LOAD = 0.8


@dataclass(frozen=True)
class Screen:
    """Mean latencies (s) per rate (requests/s): NaN beyond the sustainable rate; ``in_range`` False where
    the tier should not be trusted (load ≥ 0.8 or KV pressure); ``load`` = rate / sustainable rate."""

    qps: np.ndarray
    load: np.ndarray
    in_range: np.ndarray
    decode_rows: np.ndarray
    step_s: np.ndarray
    ttft_mean_s: np.ndarray
    tpot_mean_s: np.ndarray
    itl_mean_s: np.ndarray
    e2e_mean_s: np.ndarray
    sustainable_qps: float


def _solve(sm: StepModel, lam: np.ndarray, p: float, o: float, budget: int, iters: int = 200) -> tuple[np.ndarray, ...]:
    """Fixed point (N, τ̄, d, S, n) for each rate; τ̄ = inf where it diverges."""
    ctx = p + o / 2
    n_dec = np.zeros_like(lam)
    tau = d = s = n = np.zeros_like(lam)
    for _ in range(iters):
        chunk = np.clip(budget - np.floor(n_dec), 1, p)
        n = np.ceil(p / chunk)
        past = (p - chunk) / 2  # mean cached tokens before a chunk
        rows = np.maximum(n_dec, 1.0)  # a decoding request never runs in a step of fewer rows than itself
        d = sm.mean_step_s(rows, ctx)
        s = sm.mean_step_s(n_dec, ctx, p / n, np.minimum(past, p - p / n))
        gap = 1.0 - lam * n * (s - d)
        tau = np.where(gap > 0, d / np.where(gap > 0, gap, 1.0), np.inf)
        new = np.minimum(lam * max(o - 1, 0) * tau, 1e9)
        if np.allclose(new, n_dec, rtol=1e-10, atol=1e-9):
            break
        n_dec = 0.5 * n_dec + 0.5 * new
    return n_dec, tau, d, s, n


def screen(
    sm: StepModel,
    qps: np.ndarray,
    prompt: float,
    output: float,
    budget: int,
    max_seqs: int,
    kv_tokens: float,
    *,
    request_overhead_s: float = 0.0,
    output_lag_steps: float = 0.0,
    sustainable: float | None = None,
) -> Screen:
    """Closed-form means for each rate in ``qps`` (see the module docstring). The engine's mean request overhead
    y and output lag k add to TTFT and E2E: + y + k·τ̄ (a Poisson stream delayed by independent overheads is
    still Poisson at the same rate, so the queue is unchanged). ``sustainable``: :func:`sustainable_qps` of these
    same arguments when the caller has it already (None: computed here)."""
    lam = np.atleast_1d(np.asarray(qps, dtype=np.float64))
    n_dec, tau, d, s, n = _solve(sm, lam, prompt, output, budget)
    ok = np.isfinite(tau) & (n_dec <= max_seqs) & ((n_dec + 1) * (prompt + output) <= kv_tokens)
    x = n * s
    rho = lam * x
    ok &= rho < 1
    sus = sustainable_qps(sm, prompt, output, budget, max_seqs, kv_tokens) if sustainable is None else sustainable
    # out of range: near the knee, or Poisson swings of the running set (≈ 3σ = 3√N) would exhaust the KV pool
    in_range = ok & (lam < RANGE_LOAD * sus) & ((n_dec + 3 * np.sqrt(n_dec) + 1) * (prompt + output) <= kv_tokens)
    wq = lam * x**2 / (2 * np.where(rho < 1, 1 - rho, 1.0))
    ttft = wq + (1 - rho) * d / 2 + x
    if sm.async_cpu:  # asynchronous scheduling: the next step was formed before the arrival
        ttft = ttft + (1 - np.exp(-n_dec)) * tau
    ttft = ttft + request_overhead_s + (output_lag_s(output_lag_steps, tau) if output_lag_steps else 0.0)
    nan = np.full_like(lam, np.nan)
    return Screen(
        lam,
        lam / sus,
        in_range,
        np.where(ok, n_dec, nan),
        np.where(ok, tau, nan),
        np.where(ok, ttft, nan),
        np.where(ok, tau, nan),
        np.where(ok, tau, nan),
        np.where(ok, ttft + max(output - 1, 0) * tau, nan),
        sus,
    )


#: The knee: the lowest rate at which the mean TTFT reaches this multiple of its zero-load value.
KNEE_TTFT_RATIO = 2.0


def knee_qps(
    sm: StepModel, prompt: float, output: float, budget: int, max_seqs: int, kv_tokens: float
) -> tuple[float, float]:
    """(sustainable rate, knee) of one replica in requests/s: the knee is the lowest rate on a grid of 1 %
    steps of the sustainable rate at which the screening mean TTFT reaches ``KNEE_TTFT_RATIO`` × its value at
    zero load (the sustainable rate itself when it never does). The one definition of the knee: the
    finalists, ``plan --simulate`` and the report all read it from here."""
    sus = sustainable_qps(sm, prompt, output, budget, max_seqs, kv_tokens)
    grid = np.linspace(0.0, 1.0, 101)[1:] * sus
    rates = np.concatenate(([1e-9 * sus], grid))
    scr = screen(sm, rates, prompt, output, budget, max_seqs, kv_tokens, sustainable=sus)  # sus: computed once
    over = np.nonzero(~(scr.ttft_mean_s[1:] < KNEE_TTFT_RATIO * scr.ttft_mean_s[0]))[0]
    return sus, float(grid[over[0]]) if over.size else sus


def sustainable_qps(sm: StepModel, prompt: float, output: float, budget: int, max_seqs: int, kv_tokens: float) -> float:
    """Largest rate whose fixed point exists within the sequence and KV limits (bisection on a log grid)."""
    lo, hi = 0.0, 1.0
    while _feasible(sm, hi, prompt, output, budget, max_seqs, kv_tokens) and hi < 1e7:
        lo, hi = hi, hi * 2
    grid = np.linspace(lo, hi, 65)[1:]
    for _ in range(3):
        ok = _feasible_vec(sm, grid, prompt, output, budget, max_seqs, kv_tokens)
        last = int(np.argmin(ok)) if not ok.all() else grid.size
        a = grid[last - 1] if last > 0 else lo
        b = grid[min(last, grid.size - 1)]
        lo, grid = a, np.linspace(a, b, 65)[1:]
    return float(lo)


def _feasible_vec(
    sm: StepModel, lam: np.ndarray, p: float, o: float, budget: int, max_seqs: int, kv: float
) -> np.ndarray:
    n_dec, tau, _d, s, n = _solve(sm, lam, p, o, budget)
    return np.isfinite(tau) & (n_dec <= max_seqs) & ((n_dec + 1) * (p + o) <= kv) & (lam * n * s < 1)


def _feasible(sm: StepModel, lam: float, p: float, o: float, budget: int, max_seqs: int, kv: float) -> bool:
    return bool(_feasible_vec(sm, np.array([lam]), p, o, budget, max_seqs, kv)[0])
