"""Add one candidate pass to the saved engine-defaults passes: every row of the public closed-loop sample simulated
again at a further mean request overhead, with the row runner and options of ``validate_simulator.py
--engine-options preset --profile default`` (protocol aiperf, overhead spread cv 1).

Used to check that the front-end latency fit (``roofline/published/frontend.py``) is not pinned at the grid's
edge: ``python validation/serving/extend_passes.py 0.64`` (235 s on two cores) added the 640 ms column to
``validation/results/serving_sim_passes_preset_aiperf_cv1.csv.gz``; the fit still picks 320 ms for SGLang.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import validate_simulator as vs  # noqa: E402

PASSES = HERE.parent / "results" / "serving_sim_passes_preset_aiperf_cv1.csv.gz"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("overhead_s", type=float, help="mean request overhead of the new pass, seconds")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes")
    a = ap.parse_args()
    old = pd.read_csv(PASSES)
    d = pd.read_csv(HERE / "aic_silicon_agg.csv")
    d = d.sample(frac=1.0, random_state=0).groupby(["backend", "family", "hardware"]).head(100000)
    d = d.sort_values(["backend", "family", "hardware", "id"]).reset_index(drop=True)
    if list(d.id) != list(old.id):
        raise SystemExit(f"{PASSES} holds other rows than the sample; rerun validate_simulator.py first")
    t0 = time.perf_counter()
    task = partial(
        vs._run_record,
        field="request_overhead_s",
        value=a.overhead_s,
        options="preset",
        protocol="aiperf",
        cv=1.0,
        profile="default",
    )
    with ProcessPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        res = np.array([(t, p) for t, p, _ in pool.map(task, d.to_dict("records"), chunksize=8)], dtype=np.float64)
    y = f"{a.overhead_s:g}"
    old[f"ttft_ms_request_overhead_s={y}"], old[f"tpot_ms_request_overhead_s={y}"] = res[:, 0], res[:, 1]
    old.to_csv(PASSES, index=False, float_format="%.6g")
    print(f"{len(d)} rows at {y} s in {time.perf_counter() - t0:.0f} s -> {PASSES}")


if __name__ == "__main__":
    main()
