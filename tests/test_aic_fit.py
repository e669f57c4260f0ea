"""``--fit``: a profile whose GEMM compute efficiency per format is fitted from AIC's compute-bound rows only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from calibrate.aic.compare import gemm_rows
from calibrate.aic.fit import fit_profile
from calibrate.aic.tables import list_tables, load_table
from roofline.cli.app import app
from roofline.engine.profiles import engine_profile_path
from roofline.errors import CalibrationError
from roofline.profile import DEFAULT_PROFILE_PATH, datasheet_profile, default_profile, load_profile
from roofline.specs.library import hardware

runner = CliRunner()


def _synthetic(root: Path) -> None:
    """12 compute-bound bf16 GEMMs on h100_sxm measured at exactly 2× the datasheet time, one tiny one."""
    sizes = [4096, 5120, 6144, 7168, 8192, 10240, 12288, 14336, 16384, 20480, 24576, 32768]
    rows: list[dict[str, object]] = [
        {
            "kernel_source": "t",
            "gemm_dtype": "bfloat16",
            "m": s,
            "n": s,
            "k": 4096,
            "latency": 2 * (2.0 * s * s * 4096) / 989.5e12 * 1e3,
        }
        for s in sizes
    ]  # latency in ms: 2 × FLOPs / the bf16 datasheet peak
    rows.append({"kernel_source": "t", "gemm_dtype": "bfloat16", "m": 1, "n": 64, "k": 64, "latency": 1.0})
    path = root / "h100_sxm" / "gemm" / "vllm" / "0.24.0" / "gemm_perf.parquet"
    path.parent.mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(path, index=False)


def test_fit_is_the_hand_derived_efficiency(tmp_path: Path) -> None:
    _synthetic(tmp_path)
    profile, (fit,) = fit_profile("h100_sxm", "vllm", root=tmp_path, base=datasheet_profile())
    assert (fit.compute, fit.rows_used, fit.efficiency_before) == ("bf16", 12, 1.0)  # the 1×64×64 row is memory-bound
    assert abs(fit.efficiency - 0.5) < 1e-12 and abs(fit.residual_median - 1.0) < 1e-12
    assert profile.compute_ceiling(hardware("h100-sxm"), "bf16") == 0.5 * 989.5e12
    assert profile.provenance["fits"]["bf16"]["rows_used"] == 12
    assert profile.gemm_m_efficiency == datasheet_profile().gemm_m_efficiency  # small M left alone


def test_cli_fit_writes_a_profile_that_loads_and_rederives(tmp_path: Path) -> None:
    """--fit writes the engine-kernel profile of (gpu, engine): the shipped one, and the default stays untouched."""
    out = tmp_path / "h100-vllm.yaml"
    res = runner.invoke(
        app, ["calibrate", "import-aiconfigurator", "--fit", "--gpu", "h100_sxm", "--framework", "vllm", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    loaded, base = load_profile(out), default_profile()
    prov = loaded.provenance
    assert (prov["engine"], prov["hardware"], loaded.device, loaded.name) == ("vllm", "h100-sxm", None, "h100-sxm_vllm")
    rec = prov["fits"]["compute.bf16"]
    assert rec["table"] == "h100_sxm/gemm/vllm/0.24.0/gemm_perf.parquet"
    hw = hardware("h100-sxm")
    assert loaded.compute_ceiling(hw, "bf16") == rec["efficiency"] * hw.peak_flops_per_s("bf16")
    assert abs(rec["residual_ratio_median"] - 1.0) < 0.02  # ceiling x curve knot = each octave's median row
    shipped = load_profile(engine_profile_path("h100-sxm", "vllm")).model_dump(mode="json")
    fitted = loaded.model_dump(mode="json")
    assert {k: v for k, v in fitted.items() if k != "created"} == {k: v for k, v in shipped.items() if k != "created"}
    assert loaded.gemm_m_efficiency == base.gemm_m_efficiency
    assert load_profile(DEFAULT_PROFILE_PATH) == base  # the shipped default is untouched


def test_cli_fit_needs_gpu_framework_and_output() -> None:
    res = runner.invoke(app, ["calibrate", "import-aiconfigurator", "--fit", "--gpu", "h100_sxm"])
    assert res.exit_code == 2 and "--fit needs --gpu, --framework" in res.output


def test_curve_is_each_octaves_median_over_the_large_gemm_rate(tmp_path: Path) -> None:
    """Layer-shaped compute-bound fp8 GEMMs measured at 0.3 of the peak at M = 512-1023, 0.45 at 1024-2047 and 0.6
    from 4096 up (20 rows per octave): efficiency 0.6, knots 0.5 / 0.75 / 1 at 512 / 1024 / 4096; below 512 the
    base curve stays (decode-sized GEMMs are priced by memory and the per-kernel cost)."""
    hw = hardware("h100-sxm")
    peak = hw.peak_flops_per_s("fp8")
    rows: list[dict[str, object]] = []
    for m0, eff in ((512, 0.3), (1024, 0.45), (4096, 0.6), (8192, 0.6)):
        for i in range(20):
            m, n, k = m0 + i, 4096 + 256 * i, 8192
            rows.append({"kernel_source": "t", "gemm_dtype": "fp8", "m": m, "n": n, "k": k,
                         "latency": 2.0 * m * n * k / (eff * peak) * 1e3})  # fmt: skip
    path = tmp_path / "h100_sxm" / "gemm" / "vllm" / "0.24.0" / "gemm_perf.parquet"
    path.parent.mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(path, index=False)
    base = datasheet_profile()
    profile, (fit,) = fit_profile("h100_sxm", "vllm", root=tmp_path, base=base)
    assert fit.compute == "fp8" and abs(fit.efficiency - 0.6) < 1e-9
    curve = profile.gemm_curve("fp8")
    assert curve is fit.curve or curve == fit.curve
    got = dict(zip(curve.x, curve.y, strict=True))
    assert abs(got[512.0] - 0.5) < 1e-9 and abs(got[1024.0] - 0.75) < 1e-9 and abs(got[4096.0] - 1.0) < 1e-9
    assert all(got[x] == y for x, y in zip(base.gemm_m_efficiency.x, base.gemm_m_efficiency.y, strict=True) if x < 512)
    assert profile.gemm_curve("bf16") == base.gemm_m_efficiency  # other formats keep theirs


def _fp8_with_dynamic_scale(root: Path, scale_ms: float, write_scale: bool = True) -> list[dict[str, object]]:
    """20 layer-shaped compute-bound fp8 GEMMs on h100_sxm trtllm at 0.6 of the fp8 peak, each measured with a
    dynamic activation-scale pass of ``scale_ms`` on top (the collector's dynamic-quantisation path), and the
    engine's own computescale table beside it (one row per (m, k), as AIConfigurator ships it)."""
    peak = hardware("h100-sxm").peak_flops_per_s("fp8")
    rows: list[dict[str, object]] = []
    for i in range(20):
        m, n, k = 4096 + 512 * i, 8192, 8192
        rows.append(
            {
                "kernel_source": "t",
                "gemm_dtype": "fp8",
                "m": m,
                "n": n,
                "k": k,
                "latency": 2.0 * m * n * k / (0.6 * peak) * 1e3 + scale_ms,
            }
        )
    gemm = root / "h100_sxm" / "gemm" / "trtllm" / "1.3.0rc20" / "gemm_perf.parquet"
    gemm.parent.mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(gemm, index=False)
    if write_scale:
        cs = root / "h100_sxm" / "quantize" / "trtllm" / "1.3.0rc20" / "computescale_perf.parquet"
        cs.parent.mkdir(parents=True)
        scale = [{"m": r["m"], "k": r["k"], "quant_dtype": "fp8", "latency": scale_ms} for r in rows]
        pd.DataFrame(scale).to_parquet(cs, index=False)
    return rows


def test_fp8_fit_takes_the_dynamic_scale_pass_out(tmp_path: Path) -> None:
    """Rows = GEMM at 0.6 of the peak + a 0.3 ms dynamic-scale pass: the fit recovers exactly 0.6 (the pass is the
    engine's own computescale measurement, which a static-scale deployment does not run), and the comparison adds
    it back, so every row is predicted exactly."""
    _fp8_with_dynamic_scale(tmp_path, 0.3)
    profile, (fit,) = fit_profile("h100_sxm", "trtllm", root=tmp_path, base=datasheet_profile())
    assert fit.compute == "fp8" and abs(fit.efficiency - 0.6) < 1e-9
    (table,) = [t for t in list_tables(tmp_path) if t.kind == "gemm"]
    df = load_table(table)
    assert (df["dynamic_scale_s"] == 0.3e-3).all()
    rows = gemm_rows(df, hardware("h100-sxm"), profile)
    assert (abs(rows["ratio"] - 1.0) < 1e-9).all()


def test_without_a_computescale_table_the_pass_stays_in_the_rate(tmp_path: Path) -> None:
    """No computescale table beside the GEMM table (an older engine version): no pass is taken out, so the fitted
    efficiency is FLOPs / the whole measured time (below 0.6)."""
    _fp8_with_dynamic_scale(tmp_path, 0.3, write_scale=False)
    _, (fit,) = fit_profile("h100_sxm", "trtllm", root=tmp_path, base=datasheet_profile())
    assert fit.efficiency < 0.6 - 1e-3


def test_a_gemm_shape_missing_from_the_computescale_table_fails_by_name(tmp_path: Path) -> None:
    _fp8_with_dynamic_scale(tmp_path, 0.3)
    cs = tmp_path / "h100_sxm" / "quantize" / "trtllm" / "1.3.0rc20" / "computescale_perf.parquet"
    pd.read_parquet(cs).iloc[1:].to_parquet(cs, index=False)
    (table,) = [t for t in list_tables(tmp_path) if t.kind == "gemm"]
    with pytest.raises(CalibrationError, match=r"computescale_perf\.parquet"):
        load_table(table)


def test_rows_timed_eagerly_fit_nothing_and_stand_apart(tmp_path: Path) -> None:
    """vLLM's fp8_block rows are timed without CUDA graphs (collector/vllm/collect_gemm.py: use_cuda_graph=gemm_type
    != "fp8_block"): host-paced, so no kernel rate is fitted from them and the comparison gives them the regime
    ``eager``; the bf16 rows of the same table stay graph rows."""
    peak = hardware("h100-sxm").peak_flops_per_s("fp8")
    rows = [
        {
            "kernel_source": "t",
            "gemm_dtype": d,
            "m": 4096 + 512 * i,
            "n": 8192,
            "k": 8192,
            "latency": 2.0 * (4096 + 512 * i) * 8192 * 8192 / (0.5 * peak) * 1e3,
        }
        for i in range(20)
        for d in ("fp8_block", "bfloat16")
    ]
    path = tmp_path / "h100_sxm" / "gemm" / "vllm" / "0.24.0" / "gemm_perf.parquet"
    path.parent.mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(path, index=False)
    (table,) = list_tables(tmp_path)
    df = load_table(table)
    assert set(df.loc[df["dtype"] == "fp8_block", "launch"]) == {"eager"}
    assert set(df.loc[df["dtype"] == "bfloat16", "launch"]) == {"graph"}
    _, fits = fit_profile("h100_sxm", "vllm", root=tmp_path, base=datasheet_profile())
    assert [f.aic_dtype for f in fits] == ["bfloat16"]
    compared = gemm_rows(df, hardware("h100-sxm"), datasheet_profile())
    assert set(compared.loc[compared["dtype"] == "fp8_block", "regime"]) == {"eager"}
