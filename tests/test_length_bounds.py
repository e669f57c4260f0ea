"""Lengths are bounded counts: a length, a mean or a spread beyond MAX_SEQUENCE_TOKENS is refused by name, and a
heavy tail's draws never overflow int64 (found by the CLI fuzzer: ``--prompt lognormal:1e30:0.1`` gave an internal
IndexError; ``--output fixed:9.3e18`` one token per request)."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.boundary.limits import MAX_SEQUENCE_TOKENS
from roofline.errors import ScenarioError
from roofline.serving.workload.arrivals import parse_length


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ("lognormal:1e30:0.1", "the mean"),
        ("fixed:9.3e18", "the length"),
        (2**63, "the length"),
        ("uniform:1:1e20", "HIGH"),
        ("normal:1000:1e30", "the spread"),
        ([1, 2, 10**19], "<= 16,777,216"),
    ],
)
def test_lengths_beyond_the_bound_are_refused_by_name(spec: object, named: str) -> None:
    with pytest.raises(ScenarioError, match=named):
        parse_length(spec, "prompt_len")  # type: ignore[arg-type]


def test_a_heavy_tail_is_clipped_at_the_bound_not_wrapped() -> None:
    x = parse_length("lognormal:1000000:1000", "output_len").sample(20_000, np.random.default_rng(0))
    assert x.min() >= 1 and x.max() == MAX_SEQUENCE_TOKENS  # the tail reaches the bound, never a negative int64
