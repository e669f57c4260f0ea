"""Latency statistics of a simulated run, as the common serving benchmarks define them.

* TTFT — arrival (request sent) to first token.
* TPOT — per request (E2E − TTFT) / (output − 1), over requests with output > 1; then mean and
  percentiles over requests.
* ITL — every gap between consecutive tokens of a request, percentiled over all gaps of all
  requests. Gaps are counted, not stored: a run of k decode steps adds B·k gaps whose values are
  the step times, into a log-spaced histogram (bin ratio 1.0005, so a percentile is within
  0.05 % of the value its bin holds; the mean is exact, kept as a sum).
* E2E — arrival to last token.
Percentiles use linear interpolation between order statistics (numpy's default), as vLLM's
``benchmark_serving`` does.
"""

from __future__ import annotations

import math
from array import array

import numpy as np

LO_S, HI_S, RATIO = 1e-6, 1e4, 1.0005
_LOG_R = math.log(RATIO)
_NBINS = math.ceil(math.log(HI_S / LO_S) / _LOG_R) + 1
_LAST = _NBINS - 1
_EDGES = (LO_S * RATIO ** np.arange(_NBINS, dtype=np.float64)).tolist()  # upper edge of every bin
QUANTILES = (50, 90, 99)


class GapHistogram:
    """Weighted log-spaced histogram of inter-token gaps (seconds) with an exact sum.

    The bin weights live in a float list (an add is one list update in the simulator's hot path); ``counts``
    reads and writes them as a numpy array.
    """

    __slots__ = ("_w", "n", "total_s")

    def __init__(self) -> None:
        self._w = [0.0] * _NBINS
        self.n = 0.0
        self.total_s = 0.0

    @property
    def counts(self) -> np.ndarray:
        """Weight of every bin (a fresh array; assign one back to change them)."""
        return np.asarray(self._w, dtype=np.float64)

    @counts.setter
    def counts(self, value: np.ndarray) -> None:
        self._w = np.asarray(value, dtype=np.float64).tolist()

    @staticmethod
    def _bin(x: float) -> int:
        if x <= LO_S:
            return 0
        i = int(math.log(x / LO_S) / _LOG_R) + 1
        return i if i < _LAST else _LAST

    def add(self, gap_s: float, weight: float = 1.0) -> None:
        """``weight`` gaps of ``gap_s`` seconds each."""
        if gap_s <= LO_S:
            i = 0
        else:
            i = int(math.log(gap_s / LO_S) / _LOG_R) + 1
            if i > _LAST:
                i = _LAST
        self._w[i] += weight
        self.n += weight
        self.total_s += weight * gap_s

    def add_range(self, lo_s: float, hi_s: float, weight: float, total_s: float) -> None:
        """``weight`` gaps spread evenly over [lo, hi] whose exact sum is ``total_s``: each bin i0 … i1 gets
        weight × (its share of [lo, hi]), cut at the bins' upper edges LO_S·RATIO**i clamped to [lo, hi]."""
        self.n += weight
        self.total_s += total_s
        log = math.log  # _bin of both ends, written out
        i0 = 0 if lo_s <= LO_S else int(log(lo_s / LO_S) / _LOG_R) + 1
        i1 = 0 if hi_s <= LO_S else int(log(hi_s / LO_S) / _LOG_R) + 1
        if i1 > _LAST:
            i1 = _LAST
        if i0 > _LAST:
            i0 = _LAST
        w = self._w
        if i0 == i1 or hi_s <= lo_s:
            w[i0] += weight
            return
        width = hi_s - lo_s
        prev = lo_s
        for i in range(i0, i1):
            e = _EDGES[i]
            cut = lo_s if e < lo_s else (hi_s if e > hi_s else e)
            w[i] += weight * (cut - prev) / width
            prev = cut
        w[i1] += weight * (hi_s - prev) / width

    @property
    def mean(self) -> float:
        """Exact mean gap (s)."""
        return self.total_s / self.n if self.n else float("nan")

    def percentile(self, q: float) -> float:
        """The q-th percentile (s), geometric midpoint of its bin."""
        return self.percentiles((q,))[0]

    def percentiles(self, qs: tuple[float, ...]) -> list[float]:
        """:meth:`percentile` of each of ``qs``, from one cumulative sum of the bins."""
        if not self.n:
            return [float("nan")] * len(qs)
        cum = np.cumsum(np.frombuffer(array("d", self._w), dtype=np.float64))
        out = []
        for q in qs:
            i = int(np.searchsorted(cum, q / 100 * cum[-1], side="left"))
            out.append(LO_S * RATIO ** (i - 0.5) if i else LO_S)
        return out


def stats(prefix: str, x: np.ndarray) -> dict[str, float]:
    """``{prefix_mean_s, prefix_p50_s, prefix_p90_s, prefix_p99_s}`` of an array (NaN when empty)."""
    if x.size == 0:
        return {f"{prefix}_{k}_s": float("nan") for k in ("mean", "p50", "p90", "p99")}
    out = {f"{prefix}_mean_s": float(np.mean(x))}
    for q, v in zip(QUANTILES, np.percentile(x, QUANTILES), strict=True):
        out[f"{prefix}_p{q}_s"] = float(v)
    return out


def hist_stats(h: GapHistogram) -> dict[str, float]:
    """ITL entries of the summary from the gap histogram."""
    out = {"itl_mean_s": h.mean}
    for q, v in zip(QUANTILES, h.percentiles(QUANTILES), strict=True):
        out[f"itl_p{q}_s"] = v
    return out


def finite_percentile(x: np.ndarray, q: float) -> float:
    """The q-th percentile of the finite values of ``x`` (NaN when none): requests still in flight when a
    run stops have NaN latencies and are left out."""
    x = x[np.isfinite(x)]
    return float(np.percentile(x, q)) if x.size else float("nan")


def lockstep_share(arrival_s: np.ndarray, first_token_s: np.ndarray, concurrency: int) -> float:
    """Share of a closed-loop run's later half of requests (by arrival) whose first token came in a cohort of at
    least max(2, ⌈C/2⌉) requests, C the number of clients.

    A cohort is the set of requests whose first tokens come at one instant (one step's end). Identical
    closed-loop clients (fixed lengths, no spread in when they resend) can stay synchronised forever: they prefill
    in one step, finish in one step and resend together, so every wave waits for the whole burst's prefill.
    A share near 1 marks that lock-step, which the answer hinges on: a 2 % spread of answer lengths dissolves it
    (real clients sit in between; see :mod:`roofline.serving.simulate`). The first half (the cold start, one
    burst by construction) is left out. NaN when nothing finished.
    """
    first = np.asarray(first_token_s, dtype=np.float64)
    late = np.argsort(arrival_s, kind="stable")[len(first) // 2 :]
    late = late[np.isfinite(first[late])]
    if late.size == 0:
        return math.nan
    ok = np.isfinite(first)
    values, counts = np.unique(first[ok], return_counts=True)
    size = counts[np.searchsorted(values, first[late])]  # cohort of each later request, among all requests
    return float(np.mean(size >= max(2, math.ceil(concurrency / 2))))
