"""``--fit``: a profile whose GEMM compute efficiency per format is fitted from AIC's compute-bound rows only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from calibrate.aic.fit import fit_profile
from roofline.cli.app import app
from roofline.engine.profiles import engine_profile_path
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
