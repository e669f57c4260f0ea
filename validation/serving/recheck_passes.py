"""Re-simulate a seeded sample of the public closed-loop rows and compare with the saved passes of the last full run.

A refactor of the simulator must leave its results unchanged: this re-runs 6 rows per engine (seed 1) with the
physics-only, the 40 ms request-overhead and the 2-step output-lag candidates of ``validate_simulator.py`` and
prints the largest relative difference in mean TTFT and TPOT against ``serving_sim_passes.csv.gz`` (stored to 6
significant digits, so anything below ~5e-6 is equal). About a minute on two cores.

Run: ``.venv/bin/python validation/serving/recheck_passes.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import validate_simulator as vs  # noqa: E402

CANDIDATES = (
    (0.0, 0.0, "request_overhead_s=0"),
    (0.04, 0.0, "request_overhead_s=0.04"),
    (0.0, 2.0, "output_lag_steps=2"),
)


def main() -> None:
    d = pd.read_csv(HERE / "aic_silicon_agg.csv").set_index("id")
    p = pd.read_csv(HERE.parent / "results" / "serving_sim_passes.csv.gz").set_index("id")
    worst = 0.0
    for i in p.groupby("backend").sample(6, random_state=1).index:
        row = d.loc[i].copy()
        row["id"] = i
        for req, lag, col in CANDIDATES:
            ttft, tpot, _ = vs.run_row(row, req, lag_steps=lag)
            a, b = p.loc[i, f"ttft_ms_{col}"], p.loc[i, f"tpot_ms_{col}"]
            worst = max(worst, abs(ttft / a - 1), abs(tpot / b - 1))
            engine = p.loc[i, "backend"]
            print(f"{engine:7s} {col:24s} TTFT {ttft:9.3f} (saved {a:9.3f}) TPOT {tpot:8.4f} (saved {b:8.4f})")
    print(f"largest relative difference {worst:.1e} (the saved passes keep 6 significant digits)")


if __name__ == "__main__":
    main()
