"""Closed-loop resends reach the engine strictly after the step that returned their predecessor (GIVEN / WHEN /
THEN; the convention is the module docstring of roofline.serving.sim.engine)."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.serving.simulate import simulate

M, HW = "llama-3.1-8b", "h100-sxm"


def test_a_resend_misses_the_step_that_starts_as_its_predecessor_finishes() -> None:
    """GIVEN two clients, one with 4-token answers and one with 100, no request overhead, synchronous scheduling
    WHEN the short request finishes at the end of a step THEN the step that starts at that instant is
    decode-only (the long request alone) and the resent request's 512-token prefill runs in the step after,
    whose end is its first token."""
    out = np.array([4, 100] * 3)
    s = simulate(
        M,
        HW,
        concurrency=2,
        num_requests=6,
        prompt_len=512,
        output_len=out,
        engine_overrides={"async_scheduling": False},
    )
    r, tl = s.requests, s.timeline
    send = float(r.arrival_s[2])
    assert send == float(r.finish_s[0])  # the client resent at once
    i = int(np.flatnonzero(tl.time_s.to_numpy() == send)[0])
    gap, joined = tl.iloc[i + 1], tl.iloc[i + 2]
    assert (gap.prefill_tokens, gap.decode_rows) == (0, 1)
    assert joined.prefill_tokens == 512
    assert float(r.first_token_s[2]) == pytest.approx(float(joined.time_s), rel=1e-12)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_physics_only_is_the_limit_of_a_vanishing_overhead(asynchronous: bool) -> None:
    """GIVEN 16 identical closed-loop clients WHEN the request overhead is 0 or 1 ns THEN TTFT and TPOT agree to
    1e-6 (a resend never joins the step that starts as its predecessor finishes, with or without overhead)."""
    kw = dict(concurrency=16, num_requests=400, prompt_len=1024, output_len=64)
    runs = [
        simulate(M, HW, engine_overrides={"request_overhead_s": y, "async_scheduling": asynchronous}, **kw).summary
        for y in (0.0, 1e-9)
    ]
    for key in ("ttft_mean_s", "tpot_mean_s", "e2e_mean_s"):
        assert runs[0][key] == pytest.approx(runs[1][key], rel=1e-6), key
