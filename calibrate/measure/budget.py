"""Time budget: a deadline for the run, shares per suite, and case-time estimates.

Suite i gets ``remaining × wᵢ / Σ_{j ≥ i} wⱼ`` of the time left when it starts, so a
suite that finishes early hands its time to the next; time left after the last suite
goes, in a second pass, to the cases passed over for lack of time. Before a case runs its time is
estimated from the best rates measured so far (optimistic, so the budget is overrun
by at most one case):

    t_call ≈ max(F / rate_F, B / rate_B) + 5 µs
    t_case ≈ 2 · t_call + rounds · max(t_round, t_call) + 10 ms

Cases whose single call would exceed ``max_call_s`` are skipped as too slow. The clock
starts before torch is imported, and the measuring stops ``reserve_s(budget)`` early so
that fitting and saving also fit in the budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from calibrate.measure.records import Case, Record

WEIGHTS = {"overhead": 0.05, "memory": 0.2, "gemm": 0.45, "attention": 0.2, "collective": 0.1}


def reserve_s(budget_s: float) -> float:
    """Seconds kept back for fit, save and summary: min(4 s, 10% of the budget)."""
    return min(4.0, 0.1 * budget_s)


@dataclass
class Budget:
    """Deadline bookkeeping for one run (seconds from ``clock``, monotonic by default)."""

    total_s: float
    clock: Callable[[], float] = time.monotonic
    start: float | None = None
    suite_deadline: float = field(init=False)

    def __post_init__(self) -> None:
        if self.start is None:
            self.start = self.clock()
        self.suite_deadline = self.start + self.total_s

    @property
    def deadline(self) -> float:
        """Absolute end of the run."""
        assert self.start is not None
        return self.start + self.total_s

    def elapsed(self) -> float:
        """Seconds since the run started."""
        assert self.start is not None
        return self.clock() - self.start

    def remaining(self) -> float:
        """Seconds left for the whole run (≥ 0)."""
        return max(0.0, self.deadline - self.clock())

    def begin_suite(self, suite: str, later: list[str], weights: dict[str, float] | None = None) -> float:
        """Start ``suite`` (``later`` = suites still to run, itself included); return its allowance."""
        w = weights or WEIGHTS
        total_w = sum(w.get(s, 0.1) for s in later) or 1.0
        allowance = self.remaining() * w.get(suite, 0.1) / total_w
        self.suite_deadline = self.clock() + allowance
        return allowance

    def fits(self, est_s: float) -> bool:
        """Whether a case of ``est_s`` seconds ends before the suite's and the run's deadlines."""
        end = self.clock() + est_s
        return end <= self.suite_deadline and end <= self.deadline

    def suite_over(self) -> bool:
        """The suite's allowance is used up."""
        return self.clock() >= min(self.suite_deadline, self.deadline)


@dataclass
class Rates:
    """Best rates seen so far (FLOP/s per dtype, bytes/s), seeded with guesses."""

    rates: dict[str, float]

    def get(self, key: str) -> float:
        """Rate for ``key``; attention FLOP/s default to a fifth of the GEMM rate of the dtype."""
        if key in self.rates:
            return self.rates[key]
        if key.startswith("attn_flops:"):
            return 0.2 * self.get("flops:" + key.split(":", 1)[1])
        return self.rates.get("flops:default", 1e10) if key.startswith("flops:") else 1e9

    def call_s(self, case: Case) -> float:
        """Estimated seconds of one call of ``case``."""
        q: dict[str, Any] = case.params
        f, b = float(q.get("flops", 0) or 0), float(q.get("bytes", 0) or 0)
        key = case.rate_key
        if key is None:
            return 1e-4
        t = b / self.get("comm" if key == "comm" else "bytes")
        if key.startswith(("flops:", "attn_flops:")):
            t = max(t, f / self.get(key))
        return t + 5e-6

    def case_s(self, case: Case, rounds: int, round_s: float) -> float:
        """Estimated seconds of the whole case (warm-up + rounds + set-up)."""
        c = self.call_s(case)
        return 2 * c + rounds * max(round_s, c) + 0.01

    def update(self, case: Case, rec: Record) -> None:
        """Raise the rate of ``case.rate_key`` to what ``rec`` achieved (ok records only)."""
        if rec.get("status") != "ok" or case.rate_key is None:
            return
        t = float(rec["median_s"])
        q = case.params
        amount = float(q.get("flops", 0) if case.rate_key.startswith(("flops:", "attn_flops:")) else q.get("bytes", 0))
        if amount > 0 and t > 0:
            key = case.rate_key
            self.rates[key] = max(self.rates.get(key, 0.0), amount / t)
