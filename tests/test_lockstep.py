"""Lock-step of identical closed-loop clients (roofline.serving.sim.metrics.lockstep_share, simulate's config flag).

Hand-derived: Qwen3-32B on 2 × H100 (vLLM preset, token budget 8,192), 8 clients of 1,024 + 1,024 tokens. The
first wave's 8 prompts are exactly one 8,192-token step; all 8 then decode 1,023 steps together, finish in one
step and resend together: every later request's first token comes with all 8 (share 1, flagged), and every
TTFT is that one step. A 2 % spread of answer lengths lets them drift apart: no later cohort of ≥ 4 (share 0),
TTFT falls to about one 1,024-token prefill plus a decode step.
"""

from __future__ import annotations

import math

import numpy as np
from typer.testing import CliRunner

from roofline.cli.app import app
from roofline.serving.sim.metrics import lockstep_share
from roofline.serving.simulate import simulate

KW = {"engine": "vllm", "tp": 2, "weight_dtype": "bf16", "prompt_len": 1024, "concurrency": 8, "num_requests": 400}


def test_share_by_hand() -> None:
    """Later half = requests 2, 3 (by arrival); cohorts are counted among all requests. C = 4 → cohorts of ≥ 2
    count: request 2 shares its instant with request 0 (both first-token at 1.0), request 3 is alone → 1/2.
    C = 8 → cohorts of ≥ 4: none → 0."""
    arrival = np.array([0.0, 0.1, 0.2, 0.3])
    first = np.array([1.0, 2.0, 1.0, 3.0])
    assert lockstep_share(arrival, first, 4) == 0.5
    assert lockstep_share(arrival, first, 8) == 0.0
    assert math.isnan(lockstep_share(arrival, np.full(4, np.nan), 4))


def test_identical_clients_lock_step_and_a_length_spread_breaks_it() -> None:
    s = simulate("qwen3-32b", "h100-sxm", output_len=1024, **KW)
    assert s.config["lockstep"] and s.config["lockstep_share"] == 1.0
    ttft = s.requests["ttft_s"].to_numpy()
    assert np.ptp(ttft) < 1e-9 * ttft.max()  # every wave waits for the same 8,192-token step
    t = simulate("qwen3-32b", "h100-sxm", output_len="lognormal:1024:0.02", **KW)
    assert not t.config["lockstep"] and t.config["lockstep_share"] == 0.0
    assert t.summary["ttft_mean_s"] < s.summary["ttft_mean_s"] / 3
    one = simulate("qwen3-32b", "h100-sxm", output_len=1024, **{**KW, "concurrency": 1, "num_requests": 20})
    assert one.config["lockstep_share"] == 0.0  # one client: no cohort to be in
    assert "lockstep" not in simulate("qwen3-32b", "h100-sxm", **{**KW, "concurrency": None, "qps": 1.0}).config


def test_cli_says_so() -> None:
    res = CliRunner().invoke(
        app,
        [
            "simulate",
            "qwen3-32b",
            "h100-sxm",
            "--tp",
            "2",
            "--concurrency",
            "8",
            "--prompt",
            "1024",
            "--output",
            "1024",
            "-N",
            "200",
            "--weight-dtype",
            "bf16",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "lock-step: 100%" in " ".join(res.output.split())
