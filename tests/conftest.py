"""Shared fixtures: specs are loaded once per session, and so is every expensive object several test
modules read (the README example report and its saved file).

No test asserts on wall time: hypothesis' per-example deadline and its too-slow health check are
off for every test (the profile below), and timings live in benchmarks/, which print their targets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import roofline

# loaded before any test module is imported, so every @settings(...) inherits it
settings.register_profile("roofline", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("roofline")

#: The README example: Llama-3.1-70B for the chat preset on H100, H200 and A100 (tests/test_report*.py).
README_MODEL, README_HARDWARE, README_WORKLOAD = "llama-3.1-70b", "h100-sxm,h200-sxm,a100-80gb-sxm", "chat"
README_OUTPUT = "reports/llama-3.1-70b-chat.html"


@pytest.fixture(scope="session")
def llama7() -> roofline.ModelSpec:
    return roofline.model("llama-2-7b")


@pytest.fixture(scope="session")
def h100() -> roofline.HardwareSpec:
    return roofline.hardware("h100-sxm")


@pytest.fixture(scope="session")
def readme_report() -> Any:
    """The README example report, built once per session and shared by test_report.py, test_report_defects.py
    and test_report_browser.py (read only: Report and its data are frozen). Its Reproduce command names
    ``reports/llama-3.1-70b-chat.html``, as the README's command line does."""
    from roofline.report import build

    return build(README_MODEL, hardware=README_HARDWARE, workload=README_WORKLOAD, output_path=README_OUTPUT)


@pytest.fixture(scope="session")
def readme_report_file(readme_report: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README example report written to disk (``Report.save``: atomic write, folders created)."""
    return Path(readme_report.save(tmp_path_factory.mktemp("report") / "llama-3.1-70b-chat.html"))
