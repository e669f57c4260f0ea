"""Does the README main job's answer move with the seed or the request count? (issue: decisions a buyer can stand on)

Runs the report's sizing (:func:`roofline.report.content.hardware_rows` on the planner's candidates, the same code
``roofline report`` runs) for Llama-3.1-70B, the ``chat`` workload, H100 SXM / H200 SXM / A100 80GB SXM, vLLM, for
seeds 0–9 at the default 1,000 requests per sizing run and seeds 0–2 at 2× and 4× that, and prints the
recommended deployment and every hardware's sized GPU count. Each sizing check replicates its runs over seeds
s, s + 1, … (:mod:`roofline.serving.plan.sampling`), so the answer should be one line repeated. Writes
``validation/results/sizing_stability.csv``.

Run: ``.venv/bin/python validation/serving/sizing_stability.py [--jobs J]`` (about 2–4 minutes on two cores).
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

from roofline.report.content import hardware_rows, recommended_row, resolve_inputs, run_plan
from roofline.serving.workload.presets import PRESETS

OUT = Path(__file__).resolve().parents[1] / "results" / "sizing_stability.csv"
HARDWARE = "h100-sxm,h200-sxm,a100-80gb-sxm"
CASES = [(1000, s) for s in range(10)] + [(n, s) for n in (2000, 4000) for s in range(3)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes (one per hardware at most)")
    a = ap.parse_args()
    inp = resolve_inputs("llama-3.1-70b", HARDWARE, PRESETS["chat"])
    plan = run_plan(inp)
    out = []
    for n, seed in CASES:
        t0 = time.perf_counter()
        rows = hardware_rows(replace(inp, seed=seed, num_requests=n), plan, jobs=a.jobs)
        rec = recommended_row(rows)
        f = rec.finalist if rec is not None else None
        rec_text = f"{f.replicas} x {f.candidate.hardware} tp{f.candidate.tp} = {f.gpus} GPUs" if f else "none"
        sized = {r.hardware.name: (r.finalist.gpus if r.finalist else None) for r in rows}
        out.append({"requests": n, "seed": seed, "recommended": rec_text, **sized, "s": time.perf_counter() - t0})
        print(f"N={n:5d} seed={seed}: {rec_text}; sized {sized} ({out[-1]['s']:.1f} s)", flush=True)
    df = pd.DataFrame(out)
    df.to_csv(OUT, index=False, float_format="%.4g")
    answers = df["recommended"].unique()
    print(f"{len(answers)} distinct answer(s) over {len(df)} cases: {'; '.join(answers)} -> {OUT}")


if __name__ == "__main__":
    main()
