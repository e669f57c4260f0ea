"""Accuracy of the disaggregated serving model on AIConfigurator's public disaggregated silicon rows.

Run: ``python validation/serving/validate_disagg.py [--max-per-group N] [--pick]``. ``--pick`` first copies
the usable rows of ``/work/shared/validation/serving/aic_silicon_sample.csv`` (ai-dynamo/aiconfigurator @
095f58a5, ``aic-core/src/aiconfigurator_core/systems/silicon_sample.csv``, Apache-2.0) into
``aic_silicon_disagg.csv`` here. Writes ``validation/results/serving_disagg.csv`` and prints the median
|error| of TTFT and TPOT per engine.

Rows kept: mode disagg; H100/H200/B200; both pools without attention data parallelism, pp 1, tp <= 8,
experts tp-sharded (moe_ep 1) or fully expert-parallel (moe_ep = tp); a library model (same families as
``pick_rows.py``). Each row: prefill pool ``prefill_num_workers`` × tp ``prefill_tp_size``, decode pool
``decode_num_workers`` × tp ``decode_tp_size``; ISL/OSL fixed; closed loop of C clients, C =
``decode_batch_size`` × ``decode_num_workers`` (ASSUMED: the file leaves ``batch_size`` empty for these rows
and its decode batch is read as per decode worker).

Two predictions, nothing fitted (every row out-of-sample; the engines' CPU costs are the presets'):

* static: TPOT = ``predict(batch=decode_batch_size, tp=decode tp, ep=decode ep)`` — a decode pool sees no
  prefill chunks, so its step is a pure decode step at that batch; TTFT = prefill of one request (batch 1)
  + the KV transfer at the default link (50 GB/s per GPU, latency 0.1 ms);
* simulated (the first ``--max-per-group`` rows per (engine, model, GPU)): ``roofline.simulate(...,
  disagg=...)`` in open loop at the request rate X that satisfies Little's law X · mean E2E = C (bisection on
  X, constant arrivals), first token on the prefill side, each pool with the engine options the source's config
  generator writes for it (:func:`pool_options`; ``--engine-options preset``: the engines' defaults, written
  to ``serving_disagg_preset.csv``), vLLM scheduling asynchronously from v0.14 as in ``validate_simulator.py``;
* closed loop (``closed``, the same rows): ``roofline.simulate(..., disagg=..., concurrency=C)``, the C clients
  themselves (the disaggregated closed loop, :mod:`roofline.serving.sim.disagg_loop`), the same pool options;
* simulated with fit (``simfit``): the same with each engine's request overhead fitted on the
  AGGREGATED rows only (:func:`agg_overheads`) — held out by serving mode: no disaggregated row is fitted.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from roofline.errors import RooflineError
from roofline.memory import kv_bytes_per_sequence_per_gpu
from roofline.prediction import predict
from roofline.serving.simulate import simulate
from roofline.specs.disagg import DEFAULT_LATENCY_S, DEFAULT_LINK_BYTES_PER_S, DisaggConfig, Pool

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from pick_rows import FAMILY, HW, SPEC  # noqa: E402
from validate_simulator import sglang_prefill_tokens, trtllm_tokens, vllm_async, weight_dtype  # noqa: E402

ROWS = HERE / "aic_silicon_disagg.csv"
OUT = HERE.parent / "results" / "serving_disagg.csv"
SRC = Path("/work/shared/validation/serving/aic_silicon_sample.csv")


def pick() -> None:
    """Copy the usable disaggregated rows (columns verbatim, plus family/spec/hardware)."""
    d = pd.read_csv(SRC)
    keep = (d["mode"] == "disagg") & d.model_path.isin(list(FAMILY)) & d.system.isin(list(HW)) & d.precision.notna()
    keep &= d.decode_batch_size.notna() & d.prefill_num_workers.notna() & d.decode_num_workers.notna()
    for s in ("prefill", "decode"):
        tp, ep = d[f"{s}_tp_size"], d[f"{s}_moe_ep_size"].fillna(0)
        keep &= (d[f"{s}_attention_dp_size"].fillna(0) <= 1) & (d[f"{s}_pp_size"].fillna(1) == 1) & (tp <= 8)
        keep &= (ep <= 1) | (ep == tp)
    cols = [
        "id",
        "backend",
        "backend_version",
        "model_path",
        "system",
        "precision",
        "isl",
        "osl",
        "prefill_batch_size",
        "prefill_num_workers",
        "prefill_tp_size",
        "prefill_moe_ep_size",
        "decode_batch_size",
        "decode_num_workers",
        "decode_tp_size",
        "decode_moe_ep_size",
        "silicon_ttft_ms",
        "silicon_tpot_ms",
    ]
    out = d.loc[keep, cols].copy()
    for s in ("prefill", "decode"):
        out[f"{s}_moe_ep_size"] = out[f"{s}_moe_ep_size"].fillna(0).clip(lower=1).astype(int)
    out["family"] = out.model_path.map(FAMILY)
    out["spec"] = out.family.map(SPEC)
    out["hardware"] = out.system.map(HW)
    out.to_csv(ROWS, index=False)
    print(f"{len(out)} rows -> {ROWS}")


def config(row: pd.Series) -> DisaggConfig:
    """The row's pools at the default link."""
    p = Pool(row.hardware, int(row.prefill_tp_size), int(row.prefill_num_workers), int(row.prefill_moe_ep_size))
    d = Pool(row.hardware, int(row.decode_tp_size), int(row.decode_num_workers), int(row.decode_moe_ep_size))
    return DisaggConfig(p, d)


def pool_options(row: pd.Series) -> tuple[dict[str, object], dict[str, object]]:
    """(prefill pool, decode pool) engine options the source's config generator writes for a disaggregated
    benchmark deployment (``ai-dynamo/aiconfigurator`` ``src/aiconfigurator/generator/rule_plugin/benchmark/``
    ``trtllm.rule`` @ 581e4591, ``vllm.rule`` @ 2b264ba7, ``sglang.rule`` @ 043c66c5):

    * prefill: ``max_batch_size`` = the row's ``prefill_batch_size``, else the rules' default 1 (one request
      at a time); token budget ISL + 1500 (TensorRT-LLM ``max_num_tokens`` rounded up to 32-token blocks,
      SGLang ``max_prefill_tokens``, capped by its chunk size); TensorRT-LLM's prefill runs without the
      overlap scheduler (``prefill disable_overlap_scheduler = true``);
    * decode: ``max_batch_size`` = the row's ``decode_batch_size`` and, for vLLM and TensorRT-LLM, token
      budget = that batch (``decode max_num_tokens = max_batch_size``).
    """
    isl, batch = int(row.isl), int(row.decode_batch_size)
    pb = int(row.prefill_batch_size) if pd.notna(row.get("prefill_batch_size")) else 1
    pre: dict[str, object] = {"max_num_seqs": pb}
    dec: dict[str, object] = {"max_num_seqs": batch}
    if row.backend == "trtllm":
        pre |= {
            "max_num_batched_tokens": trtllm_tokens(isl + 1500),
            "chunked_prefill": False,
            "async_scheduling": False,
        }
        dec["max_num_batched_tokens"] = trtllm_tokens(batch)
    elif row.backend == "vllm":
        pre["max_num_batched_tokens"] = isl + 1500
        dec["max_num_batched_tokens"] = max(batch, 1)
    else:
        pre["max_num_batched_tokens"] = sglang_prefill_tokens(row)
    return pre, dec


def run_options(row: pd.Series, options: str) -> tuple[dict[str, object], dict[str, object], dict[str, object]]:
    """(engine, prefill pool, decode pool) overrides of a simulated row: vLLM's asynchronous scheduling by
    version, and the generator's per-pool options (:func:`pool_options`) or, with the engines' presets,
    TensorRT-LLM's chunked prefill."""
    over: dict[str, object] = {}
    pre: dict[str, object] = {}
    dec: dict[str, object] = {}
    if row.backend == "vllm":
        over["async_scheduling"] = vllm_async(row.backend_version)
    if options == "deployment":
        pre, dec = pool_options(row)
    elif row.backend == "trtllm":
        over["chunked_prefill"] = True
    return over, pre, dec


def static(row: pd.Series) -> tuple[float, float]:
    """(TTFT ms, TPOT ms) from the static model (see the module docstring)."""
    wd = weight_dtype(row)
    dec = predict(
        row.spec,
        row.hardware,
        int(row.decode_batch_size),
        int(row.isl),
        int(row.osl),
        tp=int(row.decode_tp_size),
        ep=int(row.decode_moe_ep_size),
        weight_dtype=wd,
        engine=row.backend,
    )
    pre = predict(
        row.spec,
        row.hardware,
        1,
        int(row.isl),
        2,
        tp=int(row.prefill_tp_size),
        ep=int(row.prefill_moe_ep_size),
        weight_dtype=wd,
        engine=row.backend,
    )
    per_gpu = max(
        float(kv_bytes_per_sequence_per_gpu(pre.model, pre.scenario, int(row.isl))),
        float(kv_bytes_per_sequence_per_gpu(dec.model, dec.scenario, int(row.isl))),
    )
    xfer = per_gpu / DEFAULT_LINK_BYTES_PER_S + DEFAULT_LATENCY_S  # as the simulator's transfer, no queueing
    return (pre.ttft_s + xfer) * 1e3, dec.tpot_s * 1e3


def agg_overheads() -> dict[str, tuple[float, float]]:
    """Per engine (step_overhead_s, request_overhead_s) fitted on the AGGREGATED rows only.

    The mean over ``validate_simulator.py``'s folds of its fitted mean request overhead (exponentially
    spread, ``request_overhead_cv`` = 1, as there), read from ``validation/results/serving_sim.csv`` (no
    disaggregated row in it); no per-step cost (the engines overlap scheduling with the GPU; a fitted one
    failed that script's held-out test).
    """
    path = HERE.parent / "results" / "serving_sim.csv"
    if not path.exists():
        return {}
    d = pd.read_csv(path)
    per_fold = d.groupby(["engine", "held_out"]).request_overhead_s.first()
    return {str(eng): (0.0, float(g.mean())) for eng, g in per_fold.groupby(level=0)}


def simulated(
    row: pd.Series, overheads: tuple[float, float] | None = None, iters: int = 7, options: str = "deployment"
) -> tuple[float, float, float]:
    """(TTFT ms, TPOT ms, request rate) at the Little's-law rate for concurrency C (bisection in log X)."""
    c = int(row.decode_batch_size) * int(row.decode_num_workers)
    cfg = config(row)
    over, pre, dec = run_options(row, options)
    if overheads is not None:
        over |= {"step_overhead_s": overheads[0], "request_overhead_s": overheads[1], "request_overhead_cv": 1.0}
    n = int(min(max(3 * c, 120), 1500))

    def run(x: float, num: int) -> tuple[float, float, float]:
        r = simulate(
            row.spec,
            disagg=cfg,
            engine=row.backend,
            qps=x,
            arrival="constant",
            prompt_len=int(row.isl),
            output_len=int(row.osl),
            num_requests=num,
            weight_dtype=weight_dtype(row),
            engine_overrides=over,
            prefill_overrides=pre,
            decode_overrides=dec,
        )
        s = r.summary
        return s["ttft_mean_s"], s["tpot_mean_s"], s["e2e_mean_s"]

    e2e0 = run(1e-3, 1)[2]
    hi, lo = c / e2e0, c / e2e0 / 50  # at hi, X·E2E ≥ C since E2E ≥ its unloaded value
    best = (math.nan, math.nan, math.nan)
    for _ in range(iters):
        x = math.sqrt(lo * hi)
        ttft, tpot, e2e = run(x, n)
        best = (ttft * 1e3, tpot * 1e3, x)
        if x * e2e > c or not math.isfinite(e2e):
            hi = x
        else:
            lo = x
    return best


def closed(row: pd.Series, options: str = "deployment") -> tuple[float, float, float]:
    """(TTFT ms, TPOT ms, request rate) of a closed loop of C = ``decode_batch_size`` × ``decode_num_workers``
    clients sending the row's fixed lengths (``simulate(..., disagg=..., concurrency=C)``: the disaggregated closed
    loop, no Little's-law rate), each pool with the options of :func:`simulated`."""
    c = int(row.decode_batch_size) * int(row.decode_num_workers)
    over, pre, dec = run_options(row, options)
    r = simulate(
        row.spec,
        disagg=config(row),
        engine=row.backend,
        concurrency=c,
        prompt_len=int(row.isl),
        output_len=int(row.osl),
        num_requests=int(min(max(3 * c, 120), 1500)),
        weight_dtype=weight_dtype(row),
        engine_overrides=over,
        prefill_overrides=pre,
        decode_overrides=dec,
    )
    s = r.summary
    return s["ttft_mean_s"] * 1e3, s["tpot_mean_s"] * 1e3, s["request_throughput_rps"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-per-group", type=int, default=4, help="simulated rows per (engine, model, GPU)")
    ap.add_argument("--pick", action="store_true", help="re-copy the rows from the shared sample first")
    ap.add_argument(
        "--engine-options",
        choices=("deployment", "preset"),
        default="deployment",
        help="the generator's per-pool options (pool_options) or the engines' defaults",
    )
    a = ap.parse_args()
    if a.pick or not ROWS.exists():
        pick()
    d = pd.read_csv(ROWS).sort_values(["backend", "family", "hardware", "id"]).reset_index(drop=True)
    sim_idx = set(
        d.sample(frac=1.0, random_state=0).groupby(["backend", "family", "hardware"]).head(a.max_per_group).index
    )
    fitted = agg_overheads()
    print("engine overheads fitted on the aggregated rows (step s, request s):", fitted)
    res = []
    for i, row in d.iterrows():
        rec = {
            "id": row.id,
            "backend": row.backend,
            "family": row.family,
            "hardware": row.hardware,
            "ratio": f"{row.prefill_num_workers}P:{row.decode_num_workers}D",
            "measured_ttft_ms": row.silicon_ttft_ms,
            "measured_tpot_ms": row.silicon_tpot_ms,
        }
        try:
            rec["static_ttft_ms"], rec["static_tpot_ms"] = static(row)
            if i in sim_idx:
                rec["sim_ttft_ms"], rec["sim_tpot_ms"], rec["sim_qps"] = simulated(row, options=a.engine_options)
                rec["closed_ttft_ms"], rec["closed_tpot_ms"], rec["closed_qps"] = closed(row, a.engine_options)
                if row.backend in fitted:
                    rec["simfit_ttft_ms"], rec["simfit_tpot_ms"], rec["simfit_qps"] = simulated(
                        row, fitted[row.backend], options=a.engine_options
                    )
        except RooflineError as exc:
            rec["note"] = str(exc).split(";")[0][:120]
        res.append(rec)
    out = pd.DataFrame(res)
    for kind in ("static", "sim", "closed", "simfit"):
        for m in ("ttft", "tpot"):
            if f"{kind}_{m}_ms" in out:
                out[f"{kind}_{m}_err"] = out[f"{kind}_{m}_ms"] / out[f"measured_{m}_ms"] - 1
    path = OUT if a.engine_options == "deployment" else OUT.with_name(f"serving_disagg_{a.engine_options}.csv")
    path.parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(path, index=False)
    print(f"{len(out)} rows; {out.get('note', pd.Series(dtype=str)).notna().sum()} not modelled")
    cols = [c for c in out if c.endswith("_err")]
    g = out.groupby("backend")[cols].agg(lambda x: float(np.nanmedian(np.abs(x))) if x.notna().any() else np.nan)
    n = out.groupby("backend")[cols].count()
    print("median |error| by engine (rows):")
    print(pd.concat({"median_abs_err": g.round(3), "rows": n}, axis=1).to_string())
    s = out[cols].agg(lambda x: float(np.nanmedian(np.abs(x))))
    print("all engines:", s.round(3).to_dict())


if __name__ == "__main__":
    main()
