"""``roofline simulate``: agrees with the API to the last digit; bad input exits 2, saturation exits 1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from roofline.cli.app import app
from roofline.serving.simulate import simulate

runner = CliRunner()
M8, H100 = "llama-3.1-8b", "h100-sxm"


def run(*args: str) -> Any:
    res = runner.invoke(app, list(args))
    assert "Traceback" not in res.output
    return res


def test_json_matches_the_api_exactly() -> None:
    res = run(
        "simulate",
        M8,
        H100,
        "--qps",
        "8",
        "-N",
        "300",
        "--prompt",
        "lognormal:800:0.5",
        "--json",
        "--engine-set",
        "max_num_batched_tokens=2048",
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    api = simulate(
        M8,
        H100,
        qps=8.0,
        num_requests=300,
        prompt_len="lognormal:800:0.5",
        engine_overrides={"max_num_batched_tokens": 2048},
    )
    assert doc["summary"] == api.summary
    assert doc["saturated"] is None


def test_table_csv_and_files(tmp_path: Path) -> None:
    req, tl = tmp_path / "r.csv", tmp_path / "t.json"
    res = run(
        "simulate", M8, H100, "--concurrency", "16", "-N", "200", "--requests-out", str(req), "--timeline-out", str(tl)
    )
    assert res.exit_code == 0 and "TTFT (ms)" in res.output and "requests/s" in res.output
    assert len(req.read_text().splitlines()) == 201
    assert json.loads(tl.read_text())[0]["time_s"] > 0
    res = run("simulate", M8, H100, "--trace", str(_trace(tmp_path)), "--csv", "-e", "sglang")
    assert res.exit_code == 0 and res.output.startswith("label,ttft_mean_s")


def _trace(tmp_path: Path) -> Path:
    p = tmp_path / "trace.jsonl"
    rows = [
        {"timestamp": 1000 * i, "input_length": 300 + i, "output_length": 20, "hash_ids": [1, 2 + i]} for i in range(10)
    ]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return p


def test_saturation_exits_1_with_the_sustainable_rate() -> None:
    res = run("simulate", M8, H100, "--qps", "300", "-N", "20000", "--prompt", "2k", "--json")
    assert res.exit_code == 1
    assert "sustainable rate" in res.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--qps", "1", "--concurrency", "2"], "exactly one"),
        (["--qps", "fast"], "--qps"),
        (["--qps", "1", "--prompt", "lognormal:100"], "lognormal takes 2"),
        (["--qps", "1", "--prompt", "gauss:1:2"], "unknown distribution"),
        (["--qps", "1", "--prefix-share", "2"], "--prefix-share"),
        (["--qps", "1", "--engine-set", "prefix_caching=maybe"], "true/false"),
        (["--qps", "1", "--arrival", "bursty"], "arrival process"),
    ],
)
def test_bad_input_exits_2(args: list[str], needle: str) -> None:
    res = run("simulate", M8, H100, "-N", "10", *args)
    assert res.exit_code == 2, res.output
    assert needle in res.output


def test_malformed_trace_names_line_and_field(tmp_path: Path) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text(
        '{"arrival_s": 0, "prompt_tokens": 10, "output_tokens": 5}\n{"arrival_s": 1, "prompt_tokens": -3, '
        '"output_tokens": 5}\n'
    )
    res = run("simulate", M8, H100, "--trace", str(p))
    assert res.exit_code == 2 and "line 2" in res.output and "prompt_tokens" in res.output
    p.write_text('{"arrival_s": 0, "output_tokens": 5}\n')
    res = run("simulate", M8, H100, "--trace", str(p))
    assert res.exit_code == 2 and "line 1" in res.output and "missing field 'prompt_tokens'" in res.output
