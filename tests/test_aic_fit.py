"""``--fit``: a profile whose GEMM compute efficiency per format is fitted from AIC's compute-bound rows only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from calibrate.aic.compare import gemm_op
from calibrate.aic.fit import fit_profile, gemm_table
from calibrate.aic.tables import load_table
from roofline.cli.app import app
from roofline.evaluate import op_time
from roofline.profile import DEFAULT_PROFILE_PATH, datasheet_profile, default_profile, load_profile
from roofline.specs.hardware import ComputeDtype
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
    out = tmp_path / "h100-vllm.yaml"
    res = runner.invoke(
        app, ["calibrate", "import-aiconfigurator", "--fit", "--gpu", "h100_sxm", "--framework", "vllm", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    loaded, base = load_profile(out), default_profile()
    prov = loaded.provenance
    assert (prov["engine"], prov["engine_version"], loaded.device) == ("vllm", "0.24.0", "h100-sxm")
    assert prov["table"] == "h100_sxm/gemm/vllm/0.24.0/gemm_perf.parquet"
    hw, df = hardware("h100-sxm"), load_table(gemm_table("h100_sxm", "vllm"))
    formats: tuple[tuple[ComputeDtype, str], ...] = (("bf16", "bfloat16"), ("fp8", "fp8"))
    for compute, aic in formats:
        rec = prov["fits"][compute]
        assert loaded.compute_ceiling(hw, compute) == rec["efficiency"] * hw.peak_flops_per_s(compute)
        rows = df[df["dtype"] == aic]
        op = gemm_op(rows, aic, hw)
        assert op is not None
        before = op_time(op, hw, base)
        used = (before.bound == "compute") & (rows["time_s"].to_numpy() > before.overhead_s)
        assert int(used.sum()) == rec["rows_used"]
        ratio = op_time(op, hw, loaded).time_s[used] / rows["time_s"].to_numpy()[used]
        assert abs(float(np.median(ratio)) - rec["residual_ratio_median"]) < 1e-9
        assert abs(rec["residual_ratio_median"] - 1.0) < 1e-3
    assert loaded.gemm_m_efficiency == base.gemm_m_efficiency and loaded.overheads == base.overheads
    assert load_profile(DEFAULT_PROFILE_PATH) == base  # the shipped default is untouched


def test_cli_fit_needs_gpu_framework_and_output() -> None:
    res = runner.invoke(app, ["calibrate", "import-aiconfigurator", "--fit", "--gpu", "h100_sxm"])
    assert res.exit_code == 2 and "--fit needs --gpu, --framework" in res.output
