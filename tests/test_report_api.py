"""Report entry points: workload presets, Python API (render/save), the CLI command, formatting."""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

import roofline
from roofline.errors import ScenarioError
from roofline.report import PRESETS, render, resolve_workload, save
from roofline.report.templating import duration, number, raw, usd

SMALL = {"hardware": "h100-sxm", "workload": "chat"}  # a fast report: one device, an 8B model


def test_presets_state_lengths_slos_and_rationale() -> None:
    chat = PRESETS["chat"]
    assert (chat.prompt_len, chat.output_len, chat.qps, chat.ttft_slo_s, chat.tpot_slo_s) == (
        1024,
        256,
        10.0,
        0.5,
        0.05,
    )
    rag = PRESETS["rag"]
    assert (rag.prompt_len, rag.output_len, rag.ttft_slo_s, rag.tpot_slo_s) == (8192, 256, 2.0, 0.06)
    assert (PRESETS["summarize"].prompt_len, PRESETS["summarize"].output_len) == (4096, 512)
    assert all(len(w.rationale) > 80 for w in PRESETS.values())


def test_overrides_are_recorded_and_custom_needs_every_field() -> None:
    wl = resolve_workload("rag", qps=2.5, tpot_slo_s=0.1)
    assert (wl.qps, wl.tpot_slo_s, wl.prompt_len) == (2.5, 0.1, 8192)
    assert wl.overridden == ("qps", "tpot_slo_s")
    with pytest.raises(ScenarioError, match="--ttft-slo, --tpot-slo"):
        resolve_workload("custom", prompt_len=100, output_len=10, qps=1)
    full = resolve_workload("custom", prompt_len=100, output_len=10, qps=1, ttft_slo_s=1, tpot_slo_s=0.1)
    assert full.name == "custom" and full.prompt_len == 100
    with pytest.raises(ScenarioError, match="did you mean chat"):
        resolve_workload("chatt")
    with pytest.raises(ScenarioError, match="--qps must be > 0"):
        resolve_workload("chat", qps=0)


def test_render_returns_html_and_save_writes_a_readable_file(tmp_path: Path) -> None:
    html = render("llama-3.1-8b", **SMALL, prompt_len=2000)
    assert html.startswith("<!DOCTYPE html>") and "--prompt 2000" in html  # override in the reproduce command
    out = save(tmp_path / "sub" / "r.html", "llama-3.1-8b", **SMALL)
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert "-o " + str(tmp_path / "sub" / "r.html") in out.read_text(encoding="utf-8")
    mode = stat.S_IMODE(out.stat().st_mode)
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask  # not mkstemp's 0600
    assert roofline.report.render is render  # reachable as roofline.report.render


def test_prices_and_unpriced_hardware_are_stated() -> None:
    html = render("llama-3.1-8b", hardware="h100-sxm,h200-sxm", workload="chat", prices={"h200-sxm": 4.5})
    assert "user-supplied price" in html and "$4.50" in html and "--price h200-sxm=4.5" in html
    html = render("llama-3.1-8b", hardware="mi325x", workload="chat")  # no public list price bundled
    assert "no price in the spec" in html


def test_cli_report_command(tmp_path: Path) -> None:
    from roofline.cli.app import app

    out = tmp_path / "r.html"
    res = CliRunner().invoke(
        app, ["report", "llama-3.1-8b", "-H", "h100-sxm", "--workload", "rag", "--tpot-slo", "80ms", "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert out.exists() and "wrote" in res.output and "recommends" in res.output
    html = out.read_text(encoding="utf-8")
    assert "--tpot-slo 80ms" in html and "Workload: rag" in html
    bad = CliRunner().invoke(app, ["report", "llama-3.1-8b", "--workload", "custom", "-o", str(out), "--force"])
    assert bad.exit_code == 2 and "--prompt" in bad.output


def test_report_command_imports_lightly() -> None:
    import subprocess
    import sys

    code = (
        "import sys, roofline.cli.report;"
        "print(any(m in sys.modules for m in ('matplotlib', 'jinja2', 'numpy', 'pandas')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("fn", "value", "text"),
    [
        (duration, 0.0891, "89.1 ms"),
        (duration, 0.35, "350 ms"),
        (duration, 2.5, "2.5 s"),
        (duration, 5e-5, "50 µs"),
        (duration, math.nan, "—"),
        (usd, 31.92, "$31.92"),
        (usd, 1234.5, "$1,234"),
        (usd, None, "—"),
        (number, 509.4, "509"),
        (number, 17.25, "17.2"),
        (number, 1095.0, "1,095"),
        (raw, 0.1, "0.1"),
        (raw, 8, "8"),
        (raw, None, "None"),
    ],
)
def test_number_formatting(fn: object, value: object, text: str) -> None:
    assert fn(value) == text  # type: ignore[operator]


def test_measured_profile_evidence_and_hash(tmp_path: Path) -> None:
    """GIVEN a profile measured on the H100 (absolute ceilings) THEN evidence says so, with its provenance."""
    from roofline.profile import default_profile

    base = default_profile()
    prof = base.model_copy(
        update={
            "name": "lab-h100",
            "device": "h100-sxm",
            "created": "2026-11-01",
            "memory": base.memory.model_copy(update={"value": 3.0e12}),
            "provenance": {"gpu": "NVIDIA H100 80GB HBM3", "driver": "550.54", "torch": "2.13.0"},
        }
    )
    path = prof.save(tmp_path / "lab.yaml")
    html = render("llama-3.1-8b", hardware="h100-sxm,a100-80gb-sxm", workload="chat", calibration=path)
    assert "Calibrated: ceilings measured on h100-sxm" in html and "created 2026-11-01" in html
    assert "NVIDIA H100 80GB HBM3" in html and "550.54" in html
    assert f'data-value="{3.0e12 / 3.35e12!r}"' in html  # % of datasheet reached, from the measured value
    import hashlib

    assert hashlib.sha256(path.read_bytes()).hexdigest() in html
    assert f"--calibration {path}" in html
