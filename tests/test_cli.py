"""The command line through typer's CliRunner: outputs agree with the Python API to the last digit,
bad input gives the documented exit codes (2 usage, 1 infeasible) and never a traceback.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import roofline
from roofline.cli.app import app
from roofline.cli.predict import interval_fields

runner = CliRunner()
M8, H100 = "llama-3.1-8b", "h100-sxm"
FIXTURES = Path(__file__).parent / "fixtures" / "configs"


def run(*args: str) -> Any:
    return runner.invoke(app, list(args))


def no_traceback(res: Any) -> None:
    assert "Traceback" not in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)


def same(a: Any, b: Any) -> bool:
    """Equality where NaN (or None from JSON) matches NaN."""
    if isinstance(b, float) and math.isnan(b):
        return a is None or (isinstance(a, float) and math.isnan(a))
    return bool(a == b)


# ---- top level ---------------------------------------------------------------------------
def test_help_and_version() -> None:
    res = run("--help")
    assert res.exit_code == 0
    for cmd in ("predict", "sweep", "compare", "plan", "hardware", "model", "schema", "calibrate"):
        assert cmd in res.stdout
    assert run("--version").stdout.strip() == f"roofline {roofline.__version__}"
    assert "1,2,4..256" in run("sweep", "--help").stdout


# ---- predict -----------------------------------------------------------------------------
def test_predict_json_matches_api_exactly() -> None:
    res = run("predict", M8, H100, "--batch", "8", "--prompt", "2k", "--output", "256", "--tp", "2", "--json")
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    r = roofline.predict(M8, H100, 8, 2000, 256, tp=2)
    want = {**r.summary(), **interval_fields(r, 0.8)}  # headline figures carry their 80 % interval
    assert got.keys() == want.keys()
    assert all(same(got[k], v) for k, v in want.items()), {k: (got[k], v) for k, v in want.items() if got[k] != v}


def test_predict_csv_matches_api_exactly() -> None:
    res = run("predict", M8, H100, "--csv", "--kv-dtype", "fp8")
    assert res.exit_code == 0
    (row,) = list(csv.DictReader(io.StringIO(res.stdout)))
    want = roofline.predict(M8, H100, kv_dtype="fp8").summary()
    for k, v in want.items():
        if isinstance(v, bool):
            assert row[k] == str(v)
        elif isinstance(v, int | float):
            assert float(row[k]) == v, k
        else:
            assert row[k] == v


def test_predict_table_and_ops() -> None:
    res = run("predict", M8, H100, "--ops")
    assert res.exit_code == 0
    for word in (
        "TTFT",
        "TPOT",
        "tok/s",
        "KV per token",
        "weights",
        "reserve",
        "free",
        "max batch",
        "GiB",
        "compute-bound",
        "memory-bound",
        "attn.qkv_proj",
        "share",
    ):
        assert word in res.stdout, word
    doc = json.loads(run("predict", M8, H100, "--ops", "--json").stdout)
    assert len(doc["ops"]) == len(roofline.predict(M8, H100).ops)


def test_predict_does_not_fit_prints_memory_then_exit_1() -> None:
    res = run("predict", "llama-3.1-405b", "l4", "--tp", "1")
    assert res.exit_code == 1
    no_traceback(res)
    assert "weights" in res.stdout and "free" in res.stdout
    assert res.stderr.startswith("error: ") and "does not fit: short by" in res.stderr and "GiB" in res.stderr
    assert "--tp" in res.stderr
    doc = json.loads(run("predict", "llama-3.1-405b", "l4", "--json").stdout)
    assert doc["fits"] is False and doc["ttft_s"] is None and doc["missing_bytes"] > 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["predict", "llama-3.1-8", H100], "did you mean"),
        (["predict", M8, "h100"], "did you mean"),
        (["predict", M8, H100, "--batch", "abc"], "--batch: cannot read 'abc'"),
        (["predict", M8, H100, "--batch", "-4"], "--batch"),
        (["predict", M8, H100, "--prompt", "0"], "--prompt must be >= 1"),
        (["predict", M8, H100, "--prompt", "1.5"], "--prompt"),
        (["predict", M8, H100, "--tp", "3"], "does not divide"),
        (["predict", M8, H100, "--tp", "-1"], "tp must be an integer >= 1"),
        (["predict", M8, H100, "--weight-dtype", "fp7"], "unknown weight_dtype"),
        (["predict", M8, "a100-80gb-sxm", "--weight-dtype", "fp8"], "no published fp8"),
        (["predict", M8, H100, "--memory-utilization", "1.5"], "memory_fraction"),
        (["predict", M8, H100, "--json", "--csv"], "exclusive"),
        (["sweep", M8, H100, "--batch", "1,,2"], "empty item"),
        (["sweep", M8, H100, "--batch", "64..8"], "ends below"),
        (["sweep", M8, H100, "--batch", "1,3,4..64"], "neither geometric"),
        (["sweep", M8, H100, "-o", "x.txt"], "unknown output format"),
        (["plan", M8, "--qps", "0", "--ttft-slo", "1s", "--tpot-slo", "50ms"], "--qps must be a positive"),
        (["plan", M8, "--qps", "1", "--ttft-slo", "soon", "--tpot-slo", "50ms"], "--ttft-slo: cannot read"),
        (["plan", M8, "--qps", "1", "--ttft-slo", "-5ms", "--tpot-slo", "50ms"], "--ttft-slo must be a positive"),
        (["plan", M8, "--qps", "1", "--ttft-slo", "1s", "--tpot-slo", "50ms", "--price", "h100"], "NAME=USD"),
        (["hardware", "show", "nope"], "unknown hardware"),
        (["model", "show", "nope"], "unknown model"),
        (["compare", M8, "--hardware", "h100-sxm,nope"], "unknown hardware"),
    ],
)
def test_usage_errors_exit_2(args: list[str], needle: str) -> None:
    res = run(*args)
    assert res.exit_code == 2, res.output
    no_traceback(res)
    assert needle in res.output


def test_click_level_errors_exit_2() -> None:
    res = run("predict", M8, H100, "--tp", "two")
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert run("predict", M8).exit_code == 2
    assert run("frobnicate").exit_code == 2


def test_debug_shows_the_exception() -> None:
    res = run("--debug", "predict", "nope", H100)
    assert res.exit_code != 0 and isinstance(res.exception, roofline.RooflineError)


def test_internal_errors_exit_3_without_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    import roofline.prediction

    def boom(*a: object, **k: object) -> None:
        raise TypeError("boom")

    monkeypatch.setattr(roofline.prediction, "predict", boom)
    res = run("predict", M8, H100)
    assert res.exit_code == 3 and "bug in roofline" in res.stderr and "--debug" in res.stderr
    no_traceback(res)


# ---- sweep -------------------------------------------------------------------------------
def test_sweep_csv_matches_api(tmp_path: Path) -> None:
    res = run("sweep", M8, H100, "--batch", "1,2,4..16", "--prompt", "512..2048:512", "--output", "64,128")
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    want = roofline.sweep(M8, H100, [1, 2, 4, 8, 16], [512, 1024, 1536, 2048], [64, 128])
    assert len(rows) == len(want) == 5 * 4 * 2
    for row, (_, w) in zip(rows, want.iterrows(), strict=True):
        assert float(row["ttft_s"]) == w["ttft_s"] and float(row["tpot_s"]) == w["tpot_s"]
        assert int(row["batch"]) == w["batch"] and int(row["prompt_len"]) == w["prompt_len"]


def test_sweep_json_file_tp_list_and_infeasible_rows(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    res = run(
        "sweep", "llama-3.1-70b", H100, "--batch", "1,64", "--prompt", "128..32768", "--tp", "1,4", "-o", str(out)
    )
    assert res.exit_code == 0, res.output
    rows = json.loads(out.read_text())
    assert len(rows) == 2 * 9 * 2
    want = roofline.sweep("llama-3.1-70b", H100, [1, 64], [128 * 2**i for i in range(9)], 128, tp=[1, 4])
    for got, (_, w) in zip(rows, want.iterrows(), strict=True):
        assert got["fits"] == bool(w["fits"]) and got["tp"] == w["tp"]
        assert same(got["ttft_s"], float(w["ttft_s"]))
    assert any(not r["fits"] and r["missing_bytes"] > 0 and r["ttft_s"] is None for r in rows)
    res = run("sweep", M8, H100, "--format", "json")
    assert json.loads(res.stdout)[0]["batch"] == 1


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("8", [8]),
        ("2k", [2000]),
        ("1,8,64", [1, 8, 64]),
        ("128..32768", [128 * 2**i for i in range(9)]),
        ("1,2,4..256", [1, 2, 4, 8, 16, 32, 64, 128, 256]),
        ("1,4..256", [1, 4, 16, 64, 256]),
        ("8,16,24..64", [8, 16, 24, 32, 40, 48, 56, 64]),
        ("256..1024:256", [256, 512, 768, 1024]),
        ("100..1000", [100, 200, 400, 800]),
        ("1,1,2", [1, 2]),
    ],
)
def test_range_syntax(text: str, values: list[int]) -> None:
    from roofline.cli.options import parse_int_list

    assert parse_int_list(text, "--batch") == values


# ---- compare -----------------------------------------------------------------------------
def test_compare_table_and_json() -> None:
    res = run("compare", "llama-3.1-70b", "--hardware", "h100-sxm,h200-sxm", "--tp", "4", "--batch", "16")
    assert res.exit_code == 0, res.output
    assert "★" in res.stdout and "h200-sxm" in res.stdout
    doc = json.loads(run("compare", "llama-3.1-70b", "-H", "h100-sxm,a100-80gb-sxm", "--tp", "4", "--json").stdout)
    want = roofline.predict("llama-3.1-70b", H100, tp=4).summary()
    assert all(same(doc[0][k], v) for k, v in want.items())
    assert doc[1]["hardware"] == "a100-80gb-sxm"


def test_compare_unsupported_column_and_fits_nowhere() -> None:
    res = run("compare", "llama-3.1-70b", "-H", "h100-sxm,a100-80gb-sxm", "--tp", "4", "-w", "fp8")
    assert res.exit_code == 0 and "no published fp8" in res.stdout
    res = run("compare", "llama-3.1-405b", "-H", "l4,h100-sxm")
    assert res.exit_code == 1 and "fits on none" in res.stderr


# ---- plan --------------------------------------------------------------------------------
PLAN = ["plan", "llama-3.1-70b", "--qps", "20", "--prompt", "2048", "--output", "256", "--ttft-slo", "500ms",
        "--tpot-slo", "50ms", "--hardware", "h100-sxm,a100-80gb-sxm"]  # fmt: skip


def test_plan_json_matches_api() -> None:
    res = run(*PLAN, "--json", "--price", "a100-80gb-sxm=1.5")
    assert res.exit_code == 0, res.output
    want = roofline.plan(
        "llama-3.1-70b",
        qps=20,
        prompt_len=2048,
        output_len=256,
        ttft_slo_s=0.5,
        tpot_slo_s=0.05,
        hardware=["h100-sxm", "a100-80gb-sxm"],
        prices={"a100-80gb-sxm": 1.5},
    )
    assert json.loads(res.stdout) == json.loads(json.dumps(want.to_dict()))


def test_plan_table() -> None:
    res = run(*PLAN, "--precision", "bf16,fp8", "--max-gpus", "64")
    assert res.exit_code == 0, res.output
    assert "recommended:" in res.stdout and "rejected" in res.stdout and "★" in res.stdout


def test_plan_impossible_slo_exits_1_with_closest() -> None:
    res = run("plan", M8, "--qps", "5", "--ttft-slo", "500ms", "--tpot-slo", "1ms", "--hardware", H100)
    assert res.exit_code == 1
    no_traceback(res)
    assert "Closest: h100-sxm" in res.stderr and "over by" in res.stderr


# ---- library -----------------------------------------------------------------------------
def test_hardware_and_model_commands(tmp_path: Path) -> None:
    res = run("hardware", "list")
    assert res.exit_code == 0 and "h100-sxm" in res.stdout and "GiB" in res.stdout
    assert "NVLink" in run("hardware", "show", "h100-sxm5").stdout
    # the second figure is the decimal one (it printed "80.00 GiB (80.00 GiB)"): 80 × 2^30 B = 85.90 GB
    assert "80.00 GiB (85.90 GB)" in run("hardware", "list").stdout
    assert "80.00 GiB = 85.90 GB" in run("hardware", "show", "h100-sxm").stdout
    assert json.loads(run("hardware", "show", H100, "--json").stdout)["name"] == H100
    res = run("model", "list")
    assert res.exit_code == 0 and "deepseek-v3" in res.stdout
    res = run("model", "show", "gemma-2-9b")
    assert "21 × (local, global)" in res.stdout and "9,241,705,984" in res.stdout
    doc = json.loads(run("model", "show", "deepseek-v3", "--json").stdout)
    spec = roofline.model("deepseek-v3")
    assert doc["param_count"] == spec.param_count() and doc["active_param_count"] == spec.active_param_count()


def test_model_import_and_schema(tmp_path: Path) -> None:
    res = run("model", "import", str(FIXTURES / "Qwen2.5-7B.json"))
    assert res.exit_code == 0 and res.stdout.startswith("#") and "num_layers: 28" in res.stdout
    out = tmp_path / "q.yaml"
    assert run("model", "import", str(FIXTURES / "Qwen2.5-7B.json"), "-o", str(out)).exit_code == 0
    assert roofline.model(out).param_count() == roofline.model("qwen2.5-7b").param_count()
    assert run("model", "import", str(FIXTURES / "Qwen2.5-7B.json"), "-o", str(out)).exit_code == 2  # exists
    bad = tmp_path / "bad.json"
    bad.write_text('{"architectures": ["NopeForCausalLM"]}')
    res = run("model", "import", str(bad))
    assert res.exit_code == 2 and res.stderr.startswith("error:")
    assert run("predict", str(out), H100).exit_code == 0
    for kind in ("hardware", "model"):
        assert "properties" in json.loads(run("schema", kind).stdout)
    assert run("schema", "gpu").exit_code == 2


# ---- commands implemented elsewhere ----------------------------------------------------------
def test_calibrate_forwards_options(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    calls: list[dict[str, Any]] = []
    fake = types.ModuleType("calibrate.cli")
    done = types.SimpleNamespace(provenance={"interrupted": False})
    fake.run_calibration = lambda **kw: calls.append(kw) or done  # type: ignore[attr-defined]
    fake.show_profile = lambda path: f"profile at {path}"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "calibrate.cli", fake)
    res = run("calibrate", "--device", "cpu", "--budget", "90s", "--tp", "2", "--quick", "-o", "p.yaml")
    assert res.exit_code == 0, res.output
    assert calls == [
        {
            "device": "cpu",
            "budget_s": 90.0,
            "model": None,
            "tp": 2,
            "output": Path("p.yaml"),
            "resume": False,
            "quick": True,
            "progress": True,
        }
    ]
    assert run("calibrate", "--device", "cpu").exit_code == 0
    assert calls[-1]["output"] == Path("calibration.yaml") and calls[-1]["budget_s"] == 60.0  # the default name
    assert run("calibrate", "show", "x.yaml").stdout.strip() == "profile at x.yaml"
    monkeypatch.setitem(sys.modules, "torch", None)
    res = run("calibrate", "--quick")
    assert res.exit_code == 2 and "pip install 'roofline[calibrate]'" in res.stderr
    assert run("calibrate", "--budget", "soon").exit_code == 2


def test_calibrate_without_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "calibrate.cli", None)
    res = run("calibrate", "show", "x.yaml")
    assert res.exit_code == 2 and "roofline[calibrate]" in res.stderr


def test_every_command_is_registered_plainly() -> None:
    """No silent stubbing: every command module imports, and each command is visible in --help."""
    from roofline.cli.app import commands

    names = {c.name for c in commands.registered_commands} | {g.name for g in commands.registered_groups}
    expected = {"predict", "sweep", "compare", "plan", "hardware", "model", "schema", "calibrate", "report"}
    assert expected | {"validate", "accuracy"} <= names
    assert not any(c.hidden for c in commands.registered_commands)


def test_debug_works_after_the_command() -> None:
    from roofline.cli.app import hoist_debug

    assert hoist_debug(["predict", "m", "h", "--debug"]) == ["--debug", "predict", "m", "h"]
    assert hoist_debug(["predict", "--", "--debug"]) == ["predict", "--", "--debug"]
    assert hoist_debug(["--debug", "plan"]) == ["--debug", "plan"]


def test_bare_slo_number_is_an_error_suggesting_a_unit() -> None:
    res = run("plan", M8, "--qps", "1", "--ttft-slo", "500", "--tpot-slo", "50ms", "-H", "h100-sxm")
    assert res.exit_code == 2 and "500ms" in res.stderr


def test_k_means_one_thousand() -> None:
    from roofline.cli.options import parse_count_opt

    assert parse_count_opt("2k", "--prompt") == 2000 and parse_count_opt("1M", "--batch") == 1_000_000


def test_plan_fits_nowhere_exits_1() -> None:
    res = run("plan", "llama-3.1-405b", "--qps", "1", "--ttft-slo", "5s", "--tpot-slo", "1s", "-H", "l4", "--tp", "1")
    assert res.exit_code == 1
    no_traceback(res)
    assert "does not fit: short by" in res.stderr and "Fix:" in res.stderr


def test_api_messages_name_api_options_and_the_cli_names_flags() -> None:
    """The API says how to fix a call in API terms; the CLI rephrases the same message as flags."""
    from roofline.advice import no_fit_reason
    from roofline.cli.options import as_flags

    r = roofline.predict("llama-3.1-70b", "h100-sxm", 1, 1024, 128)
    assert not r.fits and "tp=2" in no_fit_reason(r.model, r.hardware, r.scenario)
    assert as_flags("it fits with tp=2 or weight_dtype=fp8") == "it fits with --tp 2 or --weight-dtype fp8"
    assert as_flags("raise max_gpus to 24, lower qps") == "raise --max-gpus to 24, lower --qps"
    res = run("predict", "llama-3.1-70b", H100)
    assert res.exit_code == 1 and "--tp 2" in res.stderr and "tp=2" not in res.stderr


def test_sweep_accepts_json_and_csv_flags() -> None:
    res = run("sweep", M8, H100, "--batch", "1,2", "--json")
    assert res.exit_code == 0 and res.stdout.lstrip().startswith("[")
    assert run("sweep", M8, H100, "--batch", "1", "--json", "--csv").exit_code == 2


def test_plan_accepts_percentile_slos() -> None:
    """--ttft-slo p99=2s: the value is the SLO, the percentile is what --simulate checks at the planned load."""
    from roofline.cli.plan import percentile_slo

    assert percentile_slo("p99=2s", "--ttft-slo", 99.0) == (99.0, "2s")
    assert percentile_slo("50ms", "--tpot-slo", 90.0) == (90.0, "50ms")
    res = run(
        "plan",
        M8,
        "--qps",
        "5",
        "--ttft-slo",
        "p50=1s",
        "--tpot-slo",
        "p99=40ms",
        "-H",
        H100,
        "--tp",
        "1",
        "--simulate",
    )
    assert res.exit_code == 0 and "TTFT P50" in res.stdout and "TPOT P99" in res.stdout
    bad = run("plan", M8, "--qps", "5", "--ttft-slo", "q99=1s", "--tpot-slo", "40ms")
    assert bad.exit_code == 2 and "not a percentile" in bad.stderr
