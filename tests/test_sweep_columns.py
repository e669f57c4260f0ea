"""``sweep``'s text columns are Categoricals (issue #28): the same values as the per-row strings they
replace, and ``roofline sweep`` writes byte-identical CSV and JSON."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import roofline
from roofline import grid
from roofline.cli.app import app
from roofline.costs import scenario_costs
from roofline.latency import latencies
from roofline.memory import memory_budget

TEXT = ["model", "hardware", "bound_prefill", "bound_decode"]
runner = CliRunner()


def _object_frame(m: Any, hw: Any, sc: Any, prof: Any, b: np.ndarray, p: np.ndarray, o: np.ndarray) -> pd.DataFrame:
    """The frame as it was built before issue #28: one Python string per point in the text columns."""
    costs = scenario_costs(m, sc, hw, prof)
    lat = latencies(costs, sc)
    mem = memory_budget(m, hw, sc)
    shape = np.broadcast_shapes(b.shape, p.shape, o.shape)
    full = [np.broadcast_to(x, shape).ravel() for x in (b, p, o)]
    fits = np.broadcast_to(mem.fits, shape).ravel()

    def col(x: np.ndarray) -> np.ndarray:
        return np.where(fits, np.broadcast_to(x, shape).ravel(), np.nan)

    return pd.DataFrame(
        {
            "model": m.name,
            "hardware": hw.name,
            "tp": sc.tp,
            "batch": full[0].astype(np.int64),
            "prompt_len": full[1].astype(np.int64),
            "output_len": full[2].astype(np.int64),
            "fits": fits,
            "missing_bytes": np.broadcast_to(mem.missing_bytes, shape).ravel(),
            "ttft_s": col(lat.ttft_s),
            "tpot_s": col(lat.tpot_s),
            "e2e_s": col(lat.e2e_s),
            "throughput_tok_s": col(lat.throughput_tok_s),
            "throughput_tok_s_per_gpu": col(lat.throughput_tok_s_per_gpu),
            "kv_bytes_per_gpu": np.broadcast_to(mem.kv_bytes, shape).ravel(),
            "weight_bytes_per_gpu": mem.weight_bytes,
            "max_batch": np.broadcast_to(mem.max_batch, shape).ravel(),
            "bound_prefill": np.broadcast_to(costs.prefill.bound, shape).ravel().astype(object),
            "bound_decode": np.broadcast_to(costs.decode.bound, shape).ravel().astype(object),
        }
    )


# A grid with points that do not fit (llama-3.1-70b on one H100) and both bounds in decode.
CASES = [
    ("llama-3.1-70b", "h100-sxm", {"batch": [1, 8, 64, 512], "prompt_len": [16, 2048, 32768], "tp": [1, 4]}),
    ("llama-3.1-8b", "h100-sxm", {"batch": [1, 2, 256], "prompt_len": [1, 128, 8192], "output_len": [1, 64]}),
    ("mixtral-8x7b", "mi300x", {"batch": 3, "prompt_len": [100, 1000], "output_len": 7}),
]


@pytest.mark.parametrize(("model", "hardware", "grid_kw"), CASES, ids=[c[0] for c in CASES])
def test_text_columns_are_categoricals_with_the_same_values(
    model: str, hardware: str, grid_kw: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    new = roofline.sweep(model, hardware, **grid_kw)
    for name in TEXT:
        assert isinstance(new[name].dtype, pd.CategoricalDtype), name
        assert new[name].cat.codes.dtype == np.int8
    assert not any(new[c].dtype == object for c in new.columns)  # no Python object per point
    monkeypatch.setattr(grid, "_grid_frame", _object_frame)
    old = roofline.sweep(model, hardware, **grid_kw)
    assert list(new.columns) == list(old.columns)
    pd.testing.assert_frame_equal(new.astype({c: str for c in TEXT}), old.astype({c: str for c in TEXT}))
    numeric = [c for c in new.columns if c not in TEXT]
    pd.testing.assert_frame_equal(new[numeric], old[numeric])  # the same dtypes, not only values
    if model == "llama-3.1-70b":
        assert not new["fits"].all() and new["fits"].any()


def test_categories_survive_concatenation_of_tp_values() -> None:
    df = roofline.sweep("llama-3.1-8b", "h100-sxm", batch=[1, 64], prompt_len=[512], tp=[1, 2, 4])
    assert all(isinstance(df[c].dtype, pd.CategoricalDtype) for c in TEXT)
    assert list(df["bound_decode"].cat.categories) == ["compute", "memory", "communication", "overhead"]
    assert df["model"].tolist() == ["llama-3.1-8b"] * 6 and df["tp"].tolist() == [1, 1, 2, 2, 4, 4]
    df.loc[0, "ttft_s"] = 1.0  # the frame owns its arrays: writable
    df.loc[0, "bound_decode"] = "compute"


@pytest.mark.parametrize("fmt", ["csv", "json"])
@pytest.mark.parametrize("interval", [None, "0.8"])
def test_cli_output_is_byte_identical(fmt: str, interval: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["sweep", "llama-3.1-70b", "h100-sxm", "-b", "1,16,256", "-p", "128,8192", "-n", "16,64", "--tp", "1,8"]
    args += ["--format", fmt] + (["--interval", interval] if interval else [])
    new = runner.invoke(app, args)
    assert new.exit_code == 0, new.output
    monkeypatch.setattr(grid, "_grid_frame", _object_frame)
    old = runner.invoke(app, args)
    assert old.exit_code == 0, old.output
    assert new.stdout == old.stdout
    assert "false" in new.stdout.lower() and "memory" in new.stdout
