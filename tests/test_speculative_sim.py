"""Speculative decoding in the serving simulator: agreement with the static model, sampled acceptance, lumpy ITL."""

from __future__ import annotations

import numpy as np
import pytest

import roofline
from roofline.serving.sim.speculative import chain_alpha
from roofline.serving.simulate import simulate
from roofline.specs.speculative import SpeculativeConfig, tokens_per_step

M, HW = "llama-3.1-8b", "h100-sxm"


@pytest.mark.parametrize("engine", ["ideal", "vllm"])
def test_single_request_full_acceptance_reproduces_static_predict(engine: str) -> None:
    """GIVEN one request, P = 1000, O = 201, n-gram drafts with α = 1, k = 4 WHEN simulated THEN TPOT and the
    decode time equal predict(..., speculative=...), TTFT the plain simulator's.

    Derivation: α = 1 makes every step emit k + 1 = 5 tokens, so the O − 1 = 200 tokens after the first
    take exactly 40 steps at caches P + 5j, j = 0 … 39 — the steps the static model prices (it evaluates
    (O − 1)/τ = 40 steps at P + τ·j). Both price a step as the target on V = 5 query tokens per row with
    logits at all 5 positions and n-gram drafting free; the presets carry no CPU overhead.
    """
    spec = "ngram:k=4,alpha=1"
    s = simulate(M, HW, speculative=spec, engine=engine, qps=1.0, prompt_len=1000, output_len=201, num_requests=1)
    r = roofline.predict(M, HW, 1, 1000, 201, engine=engine, speculative=spec)
    plain = roofline.simulate(M, HW, engine=engine, qps=1.0, prompt_len=1000, output_len=201, num_requests=1)
    # TTFT: the same prefill step as the plain simulator (whose own equality with predict is its test's concern)
    assert s.summary["ttft_mean_s"] == pytest.approx(plain.summary["ttft_mean_s"], rel=1e-12)
    assert s.summary["tpot_mean_s"] == pytest.approx(r.tpot_s, rel=1e-9)
    assert s.summary["e2e_mean_s"] - s.summary["ttft_mean_s"] == pytest.approx(r.decode_s, rel=1e-9)


def test_sampled_acceptance_is_lumpy_and_conserves_tokens() -> None:
    """GIVEN α = 0.6, k = 4 (τ = 2.1744) WHEN 300 equal requests are served one at a time THEN

    * every request emits exactly its O tokens (generated = Σ O);
    * a share (τ − 1)/τ = 0.540 of the inter-token gaps is zero (the further accepted tokens of a step
      arrive with its first), so the ITL median is 0 while the mean ITL equals the mean TPOT;
    * per-request TPOT varies (acceptance is sampled per step), with mean ≈ step / τ (within 3 %:
      300 requests × ~58 steps, the sampled step count's relative spread is ~1/√(300·58)·1.1 < 0.5 %).
    """
    spec = SpeculativeConfig("ngram", k=4, alpha=0.6)
    tau = tokens_per_step(0.6, 4)
    s = simulate(
        M, HW, speculative=spec, engine="ideal", concurrency=1, prompt_len=512, output_len=128, num_requests=300, seed=3
    )
    assert s.config["generated_tokens"] == 300 * 128
    sm = s.summary
    assert sm["itl_p50_s"] <= 1e-6  # the gap histogram's lowest bin: a zero gap
    assert sm["itl_p90_s"] > 1e-3  # the step-time gaps
    assert sm["itl_mean_s"] == pytest.approx(sm["tpot_mean_s"], rel=0.02)
    tpot = s.requests["tpot_s"].to_numpy()
    assert np.std(tpot) > 0.02 * np.mean(tpot)
    r = roofline.predict(M, HW, 1, 512, 128, engine="ideal", speculative=spec)
    assert sm["tpot_mean_s"] == pytest.approx(r.tpot_s, rel=0.03)
    assert s.config["spec_tokens_per_step"] == pytest.approx(tau)


def test_tau_is_turned_into_the_chain_alpha_with_the_same_mean() -> None:
    """τ = 3 at k = 4 ⇒ α with (1 − α⁵)/(1 − α) = 3 (≈ 0.7067); the bisection hits it to 1e-12."""
    a = chain_alpha(SpeculativeConfig("eagle", k=4, tau=3.0))
    assert tokens_per_step(a, 4) == pytest.approx(3.0, abs=1e-12)


def test_speculation_loses_at_high_load() -> None:
    """GIVEN a closed loop of 512 clients (verify of 5 tokens × hundreds of rows is compute-bound) WHEN
    α = 0.5, k = 4 (τ = 1.94) THEN throughput falls below plain decoding's: each verify step costs ≈ the
    compute of 5 tokens per row but emits 1.94. At 1 client the same setting speeds decoding up."""
    kw = dict(engine="vllm", prompt_len=256, output_len=128, num_requests=1500)
    plain = roofline.simulate(M, HW, concurrency=512, **kw)  # type: ignore[arg-type]
    spec = simulate(M, HW, speculative="ngram:k=4,alpha=0.5", concurrency=512, **kw)  # type: ignore[arg-type]
    assert spec.summary["output_throughput_tok_s"] < plain.summary["output_throughput_tok_s"]
    one_plain = roofline.simulate(M, HW, concurrency=1, **{**kw, "num_requests": 5})  # type: ignore[arg-type]
    one_spec = simulate(M, HW, speculative="ngram:k=4,alpha=0.5", concurrency=1, **{**kw, "num_requests": 5})  # type: ignore[arg-type]
    assert one_spec.summary["tpot_mean_s"] < one_plain.summary["tpot_mean_s"]


@pytest.mark.parametrize(("model", "tp", "wd"), [("gpt-oss-120b", 2, "int4"), ("gemma-2-9b", 1, "bf16")])
def test_sliding_window_verify_steps_reproduce_static_predict(model: str, tp: int, wd: str) -> None:
    """GIVEN one request, P = 100, O = 201, α = 1, k = 4 on models with sliding-window layers (W = 128 on
    gpt-oss, 4096 on Gemma-2) WHEN simulated THEN TPOT equals the static model's.

    The 40 verify steps have caches 100, 105, …, 295, crossing W = 128 on gpt-oss: below it a row's pairs
    are V·p + V(V + 1)/2 and span p + V, above it V·W and W + V − 1, and the steps with 123 < p < 128 straddle
    it (Σ_{i=p+1}^{p+5} min(i, 128)); the simulator prices each step from these per-row sums, the static
    model from the op builder's causal pairs at each cache, so both agree to rounding.
    """
    spec = "ngram:k=4,alpha=1"
    s = simulate(
        model,
        HW,
        speculative=spec,
        engine="vllm",
        tp=tp,
        weight_dtype=wd,
        qps=1.0,
        prompt_len=100,
        output_len=201,
        num_requests=1,
    )
    r = roofline.predict(model, HW, 1, 100, 201, tp=tp, engine="vllm", weight_dtype=wd, speculative=spec)
    assert s.summary["tpot_mean_s"] == pytest.approx(r.tpot_s, rel=1e-9)


def test_cli_simulate_spec_matches_api() -> None:
    import json

    from typer.testing import CliRunner

    from roofline.cli.app import app

    args = ["simulate", M, HW, "--qps", "5", "-N", "50", "-p", "256", "-n", "64", "--spec", "eagle:k=3,alpha=0.7"]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    api = simulate(M, HW, speculative="eagle:k=3,alpha=0.7", qps=5.0, num_requests=50, prompt_len=256, output_len=64)
    assert json.loads(res.output)["summary"]["tpot_mean_s"] == api.summary["tpot_mean_s"]
    bad = CliRunner().invoke(app, [*args, "--ep", "2"])
    assert bad.exit_code != 0 and "Traceback" not in bad.output and "--ep" in bad.output
