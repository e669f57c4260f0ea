"""The long fuzz of the serving simulator's surfaces (issue 31; not a test): 10,000+ inputs, a 30 s watchdog per
case and a memory cap, and a summary of what failed.

Run: ``python benchmarks/fuzz_long.py [--cases 11000] [--seed 31] [--memory-gib 6] [--surface NAME ...]
[--failures FILE]``. It draws ``--cases`` inputs, split evenly over the surfaces of ``tests/fuzz_serving_cases.py``
(``roofline simulate`` closed loop, trace replay and open loop, ``simulate-disagg``, ``spec-plan``,
``plan-disagg``, ``plan --simulate``, ``accuracy --coverage``, and ``roofline.simulate`` plain and with
``disagg=``), from hypothesis' generator seeded with ``--seed`` (no shrinking, so a failure does not stop the
run), and checks each with the suite's own checks (``tests/test_fuzz_serving.py``: the CLI in this process through
typer's runner, exit 0/1/2 and never 3, no traceback, only the project's errors; exit-0 and returned results with
no negative, NaN or truncated figure). One process, one core: measured, the default 11,000 cases took 16.8 min
on a 2-core machine (1,100 per surface; ``plan --simulate`` 10 of them, its slowest case 19 s; every other case
under 1 s, most refused in milliseconds) and a peak of 236 MiB resident. Run it in the background with
``nohup nice python benchmarks/fuzz_long.py > fuzz_long.log &``.

Watchdog: ``signal.alarm`` raises :class:`CaseTimeout` (a BaseException, which the CLI's guard does not catch)
in a case still running after ``WATCHDOG_S`` seconds; the case counts as "over 30 s" and the run goes on. The
memory cap is the address-space limit (``RLIMIT_AS``, default 6 GiB): an input that would exhaust memory raises
MemoryError, which the checks report as a non-project exception or an exit 3. Each failing case is written as one
JSON line to ``--failures`` (default ``fuzz_long_failures.jsonl`` in the current folder) with its problems.

The summary prints, per surface, the cases run, their outcomes (exit codes; for the API "returned" or the
project error's class), the slowest case, and the failure counts: non-project exceptions, exit 3, runs over 30 s,
and exit-0 / returned results with negative, NaN or truncated figures. Exit code 1 when any failure was found.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import os
import resource
import signal
import sys
import time
import warnings
from pathlib import Path
from types import FrameType
from typing import Any

TESTS = Path(__file__).resolve().parents[1] / "tests"
WATCHDOG_S = 30
CATEGORIES = ("non-project exception", "exit 3", "over 30 s", "negative/NaN figure", "truncated", "other")


class CaseTimeout(BaseException):
    """A case ran past the watchdog (a BaseException: the CLI's ``except Exception`` guard lets it through)."""


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise CaseTimeout(f"over {WATCHDOG_S} s")


def category(problem: str) -> str:
    """Which failure count of the summary ``problem`` (a string of the suite's checks) falls in."""
    if problem.startswith("non-project"):
        return "non-project exception"
    if problem.startswith("exit 3"):
        return "exit 3"
    if problem.startswith("over "):
        return "over 30 s"
    if "figure" in problem or problem.split(" ")[0] in ("ttft_s", "e2e_s", "tpot_s", "arrival_s", "finish_s"):
        return "negative/NaN figure"
    if problem.startswith("truncated") or "differs from" in problem or "below 1" in problem:
        return "truncated"
    return "other"


class Tally:
    """Per-surface outcomes, failure counts, seconds, and the failing cases (written as JSON lines)."""

    def __init__(self, failures: Path) -> None:
        self.outcomes: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self.failed: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self.slowest: dict[str, float] = collections.defaultdict(float)
        self.examples: dict[tuple[str, str], str] = {}
        self.fh = failures.open("w", encoding="utf-8")

    def add(self, surface: str, case: Any, result: str, problems: list[str], seconds: float) -> None:
        """Count one case."""
        self.outcomes[surface][result] += 1
        self.slowest[surface] = max(self.slowest[surface], seconds)
        for cat in sorted({category(p) for p in problems}):
            self.failed[surface][cat] += 1
            self.examples.setdefault((surface, cat), f"{case!r:.300} -> {problems[0][:300]}")
        if problems:
            self.fh.write(json.dumps({"surface": surface, "case": repr(case), "problems": problems}) + "\n")
            self.fh.flush()


def run_surface(surface: str, strategy: Any, n: int, seed: int, tally: Tally) -> None:
    """Draw ``n`` cases of ``surface`` (hypothesis, seeded, generation only) and count each one's outcome."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    from test_fuzz_serving import outcome

    @hseed(seed)
    @settings(
        max_examples=n,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def drive(case: Any) -> None:
        t0 = time.perf_counter()
        signal.alarm(WATCHDOG_S)
        try:
            result, problems = outcome(case)
        except CaseTimeout as exc:
            result, problems = "over 30 s", [str(exc)]
        except MemoryError:
            result, problems = "MemoryError", ["non-project MemoryError (over the memory cap)"]
        finally:
            signal.alarm(0)
        tally.add(surface, case, result, problems, time.perf_counter() - t0)

    drive()


def summary(tally: Tally, wall_s: float) -> int:
    """Print the summary table; the number of failing cases."""
    total = sum(sum(c.values()) for c in tally.outcomes.values())
    print(f"\n{total:,} cases in {wall_s / 60:.1f} min (watchdog {WATCHDOG_S} s)\n")
    head = f"{'surface':<24} {'cases':>6} {'slowest s':>9}  " + "  ".join(f"{c:>5.5}" for c in CATEGORIES)
    print(head + "  outcomes")
    bad = 0
    for surface, outs in tally.outcomes.items():
        f = tally.failed[surface]
        bad += sum(f.values())
        counts = "  ".join(f"{f[c]:>5}" for c in CATEGORIES)
        top = ", ".join(f"{k} {v}" for k, v in outs.most_common(5))
        print(f"{surface:<24} {sum(outs.values()):>6} {tally.slowest[surface]:>9.2f}  {counts}  {top}")
    totals = {c: sum(tally.failed[s][c] for s in tally.failed) for c in CATEGORIES}
    print("\nfailures: " + ", ".join(f"{c} {n}" for c, n in totals.items()))
    for (surface, cat), example in sorted(tally.examples.items()):
        print(f"  e.g. {surface} / {cat}: {example}")
    return bad


def main() -> int:
    """Run the long fuzz; exit 1 when any case failed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=11_000, help="inputs in all, split evenly over the surfaces")
    ap.add_argument("--seed", type=int, default=31, help="hypothesis' generator seed")
    ap.add_argument("--memory-gib", type=float, default=6.0, help="address-space cap of this process")
    ap.add_argument("--surface", action="append", help="only these surfaces (repeatable)")
    ap.add_argument("--failures", type=Path, default=Path("fuzz_long_failures.jsonl"), help="failing cases (JSONL)")
    a = ap.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # keep the address space of BLAS threads off the cap
    cap = int(a.memory_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    signal.signal(signal.SIGALRM, _alarm)
    sys.path.insert(0, str(TESTS))
    from fuzz_serving_cases import SURFACES

    surfaces = {k: v for k, v in SURFACES.items() if not a.surface or k in a.surface}
    per = -(-a.cases // len(surfaces))
    tally = Tally(a.failures)
    t0 = time.perf_counter()
    for i, (surface, strategy) in enumerate(surfaces.items()):
        t1 = time.perf_counter()
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            run_surface(surface, strategy, per, a.seed + i, tally)
        n = sum(tally.outcomes[surface].values())
        print(f"{surface}: {n} cases in {time.perf_counter() - t1:.0f} s", flush=True)
    return 1 if summary(tally, time.perf_counter() - t0) else 0


if __name__ == "__main__":
    sys.exit(main())
