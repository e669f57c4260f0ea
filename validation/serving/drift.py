"""Lock-step against drift: the public closed-loop rows simulated physics only, with fixed lengths and with a 2 %
spread of answer lengths (lognormal, same mean) that lets identical clients drift apart.

Run: ``python validation/serving/drift.py`` (two passes over the rows of ``validation/results/serving_sim.csv``,
about 5 minutes on two cores). Writes ``validation/results/serving_drift.csv`` (per row: measured and simulated
mean TTFT/TPOT both ways, and the fixed-length run's ``lockstep_share``, :func:`roofline.serving.sim.metrics.
lockstep_share`) and prints per engine the rows in lock-step and the median |error| both ways. Engine options
and protocol as ``validate_simulator.py`` (deployment options, 50C requests from a cold start).
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import validate_simulator as vs

from roofline.errors import RooflineError

HERE = Path(__file__).parent
OUT = HERE.parent / "results" / "serving_drift.csv"
SPREAD = 0.02


def run(args: tuple[dict, float]) -> tuple[float, float, float]:
    """(mean TTFT ms, mean TPOT ms, lockstep_share) of one row, answer lengths spread by CV ``spread`` (0: fixed)."""
    rec, spread = args
    row = pd.Series(rec)
    try:
        s = vs.simulate_row(row, output_len=None if spread == 0 else f"lognormal:{int(row.osl)}:{spread}")
    except RooflineError:
        return np.nan, np.nan, np.nan
    q = s.requests
    return float(q.ttft_s.mean()) * 1e3, float(q.tpot_s.mean()) * 1e3, float(s.config["lockstep_share"])


def main() -> None:
    res = pd.read_csv(HERE.parent / "results" / "serving_sim.csv")
    rows = pd.read_csv(HERE / "aic_silicon_agg.csv").set_index("id").loc[res.id].reset_index().to_dict("records")
    keep = ["id", "engine", "family", "hardware", "isl", "osl", "concurrency", "ttft_meas_ms", "tpot_meas_ms"]
    out = res[keep].copy()
    with ProcessPoolExecutor(os.cpu_count() or 1) as ex:
        for name, spread in (("fixed", 0.0), ("drift", SPREAD)):
            got = np.array(list(ex.map(run, [(r, spread) for r in rows], chunksize=4)))
            out[f"ttft_{name}_ms"], out[f"tpot_{name}_ms"] = got[:, 0], got[:, 1]
            if name == "fixed":
                out["lockstep_share"] = got[:, 2]
    OUT.parent.mkdir(exist_ok=True)
    out.to_csv(OUT, index=False, float_format="%.6g")
    for eng, g in out.groupby("engine"):
        err = {n: np.median(np.abs(g[f"ttft_{n}_ms"] / g.ttft_meas_ms - 1)) for n in ("fixed", "drift")}
        tp = {n: np.median(np.abs(g[f"tpot_{n}_ms"] / g.tpot_meas_ms - 1)) for n in ("fixed", "drift")}
        print(
            f"{eng}: {int((g.lockstep_share > 0.5).sum())} of {len(g)} rows in lock-step; median |TTFT error| "
            f"fixed {err['fixed']:.1%}, drift {err['drift']:.1%}; TPOT {tp['fixed']:.1%}, {tp['drift']:.1%}"
        )


if __name__ == "__main__":
    main()
