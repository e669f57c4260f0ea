"""Shared fixtures: specs are loaded once per session."""

from __future__ import annotations

import pytest

import roofline


@pytest.fixture(scope="session")
def llama7() -> roofline.ModelSpec:
    return roofline.model("llama-2-7b")


@pytest.fixture(scope="session")
def h100() -> roofline.HardwareSpec:
    return roofline.hardware("h100-sxm")
