"""Engine configurations that starve are detected and said with the knob to change (hand-derived cases).

With chunked prefill off and a token budget B, a decodes-first scheduler can put a P-token prompt into a step only
when no request decodes if P > B − 1: every such request runs alone, so the mean batch is exactly 1 and the fix is
a budget of P + (the decodes that should run beside it). At P = B − 1 the prompt fits next to one decode and the
batch grows. A closed loop whose batch is capped by max_num_seqs below its clients says so.
"""

from __future__ import annotations

import pytest

import roofline
from roofline.serving.sim.result import SimulationResult

M, HW = "llama-3.1-8b", "h100-sxm"
UNCHUNKED = {"chunked_prefill": False, "max_num_batched_tokens": 2048}


def _closed(prompt: int, **over: object) -> SimulationResult:
    return roofline.simulate(
        M, HW, "trtllm", concurrency=4, prompt_len=prompt, output_len=32, num_requests=24, engine_overrides=over
    )


def test_a_prompt_that_cannot_join_a_decode_runs_alone_and_is_named() -> None:
    s = _closed(2048, **UNCHUNKED)
    assert s.summary["mean_batch"] == pytest.approx(1.0, abs=1e-9)  # one request at a time, every step
    msg = s.config["starvation"]
    assert "100% of the prompts (up to 2,048 tokens) can never be scheduled next to a running decode" in msg
    assert "max_num_batched_tokens=2,052" in msg and "chunked_prefill=true" in msg  # 2048 + the 4 clients' decodes


def test_a_prompt_that_fits_next_to_one_decode_is_not_starved() -> None:
    s = _closed(2047, **UNCHUNKED)
    assert s.config["starvation"] is None
    assert s.summary["mean_batch"] > 1.5


def test_a_prefill_first_scheduler_is_not_flagged_for_unchunked_prompts() -> None:
    s = roofline.simulate(
        M, HW, "sglang", concurrency=4, prompt_len=2048, output_len=32, num_requests=24, engine_overrides=UNCHUNKED
    )
    assert s.config["starvation"] is None


def test_a_batch_capped_below_the_clients_names_max_num_seqs() -> None:
    s = roofline.simulate(
        M, HW, concurrency=32, prompt_len=256, output_len=64, num_requests=200, engine_overrides={"max_num_seqs": 2}
    )
    assert s.summary["mean_batch"] <= 2.0 + 1e-9
    assert "max_num_seqs=2 admits fewer than the 32 clients" in s.config["starvation"]
    assert "--engine-set max_num_seqs=32" in s.config["starvation"]


def test_an_ordinary_run_has_no_statement_and_the_cli_prints_one_when_starved() -> None:
    from typer.testing import CliRunner

    from roofline.cli.app import app

    assert roofline.simulate(M, HW, qps=5.0, num_requests=50).config["starvation"] is None
    args = [
        "simulate",
        M,
        HW,
        "-e",
        "trtllm",
        "--concurrency",
        "4",
        "-p",
        "2048",
        "-n",
        "32",
        "-N",
        "12",
        "--engine-set",
        "chunked_prefill=false",
        "--engine-set",
        "max_num_batched_tokens=2048",
    ]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    assert "starved" in out.output and "max_num_batched_tokens=2,052" in out.output
