"""The serving simulator against real vLLM 0.15.1 runs with their engine options recorded (BLIS sim-to-real study).

Data: ``shared/validation/serving/blis_vllm_groundtruth.csv`` (see its SOURCES.md entry): H100 SXM, Llama-3.1-8B
(tp 1, 2), Qwen3-14B (tp 1), Mixtral-8x7B (tp 2, 4), FP16, an open-loop client (inference-perf) at each stage's
rate, TTFT / ITL / E2E mean and P99 per stage.

Mixtral's experts are tensor-sharded (each GPU holds 1/tp of every expert), vLLM's default: expert parallelism is
opt-in (``ParallelConfig.enable_expert_parallel: bool = False``, "Use expert parallelism instead of tensor
parallelism for MoE layers", ``vllm/config/parallel.py``; ``--enable-expert-parallel``), and the study's run
configuration records ``tensor_parallelism`` and ``dp`` only (``experiment/ground_truth.py`` of the study @ dcec3fd
reads ``exp-config.yaml``'s ``tensor_parallelism``; its figures name expert parallelism only for a dp 2 run,
``experiment/figures.py`` ``_derive_config_tag``: "ep=4" = dp × tp, which is not among these runs). The data's
SOURCES.md note says "MoE EP = TP"; ``--expert-parallel`` simulates that reading instead (writes ``*_ep.csv``).

Each run is simulated with ``roofline.simulate`` and the vLLM preset with the run's recorded engine options:
``max_num_batched_tokens`` = its chunk size, ``gpu_memory_utilization`` from the notes, ``max_num_seqs`` 128 (so
CUDA graphs, full for decode and piecewise for prefill/mixed steps, captured up to min(2 x 128, 512) = 256 tokens),
chunked prefill and prefix caching on (the preset's), asynchronous scheduling on (vLLM's default from v0.14,
release notes #27614), weights and KV in fp16. ASSUMED, since the per-request traces are not public: prompt and
output lengths at the stated means (``--cv`` > 0 draws them lognormal with that coefficient of variation instead,
each output cut where its context reaches the recorded ``max_model_len`` of 4,096 tokens). Fixed lengths are the
assumption with no free parameter, and the measured E2E P99 is within 1.05–1.8× its mean in every run, so the
output lengths are narrow (lognormal CV 1 puts the simulated P99 at 4–5× the mean); each stage
simulated alone from an empty engine (a later stage of a multi-stage run starts loaded in reality); at most
``--max-requests`` requests per stage (rate × duration otherwise); CPU KV offload (on in some runs) not modelled.
Runs whose stage rates are not published ("general-lite", whole run) are left out and counted.

Arrivals (``--arrival``, default ``poisson``): the study's harness sends with inference-perf's load type
``constant`` (its default, ``inference_perf/config.py``; the study's tekton sample ``values.yaml`` and its own copy of
a run's ``profile.yaml``, ``tests/test_ground_truth.py`` of inference-sim/sim-to-real-accuracy-validation @ dcec3fd:
``"load": {"stages": ..., "type": "constant"}``), and that type is not evenly spaced: ``ConstantLoadTimer`` draws
rate × duration exponential gaps and rescales them to sum to the stage duration
(``inference_perf/loadgen/load_timer.py``; ``roofline/data/clients.yaml`` ``inference-perf``), a Poisson stream
conditioned on its count, which is what the data's SOURCES.md entry says. ``--arrival constant`` simulates evenly
spaced sends instead (writes ``*_constant.csv``; the study's own simulator adapters replayed the runs that way,
``docs/superpowers/specs/2026-03-24-llmservingsim-adapter-design.md``, which is not what inference-perf sent).

Shared system prompts (on by default, ``--no-shared-prefix`` off, writes ``*_noprefix.csv``): the same profile
copy and the tekton sample generate the prompts with inference-perf's ``shared_prefix`` data type, a 100-token system
prompt shared by each group of users ahead of each question (:data:`SHARED_PREFIX_WORKLOADS`: "general" 447 + 100
tokens, "codegen" 466 + 100), and the runs had prefix caching on, so those stages' prompts open with a cached share
100 / mean prompt (``prefix_share``); roleplay and reasoning state none. Multi-turn context (the profiles enable
``enable_multi_turn_chat``) is not modelled: the stated mean prompts (~547, ~566) are single-round lengths.

Nothing is fitted: the simulator runs physics only (no request overhead, no output lag), so every row is out of
sample and the per-family figures are held-out figures. Writes ``validation/results/serving_blis.csv`` and prints
the median |error| per model family and metric.

Run: ``.venv/bin/python validation/serving/validate_blis.py`` (about a minute on two cores).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import pandas as pd

import roofline
from roofline.engine.profiles import select_profile

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[2] / "shared" / "validation" / "serving" / "blis_vllm_groundtruth.csv"
OUT = HERE.parent / "results" / "serving_blis.csv"
MODELS = {
    "meta-llama/Llama-3.1-8B-Instruct": ("llama-3.1-8b", "llama"),
    "Qwen/Qwen3-14B": (str(HERE / "models" / "qwen3-14b.yaml"), "qwen3"),
    "mistralai/Mixtral-8x7B-v0.1": ("mixtral-8x7b", "mixtral"),
}
#: measured metric -> the simulator's summary key
METRICS = {
    "ttft_mean": "ttft_mean_s",
    "ttft_p99": "ttft_p99_s",
    "itl_mean": "itl_mean_s",
    "e2e_mean": "e2e_mean_s",
    "e2e_p99": "e2e_p99_s",
}


def runs(path: Path = DATA) -> tuple[pd.DataFrame, int]:
    """One row per (experiment, stage) with its settings and measured metrics (ms), and the stages left out."""
    d = pd.read_csv(path)
    d["exp"] = d["ref"].str.extract(r"exp_id=(\d+)", expand=False)
    d["stage"] = d["workload"].str.extract(r"(stage \d+|single stage|whole run)", expand=False)
    keys = ["exp", "stage", "model", "tp", "workload", "prompt_len", "output_len", "qps_or_concurrency", "chunk_size"]
    wide = d.pivot_table(index=keys, columns="metric", values="value", aggfunc="first").reset_index()
    notes = d.groupby(["exp", "stage"])["notes"].first()
    wide["gpu_mem_util"] = [
        float(re.search(r"gpu_mem_util ([0-9.]+)", notes[(e, s)]).group(1))  # type: ignore[union-attr]
        for e, s in zip(wide["exp"], wide["stage"], strict=True)
    ]
    rate = wide["qps_or_concurrency"].str.extract(r"^([0-9.]+) req/s \((?:stage \d+|single stage), (\d+) s\)")
    wide["qps"], wide["duration_s"] = rate[0].astype(float), rate[1].astype(float)
    skipped = int(wide["qps"].isna().sum())
    wide = wide.dropna(subset=["qps"]).reset_index(drop=True)
    wide["prompt_mean"] = wide["prompt_len"].str.extract(r"~(\d+)", expand=False).astype(float)
    wide["output_mean"] = wide["output_len"].str.extract(r"~(\d+)", expand=False).astype(float)
    return wide, skipped


#: The runs' recorded ``max_model_len`` (tokens of prompt + output).
MAX_MODEL_LEN = 4096


def lengths(prompt_mean: float, output_mean: float, cv: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` prompt and output lengths (tokens) of these means: fixed for ``cv`` 0, else lognormal of that CV with
    each request's output cut where prompt + output reaches MAX_MODEL_LEN (the prompt at most MAX_MODEL_LEN − 1)."""
    from roofline.serving.workload.arrivals import parse_length

    if cv == 0:
        return np.full(n, round(prompt_mean), dtype=np.int64), np.full(n, round(output_mean), dtype=np.int64)
    rng = np.random.default_rng([seed, 11])
    p = np.minimum(parse_length(f"lognormal:{prompt_mean:g}:{cv:g}", "prompt_len").sample(n, rng), MAX_MODEL_LEN - 1)
    o = parse_length(f"lognormal:{output_mean:g}:{cv:g}", "output_len").sample(n, rng)
    return p, np.maximum(np.minimum(o, MAX_MODEL_LEN - p), 1)


#: The "general" workload's system prompts (the study's inference-perf sample data: 9 shared 100-token system
#: prompts before 447-token questions, module docstring): with prefix caching on, a prompt's first 100 tokens are a
#: cache hit once its system prompt has been seen (9 distinct ones: the first few requests).
GENERAL_SYSTEM_PROMPT_TOKENS = 100
#: The workloads whose prompts open with a shared system prompt of that many tokens, and where that is stated.
SHARED_PREFIX_WORKLOADS = {
    "general": "the study's tekton sample values.yaml (data: shared_prefix, system_prompt_len 100, 9 x 5 users)",
    "codegen": "the study's profile fixture (tests/test_ground_truth.py: data type shared_prefix, system_prompt_len "
    "100, question_len 466, output_len 247, 11 x 4 users, stages 5 -> 10 req/s: the codegen runs' shape)",
}


def general_prefix_share(row: pd.Series) -> float:
    """The share of a stage's mean prompt that is a cached system prompt: 100 / mean prompt for the workloads of
    :data:`SHARED_PREFIX_WORKLOADS`, 0 for the others (roleplay, reasoning: no shared prefix stated)."""
    shared = str(row["workload"]).split(" ")[0] in SHARED_PREFIX_WORKLOADS
    return GENERAL_SYSTEM_PROMPT_TOKENS / float(row["prompt_mean"]) if shared else 0.0


def simulate_run(
    row: pd.Series,
    cv: float,
    max_requests: int,
    engine_kernels: bool = False,
    seed: int = 0,
    arrival: str = "poisson",
    extra: dict[str, float] | None = None,
    shared_prefix: bool = True,
    expert_parallel: bool = False,
) -> dict[str, float]:
    """The run's simulated TTFT/ITL/E2E (ms) under its recorded engine options (module docstring); ``extra``:
    further engine options (a front-end latency candidate); ``shared_prefix``: a "general" or "codegen" stage's
    prompts open with a cached system prompt of :data:`GENERAL_SYSTEM_PROMPT_TOKENS` (module docstring);
    ``expert_parallel``: an MoE model's experts split whole over the tp GPUs (ep = tp) instead of tensor-sharded."""
    model, _ = MODELS[str(row["model"])]
    tp = int(row["tp"])
    n = int(min(max_requests, row["qps"] * row["duration_s"]))
    prompt, output = lengths(float(row["prompt_mean"]), float(row["output_mean"]), cv, n, seed)
    over = {
        "max_num_batched_tokens": int(row["chunk_size"]),
        "gpu_memory_utilization": float(row["gpu_mem_util"]),
        "max_num_seqs": 128,
        "cuda_graph_max_batch": 256,  # vLLM's capture sizes up to min(2 x max_num_seqs, 512) (presets.VLLM_GRAPHS)
        "async_scheduling": True,
        **(extra or {}),
    }
    s = roofline.simulate(
        model,
        "h100-sxm",
        "vllm",
        tp,
        ep=tp if expert_parallel and "Mixtral" in str(row["model"]) else 1,
        qps=float(row["qps"]),
        arrival=arrival,
        prompt_len=prompt,
        output_len=output,
        num_requests=n,
        seed=seed,
        weight_dtype="fp16",
        kv_dtype="fp16",
        engine_overrides=over,
        calibration=select_profile(None, "h100-sxm", "vllm", engine_kernels=True) if engine_kernels else None,
        prefix_share=general_prefix_share(row) if shared_prefix else 0.0,
    )
    out = {f"sim_{m}": s.summary[k] * 1e3 for m, k in METRICS.items()}
    out["sim_mean_batch"] = s.summary["mean_batch"]
    out["saturated"] = float(s.saturated is not None)
    return out


#: Candidate mean front-end latencies (s) the frontend passes simulate: the closed-loop fit's grid
#: (roofline/published/frontend.py), each request's drawn from an exponential law about it.
FRONTEND_GRID_S = (0.0, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64)
FRONTEND_PASSES = OUT.with_name("serving_blis_frontend_passes.csv")


def frontend_passes(wide: pd.DataFrame, max_requests: int) -> pd.DataFrame:
    """Every stage's simulated mean TTFT (ms) at each candidate front-end latency, beside its measured one: the
    independent source the front-end latency fit checks vLLM's candidate on (roofline.published.frontend)."""
    out = wide[["exp", "stage"]].copy()
    out["family"] = [MODELS[m][1] for m in wide["model"]]
    out["ttft_meas_ms"] = wide["ttft_mean"]
    for y in FRONTEND_GRID_S:
        extra = {"request_overhead_s": y, "request_overhead_cv": 1.0 if y else 0.0}
        sims = [simulate_run(r, 0.0, max_requests, extra=extra)["sim_ttft_mean"] for _, r in wide.iterrows()]
        out[f"ttft_ms_request_overhead_s={y:g}"] = sims
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cv", type=float, default=0.0, help="CV of lognormal lengths (0: the stated means, fixed)")
    ap.add_argument("--max-requests", type=int, default=4000, help="requests simulated per stage at most")
    ap.add_argument(
        "--profile",
        choices=("default", "engine"),
        default="default",
        help="the default profile, or the shipped vLLM kernel profile of the H100 (writes serving_blis_engine.csv)",
    )
    ap.add_argument(
        "--frontend-passes",
        action="store_true",
        help=f"simulate every stage at each front-end latency of {FRONTEND_GRID_S} s (default profile) and write "
        f"{FRONTEND_PASSES.name}",
    )
    ap.add_argument(
        "--no-shared-prefix",
        dest="shared_prefix",
        action="store_false",
        help="no cached 100-token system prompts on the general and codegen stages (writes a _noprefix file)",
    )
    ap.add_argument(
        "--expert-parallel",
        action="store_true",
        help="Mixtral's experts split whole over the tp GPUs (ep = tp) instead of vLLM's default tensor sharding "
        "(writes an _ep file)",
    )
    ap.add_argument(
        "--arrival",
        choices=("poisson", "constant"),
        default="poisson",
        help="the client's arrival process (module docstring; constant, evenly spaced, writes a _constant file)",
    )
    a = ap.parse_args()
    wide, skipped = runs()
    if a.frontend_passes:
        frontend_passes(wide, a.max_requests).to_csv(FRONTEND_PASSES, index=False, float_format="%.6g")
        print(f"{len(wide)} stages at {len(FRONTEND_GRID_S)} front-end latencies -> {FRONTEND_PASSES}")
        return
    engine = a.profile == "engine"
    sims = pd.DataFrame(
        [
            simulate_run(
                r,
                a.cv,
                a.max_requests,
                engine,
                arrival=a.arrival,
                shared_prefix=a.shared_prefix,
                expert_parallel=a.expert_parallel,
            )
            for _, r in wide.iterrows()
        ]
    )
    res = pd.concat([wide.drop(columns=["qps_or_concurrency"]), sims], axis=1)
    res["family"] = [MODELS[m][1] for m in res["model"]]
    for m in METRICS:
        res[f"err_{m}"] = res[f"sim_{m}"] / res[m] - 1.0
    out = OUT.with_name("serving_blis_engine.csv") if engine else OUT
    if a.arrival != "poisson":
        out = out.with_name(f"{out.stem}_{a.arrival}.csv")
    if not a.shared_prefix:
        out = out.with_name(f"{out.stem}_noprefix.csv")
    if a.expert_parallel:
        out = out.with_name(f"{out.stem}_ep.csv")
    res.to_csv(out, index=False, float_format="%.6g")
    shape = "fixed at the stated means" if a.cv == 0 else f"lognormal, CV {a.cv:g}"
    print(
        f"{len(res)} stages simulated ({skipped} left out: stage rates not published); lengths {shape}, "
        f"{a.arrival} arrivals, {'shared system prompts cached' if a.shared_prefix else 'no shared prefix'}"
    )
    print_table(res, out.name)


def print_table(res: pd.DataFrame, name: str) -> None:
    """Median |error| per (family, tp), per family (the held-out unit) and over all stages."""

    def cells(g: pd.DataFrame) -> str:
        return " ".join(f"{np.median(np.abs(g[f'err_{m}'])) * 100:9.1f}%" for m in METRICS)

    print(f"{'family':8s} {'tp':>3s} {'n':>3s} " + " ".join(f"{m:>10s}" for m in METRICS))
    for (fam, tp), g in res.groupby(["family", "tp"]):
        print(f"{fam:8s} {tp:3d} {len(g):3d} {cells(g)}")
    for fam, g in res.groupby("family"):
        print(f"{fam:8s} {'all':>3s} {len(g):3d} {cells(g)}")
    print(f"{'all':8s} {'':3s} {len(res):3d} {cells(res)}   (median |error|; signed medians in {name})")


if __name__ == "__main__":
    main()
