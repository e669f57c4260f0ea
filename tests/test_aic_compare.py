"""Roofline's op time against AIConfigurator's kernel tables: hand-derived ratios on synthetic rows, the summary
statistics, the installed h100_sxm vLLM bf16 GEMM table, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from calibrate.aic.compare import compare, summarise, table_rows
from calibrate.aic.tables import AicTable, list_tables
from roofline.cli.app import app
from roofline.profile import CalibrationProfile, Comm, Overheads, datasheet_profile

FIXTURES = Path(__file__).parent / "fixtures" / "aic"
NVLINK = 450e9  # h100-sxm NVLink, bytes/s per direction
runner = CliRunner()


def _table(kind: str) -> AicTable:
    (t,) = [t for t in list_tables(FIXTURES, gpu="h100_sxm") if t.kind == kind]
    return t


def _latency_profile() -> CalibrationProfile:
    """The datasheet profile with a collective latency of 10 µs + 1 µs per NVLink hop and launch costs."""
    return datasheet_profile().model_copy(
        update={
            "comm": Comm(latency_s=1e-5, hop_latency_s={"nvlink": 1e-6}),
            "overheads": Overheads(per_kernel_s=2e-5, per_kernel_graph_s=4e-6),
        }
    )


def test_gemm_ratio_is_the_hand_derived_fraction() -> None:
    rows = table_rows(_table("gemm"), datasheet_profile())
    assert rows["dtype"].tolist() == ["bfloat16", "bfloat16", "fp8"]  # nvfp4 (no fp4 peak on H100), 'weird' skipped
    np.testing.assert_allclose(rows["ratio"], [0.5, 0.25, 1.0], rtol=1e-12)
    assert rows["regime"].tolist() == ["compute", "memory", "compute"]
    expected = [2 * 8192**3 / 989.5e12, (8192 * 8192 * 2 + 2 * 8192 * 2) / 3.35e12, 2 * 8192**3 / 1979e12]
    np.testing.assert_allclose(rows["predicted_s"], expected, rtol=1e-12)


def test_allreduce_custom_and_nccl_against_hand_derived_times() -> None:
    rows = table_rows(_table("custom_allreduce"), _latency_profile())
    one_shot = 2048 / NVLINK + 1e-5 + 1 * 1e-6  # p = 2: wire (p − 1)·S, one hop
    by_op = dict(zip(rows["op"], rows["predicted_s"], strict=True))
    assert by_op["allreduce-custom"] == pytest.approx(one_shot + 4e-6, rel=1e-12)  # CUDA-graph launch
    assert by_op["allreduce-custom-eager"] == pytest.approx(one_shot + 2e-5, rel=1e-12)
    assert set(rows["regime"]) == {"latency"}
    np.testing.assert_allclose(rows["ratio"], rows["predicted_s"] / 1e-3, rtol=1e-12)
    nccl = table_rows(_table("nccl"), _latency_profile())  # the all_gather row is not an all-reduce
    ring = 2 * 3 / 4 * 2 * 2**20 / NVLINK + 1e-5 + 6 * 1e-6 + 4e-6  # p = 4: 2(p − 1) hops
    assert nccl["op"].tolist() == ["allreduce-nccl"] and nccl["predicted_s"].tolist() == [pytest.approx(ring)]
    bare = table_rows(_table("nccl"), datasheet_profile())
    assert bare["regime"].tolist() == ["bandwidth"]
    assert bare["ratio"].tolist() == [pytest.approx(2 * 3 / 4 * 2 * 2**20 / NVLINK / 1e-3, rel=1e-12)]


def test_attention_decode_and_prefill_ratios_and_exclusions() -> None:
    profile = datasheet_profile()
    decode = table_rows(_table("generation_attention"), profile)  # the windowed row is left out
    assert decode["op"].tolist() == ["attention-decode"] and decode["regime"].tolist() == ["memory"]
    assert decode["ratio"].tolist() == [pytest.approx(0.5, rel=1e-12)]
    prefill = table_rows(_table("context_attention"), profile)  # the fp8-math row is left out
    assert prefill["op"].tolist() == ["attention-prefill"] and prefill["regime"].tolist() == ["compute"]
    assert prefill["ratio"].tolist() == [pytest.approx(0.5, rel=1e-12)]
    assert set(decode["dtype"]) == {"bf16"}


def test_compare_skips_unmapped_gpus_and_filters() -> None:
    fixtures = list_tables(FIXTURES)
    rows = compare(fixtures, profile=datasheet_profile())
    assert set(rows["gpu"]) == {"h100_sxm"}  # rtx_pro_6000_server has no roofline spec
    assert set(compare(fixtures, op="gemm", profile=datasheet_profile())["op"]) == {"gemm"}
    assert set(compare(fixtures, framework="nccl", profile=datasheet_profile())["op"]) == {"allreduce-nccl"}


def test_summary_median_and_quantiles() -> None:
    ratios = np.array([1.0, 2.0, 3.0, 4.0, 5.0, np.inf])
    rows = pd.DataFrame(
        {
            "gpu": "g",
            "framework": "f",
            "version": "v",
            "op": "gemm",
            "dtype": "bfloat16",
            "regime": "compute",
            "kernel": "k",
            "predicted_s": ratios,
            "measured_s": 1.0,
            "ratio": ratios,
        }
    )
    (s,) = summarise(rows).to_dict(orient="records")
    assert s["rows"] == 5  # the infinite ratio is dropped
    assert (s["ratio_median"], s["ratio_p10"], s["ratio_p90"]) == (3.0, pytest.approx(1.4), pytest.approx(4.6))


def test_installed_h100_vllm_bf16_gemm_has_both_regimes() -> None:
    (t,) = list_tables(gpu="h100_sxm", op="gemm", framework="vllm")
    rows = table_rows(t)
    bf16 = rows[rows["dtype"] == "bfloat16"]
    assert {"compute", "memory"} <= set(bf16["regime"])
    assert np.isfinite(bf16["ratio"]).all() and (bf16["ratio"] > 0).all()
    summary = summarise(bf16)
    assert (summary.loc[summary["regime"].isin(["compute", "memory"]), "rows"] > 100).all()


def test_cli_compare_json_and_bad_names() -> None:
    res = runner.invoke(
        app, ["calibrate", "import-aiconfigurator", "--compare", "--gpu", "h100_sxm", "--framework", "nccl", "--json"]
    )
    assert res.exit_code == 0, res.output
    records = json.loads(res.output)
    assert records and {r["op"] for r in records} == {"allreduce-nccl"}
    assert {"rows", "predicted_over_measured_median", "measured_median_s", "predicted_median_s"} <= set(records[0])
    bad = runner.invoke(app, ["calibrate", "import-aiconfigurator", "--compare", "--op", "mlp"])
    assert bad.exit_code == 2 and "--op must be one of gemm, allreduce, attention" in bad.output
    unmapped = runner.invoke(app, ["calibrate", "import-aiconfigurator", "--compare", "--gpu", "rtx_pro_6000_server"])
    assert unmapped.exit_code == 2 and "no roofline hardware spec" in unmapped.output
    listing = runner.invoke(app, ["calibrate", "import-aiconfigurator", "--gpu", "rtx_pro_6000_server"])
    assert listing.exit_code == 0 and "unmapped" in listing.output


def test_engine_profiles_price_each_table_under_its_gpu_and_engine_profile() -> None:
    """--engine-profiles: the h100_sxm vLLM fixture table's rows are the rows table_rows gives under the shipped
    h100-sxm vLLM engine-kernel profile; NCCL's own tables (no engine profile) keep the default profile's."""
    from roofline.engine.profiles import shipped_engine_profile
    from roofline.profile import default_profile

    fixtures = list_tables(FIXTURES, gpu="h100_sxm")
    engine = shipped_engine_profile("h100-sxm", "vllm")
    assert engine is not None
    rows = compare(fixtures, op="gemm", engine_profiles=True)
    pd.testing.assert_frame_equal(rows, table_rows(_table("gemm"), engine), check_dtype=False)
    nccl = compare(fixtures, framework="nccl", engine_profiles=True)
    pd.testing.assert_frame_equal(nccl, table_rows(_table("nccl"), default_profile()), check_dtype=False)
    assert not np.allclose(rows["predicted_s"], table_rows(_table("gemm"), default_profile())["predicted_s"])


def test_cli_engine_profiles_needs_compare() -> None:
    res = runner.invoke(app, ["calibrate", "import-aiconfigurator", "--engine-profiles"])
    assert res.exit_code == 2 and "add --compare" in res.output
    ok = runner.invoke(
        app,
        ["calibrate", "import-aiconfigurator", "--compare", "--engine-profiles", "--gpu", "h100_sxm", "--op", "gemm"],
    )
    assert ok.exit_code == 0 and "engine-kernel profile" in ok.output


def test_mla_tables_are_priced_as_the_op_roofline_builds_for_deepseek_v3() -> None:
    """The MLA kernel tables (DeepSeek-V3 geometry) load in the attention columns, and each row is priced as the
    ``attn.core`` op roofline builds for DeepSeek-V3 at the same heads per GPU, batch and context: FLOPs and K/V
    bytes equal, decode absorbed over the latent (576 / 512), prefill over expanded heads (192 / 128)."""
    from calibrate.aic.compare import mla_op
    from calibrate.aic.tables import load_table
    from roofline.ops.builder import decode_ops, prefill_ops
    from roofline.specs.library import hardware, model
    from roofline.specs.scenario import Scenario

    (t,) = [t for t in list_tables(gpu="h200_sxm", framework="sglang") if t.kind == "generation_mla"]
    df = load_table(t)
    assert set(df["kv_heads"]) == {1.0} and set(df["head_dim"]) == {576.0} and set(df["new_tokens"]) == {1.0}
    assert sorted(set(df["q_heads"])) == [1, 2, 4, 8, 16, 32, 64, 128]  # per GPU: the collector's local heads
    hw, ds = hardware("h200-sxm"), model("deepseek-v3")  # 128 heads: 16 per GPU at tp 8
    sc = Scenario(batch=4, prompt_len=2048, output_len=2, tp=8)
    ours = {
        "decode": next(o for o in decode_ops(ds, sc, hw, 2049.0) if o.name == "attn.core"),
        "prefill": next(o for o in prefill_ops(ds, sc, hw) if o.name == "attn.core"),
    }
    for phase, tokens, past in (("decode", 1.0, 2048.0), ("prefill", 2048.0, 0.0)):
        row = {"phase": phase, "q_heads": 16.0, "kv_dtype": "bfloat16", "batch": 4.0, "new_tokens": tokens}
        op = mla_op(pd.DataFrame([row | {"past": past}]), hw)
        assert float(op.flops[0]) == pytest.approx(float(np.max(ours[phase].flops)), rel=1e-12), phase
        assert float(op.kv_read_bytes[0]) == pytest.approx(float(np.max(ours[phase].kv_read_bytes)), rel=1e-12)
