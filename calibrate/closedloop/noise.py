"""Run-to-run noise of the closed loop: repeat calibrate-then-validate and compare the runs.

``python -m calibrate.closedloop.noise --runs 3 --out validation/results`` runs the CPU closed
loop (quick calibration for the tiny model, then the validation grid) ``runs`` times, saves
each run's table as ``cpu_tiny_run<i>.csv`` and a per-point noise table ``cpu_noise.csv``:

* ``measured_spread_pct`` = (max − min) / median of a point's measured time over the runs:
  how much the machine itself drifts between runs;
* ``error_spread_pct`` = max − min of the point's error over the runs (percentage points):
  how much the closed-loop error moves when everything is redone.

The printed summary (median over points, per phase) is what the CI tolerance is set against.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


def noise_table(runs: list[pd.DataFrame]) -> pd.DataFrame:
    """Per point (phase, batch, context): measured time and error across runs, and their spreads."""
    import pandas as pd

    keys = ["phase", "batch", "context"]
    long = pd.concat([df.assign(run=i) for i, df in enumerate(runs)], ignore_index=True)
    g = long.groupby(keys, sort=False)
    out = g.agg(
        measured_median_s=("measured_s", "median"),
        measured_min_s=("measured_s", "min"),
        measured_max_s=("measured_s", "max"),
        error_min_pct=("error_pct", "min"),
        error_max_pct=("error_pct", "max"),
        error_median_pct=("error_pct", "median"),
        within_run_spread_pct=("spread_pct", "median"),
    ).reset_index()
    out["measured_spread_pct"] = 100 * (out["measured_max_s"] - out["measured_min_s"]) / out["measured_median_s"]
    out["error_spread_pct"] = out["error_max_pct"] - out["error_min_pct"]
    return out


def summary_lines(runs: list[pd.DataFrame], noise: pd.DataFrame) -> list[str]:
    """Per phase: median |error| of each run, and the median run-to-run spreads over points."""
    from calibrate.closedloop.grid import summarize

    lines = []
    for i, df in enumerate(runs):
        s = summarize(df)
        lines.append(
            f"run {i}: "
            + "; ".join(
                f"{ph} median |error| {v['median_abs_error_pct']:.1f}% (worst {v['worst_abs_error_pct']:.1f}%, "
                f"bias {v['bias_pct']:+.1f}%)"
                for ph, v in s.items()
            )
        )
    for phase, g in noise.groupby("phase", sort=False):
        lines.append(
            f"{phase}: run-to-run spread of measured time, median over points {g['measured_spread_pct'].median():.1f}% "
            f"(max {g['measured_spread_pct'].max():.1f}%); of the error {g['error_spread_pct'].median():.1f} points; "
            f"within-run timing spread {g['within_run_spread_pct'].median():.1f}%"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Repeat the CPU closed loop and write the per-run tables and the noise table."""
    import roofline
    from calibrate.closedloop.model import scale_spec
    from calibrate.closedloop.validate import calibrate_and_validate, parse_grid

    ap = argparse.ArgumentParser(prog="python -m calibrate.closedloop.noise", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--budget", type=float, default=30.0, help="calibration budget per run (s)")
    ap.add_argument("--gap", type=float, default=0.0, help="seconds to wait between runs")
    ap.add_argument("--pairs", type=int, default=1, help="calibrate-then-measure pairs per run (median over pairs)")
    ap.add_argument("--grid", default="cpu")
    ap.add_argument("--out", default="validation/results")
    ap.add_argument("--prefix", default="cpu_tiny")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    spec = scale_spec(roofline.model(a.model), "tiny")
    runs = []
    for i in range(a.runs):
        if i and a.gap:
            time.sleep(a.gap)
        _, df = calibrate_and_validate(spec, "cpu", a.budget, parse_grid(a.grid, "cpu"), threads=1, pairs=a.pairs)
        df.to_csv(out / f"{a.prefix}_run{i}.csv", index=False)
        runs.append(df)
        print(f"run {i} done", flush=True)
    noise = noise_table(runs)
    noise.to_csv(out / f"{a.prefix}_noise.csv", index=False)
    print("\n".join(summary_lines(runs, noise)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
