"""The installed ``roofline`` entry point in a real subprocess (falls back to ``python -m roofline``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import roofline
from roofline.cli.predict import interval_fields


def _cmd() -> list[str]:
    venv = Path(sys.executable).with_name("roofline")
    exe = str(venv) if venv.exists() else shutil.which("roofline")
    return [exe] if exe else [sys.executable, "-m", "roofline"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*_cmd(), *args], capture_output=True, text=True, timeout=60, check=False)


def test_entry_point_predict_json_round_trips() -> None:
    res = _run("predict", "llama-3.1-8b", "h100-sxm", "--batch", "4", "--json")
    assert res.returncode == 0, res.stderr
    r = roofline.predict("llama-3.1-8b", "h100-sxm", 4)
    assert json.loads(res.stdout) == {**r.summary(), **interval_fields(r, 0.8)}  # figures carry their 80 % interval


def test_entry_point_errors_have_no_traceback() -> None:
    res = _run("predict", "llama-3.1-405b", "l4", "--tp", "1")
    assert res.returncode == 1
    assert res.stderr.startswith("error: ") and "Traceback" not in res.stderr
    res = _run("predict", "llama-3.1-8b", "h100-sxm", "--batch", "lots")
    assert res.returncode == 2 and "Traceback" not in res.stderr


def test_python_dash_m_and_version() -> None:
    res = subprocess.run([sys.executable, "-m", "roofline", "--version"], capture_output=True, text=True, check=False)
    assert res.returncode == 0 and res.stdout.strip() == f"roofline {roofline.__version__}"
