"""The sampling error of a simulated percentile, and the sizing verdict that accounts for it.

A simulated P99 from N requests is a random quantity: another seed moves it (Llama-3.1-70B on one 8 × H200
replica at 10 req/s, N = 1,000: P99 TTFT 198–271 ms over seeds 0–9, standard deviation 19 ms). Sizing on one
draw lets the answer flip with the seed. Resampling the requests of one run does not see it: a calm run (seed 0,
198 ms) has a calm bootstrap (block bootstrap interval 182–212 ms, below the 238 ms mean of ten seeds). So each
check is **replicated**: R independent runs of N requests with seeds s, s + 1, …; the estimate is the mean of the
R percentiles and its interval mean ± t(R − 1) · sd / √R at :data:`LEVEL` (two-sided; t from
:data:`T_QUANTILES`), where sd is the larger of the runs' spread and each run's own sampling error (a block
bootstrap over its requests, :func:`within_run_sd`): three calm runs can agree to 2 % while runs differ by 10 %.

A check compares that interval with its threshold t (the SLO ÷ the model-error factor): it **meets** when the
upper end is ≤ t, **misses** when the lower end is > t, and is **too close** otherwise. It starts with
:data:`MIN_RUNS` runs and adds one at a time while too close, up to :data:`MAX_RUNS`; a check still too close
then counts as a miss (the deployment is sized up) and says so. Seeds s and s + 1 share all runs but one, so the
answer moves with the seed only where the threshold sits inside the interval of the runs they do not share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

import numpy as np

from roofline.serving.sim.metrics import finite_percentile as pct

if TYPE_CHECKING:
    from collections.abc import Callable

    from roofline.serving.sim.result import SimulationResult
    from roofline.serving.workload.stream import Workload

MIN_RUNS = 1
MAX_RUNS = 6
LEVEL = 0.9
BLOCKS = 20  # contiguous blocks of a run's requests in the within-run bootstrap
DRAWS = 100  # bootstrap draws
RNG_SEED = 20261201
#: Student-t quantile at (1 + LEVEL)/2 = 0.95 by degrees of freedom 1 … MAX_RUNS − 1 (standard tables).
T_QUANTILES = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015}

Verdict = Literal["meets", "misses", "too close"]


@dataclass(frozen=True)
class PercentileEstimate:
    """A percentile over R replicated runs (s): their mean and its interval at :data:`LEVEL`."""

    value: float
    lo: float
    hi: float
    runs: int
    requests: int

    def verdict(self, threshold: float) -> Verdict:
        """meets (hi ≤ threshold), misses (lo > threshold) or too close (the interval straddles it)."""
        if self.hi <= threshold:
            return "meets"
        if self.lo > threshold:
            return "misses"
        return "too close"

    def margin(self, threshold: float) -> float:
        """threshold / upper end − 1: the relative room below the threshold (negative: over it)."""
        return threshold / self.hi - 1.0 if self.hi > 0 else math.inf


def replicated_estimate(values: Sequence[float], requests: int, within_sd: Sequence[float] = ()) -> PercentileEstimate:
    """The mean of the runs' percentiles ``values`` (s) and mean ± t·sd/√R, sd = max(the spread of the values,
    the root mean square of ``within_sd``, each run's own sampling error from :func:`within_run_sd`): a few calm
    runs agree with each other more closely than runs do (the tail of a P99 comes from rare bursts), so the
    runs' spread alone is not trusted below what each run's own sampling error says. One run and no
    ``within_sd`` gives a zero-width interval; NaN values (a run whose requests all failed) give NaN."""
    r = len(values)
    if r == 0 or any(math.isnan(v) for v in values):
        return PercentileEstimate(math.nan, math.nan, math.nan, r, requests)
    mean = math.fsum(values) / r
    between = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (r - 1)) if r > 1 else 0.0
    within = math.sqrt(math.fsum(w * w for w in within_sd) / len(within_sd)) if within_sd else 0.0
    sd = max(between, within)
    half = T_QUANTILES[min(max(r - 1, 1), max(T_QUANTILES))] * sd / math.sqrt(r)
    return PercentileEstimate(mean, mean - half, mean + half, r, requests)


def within_run_sd(x: np.ndarray, q: float, blocks: int = BLOCKS, draws: int = DRAWS) -> float:
    """Standard deviation (s) of the ``q``-th percentile of one run's latencies ``x`` (arrival order) by a block
    bootstrap: B contiguous blocks, D draws of B blocks with replacement (fixed RNG seed); non-finite values
    (requests in flight at the end) dropped; 0 for fewer than two values."""
    v = np.asarray(x, dtype=np.float64)
    v = v[np.isfinite(v)]
    n = int(v.size)
    if n < 2:
        return 0.0
    b = min(blocks, n)
    edges = np.linspace(0, n, b + 1).astype(np.int64)
    picks = np.random.default_rng(RNG_SEED).integers(0, b, size=(draws, b))
    return float(np.std(resampled_percentiles(v, edges, picks, q), ddof=1))


def resampled_percentiles(v: np.ndarray, edges: np.ndarray, picks: np.ndarray, q: float) -> np.ndarray:
    """The ``q``-th percentile of each draw: row i of ``picks`` names the blocks ``v[edges[j]:edges[j + 1]]``
    whose concatenation is draw i. The draws of one length are taken together (one ``np.percentile`` along an
    axis), each the same number as ``np.percentile`` of that draw alone (tests/test_sampling_vectorised.py)."""
    starts, sizes = edges[:-1][picks].ravel(), np.diff(edges)[picks].ravel()
    first = np.cumsum(sizes) - sizes  # where each picked block begins in the concatenation of all draws
    flat = v[np.repeat(starts - first, sizes) + np.arange(int(sizes.sum()))]
    lengths = np.diff(edges)[picks].sum(axis=1)
    row_start = np.cumsum(lengths) - lengths
    out = np.empty(len(picks))
    for length in np.unique(lengths):
        rows = np.nonzero(lengths == length)[0]
        out[rows] = np.percentile(flat[row_start[rows][:, None] + np.arange(length)], q, axis=1)
    return out


def combined_verdict(verdicts: Sequence[Verdict]) -> Verdict:
    """Misses if any misses, too close if any is too close, else meets."""
    if "misses" in verdicts:
        return "misses"
    return "too close" if "too close" in verdicts else "meets"


def fastest(s: SimulationResult) -> tuple[float, float]:
    """(lowest TTFT, lowest TPOT) over a run's finished requests (s): what an idle replica gets at best, which no
    number of replicas improves on; inf when none finished."""
    r = s.requests
    t, u = r["ttft_s"].to_numpy(), r["tpot_s"].to_numpy()
    t, u = t[np.isfinite(t)], u[np.isfinite(u)]
    return (float(t.min()) if t.size else math.inf, float(u.min()) if u.size else math.inf)


@dataclass(frozen=True)
class Check:
    """One percentile check of a sizing run: ``column`` (``ttft_s`` | ``tpot_s``) at percentile ``pct`` against
    ``threshold`` (s), over the requests of class ``rows`` of a workload mix (None: every request)."""

    column: str
    pct: float
    threshold: float
    rows: str | None = None

    def values(self, s: SimulationResult) -> np.ndarray:
        """The run's latencies this check reads (arrival order)."""
        r = s.requests
        x = r[self.column].to_numpy()
        return x if self.rows is None else x[r["class"].to_numpy() == self.rows]


def sampled_check(
    run: Callable[..., SimulationResult], wl: Workload, pcts: tuple[float, float], thresholds: tuple[float, float]
) -> tuple[SimulationResult, tuple[PercentileEstimate, PercentileEstimate], Verdict]:
    """(last run, TTFT and TPOT estimates, verdict) of one replica at ``wl``, replicated over seeds wl.seed,
    wl.seed + 1, … (roofline.serving.plan.sampling): MIN_RUNS runs, then one more while too close, up to MAX_RUNS;
    a run that saturates misses at once."""
    checks = (Check("ttft_s", pcts[0], thresholds[0]), Check("tpot_s", pcts[1], thresholds[1]))
    s, est, verdict = sampled_checks(run, wl, checks)
    return s, (est[0], est[1]), verdict


def sampled_checks(
    run: Callable[..., SimulationResult], wl: Workload, checks: Sequence[Check]
) -> tuple[SimulationResult, tuple[PercentileEstimate, ...], Verdict]:
    """:func:`sampled_check` for any number of checks (e.g. TTFT and TPOT of every class of a workload mix, each
    over its class's requests): one estimate per check, the verdict combined over all of them
    (:func:`combined_verdict`); each estimate counts the requests it read."""
    seed = int(wl.seed or 0)
    vals: list[list[float]] = [[] for _ in checks]
    within: list[list[float]] = [[] for _ in checks]
    counts = [0 for _ in checks]
    for k in range(MAX_RUNS):
        s = run(workload=replace(wl, seed=seed + k))
        for i, ch in enumerate(checks):
            x = ch.values(s)
            vals[i].append(pct(x, ch.pct))
            within[i].append(within_run_sd(x, ch.pct))
            counts[i] += len(x)
        est = tuple(replicated_estimate(v, n, w) for v, n, w in zip(vals, counts, within, strict=True))
        if s.saturated is not None:
            return s, est, "misses"
        if k + 1 < MIN_RUNS:
            continue
        verdict = combined_verdict([e.verdict(ch.threshold) for e, ch in zip(est, checks, strict=True)])
        if verdict != "too close":
            return s, est, verdict
    return s, est, "too close"
