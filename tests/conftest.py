"""Shared fixtures: specs are loaded once per session.

No test asserts on wall time: hypothesis' per-example deadline and its too-slow health check are
off for every test (the profile below), and timings live in benchmarks/, which print their targets.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

import roofline

# loaded before any test module is imported, so every @settings(...) inherits it
settings.register_profile("roofline", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("roofline")


@pytest.fixture(scope="session")
def llama7() -> roofline.ModelSpec:
    return roofline.model("llama-2-7b")


@pytest.fixture(scope="session")
def h100() -> roofline.HardwareSpec:
    return roofline.hardware("h100-sxm")
