"""Scoring the public disaggregated rows (:mod:`roofline.published.disagg_rows` maps and predicts them): one record
per row with its inputs, measured and predicted figures and ln errors, and the medians of |error| overall and per
held-out group (engine, GPU family, GPU, model, data source). Nothing here is fitted to the rows.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from roofline.published.disagg_rows import (
    GPU_FAMILY,
    NO_FIT,
    map_row,
    measured,
    predict_row,
    worker,
    worker_prediction,
)

#: metric -> suffix of its ``pred_*`` / ``meas_*`` columns (``tput_closed`` scored against the measured throughput).
SUFFIX = {"ttft": "ttft_s", "tpot": "tpot_s", "tput": "tput_per_gpu", "tput_closed": "tput_closed"}


def data_source(note: str) -> str:
    """The dump a row comes from: ``db-dump``, ``gap-analysis`` or the ``source_file`` name."""
    head = note.split(";")[0].strip()
    if head.startswith("db-dump"):
        return "db-dump"
    if "gap-analysis" in head:
        return "gap-analysis"
    return head.removeprefix("source_file=")


def _inputs(row: pd.Series) -> dict[str, object]:
    keep = [
        "id",
        "backend",
        "backend_version",
        "model_path",
        "system",
        "precision",
        "gemm_quant_mode",
        "moe_quant_mode",
        "isl",
        "osl",
        "silicon_concurrency",
    ]
    out: dict[str, object] = {k: row.get(k) for k in keep}
    out["source"] = data_source(str(row.silicon_data_source))
    out["gpu_family"] = GPU_FAMILY.get(str(row.system), "blackwell-ultra")  # b300, gb300
    for stage in ("prefill", "decode"):
        w = worker(row, stage)
        for f in ("tp", "pp", "dp", "moe_tp", "moe_ep", "batch_per_rank", "workers", "gpus"):
            out[f"{stage}_{f}"] = getattr(w, f)
    return out


def evaluate_row(row: pd.Series, kv_dtype: str = "bf16") -> dict[str, object]:
    """One output line: inputs, mapping, measured, predicted, ln errors, skip reason ('' when evaluated)."""
    out = _inputs(row)
    m = map_row(row, kv_dtype)
    out["skip_reason"] = m if isinstance(m, str) else ""
    if isinstance(m, str):
        return out
    out |= {
        "model": m.model,
        "hardware": m.hardware,
        "kv_dtype": m.kv_dtype,
        "roofline_prefill_ep": m.prefill.ep,
        "roofline_decode_ep": m.decode.ep,
        "gpus_total": m.gpus,
        "concurrency": m.concurrency,
    }
    p = predict_row(m)
    if isinstance(p, str):
        out["skip_reason"] = p
        if p.endswith(NO_FIT):
            out["roofline_short_gib"] = worker_prediction(m, p.split()[0]).missing_bytes / 2**30
        return out
    meas = measured(row, m)
    out |= meas | p
    meas["meas_tput_closed"] = meas["meas_tput_per_gpu"]
    for key, suffix in SUFFIX.items():
        out[f"ln_err_{key}"] = math.log(p[f"pred_{suffix}"] / meas[f"meas_{suffix}"])
    return out


def evaluate(rows: pd.DataFrame, kv_dtype: str = "bf16") -> pd.DataFrame:
    """:func:`evaluate_row` over every row, in order."""
    return pd.DataFrame([evaluate_row(r, kv_dtype) for _, r in rows.iterrows()])


GROUPS = ("backend", "gpu_family", "system", "model", "source")


def _stats(e: pd.Series) -> dict[str, float]:
    v = e.dropna().to_numpy(dtype=float)
    med = (lambda x: float(np.median(x))) if len(v) else (lambda x: float("nan"))
    return {
        "n": len(v),
        "median_abs_ln": med(np.abs(v)),
        "median_ape_pct": med(np.abs(np.expm1(v))) * 100,
        "median_ln": med(v),
    }


def summarize(results: pd.DataFrame) -> pd.DataFrame:
    """Median |ln error|, median APE (%) and median signed ln error per metric, overall and per group value of
    each of :data:`GROUPS` (each group's rows scored on their own: nothing is fitted, so every row is held out)."""
    ok = results[results.skip_reason.fillna("") == ""]
    parts: list[tuple[str, object, pd.DataFrame]] = [("all", "all", ok)]
    for g in (g for g in GROUPS if g in ok):
        parts += [(g, v, p) for v, p in ok.groupby(g, sort=True)]
    out = [{"group": g, "value": str(v), "metric": k, **_stats(p[f"ln_err_{k}"])} for g, v, p in parts for k in SUFFIX]
    return pd.DataFrame(out)


def skip_counts(results: pd.DataFrame) -> pd.Series:
    """Rows per skip reason (the evaluated rows under ``evaluated``)."""
    return results.skip_reason.fillna("").replace("", "evaluated").value_counts()
