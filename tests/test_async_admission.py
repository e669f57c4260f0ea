"""Asynchronous scheduling delays admission by one step (GIVEN / WHEN / THEN, hand-derived).

Under vLLM ≥ 0.14 ``--async-scheduling``, SGLang's and TensorRT-LLM's overlap schedulers, the batch of step
k + 1 is formed while step k runs, so a request reaching the queue during step k joins step k + 2.
"""

from __future__ import annotations

import json

import pytest

import roofline
from roofline.engine import engine_preset
from roofline.serving.sim.policy import policy_for
from roofline.serving.simulate import simulate

M, HW = "llama-3.1-8b", "h100-sxm"


def _two_requests(tmp_path, async_on: bool):  # type: ignore[no-untyped-def]
    """A (prompt 1000, 400 tokens) at t = 0; B (prompt 1000, 4 tokens) at 0.5 s, while A decodes alone."""
    p = tmp_path / "two.jsonl"
    rows = [
        {"arrival_s": 0.0, "prompt_tokens": 1000, "output_tokens": 400},
        {"arrival_s": 0.5, "prompt_tokens": 1000, "output_tokens": 4},
    ]
    p.write_text("\n".join(json.dumps(r) for r in rows))
    return simulate(
        M, HW, engine="vllm", trace=p, engine_overrides={"async_scheduling": async_on, "prefix_caching": False}
    )


def test_arrival_mid_step_waits_one_more_decode_step(tmp_path) -> None:
    """GIVEN A decoding alone when B arrives mid-step WHEN scheduling is asynchronous THEN B's first token comes
    exactly one A-only decode step later than under synchronous scheduling.

    Derivation: B arrives during A's decode step j (it started before 0.5 s). Synchronous: step j + 1 is the
    mixed step (A's decode + B's prefill), B's first token at its end. Asynchronous: step j + 1 was formed
    when step j started, without B, so it is one more A-only decode step; the mixed step follows. Every later
    step has the same composition in both runs, so B's TTFT differs by the length of that one step, which is
    A's inter-token gap at that point: the median ITL, since nearly every gap is an A-only decode step and
    those differ by < 0.2 % over A's contexts 1,000 … 1,400.
    """
    sync, asyn = _two_requests(tmp_path, False), _two_requests(tmp_path, True)
    rs, ra = sync.requests, asyn.requests
    d_ttft = float(ra.first_token_s[1] - rs.first_token_s[1])
    assert float(ra.first_token_s[0]) == pytest.approx(float(rs.first_token_s[0]), rel=1e-12)  # A: idle engine
    assert d_ttft == pytest.approx(float(sync.summary["itl_p50_s"]), rel=2e-3)
    assert float(asyn.summary["itl_p50_s"]) == pytest.approx(float(sync.summary["itl_p50_s"]), rel=2e-3)


def test_idle_engine_schedules_at_once() -> None:
    """GIVEN one request on an idle engine WHEN scheduling is asynchronous THEN its TTFT and TPOT are the
    synchronous ones exactly (nothing was in flight when it arrived)."""
    kw = {"qps": 1.0, "prompt_len": 1000, "output_len": 50, "num_requests": 1}
    a = simulate(M, HW, engine="vllm", engine_overrides={"async_scheduling": True}, **kw).summary
    s = simulate(M, HW, engine="vllm", **kw).summary
    assert a["ttft_mean_s"] == pytest.approx(s["ttft_mean_s"], rel=1e-12)
    assert a["tpot_mean_s"] == pytest.approx(s["tpot_mean_s"], rel=1e-12)


def test_closed_loop_async_keeps_littles_law_and_adds_ttft() -> None:
    """GIVEN a closed loop of 16 clients WHEN scheduling is asynchronous THEN concurrency = throughput × mean
    E2E still holds within 1 % and the mean TTFT is longer (every re-sent request misses one formed step)."""
    kw = {"concurrency": 16, "prompt_len": 1024, "output_len": 128, "num_requests": 400}
    a = simulate(M, HW, engine="vllm", engine_overrides={"async_scheduling": True}, **kw).summary
    s = simulate(M, HW, engine="vllm", **kw).summary
    assert a["request_throughput_rps"] * a["e2e_mean_s"] == pytest.approx(16, rel=0.01)
    assert a["ttft_mean_s"] > s["ttft_mean_s"]


def test_engine_defaults_cite_their_overlap_schedulers() -> None:
    """SGLang and TensorRT-LLM overlap by default in the cited versions; the vLLM preset (v0.11) does not.
    The engine holds the setting with its source; the simulator's policy is derived from it."""
    hw = roofline.hardware(HW)
    for name, on in (("sglang", True), ("trtllm", True), ("vllm", False)):
        eng = engine_preset(name, hw)
        assert eng.async_scheduling is on and policy_for(eng).async_scheduling is on, name
        assert ("overlap" in eng.sources["async_scheduling"]) is on, name
