"""Memory knee: does the simulator put the TTFT jump of a concurrency sweep in the measured step?

Data: ``qwen3_32b_vllm_sweeps.csv`` (copied verbatim from the shared ``measurements.csv``, source
AIConfigurator-silicon-sample-sweeps: Qwen3-32B, vLLM 0.12, H100 SXM, tp 2, closed loop at concurrency
8 … 128; precision not recorded, "likely bf16" per the source note, so bf16 here). The knee is the first
concurrency step at which mean TTFT grows by more than 3× (KV exhausted: requests queue or are preempted).
The engine's CPU overheads are the vLLM values fitted in ``validate_simulator.py`` (mean over its folds,
none of which saw these rows), and each point runs the benchmark protocol used there (50C requests from a cold
start, ``request_count``). Run: ``python validation/serving/knee.py``; writes
``validation/results/serving_knee.csv``. ``--form output_lag`` runs the other fitted form instead (the vLLM
``output_lag_steps``, mean over the folds) and writes ``serving_knee_output_lag.csv``. ``--form physics`` runs
the vLLM preset with no fitted overhead (what ``roofline.simulate`` runs by default), writes
``serving_knee_physics.csv`` and counts how many measured points fall inside the simulator's 80 % serving
intervals (``roofline.published.serving_error``): an out-of-sample check, since these intervals were derived
from vLLM rows of other model families (no Qwen3-32B among them).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from validate_simulator import request_count

from roofline.serving.simulate import simulate

HERE = Path(__file__).parent
OUT = HERE.parent / "results" / "serving_knee.csv"
JUMP = 3.0


def knee(conc: np.ndarray, ttft: np.ndarray) -> float:
    """First concurrency whose TTFT exceeds JUMP × the previous step's (NaN when none)."""
    hit = np.nonzero(ttft[1:] > JUMP * ttft[:-1])[0]
    return float(conc[hit[0] + 1]) if hit.size else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--form",
        choices=("request_overhead", "output_lag", "physics"),
        default="request_overhead",
        help="fitted form, or physics (none); output_lag/physics: serving_knee_<form>.csv",
    )
    a = ap.parse_args()
    m = pd.read_csv(HERE / "qwen3_32b_vllm_sweeps.csv")
    m["concurrency"] = m.qps_or_concurrency.str.extract(r"concurrency (\d+)").astype(int)
    fits = pd.read_csv(HERE.parent / "results" / "serving_sim.csv")
    folds = fits[fits.engine == "vllm"].groupby("held_out")
    over: dict[str, float] = {}
    if a.form == "output_lag":
        over = {"output_lag_steps": float(folds.output_lag_steps.first().mean())}
    elif a.form == "request_overhead":
        v = folds[["step_overhead_s", "request_overhead_s"]].first().mean()
        over = {
            "step_overhead_s": float(v.step_overhead_s),
            "request_overhead_s": float(v.request_overhead_s),
            "request_overhead_cv": 1.0,
        }
    rows = []
    for (isl, osl), g in m.groupby(["prompt_len", "output_len"]):
        piv = g.pivot_table(index="concurrency", columns="metric", values="value")
        for c, r in piv.iterrows():
            s = simulate(
                "qwen3-32b",
                "h100-sxm",
                engine="vllm",
                tp=2,
                concurrency=int(c),
                prompt_len=int(isl),
                output_len=int(osl),
                num_requests=request_count(int(c), "aiperf"),
                weight_dtype="bf16",
                engine_overrides=over,
            )
            rows.append(
                {
                    "isl": isl,
                    "osl": osl,
                    "concurrency": c,
                    "ttft_meas_ms": r.ttft,
                    "tpot_meas_ms": r.tpot,
                    "ttft_sim_ms": s.summary["ttft_mean_s"] * 1e3,
                    "tpot_sim_ms": s.summary["tpot_mean_s"] * 1e3,
                    "preemptions": s.summary["preemptions"],
                }
            )
    res = pd.DataFrame(rows)
    OUT.parent.mkdir(exist_ok=True)
    res.to_csv(OUT if a.form == "request_overhead" else OUT.with_name(f"serving_knee_{a.form}.csv"), index=False)
    below = res[res.preemptions == 0]  # the rows below the knee
    err = float(np.median(np.abs(below.ttft_sim_ms / below.ttft_meas_ms - 1)))
    print(f"{over}: median |TTFT error| {err:.1%} on the {len(below)} points without preemption")
    print(res.to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    for (isl, osl), g in res.groupby(["isl", "osl"]):
        c = g.concurrency.to_numpy()
        print(
            f"ISL {isl} OSL {osl}: measured knee at concurrency {knee(c, g.ttft_meas_ms.to_numpy())}, "
            f"simulated {knee(c, g.ttft_sim_ms.to_numpy())}"
        )
    if a.form == "physics":
        from roofline.published.serving_error import serving_interval

        for fig in ("ttft", "tpot"):
            iv = serving_interval(f"{fig}_mean_s", 1.0, engine="vllm", level=0.8)
            ratio = res[f"{fig}_meas_ms"] / res[f"{fig}_sim_ms"]
            inside = (ratio >= iv.low) & (ratio <= iv.high)
            print(
                f"{fig.upper()}: {int(inside.sum())} of {len(res)} measured points inside the vLLM 80 % interval "
                f"(×{iv.low:.2f} – ×{iv.high:.2f} the simulated value); below the knee "
                f"{int(inside[res.preemptions == 0].sum())} of {int((res.preemptions == 0).sum())}"
            )


if __name__ == "__main__":
    main()
