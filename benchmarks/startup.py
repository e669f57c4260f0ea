"""Wall-clock start-up of the ``roofline`` command: median and min over N runs.

Usage::

    python benchmarks/startup.py [-n 15]

Each command runs N times in a fresh subprocess of the installed entry point (the
``roofline`` next to this interpreter, else on PATH, else ``python -m roofline``), after
one untimed warm-up run (so the OS file cache is warm). Targets: ``--help`` < 0.3 s,
``predict llama-3.1-8b h100-sxm`` < 0.8 s.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

PLAN = ["plan", "llama-3.1-70b", "--qps", "20", "--ttft-slo", "500ms", "--tpot-slo", "50ms"]
COMMANDS: list[tuple[str, list[str], float]] = [
    ("--help", ["--help"], 0.3),
    ("predict", ["predict", "llama-3.1-8b", "h100-sxm"], 0.8),
    ("predict --json", ["predict", "llama-3.1-8b", "h100-sxm", "--json"], 0.8),
    ("plan (3 hw)", [*PLAN, "--hardware", "h100-sxm,h200-sxm,a100-80gb-sxm"], float("inf")),
]


def entry_point() -> list[str]:
    """The roofline executable of this interpreter's environment."""
    venv = Path(sys.executable).with_name("roofline")
    exe = str(venv) if venv.exists() else shutil.which("roofline")
    return [exe] if exe else [sys.executable, "-m", "roofline"]


def time_command(argv: list[str], n: int) -> list[float]:
    """Seconds of wall time for each of ``n`` runs (after one warm-up); raises if the command fails."""
    subprocess.run(argv, capture_output=True, check=True)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    """Print one line per command: median, min, max and the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=15, help="runs per command (default 15)")
    args = parser.parse_args()
    base = entry_point()
    print(f"entry point: {' '.join(base)}; {args.n} runs each")
    print(f"{'command':<16} {'median':>8} {'min':>8} {'max':>8}  target")
    for label, extra, target in COMMANDS:
        t = time_command([*base, *extra], args.n)
        med = statistics.median(t)
        verdict = "" if target == float("inf") else f"< {target:.1f} s {'ok' if med < target else 'MISSED'}"
        print(f"{label:<16} {med:>7.3f}s {min(t):>7.3f}s {max(t):>7.3f}s  {verdict}")


if __name__ == "__main__":
    main()
