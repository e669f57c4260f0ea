"""Regression tests for what the serving fuzz (``tests/test_fuzz_serving.py``, ``benchmarks/fuzz_long.py``) found
after issue 31's round 3: each input below raised an exception that is not the project's (TypeError,
AttributeError, ValueError, KeyError, ZeroDivisionError, RecursionError), took a FIFO for a missing file, or exited 0
for an answer it reported as infeasible; now each is a :class:`~roofline.errors.RooflineError` naming the argument,
field, file and line with a fix (exit 1 or 2 from the CLI, never 3, no traceback).

No wall-clock assertions: a refusal that must come before the work replaces the work with a function that fails.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from roofline.cli.app import app
from roofline.errors import RooflineError, ScenarioError
from roofline.serving.simulate import simulate
from roofline.serving.workload.arrivals import parse_length
from roofline.serving.workload.stream import Workload
from roofline.serving.workload.trace import load_trace

runner = CliRunner()
M, HW = "llama-3.1-8b", "h100-sxm"
SMALL: dict[str, Any] = {"num_requests": 5, "prompt_len": 64, "output_len": 4}
POOLS = "prefill=h100-sxm:tp1x1,decode=h100-sxm:tp1x1"


def refused(*args: str, text: str, code: int = 2) -> str:
    """Run the CLI: exit ``code`` with an ``error:`` paragraph holding ``text``; no traceback, no exit 3."""
    res = runner.invoke(app, list(args))
    assert res.exit_code == code, res.output
    assert "Traceback" not in res.output and "internal error" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "error: " in res.output and text in res.output, res.output
    return res.output


def must_not_run(monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    """Replace ``target`` with a function that fails the test: the refusal must come before that work."""

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"{target} ran before the input was refused")

    monkeypatch.setattr(target, fail)


def trace(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --- traces ----------------------------------------------------------------------------------------------------


def test_a_5000_digit_integer_in_a_trace_names_the_file_and_line(tmp_path: Path) -> None:
    """It was Python's ValueError "Exceeds the limit (4300 digits) for integer string conversion" (exit 2 from the
    CLI's last guard, naming neither the file nor the line)."""
    first = '{"arrival_s": 0, "prompt_tokens": 8, "output_tokens": 4}'
    path = trace(tmp_path, first, '{"arrival_s": ' + "9" * 5000 + ', "prompt_tokens": 8, "output_tokens": 4}')
    with pytest.raises(ScenarioError, match=r"t\.jsonl line 2: a number of more than 4,300 digits"):
        load_trace(path)
    out = refused("simulate", M, HW, "--trace", str(path), text="t.jsonl line 2")
    assert "set_int_max_str_digits" not in out


def test_deeply_nested_trace_line_names_the_line(tmp_path: Path) -> None:
    """json.loads of 100,000 nested lists raised RecursionError."""
    path = trace(tmp_path, "[" * 100_000 + "]" * 100_000)
    with pytest.raises(ScenarioError, match=r"t\.jsonl line 1: .*nested too deep"):
        load_trace(path)


@pytest.mark.parametrize(
    ("field", "value"), [("prefix_hashes", [[1], [2]]), ("hash_ids", [{"a": 1}]), ("prompt_token_ids", [[1]] * 64)]
)
def test_nested_hash_ids_are_refused_by_field(tmp_path: Path, field: str, value: object) -> None:
    """A list of lists (or objects) as block ids loaded, then raised TypeError "unhashable type" mid-simulation."""
    row = {"arrival_s": 0, "prompt_tokens": 1024, "output_tokens": 4, field: value}
    path = trace(tmp_path, json.dumps(row))
    with pytest.raises(ScenarioError, match=rf"t\.jsonl line 1: field '{field}' must be a list of"):
        simulate(M, HW, trace=path, trace_block_tokens=16)
    refused("simulate", M, HW, "--trace", str(path), text=f"field '{field}'")


def test_flat_hash_ids_still_share_prefixes(tmp_path: Path) -> None:
    rows = [{"arrival_s": i, "prompt_tokens": 1024, "output_tokens": 4, "hash_ids": [1, 2]} for i in range(3)]
    s = simulate(M, HW, trace=trace(tmp_path, *map(json.dumps, rows)), trace_block_tokens=512)
    assert (s.requests["cached_tokens"].to_numpy()[1:] > 0).all()


def test_a_fifo_trace_is_not_a_missing_file(tmp_path: Path) -> None:
    """A FIFO was reported as "does not exist"; it is refused as what it is, before anything opens (and blocks)."""
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(ScenarioError, match="not a regular file"):
        load_trace(fifo)
    refused("simulate", M, HW, "--trace", str(fifo), text="is not a regular file (a FIFO")
    with pytest.raises(ScenarioError, match="is a folder"):
        load_trace(tmp_path)
    with pytest.raises(ScenarioError, match="No such file"):
        load_trace(tmp_path / "missing.jsonl")


@pytest.mark.parametrize("bad", [4.0, -1, 2**70, {}, True, np.int64(4), object(), b"t.jsonl", "a\x00b"])
def test_trace_of_the_wrong_type(bad: object) -> None:
    """trace=4.0 (or any non-path) raised TypeError from pathlib."""
    with pytest.raises(ScenarioError, match="trace must be a file path"):
        simulate(M, HW, trace=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("block", [0, -1, 1.5, True, None, "16", 2**63])
def test_trace_block_tokens_is_checked(tmp_path: Path, block: object) -> None:
    """trace_block_tokens=0 divided by zero re-blocking a trace's hash ids (ZeroDivisionError)."""
    path = trace(tmp_path, json.dumps({"arrival_s": 0, "prompt_tokens": 1024, "output_tokens": 4, "hash_ids": [1]}))
    with pytest.raises(ScenarioError, match="trace_block_tokens"):
        simulate(M, HW, trace=path, trace_block_tokens=block)  # type: ignore[arg-type]


# --- the workload's other arguments -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("qps", "5"),
        ("qps", {}),
        ("qps", True),
        ("prefix_share", None),
        ("prefix_share", "0.5"),
        ("arrival_cv", "x"),
        ("concurrency", {}),
        ("concurrency", object()),
        ("max_concurrency", "8"),
        ("arrival", 5),
    ],
)
def test_workload_fields_of_the_wrong_type(monkeypatch: pytest.MonkeyPatch, field: str, value: object) -> None:
    """Each raised TypeError (a comparison, float() or the client preset's arithmetic); qps='5' ran the whole
    simulation before failing in the workload's label. Now refused by name before any draw or run."""
    must_not_run(monkeypatch, "roofline.serving.simulate.run_replica")
    kw: dict[str, Any] = {"qps": 2.0} if field not in ("qps", "concurrency") else {}
    if field == "max_concurrency":
        kw["client"] = "vllm-bench"  # the client preset multiplies by it
    with pytest.raises(ScenarioError, match=rf"^{field} must be"):
        simulate(M, HW, **SMALL, **kw, **{field: value})
    with pytest.raises(ScenarioError, match=rf"^{field} must be"):
        Workload(**{"qps": 1.0, **kw, field: value}).draw()


def test_whole_float_client_counts_still_run() -> None:
    s = simulate(M, HW, concurrency=2.0, **SMALL)  # type: ignore[arg-type]
    assert len(s.requests) == SMALL["num_requests"]


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ({"dist": "uniform", "low": 1}, "missing: high"),
        ({"dist": "lognormal", "mean": 64}, "missing: cv"),
        ({"dist": "fixed", "value": 8, "mean": 3}, "unknown: mean"),
        ({"dist": "normal", "mean": 64, "std": "x"}, "is not a length"),
        pytest.param(10**400, "the length 1000.*exceeds 16,777,216 tokens", id="10**400"),
        pytest.param(10**5000, "an integer of 16,610 bits", id="10**5000"),
        pytest.param({"dist": "fixed", "value": 10**400}, "is not a length", id="dict-10**400"),
    ],
)
def test_length_dicts_and_huge_lengths(spec: object, match: str) -> None:
    """A dict missing a key raised KeyError; an int of 400 digits OverflowError (5,000 digits: ValueError)."""
    with pytest.raises(ScenarioError, match=match):
        parse_length(spec, "prompt_len")  # type: ignore[arg-type]
    with pytest.raises(ScenarioError, match="prompt_len"):
        simulate(M, HW, qps=2.0, num_requests=5, prompt_len=spec, output_len=4)  # type: ignore[arg-type]


def test_workload_and_an_array_keyword() -> None:
    """workload= with prompt_len=<array> raised numpy's "truth value of an array is ambiguous" (ValueError)."""
    with pytest.raises(ScenarioError, match=r"not both .*prompt_len"):
        simulate(M, HW, workload=Workload(qps=1.0), prompt_len=np.array([16, 32]))


# --- the deployment's arguments -----------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [True, 5, {}, [POOLS], b"prefill=h100-sxm:tp1x1", 2.5])
def test_disagg_of_the_wrong_type(monkeypatch: pytest.MonkeyPatch, bad: object) -> None:
    """disagg=True (or a dict, a list, bytes) raised AttributeError "'bool' object has no attribute 'prefill'"."""
    must_not_run(monkeypatch, "roofline.serving.sim.disagg.run_disagg")
    with pytest.raises(ScenarioError, match="disagg must be its text or a DisaggConfig"):
        simulate(M, disagg=bad, qps=2.0, **SMALL)  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "bad"), [("speculative", 5), ("speculative", {"k": 3}), ("progress", "x")])
def test_variant_arguments_of_the_wrong_type(monkeypatch: pytest.MonkeyPatch, name: str, bad: object) -> None:
    must_not_run(monkeypatch, "roofline.serving.simulate.run_replica")
    with pytest.raises(ScenarioError, match=rf"^{name} must be"):
        simulate(M, HW, qps=2.0, **SMALL, **{name: bad})


@pytest.mark.parametrize("bad", [2.5, np.float64(2.5), 5, False, b"vllm", ["vllm"]])
@pytest.mark.parametrize("pools", [None, POOLS])
def test_engine_of_the_wrong_type(bad: object, pools: str | None) -> None:
    """engine=2.5 raised AttributeError "'float' object has no attribute 'strip'" (engine=False ran vllm)."""
    hw = HW if pools is None else None
    with pytest.raises(ScenarioError, match="engine must be a preset name"):
        simulate(M, hw, engine=bad, disagg=pools, qps=2.0, **SMALL)  # type: ignore[arg-type]


def test_an_empty_engine_name_is_unknown_not_vllm() -> None:
    with pytest.raises(RooflineError, match="unknown engine ''"):
        simulate(M, HW, engine="", qps=2.0, **SMALL)
    refused("simulate", M, HW, "--qps", "2", "-N", "5", "--engine", "", text="unknown engine ''")


# --- plan-disagg's exit code --------------------------------------------------------------------------------------


def test_plan_disagg_json_exits_1_when_nothing_meets_the_slos() -> None:
    """With --json the table's "no deployment tried meets the SLOs" exited 0; now the JSON is printed and exit 1."""
    args = ["plan-disagg", M, HW, "--qps", "2", "-N", "20", "--p-max", "1", "--d-max", "1", "--n-max", "1"]
    res = runner.invoke(app, [*args, "--ttft-slo", "1ms", "--json"])
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert doc["best_disagg"] is None and doc["best_colocated"] is None
    assert all(not c["ok"] and math.isfinite(c["ttft_s"]) for c in doc["disagg"] + doc["colocated"])
    assert "no deployment tried meets the SLOs" in res.output
    ok = runner.invoke(app, [*args, "--json"])
    assert ok.exit_code == 0 and json.loads(ok.stdout)["best_colocated"] is not None, ok.output


# --- the CLI's phrasing -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", M, HW, "--qps", "0", "-N", "5"],
        ["simulate", M, HW, "--qps", "1e12", "-N", "5"],
        ["simulate-disagg", M, "--disagg", POOLS, "--qps", "inf", "-N", "5"],
        ["plan-disagg", M, HW, "--qps", "-1", "-N", "20"],
        ["plan", M, "--qps", "0", "--ttft-slo", "1s", "--tpot-slo", "50ms", "-H", HW],
    ],
)
def test_a_flag_in_a_message_is_not_prefixed_twice(args: list[str]) -> None:
    """The CLI's own "--qps must be …" went through the API-name rephrasing again and read "----qps"."""
    out = refused(*args, text="error: --qps")
    assert "----" not in out


def test_as_flags_leaves_flags_alone() -> None:
    from roofline.cli.options import as_flags

    assert as_flags("--qps must be a positive number, got 0") == "--qps must be a positive number, got 0"
    assert (
        as_flags("qps must be >= 1; --num-requests 5, num_requests=5")
        == "--qps must be >= 1; --num-requests 5, --num-requests 5"
    )
    assert as_flags("--tp=2 or tp=4") == "--tp=2 or --tp 4"
