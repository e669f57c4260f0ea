"""Simulator physics: hand-derived goldens, queueing laws and conservation (GIVEN / WHEN / THEN)."""

from __future__ import annotations

import numpy as np
import pytest

import roofline
from roofline.errors import ScenarioError
from roofline.prediction import make_scenario, resolve
from roofline.serving.sim.result import SUMMARY_KEYS
from roofline.serving.sim.steptime import StepModel
from roofline.serving.simulate import simulate

M, HW = "llama-3.1-8b", "h100-sxm"


@pytest.mark.parametrize(
    ("model", "hw", "tp", "wd", "engine", "p"),
    [
        (M, HW, 1, None, "ideal", 1000),
        (M, HW, 1, None, "vllm", 1000),
        ("gpt-oss-120b", HW, 2, "int4", "vllm", 100),  # sliding window 128 crossed during decode
        ("deepseek-v3", "h200-sxm", 8, "fp8", "sglang", 1000),  # MLA, MoE, prefill-first policy
        ("qwen3.5-397b-a17b", "h200-sxm", 8, "fp8", "vllm", 1000),  # linear-attention state kernels
    ],
)
def test_single_request_reproduces_static_predict(
    model: str, hw: str, tp: int, wd: str | None, engine: str, p: int
) -> None:
    """GIVEN one request of P prompt and O = 200 output tokens WHEN simulated THEN TTFT and TPOT equal predict's.

    Derivation: alone, the request's prefill is one step of P ≤ max_num_batched_tokens tokens, the prefill
    pass predict times as TTFT; then O − 1 decode-only steps at contexts P + 1 … P + O − 1, the steps predict
    sums, so (E2E − TTFT)/(O − 1) = predict's TPOT. The presets carry zero step/request CPU overhead and the
    same CUDA-graph setting in predict and simulate, so nothing else enters (the KV block size changes no
    time). With P = 100 on gpt-oss the decode contexts cross the 128-token window: the simulator splits the
    decode stretch there and stays exact. The SGLang preset's front-end latency (320 ms mean,
    roofline.published.frontend) is in both: predict adds its mean, the simulator draws each request's from an
    exponential law about it, so the draw is pinned to the mean here (request_overhead_cv 0; the spread's mean is
    tests/test_request_overhead_spread.py's).
    """
    s = simulate(
        model,
        hw,
        engine=engine,
        tp=tp,
        qps=1.0,
        prompt_len=p,
        output_len=200,
        num_requests=1,
        weight_dtype=wd,
        engine_overrides={"request_overhead_cv": 0.0},
    )
    r = roofline.predict(
        model, hw, batch=1, prompt_len=p, output_len=200, tp=tp, engine=engine, weight_dtype=wd or "bf16"
    )
    assert s.summary["ttft_mean_s"] == pytest.approx(r.ttft_s, rel=1e-12)
    assert s.summary["tpot_mean_s"] == pytest.approx(r.tpot_s, rel=1e-12)
    assert s.summary["itl_mean_s"] == pytest.approx(r.tpot_s, rel=1e-12)
    assert s.summary["e2e_mean_s"] == pytest.approx(r.e2e_s, rel=1e-12)


def test_low_load_ttft_is_one_prefill() -> None:
    """GIVEN constant arrivals spaced 2 × E2E apart WHEN simulated THEN every TTFT is one prefill step.

    No request ever overlaps another, so each finds the engine idle: TTFT = prefill time of P tokens.
    """
    p = roofline.predict(M, HW, batch=1, prompt_len=512, output_len=64)
    s = simulate(M, HW, qps=1 / (2 * p.e2e_s), arrival="constant", prompt_len=512, output_len=64, num_requests=20)
    np.testing.assert_allclose(s.requests["ttft_s"], p.ttft_s, rtol=1e-12)
    assert s.summary["mean_batch"] == pytest.approx(1.0)


def test_closed_loop_obeys_littles_law() -> None:
    """GIVEN C = 32 clients in a closed loop WHEN N = 3000 requests are served THEN C = X · mean E2E within 1 %.

    Little's law L = λW over the run: Σ E2E = ∫ L(t) dt = C·T minus the drain after the last send,
    about C·E2E/2, so X·E[E2E] = C·(1 − O(C/2N)) ≈ C·(1 − 0.5 %).
    """
    s = simulate(M, HW, concurrency=32, prompt_len="uniform:200:1800", output_len="uniform:50:400", num_requests=3000)
    x = s.summary["request_throughput_rps"]
    assert x * s.summary["e2e_mean_s"] == pytest.approx(32, rel=0.01)


def test_md1_mean_wait_at_half_load() -> None:
    """GIVEN fixed 2048-token prefills (output 1, one prefill per step: budget 2048) at Poisson rate 0.5/S
    THEN the mean wait TTFT − S matches M/D/1: W_q = ρS / (2(1 − ρ)) = 0.5·S, within 5 %.

    The engine is a single server with deterministic service S (the prefill step time) and FCFS queue:
    a request arriving during a step waits for its end, an idle engine starts at once.
    """
    over = {"max_num_batched_tokens": 2048}
    svc = roofline.predict(M, HW, prompt_len=2048, output_len=1, engine_overrides=over).ttft_s
    s = simulate(M, HW, qps=0.5 / svc, prompt_len=2048, output_len=1, num_requests=100_000, engine_overrides=over)
    wait = s.summary["ttft_mean_s"] - svc
    assert wait == pytest.approx(0.5 * svc, rel=0.05)


def test_preemption_conserves_tokens_and_blocks() -> None:
    """GIVEN a KV pool far smaller than the load needs (forcing preemptions) WHEN every request finishes
    THEN each emitted exactly its O tokens (Σ decode-row steps + prefill completions = Σ O), every
    preemption recomputed its prompt + generated tokens (prefill tokens = Σ P + Σ recomputed), and the
    pool returns to zero used blocks."""
    # all memory usable, 1 GB reserve: the pool is what the weights (16.06 GB) leave of 18.1 GB, ~7,600 tokens
    over = {"capacity_bytes": 18.1e9, "gpu_memory_utilization": 1.0, "reserve_bytes": 1e9}
    s = simulate(M, HW, concurrency=64, prompt_len=600, output_len=400, num_requests=300, engine_overrides=over)
    c = s.config
    assert s.summary["preemptions"] > 0
    out = int(s.requests["output_tokens"].sum())
    assert c["generated_tokens"] == out
    assert c["decode_tokens"] + c["prefill_completions"] == out
    assert c["prefill_completions"] == len(s.requests) + s.summary["preemptions"]
    assert c["prefill_tokens"] > int(s.requests["prompt_tokens"].sum())
    assert c["kv_blocks_used_at_end"] == 0
    assert s.requests["finish_s"].notna().all()


def test_guaranteed_no_evict_never_preempts() -> None:
    """GIVEN the same small KV pool on TensorRT-LLM (reserve prompt + max output at admission) THEN no preemption."""
    over = {"capacity_bytes": 18.1e9, "free_gpu_memory_fraction": 1.0, "reserve_bytes": 1e9, "max_num_tokens": 2048}
    s = simulate(
        M, HW, engine="trtllm", concurrency=64, prompt_len=600, output_len=400, num_requests=200, engine_overrides=over
    )
    assert s.summary["preemptions"] == 0
    assert s.config["kv_blocks_used_at_end"] == 0
    assert s.requests["finish_s"].notna().all()


def test_full_shared_prefix_removes_the_prefill_work() -> None:
    """GIVEN P = 1024 prompts that are one shared system prompt (share 1.0), served one at a time WHEN
    prefix caching is on THEN every request after the first reuses floor((P − 1)/16) = 63 blocks (1008
    tokens; vLLM always recomputes the last token) and computes only 16 tokens, so its TTFT is the step
    time of a 16-token chunk after 1008 cached tokens; with caching off every request computes 1024."""
    kw = dict(qps=0.5, arrival="constant", prompt_len=1024, output_len=8, num_requests=10, prefix_share=1.0)
    on = simulate(M, HW, **kw)
    off = simulate(M, HW, engine_overrides={"prefix_caching": False}, **kw)
    assert list(on.requests["cached_tokens"]) == [0] + [1008] * 9
    assert on.config["prefill_tokens"] == 1024 + 9 * 16
    assert off.config["prefill_tokens"] == 10 * 1024
    m, hw, prof = resolve(M, HW, None)
    sm = StepModel(m, make_scenario(hw, engine="vllm"), hw, prof, 8192, 1024)
    chunk = sm.step_time(0, (0.0,), np.array([16.0]), np.array([1008.0]))
    np.testing.assert_allclose(on.requests["ttft_s"][1:], chunk, rtol=1e-12)


def test_deterministic_given_a_seed() -> None:
    """Same seed, same everything; another seed, another run."""
    kw = dict(qps=20.0, prompt_len="lognormal:800:0.6", output_len="lognormal:200:0.8", num_requests=400)
    a, b, c = simulate(M, HW, seed=3, **kw), simulate(M, HW, seed=3, **kw), simulate(M, HW, seed=4, **kw)
    assert a.summary == b.summary
    assert a.requests.equals(b.requests) and a.timeline.equals(b.timeline)
    assert a.summary != c.summary


def test_summary_has_exactly_the_documented_keys() -> None:
    s = simulate(M, HW, engine="sglang", qps=5.0, prompt_len=512, output_len=64, num_requests=50)
    assert tuple(s.summary) == SUMMARY_KEYS
    assert set(s.requests.columns) >= {"arrival_s", "first_token_s", "finish_s", "cached_tokens", "preemptions"}
    assert s.summary["tpot_p50_s"] <= s.summary["tpot_p99_s"]


def test_unservable_rate_ends_with_a_saturation_statement() -> None:
    """GIVEN 500 req/s of 2k-token prompts (far above what one H100 serves) THEN the run stops early and says
    the queue grows without bound, with the sustainable rate."""
    s = simulate(M, HW, qps=500.0, prompt_len=2048, output_len=256, num_requests=20_000)
    assert s.saturated is not None and "sustainable" in s.saturated
    assert s.requests["finish_s"].notna().sum() < 20_000


def test_impossible_requests_fail_loudly() -> None:
    with pytest.raises(ScenarioError, match="context"):
        simulate(M, HW, qps=1.0, prompt_len=200_000, output_len=10, num_requests=2)
    with pytest.raises(ScenarioError, match="exactly one"):
        simulate(M, HW, qps=1.0, concurrency=4)
    with pytest.raises(ScenarioError, match="chunked"):
        simulate(M, HW, engine="trtllm", qps=1.0, prompt_len=9000, output_len=10, num_requests=2)


def test_trace_prefix_hashes_hit_the_cache(tmp_path) -> None:
    """GIVEN a Mooncake-style trace whose requests share their first 512-token hash id THEN every request after
    the first finds those 512 tokens (32 blocks of 16) cached, and no more (their second ids differ)."""
    import json

    p = tmp_path / "mc.jsonl"
    rows = [{"timestamp": 2000 * i, "input_length": 1024, "output_length": 4, "hash_ids": [0, 1 + i]} for i in range(5)]
    p.write_text("\n".join(json.dumps(r) for r in rows))
    s = simulate(M, HW, trace=p)
    assert list(s.requests["cached_tokens"]) == [0, 512, 512, 512, 512]


def test_plot_writes_a_figure(tmp_path) -> None:
    s = simulate(M, HW, qps=5.0, prompt_len=256, output_len=32, num_requests=40)
    s.plot(str(tmp_path / "sim.png"))
    assert (tmp_path / "sim.png").stat().st_size > 10_000


def test_prefill_first_partial_prefill_without_kv_room_yields_to_decode() -> None:
    """GIVEN SGLang's prefill-first policy, a KV pool too small for 32 × (1024 + 2048) tokens and a 600-token
    chunk WHEN a recomputed (retracted) request's next chunk finds no free blocks THEN the engine runs a decode
    step instead (as SGLang's prefill adder does) and every request still finishes with its tokens (was: the
    partial prefill preempted itself and the run stopped with "cannot schedule any request")."""
    s = simulate(
        M,
        HW,
        engine="sglang",
        concurrency=32,
        prompt_len=1024,
        output_len=2048,
        num_requests=96,
        engine_overrides={"max_num_batched_tokens": 600, "memory_fraction": 0.3},
    )
    assert s.summary["preemptions"] > 0
    assert int(s.requests["output_tokens"].sum()) == s.config["generated_tokens"] == 96 * 2048
    assert s.requests["finish_s"].notna().all()
