"""AIConfigurator's kernel tables: found, listed and loaded with SI columns (synthetic fixtures, installed package)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from calibrate.aic import tables
from calibrate.aic.tables import AicTable, data_root, list_tables, load_table, unmapped_gpus
from roofline.errors import CalibrationError

FIXTURES = Path(__file__).parent / "fixtures" / "aic"


def _one(kind: str, gpu: str = "h100_sxm") -> AicTable:
    (t,) = [t for t in list_tables(FIXTURES, gpu=gpu) if t.kind == kind]
    return t


def test_listing_is_typed_records_with_rows_and_slugs() -> None:
    listed = list_tables(FIXTURES)
    assert {(t.gpu, t.op, t.framework, t.version, t.kind) for t in listed} >= {
        ("h100_sxm", "gemm", "vllm", "0.24.0", "gemm"),
        ("h100_sxm", "comm", "nccl", "2.29.2", "nccl"),
        ("h100_sxm", "attention", "vllm", "0.24.0", "generation_attention"),
        ("rtx_pro_6000_server", "gemm", "vllm", "0.24.0", "gemm"),
    }
    gemm = _one("gemm")
    assert gemm.rows == 5 and gemm.hardware == "h100-sxm"
    assert gemm.label == "h100_sxm/gemm/vllm/0.24.0/gemm_perf.parquet"
    assert unmapped_gpus(listed) == ["rtx_pro_6000_server"]
    assert [t.gpu for t in list_tables(FIXTURES, framework="nccl")] == ["h100_sxm"]


def test_gemm_table_in_seconds_with_roofline_names() -> None:
    df = load_table(_one("gemm"))
    raw = pd.read_parquet(_one("gemm").path)
    assert list(df.columns) == [
        "gpu",
        "framework",
        "version",
        "kernel",
        "m",
        "n",
        "k",
        "dtype",
        "time_s",
        "dynamic_scale_s",
        "launch",
    ]
    assert (df["dynamic_scale_s"] == 0).all()  # the fixture has no computescale table beside it
    assert set(df["launch"]) == {"graph"}  # vLLM times only its fp8_block rows eagerly (tables.EAGER_GEMMS)
    np.testing.assert_allclose(df["time_s"], raw["latency"] / 1e3, rtol=0, atol=0)
    assert df["m"].tolist() == [8192.0, 1.0, 8192.0, 8192.0, 8192.0]
    assert df["dtype"].tolist() == ["bfloat16", "bfloat16", "fp8", "nvfp4", "weird"]
    assert set(df["framework"]) == {"vllm"} and set(df["version"]) == {"0.24.0"}


def test_comm_tables_count_bytes_and_launch() -> None:
    custom = load_table(_one("custom_allreduce"))
    assert custom["message_elems"].tolist() == [1024.0, 1024.0]
    assert custom["message_bytes"].tolist() == [2048.0, 2048.0]  # bfloat16: 2 B per element
    assert custom["launch"].tolist() == ["graph", "eager"]
    assert custom["time_s"].tolist() == [1e-3, 1e-3]
    nccl = load_table(_one("nccl"))
    assert nccl["collective"].tolist() == ["all_reduce", "all_gather"]
    assert nccl["message_bytes"].tolist() == [2.0 * 2**20, 1.0 * 2**20]  # half 2 B, int8 1 B
    assert nccl["gpus"].tolist() == [4, 4]


def test_attention_tables_name_past_and_window() -> None:
    gen = load_table(_one("generation_attention"))
    assert gen["phase"].tolist() == ["decode", "decode"]
    assert gen["past"].tolist() == [1023.0, 1023.0]  # isl 1 + step 1023 − 1: context 1024
    assert gen["new_tokens"].tolist() == [1.0, 1.0]
    assert np.isinf(gen["window"].iloc[0]) and gen["window"].iloc[1] == 128.0
    ctx = load_table(_one("context_attention"))
    assert ctx["phase"].tolist() == ["prefill", "prefill"] and ctx["past"].tolist() == [0.0, 0.0]
    assert ctx["new_tokens"].tolist() == [1024.0, 1024.0] and ctx["dtype"].tolist() == ["bfloat16", "fp8"]


def test_missing_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(CalibrationError, match=r'pip install -e "\.\[aic\]"'):
        data_root()


def test_unknown_message_dtype_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "h100_sxm" / "comm" / "nccl" / "9.9" / "nccl_perf.parquet"
    path.parent.mkdir(parents=True)
    row = {"op_name": "all_reduce", "kernel_source": "NCCL", "nccl_dtype": "fp64", "num_gpus": 2, "message_size": 8}
    pd.DataFrame([{**row, "latency": 1.0}]).to_parquet(path, index=False)
    with pytest.raises(CalibrationError, match="fp64"):
        load_table(list_tables(tmp_path)[0])


def test_installed_package_tables_are_found() -> None:
    root = data_root()
    assert root.name == "data" and (root / "h100_sxm").is_dir()
    h100 = list_tables(gpu="h100_sxm", op="gemm", framework="vllm")
    assert [t.version for t in h100] == ["0.24.0"] and h100[0].rows > 10_000
    assert set(tables.AIC_HARDWARE) <= {p.name for p in root.iterdir()}


def test_import_roofline_loads_neither_pyarrow_nor_aiconfigurator() -> None:
    code = (
        "import sys, roofline, roofline.cli.app, roofline.cli.calibrate\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('pyarrow', 'aiconfigurator_core')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
