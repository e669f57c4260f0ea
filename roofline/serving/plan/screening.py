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

import math
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


#: Sub-points per whole decode row of the grid the fixed points are located on (the rate curve is smooth between
#: whole rows, where the prefill chunk is fixed; it can drop at a whole row, so each is also taken just below).
GRID_PER_ROW = 8
BISECTIONS = 48  # halvings of a grid cell (1/8 row) when locating a fixed point: to 1/8 · 2⁻⁴⁸ of a row


def _curve(sm: StepModel, nd: np.ndarray, p: float, o: float, budget: int) -> tuple[np.ndarray, ...]:
    """(λ(N), d, S, n) at decode populations ``nd``: the rate whose fixed point N = λ·(O − 1)·τ̄ is N.

    With N fixed, everything but λ is known: chunk c = clip(budget − ⌊N⌋, 1, P), n = ⌈P / c⌉, d = d(max(N, 1)),
    S = S(N) (module docstring), and τ̄ = d / (1 − λ·n·(S − d)); so N = λ·(O − 1)·d / (1 − λ·n·(S − d)) solves to
    λ(N) = N / ((O − 1)·d + N·n·(S − d)) (0 at N = 0)."""
    chunk = np.clip(budget - np.floor(nd), 1, p)
    n = np.ceil(p / chunk)
    past = (p - chunk) / 2  # mean cached tokens before a chunk
    d = sm.mean_step_s(np.maximum(nd, 1.0), p + o / 2)  # a decoding request never runs in a step of fewer rows
    s = sm.mean_step_s(nd, p + o / 2, p / n, np.minimum(past, p - p / n))
    den = max(o - 1, 0) * d + nd * n * (s - d)
    lam = np.where(nd > 0, nd / np.where(den > 0, den, 1.0), 0.0)
    return lam, d, s, n


def _grid(n_max: float) -> np.ndarray:
    """Decode populations 0 … ``n_max``: GRID_PER_ROW points per row, each whole row also just below itself."""
    top = max(float(n_max), 0.0)
    whole = np.arange(1.0, math.floor(top) + 1.0)
    pts = np.concatenate((np.linspace(0.0, top, max(math.ceil(top * GRID_PER_ROW), 1) + 1), whole - 1e-7, whole))
    return np.unique(np.clip(pts, 0.0, top))


def _solve(sm: StepModel, lam: np.ndarray, p: float, o: float, budget: int, n_max: float) -> tuple[np.ndarray, ...]:
    """(N, τ̄, d, S, n) at each rate: N the smallest decode population ≤ ``n_max`` that is its own fixed point
    (the one a damped iteration from an empty engine converges to: the steps grow with N, so it climbs to the
    first), found as the first crossing λ(N) ≥ λ of :func:`_curve` on :func:`_grid` then bisected within its
    cell; N = τ̄ = inf where no N ≤ ``n_max`` is one (the rate is beyond what the limits let the engine hold)."""
    lam = np.asarray(lam, dtype=np.float64)
    if o <= 1:  # no request ever decodes: N = 0 at every rate
        nd = np.zeros_like(lam)
        _, d, s, n = _curve(sm, nd, p, o, budget)
        gap = 1.0 - lam * n * (s - d)
        return nd, np.where(gap > 0, d / np.where(gap > 0, gap, 1.0), np.inf), d, s, n
    g = _grid(n_max)
    best = np.maximum.accumulate(_curve(sm, g, p, o, budget)[0])
    j = np.searchsorted(best, lam, side="left")  # first grid point with λ(N) ≥ λ
    found = (j < g.size) & (lam > 0)
    lo = g[np.clip(j - 1, 0, g.size - 1)]
    hi = g[np.clip(j, 0, g.size - 1)]
    for _ in range(BISECTIONS):
        mid = 0.5 * (lo + hi)
        up = _curve(sm, mid, p, o, budget)[0] >= lam
        lo, hi = np.where(up, lo, mid), np.where(up, mid, hi)
    nd = np.where(found, hi, np.where(lam > 0, np.inf, 0.0))
    _, d, s, n = _curve(sm, np.where(np.isfinite(nd), nd, 0.0), p, o, budget)
    gap = 1.0 - lam * n * (s - d)
    tau = np.where(np.isfinite(nd) & (gap > 0), d / np.where(gap > 0, gap, 1.0), np.inf)
    return nd, tau, d, s, n


def _population_limit(p: float, o: float, max_seqs: int, kv_tokens: float) -> float:
    """The largest decode population the limits allow: N ≤ max_num_seqs and (N + 1)·(P + O) ≤ the KV pool."""
    return float(min(max_seqs, kv_tokens / (p + o) - 1.0))


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
    n_dec, tau, d, s, n = _solve(
        sm, lam, prompt, output, budget, _population_limit(prompt, output, max_seqs, kv_tokens)
    )
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
    """Largest rate whose fixed point exists within the sequence and KV limits, in closed form.

    A rate is sustainable when its fixed point N (:func:`_solve`) keeps N ≤ max_num_seqs, (N + 1)·(P + O) ≤ the KV
    pool and the prefill queue stable, ρ = λ·n·S < 1; at a fixed point λ = λ(N) (:func:`_curve`), so ρ < 1 reads
    N·n < O − 1. These limits hold on an interval of N from 0 (n grows with N), and the first fixed point of any
    rate up to the curve's largest value there lies inside it: the sustainable rate is max λ(N) over that
    interval, taken on :func:`_grid` and refined by golden section around the best grid point."""
    p, o = float(prompt), float(output)
    top = _population_limit(p, o, max_seqs, kv_tokens)
    if top < 0:
        return 0.0
    if o <= 1:  # N = 0: the prefill queue alone, ρ = λ·n·S < 1
        _, _, s, n = _curve(sm, np.zeros(1), p, o, budget)
        return float(1.0 / (n[0] * s[0]))
    g = _grid(top)
    lam, _, _, n = _curve(sm, g, p, o, budget)
    ok = g * n < o - 1
    lam = np.where(ok, lam, 0.0)
    i = int(np.argmax(lam))
    a, b = g[max(i - 1, 0)], g[min(i + 1, g.size - 1)]
    best = float(lam[i])
    for _ in range(GOLDEN_STEPS):  # golden section on [a, b]; a point outside the limits counts 0
        x1, x2 = b - INV_PHI * (b - a), a + INV_PHI * (b - a)
        v = _curve(sm, np.array([x1, x2]), p, o, budget)
        f = np.where(np.array([x1, x2]) * v[3] < o - 1, v[0], 0.0)
        best = max(best, float(f.max()))
        a, b = (a, x2) if f[0] >= f[1] else (x1, b)
    return best


INV_PHI = (math.sqrt(5.0) - 1.0) / 2.0
GOLDEN_STEPS = 40
