"""Durations print with three significant digits in the unit the rounded value belongs to."""

from __future__ import annotations

import math

import pytest

from roofline.cli.render import seconds_range
from roofline.units import fmt_seconds


@pytest.mark.parametrize(
    ("s", "text"),
    [
        (0.9996, "1 s"),  # rounds up across the unit: not "1e+03 ms"
        (0.9994, "999 ms"),
        (0.00099996, "1 ms"),
        (9.9996e-7, "1 µs"),
        (1.2345, "1.23 s"),
        (0.0123, "12.3 ms"),
        (250.0, "250 s"),
        (math.nan, "n/a"),
    ],
)
def test_fmt_seconds(s: float, text: str) -> None:
    assert fmt_seconds(s) == text


def test_range_bounds_follow_the_rounded_unit() -> None:
    assert seconds_range(0.9996, 0.662, 1.509) == "1 s (0.662–1.51)"
