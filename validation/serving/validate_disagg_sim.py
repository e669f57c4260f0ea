"""The public disaggregated rows on the serving simulator, closed loop (issue #30): TTFT with its queueing.

Run: ``python validation/serving/validate_disagg_sim.py [--per-group K]`` after ``validate_disagg_rows.py`` (it reads
that script's ``validation/results/disagg_rows.csv`` for the rows roofline expresses and their static figures).

For the first K expressible rows of every (engine, GPU) group (row order of the source file), simulates the row's
prefill and decode pools of attention-DP / wide-EP workers under its C clients
(:func:`roofline.published.disagg_sim.simulate_row`) and writes ``validation/results/disagg_rows_sim.csv`` (the
static and simulated TTFT / TPOT / throughput per GPU against the measured ones, ln errors) and prints the medians
of |error| of both tiers on these rows, overall and per engine / GPU family / model. Nothing is fitted to the rows.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from roofline.errors import RooflineError
from roofline.published.disagg_rows import load_rows, map_row
from roofline.published.disagg_sim import simulate_row

RESULTS = Path(__file__).resolve().parents[1] / "results"
METRICS = (("ttft", "ttft_s"), ("tpot", "tpot_s"), ("tput", "tput_per_gpu"))


def simulate_rows(per_group: int) -> pd.DataFrame:
    """The simulated rows with their static and measured figures and ln errors (module docstring)."""
    static = pd.read_csv(RESULTS / "disagg_rows.csv")
    ok = static[static.skip_reason.isna()].groupby(["backend", "system"], sort=True).head(per_group)
    src = load_rows().set_index("id")
    out = []
    for _, r in ok.iterrows():
        m = map_row(src.loc[r.id])
        rec = {k: r[k] for k in ("id", "backend", "system", "gpu_family", "model", "concurrency", "gpus_total")}
        t = time.perf_counter()
        try:
            rec |= simulate_row(m)  # type: ignore[arg-type]
        except RooflineError as exc:
            rec["sim_note"] = str(exc).split(";")[0][:160]
        rec["sim_wall_s"] = time.perf_counter() - t
        for key, suffix in METRICS:
            rec[f"meas_{suffix}"], rec[f"pred_{suffix}"] = r[f"meas_{suffix}"], r[f"pred_{suffix}"]
            sim = rec.get(f"sim_{suffix}", math.nan)
            rec[f"ln_err_static_{key}"] = math.log(r[f"pred_{suffix}"] / r[f"meas_{suffix}"])
            rec[f"ln_err_sim_{key}"] = math.log(sim / r[f"meas_{suffix}"]) if sim == sim else math.nan
        out.append(rec)
    return pd.DataFrame(out)


def medians(d: pd.DataFrame) -> pd.DataFrame:
    """Median |predicted/measured − 1| (%) of both tiers, overall and per engine, GPU family and model."""
    cols = [f"ln_err_{tier}_{key}" for tier in ("static", "sim") for key, _ in METRICS]

    def ape(x: pd.Series) -> float:
        v = x.dropna().to_numpy(dtype=float)
        return float(np.median(np.abs(np.expm1(v))) * 100) if len(v) else math.nan

    parts = [d[cols].agg(ape).to_frame("all").T.assign(n=len(d))]
    for g in ("backend", "gpu_family", "model"):
        parts.append(d.groupby(g)[cols].agg(ape).assign(n=d.groupby(g).size()))
    return pd.concat(parts).rename(columns=lambda c: c.replace("ln_err_", ""))


def main() -> int:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-group", type=int, default=2, help="rows simulated per (engine, GPU) group")
    a = ap.parse_args()
    t0 = time.perf_counter()
    d = simulate_rows(a.per_group)
    path = RESULTS / "disagg_rows_sim.csv"
    d.to_csv(path, index=False)
    pd.set_option("display.width", 200)
    print(medians(d).round(1).to_string())
    print(f"\n{len(d)} rows simulated -> {path} in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
