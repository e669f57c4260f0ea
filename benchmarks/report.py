"""Wall time of the README example report (not a test): Llama-3.1-70B, chat, H100/H200/A100.

Run: ``python benchmarks/report.py [-n 3] [--strict] [--count]``.

Builds the report ``n`` times in this process (the first build pays the imports and spec caches and
is printed apart) and prints the median build time (``Report.data.seconds``: planning, simulation,
charts and HTML) against the target: < 20 s. The same build used to be gated in
``tests/test_report.py`` (``test_report_is_fast``); timings live here so that the tests pass on a slow
or loaded machine. ``--strict`` exits 1 when the median misses the target. ``--count`` first builds once in
turn (``jobs=1``, so every simulation runs in this process) and prints how many simulations the report runs and
how many of them repeat an earlier one's inputs exactly.
"""

from __future__ import annotations

import argparse
import hashlib
import pickle
import statistics
import sys
import time
from typing import TYPE_CHECKING, Any

from roofline.report import build

if TYPE_CHECKING:
    from collections.abc import Callable

MODEL, HARDWARE, WORKLOAD = "llama-3.1-70b", "h100-sxm,h200-sxm,a100-80gb-sxm", "chat"
TARGET_S = 20.0


def count_simulations() -> tuple[int, int]:
    """(simulate() calls, calls whose every input repeats an earlier call's) of one build in turn."""
    import roofline.serving.simulate as sim

    real: Callable[..., Any] = sim.simulate
    keys: list[str] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        cal = kwargs.get("calibration")
        shown = cal.model_dump_json() if hasattr(cal, "model_dump_json") else repr(cal)
        rest = sorted((k, v) for k, v in kwargs.items() if k != "calibration")
        keys.append(hashlib.sha1(pickle.dumps((args, rest, shown))).hexdigest())
        return real(*args, **kwargs)

    sim.simulate = counted  # the sizing imports it from the module when it runs
    try:
        build(MODEL, hardware=HARDWARE, workload=WORKLOAD, jobs=1)
    finally:
        sim.simulate = real
    return len(keys), len(keys) - len(set(keys))


def main() -> int:
    """Print the cold build, the warm builds' median and min, and the target; return the exit code."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=3, help="warm builds after the first (default 3)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when the target is missed")
    ap.add_argument("--count", action="store_true", help="count the simulations of one build in turn first")
    a = ap.parse_args()
    if a.count:
        calls, repeats = count_simulations()
        print(f"simulations: {calls} ({repeats} with the inputs of an earlier one)")
    t0 = time.perf_counter()
    build(MODEL, hardware=HARDWARE, workload=WORKLOAD)
    cold = time.perf_counter() - t0
    warm = [build(MODEL, hardware=HARDWARE, workload=WORKLOAD).data.seconds for _ in range(a.n)]
    med = statistics.median(warm) if warm else cold
    ok = med < TARGET_S
    print(f"report {MODEL} {WORKLOAD} on {HARDWARE}: first build {cold:.1f} s (imports included)")
    if warm:
        print(f"  warm builds: median {med:.1f} s, min {min(warm):.1f} s ({len(warm)} runs)")
    print(f"  target < {TARGET_S:.0f} s: {'ok' if ok else 'MISSED'}")
    return 1 if a.strict and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
