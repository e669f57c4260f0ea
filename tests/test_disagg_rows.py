"""The disaggregated-row validation (roofline.published.disagg_rows, validation/serving/validate_disagg_rows.py).

Rows copied from /work/shared/validation/serving/aic_silicon_sample.csv (ai-dynamo/aiconfigurator @ 095f58a5,
aic-core/src/aiconfigurator_core/systems/silicon_sample.csv, Apache-2.0), their values verbatim.
"""

from __future__ import annotations

import importlib.util
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from roofline.published import disagg_rows as dr
from roofline.published import disagg_scores as ds

SCRIPT = Path(__file__).resolve().parents[1] / "validation" / "serving" / "validate_disagg_rows.py"
HEADER = (
    "id",
    "silicon_data_source",
    "backend",
    "backend_version",
    "model_path",
    "system",
    "precision",
    "mode",
    "isl",
    "osl",
    "gemm_quant_mode",
    "moe_quant_mode",
)
STAGE = ("batch_size", "num_workers", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
DB = "db-dump/2026-04-27; config_id={c}; silicon_concurrency={n}; measured=2026-02-08T00:00:00.000Z"
GAP = "source_file=/Users/harrli/projects/aic-auto-gap-analysis/data/h100_sxm/vllm/0.12.0/qwen3_235b_a22b.csv"


def _row(
    ident: str,
    note: str,
    eng: str,
    ver: str,
    model: str,
    system: str,
    prec: str,
    mode: str,
    isl: int,
    osl: int,
    quant: tuple[str, str],
    pre: tuple,
    dec: tuple,
    ttft: float,
    tpot: float,
) -> dict[str, Any]:
    """One source row (the aggregated-mode parallelism columns left empty, as in the disaggregated rows)."""
    vals = (ident, note, eng, ver, model, system, prec, mode, isl, osl, *quant)
    r: dict[str, Any] = dict(zip(HEADER, vals, strict=True))
    r |= dict.fromkeys(("batch_size", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size"))
    for stage, stage_vals in (("prefill", pre), ("decode", dec)):
        r |= {f"{stage}_{f}": v for f, v in zip(STAGE, stage_vals, strict=True)}
    return r | {"silicon_ttft_ms": ttft, "silicon_tpot_ms": tpot}


NA = (None,) * 7
ROWS = [
    _row(
        "minimaxm2_5_b300_vllm_fp8_agg_8192x1024_c128_cfg733",
        DB.format(c=733, n=128),
        "vllm",
        "0.19.0",
        "MiniMaxAI/MiniMax-M2.5",
        "b300_sxm",
        "fp8",
        "agg",
        8192,
        1024,
        ("fp8", "fp8"),
        NA,
        NA,
        972.31,
        33.44,
    ),
    _row(
        "dsr1_gb200_sglang_fp4_disagg_1024x1024_c2048_cfg483",
        DB.format(c=483, n=2048),
        "sglang",
        "0.5.8",
        "deepseek-ai/DeepSeek-V3",
        "gb200",
        "fp4",
        "disagg",
        1024,
        1024,
        ("nvfp4", "nvfp4"),
        (1, 4, 1, 1, 4, 1, 4),
        (64, 1, 1, 1, 32, 1, 32),
        1226.7346629403733,
        16.983704414044915,
    ),
    _row(
        "dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg666",
        DB.format(c=666, n=128),
        "trtllm",
        "0.8.1.post2",
        "deepseek-ai/DeepSeek-V3",
        "b200_sxm",
        "fp8",
        "disagg",
        8192,
        1024,
        ("fp8", "fp8"),
        (1, 1, 1, 1, 8, 8, 1),
        (16, 1, 1, 1, 8, 1, 8),
        1947.784445944626,
        30.637100950865378,
    ),
    _row(
        "kimik2_5_gb200_vllm_fp4_disagg_1024x1024_c256_cfg697",
        DB.format(c=697, n=256),
        "vllm",
        "0.18.0",
        "moonshotai/Kimi-K2.5",
        "gb200",
        "fp4",
        "disagg",
        1024,
        1024,
        ("nvfp4", "nvfp4"),
        (1, 1, 4, 1, 1, 1, 4),
        (256, 1, 16, 1, 1, 1, 16),
        564.2877826157928,
        19.037631944985048,
    ),
    _row(
        "qwen3_235b_a22b_qwen3_235b_a22b_h100_sxm_vllm_disagg_4000x1000_c_tpnone_epnone_1",
        GAP,
        "vllm",
        "0.12.0",
        "Qwen/Qwen3-235B-A22B-FP8",
        "h100_sxm",
        "fp8",
        "disagg",
        4000,
        1000,
        ("fp8", "fp8"),
        (1, 1, 1, 1, 4, 0, 0),
        (24, 3, 4, 1, 1, 0, 0),
        898.339221,
        11.383278279967469,
    ),
    _row(
        "2026_03_25_glm_5_gb200_trtllm_fp4_disagg_8192x1024_c5_tp4_0_ep_138",
        "source_file=2026-03-25.csv; model=GLM-5; silicon_concurrency=5",
        "trtllm",
        "",
        "zhipuai/GLM-5",
        "gb200",
        "fp4",
        "disagg",
        8192,
        1024,
        ("nvfp4", "nvfp4"),
        (None, None, 4, 1, 1, 4, 1),
        (None, None, 4, 1, 1, 4, 1),
        964.82,
        11.83,
    ),
]


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "sample.csv"
    pd.DataFrame(ROWS).to_csv(path, index=False)
    return path


@pytest.fixture
def rows(source: Path) -> dict[str, pd.Series]:
    return {str(r.id).split("_disagg")[0]: r for _, r in dr.load_rows(source).iterrows()}


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("validate_disagg_rows", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_load_keeps_disagg_rows_and_parses_concurrency(rows: dict[str, pd.Series]) -> None:
    assert len(rows) == 5  # the agg row is dropped
    assert rows["dsr1_gb200_sglang_fp4"].silicon_concurrency == 2048
    assert math.isnan(rows["qwen3_235b_a22b_qwen3_235b_a22b_h100_sxm_vllm"].silicon_concurrency)


def test_attention_dp_row_gpus_batch_per_rank_and_ep(rows: dict[str, pd.Series]) -> None:
    m = dr.map_row(rows["dsr1_gb200_sglang_fp4"])
    assert isinstance(m, dr.RowMap)
    assert (m.model, m.hardware, m.engine, m.async_scheduling) == ("deepseek-v3", "gb200", "sglang", None)
    # prefill: tp 1 × pp 1 × attention DP 4 = 4 GPUs a worker, 1 sequence per DP rank -> 4 per worker, ep = 4
    assert (m.prefill.gpus, m.prefill.batch, m.prefill.ep, m.prefill.workers) == (4, 4, 4, 4)
    # decode: 1 × 1 × 32 = 32 GPUs, 64 per DP rank -> 2,048 per worker, ep = dp × tp = 32
    assert (m.decode.gpus, m.decode.batch, m.decode.ep, m.decode.workers) == (32, 2048, 32, 1)
    assert m.gpus == 4 * 4 + 32 * 1 == 48
    assert m.concurrency == 64 * 32 * 1 == 2048  # = the note's silicon_concurrency
    assert dict(m.weights) == {
        "attention": "nvfp4",
        "dense_ffn": "nvfp4",
        "shared_experts": "nvfp4",
        "routed_experts": "nvfp4",
    }


def test_measured_throughput_per_gpu_by_hand(rows: dict[str, pd.Series]) -> None:
    row = rows["dsr1_gb200_sglang_fp4"]
    m = dr.map_row(row)
    assert isinstance(m, dr.RowMap)
    got = dr.measured(row, m)
    # Little's law: X = C / (TTFT + (osl - 1)·TPOT) = 2048 / (1.22673 + 1023 × 0.0169837) = 110.10 req/s,
    # tokens/s/GPU = X · 1024 / 48 = 2,348.8
    x = 2048 / (1.2267346629403733 + 1023 * 0.016983704414044915)
    assert x == pytest.approx(110.10, abs=0.01)
    assert got["meas_tput_per_gpu"] == pytest.approx(x * 1024 / 48, rel=1e-12)
    assert got["meas_tput_per_gpu"] == pytest.approx(2348.8, abs=0.1)
    assert got["meas_ttft_s"] == pytest.approx(1.2267346629403733)


def test_tp_ep_row_without_dp(rows: dict[str, pd.Series]) -> None:
    m = dr.map_row(rows["kimik2_5_gb200_vllm_fp4"])
    assert isinstance(m, dr.RowMap)
    assert (m.model, m.engine, m.async_scheduling) == ("kimi-k2.5", "vllm", True)  # vLLM 0.18 >= 0.14
    assert (m.prefill.gpus, m.prefill.batch, m.prefill.ep, m.prefill.dp) == (4, 1, 4, 1)
    assert (m.decode.gpus, m.decode.batch, m.decode.ep, m.decode.dp) == (16, 256, 16, 1)
    assert (m.gpus, m.concurrency) == (20, 256)


def test_aic_throughput_formula_by_hand() -> None:
    # 4 prefill workers of 4 sequences at 0.5 s: 32 req/s; 1 decode worker of 2,048 at 20 ms over 1,023 steps:
    # 100.1 req/s; min 32 req/s × 1,024 tokens / 48 GPUs = 682.67 tokens/s/GPU
    assert dr.aic_tput_per_gpu(4 * 4 / 0.5, 2048 / (0.02 * 1023), 1024, 48) == pytest.approx(682.667, abs=1e-3)
    assert dr.aic_tput_per_gpu(200.0, 100.0, 1000, 10) == 10_000.0  # decode-bound side


def test_predicted_figures_follow_the_stated_formulas(rows: dict[str, pd.Series]) -> None:
    m = dr.map_row(rows["dsr1_gb200_sglang_fp4"])
    assert isinstance(m, dr.RowMap)
    p = dr.predict_row(m)
    assert isinstance(p, dict)
    eng = dr.worker_prediction(m, "decode").memory.engine
    assert p["pred_ttft_s"] == pytest.approx(
        eng.request_overhead_s + p["pred_prefill_s"] + eng.output_lag_steps * p["pred_tpot_s"]
    )
    prefill_rate = 4 * 4 / p["pred_prefill_s"]
    decode_rate = 2048 / (p["pred_tpot_s"] * 1023)
    assert p["pred_tput_per_gpu"] == pytest.approx(min(prefill_rate, decode_rate) * 1024 / 48)
    closed = min(prefill_rate, 2048 / (p["pred_ttft_s"] + 1023 * p["pred_tpot_s"]))
    assert p["pred_tput_closed"] == pytest.approx(closed * 1024 / 48)
    assert 0 < p["pred_prefill_load"] <= 1
    assert dr.worker_prediction(m, "decode").scenario.dp == 32 and dr.worker_prediction(m, "prefill").scenario.dp == 4


def test_skip_reasons(rows: dict[str, pd.Series]) -> None:
    assert dr.map_row(rows["2026_03_25_glm_5_gb200_trtllm_fp4"]) == dr.SKIP_INCOMPLETE
    elsewhere = rows["dsr1_gb200_sglang_fp4"].copy()
    elsewhere["system"] = "x100_sxm"
    assert dr.map_row(elsewhere) == "hardware x100_sxm not in roofline's library"
    moe_tp = dr.map_row(rows["dsr1_b200_trtllm_fp8"])  # prefill: attention DP 8 with the experts tp-sharded over 8
    assert isinstance(moe_tp, dr.RowMap) and (moe_tp.prefill.dp, moe_tp.prefill.ep) == (8, 1)
    mixed = dr.worker(rows["dsr1_b200_trtllm_fp8"], "prefill")
    assert dr.roofline_ep(replace(mixed, moe_tp=2, moe_ep=4), True) == (
        f"{dr.NOT_EXPRESSIBLE}: MoE tp 2 × ep 4 inside attention DP 8 (needs ep = dp × tp or ep = 1)"
    )
    unstated = dr.map_row(rows["qwen3_235b_a22b_qwen3_235b_a22b_h100_sxm_vllm"])
    assert isinstance(unstated, str) and unstated.startswith("prefill: MoE layout not stated")
    other = rows["kimik2_5_gb200_vllm_fp4"].copy()
    other["model_path"] = "example/Unknown-MoE"
    assert dr.map_row(other) == "model example/Unknown-MoE not in roofline's library"


def test_data_source_labels() -> None:
    assert ds.data_source(DB.format(c=1, n=2)) == "db-dump"
    assert ds.data_source(GAP + "; gtl_job_id=1") == "gap-analysis"
    assert ds.data_source("source_file=2026-03-25.csv; model=GLM-5") == "2026-03-25.csv"


def test_script_summary_is_computed_from_its_csv(source: Path, tmp_path: Path) -> None:
    script = _script()
    out = tmp_path / "disagg_rows.csv"
    summary, skips = script.run(source, out)
    written = pd.read_csv(out)
    assert len(written) == 5 and skips[dr.SKIP_INCOMPLETE] == 1 and sum(skips.values()) == 5
    ok = written[written.skip_reason.isna()]
    assert {
        "dsr1_gb200_sglang_fp4_disagg_1024x1024_c2048_cfg483",
        "kimik2_5_gb200_vllm_fp4_disagg_1024x1024_c256_cfg697",
    } <= set(ok.id)
    assert skips["evaluated"] == len(ok)
    for key in ("ttft", "tpot", "tput"):
        e = ok[f"ln_err_{key}"].to_numpy()
        np.testing.assert_allclose(e, np.log(ok[f"pred_{ds.SUFFIX[key]}"] / ok[f"meas_{ds.SUFFIX[key]}"]))
        line = summary[(summary.group == "all") & (summary.metric == key)].iloc[0]
        assert line.n == len(ok)
        assert line.median_abs_ln == pytest.approx(float(np.median(np.abs(e))))
        assert line.median_ape_pct == pytest.approx(float(np.median(np.abs(np.expm1(e))) * 100))
    s_csv, s_json = script.summary_paths(out)
    assert json.loads(s_json.read_text())["skips"] == skips
    pd.testing.assert_frame_equal(pd.read_csv(s_csv), summary, check_dtype=False)
    # editing the per-row CSV moves the summary: it is read from the file, not kept in memory
    written.loc[written.skip_reason.isna(), "ln_err_tpot"] = [0.5, -0.5] * (len(ok) // 2) + [0.5] * (len(ok) % 2)
    written.to_csv(out, index=False)
    again, _ = script.summarize_file(out)
    tpot = again[(again.group == "all") & (again.metric == "tpot")].iloc[0]
    assert tpot.median_abs_ln == pytest.approx(0.5)


def test_kv_dtype_reaches_both_workers(rows: dict[str, pd.Series]) -> None:
    m = dr.map_row(rows["kimik2_5_gb200_vllm_fp4"], kv_dtype="fp8")
    assert isinstance(m, dr.RowMap) and m.kv_dtype == "fp8"
    assert {dr.worker_prediction(m, s).scenario.kv_dtype.value for s in ("prefill", "decode")} == {"fp8"}
    over = dr.worker_overrides(m, m.decode, "decode")
    assert int(str(over["max_num_seqs"])) >= 256 and over["async_scheduling"] is True
    assert dr.worker_overrides(m, m.prefill, "prefill")["request_overhead_s"] == 0.0


def test_a_row_as_simulated_pools(rows: dict[str, pd.Series]) -> None:
    """The row above on the simulator: 4 prefill instances of 4 DP ranks (ep 4), one decode instance of 32 ranks
    (ep 32), 48 GPUs in all, as the static mapping counts them."""
    from roofline.published.disagg_sim import row_pools

    m = dr.map_row(rows["dsr1_gb200_sglang_fp4"])
    assert isinstance(m, dr.RowMap)
    cfg = row_pools(m)
    assert cfg.prefill.label() == "gb200:tp1dp4ep4x4" and cfg.decode.label() == "gb200:tp1dp32ep32x1"
    assert cfg.prefill.gpus + cfg.decode.gpus == m.gpus == 48


def test_checkpoint_states_its_kv_format() -> None:
    """nvidia/Qwen3-32B-NVFP4 states an FP8 KV cache in its quantisation config and the engines' ``auto`` keeps it:
    the row maps to fp8 KV whatever the default, the bf16 checkpoint of the same model to the default. KV of the
    decode worker by hand: batch 80 × 15,520 tokens (15,000 + 500 in TensorRT-LLM's 32-token blocks) × 2 (K, V) ·
    64 layers · 8 KV heads · 128 · 1 byte / tp 4 = 40,684,748,800 bytes per GPU; bf16 twice that."""
    note = "source_file=/Users/harrli/projects/aic-auto-gap-analysis/data/b200_sxm/trtllm/1.3.0rc5/q.csv"
    fields = ("trtllm", "1.3.0rc5")
    workers = ((1, 40, 1, 1, 1, 1, 1), (80, 6, 4, 1, 1, 1, 1))
    shape = ("b200_sxm", "fp4", "disagg", 15000, 500, ("nvfp4", "nvfp4"), *workers)
    stated = pd.Series(_row("q_nvfp4", note, *fields, "nvidia/Qwen3-32B-NVFP4", *shape, 1436.09, 10.61))
    unstated = pd.Series(_row("q_bf16", note, *fields, "Qwen/Qwen3-32B", *shape, 1436.09, 10.61))
    m, plain = dr.map_row(stated, kv_dtype="bf16"), dr.map_row(unstated)
    assert isinstance(m, dr.RowMap) and isinstance(plain, dr.RowMap)
    assert (m.kv_dtype, plain.kv_dtype, dr.CHECKPOINT_KV_DTYPE[str(stated.model_path)]) == ("fp8", "bf16", "fp8")
    kv = float(dr.worker_prediction(m, "decode").memory.kv_bytes)
    assert kv == 80 * (math.ceil(15500 / 32) * 32) * 2 * 64 * 8 * 128 * 1 / 4 == 40_684_748_800
    assert float(dr.worker_prediction(plain, "decode").memory.kv_bytes) == 2 * kv
