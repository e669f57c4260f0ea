"""Speculative decoding in the static model: acceptance formula, grammar, and the physics of draft + verify."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from roofline.errors import RooflineError
from roofline.prediction import predict
from roofline.profile import default_profile
from roofline.specs.speculative import SpeculativeConfig, tokens_per_step


def test_chain_acceptance_formula() -> None:
    """τ = Σ_{i=0}^{k} α^i: α = 0.8, k = 4 → 1 + .8 + .64 + .512 + .4096 = 3.3616; α = 0 → 1; α = 1 → k + 1."""
    assert tokens_per_step(0.8, 4) == pytest.approx(3.3616, abs=1e-12)
    assert tokens_per_step(0.0, 4) == 1.0
    assert tokens_per_step(1.0, 4) == 5.0
    assert SpeculativeConfig("eagle", k=4, alpha=0.8).tokens_per_step == pytest.approx(3.3616)
    assert SpeculativeConfig("eagle", k=7, tau=3.6).tokens_per_step == 3.6


def test_grammar_round_trip() -> None:
    c = SpeculativeConfig.parse("eagle:k=5,alpha=0.7,verify=26")
    assert (c.method, c.k, c.alpha, c.tau, c.verify_tokens) == ("eagle", 5, 0.7, None, 26)
    d = SpeculativeConfig.parse("draft:model=llama-2-7b,k=3,tau=2.5")
    assert (d.method, d.draft_model, d.verify_tokens) == ("draft", "llama-2-7b", 4)
    assert SpeculativeConfig.parse("ngram:alpha=0.5").k == 4


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("lookahead:k=4,alpha=0.5", "method"),
        ("eagle:k=0,alpha=0.5", "k must"),
        ("eagle:k=4", "exactly one"),
        ("eagle:k=4,alpha=0.5,tau=2", "exactly one"),
        ("eagle:k=4,alpha=1.5", "alpha"),
        ("eagle:k=2,tau=3.5", "tau"),
        ("eagle:k=4,alpha=x", "numbers"),
        ("eagle:k4", "KEY=VALUE"),
        ("draft:k=4,alpha=0.5", "model=NAME"),
        ("eagle:k=4,alpha=0.5,verify=3", "verify"),
    ],
)
def test_bad_spec_names_the_field(text: str, field: str) -> None:
    with pytest.raises(RooflineError, match=field):
        SpeculativeConfig.parse(text)


def test_mtp_needs_mtp_layers() -> None:
    with pytest.raises(RooflineError, match="mtp_layers"):
        predict("llama-3.1-8b", "h100-sxm", speculative="mtp:k=2,alpha=0.8")


def test_batch1_ngram_gain_is_tau_times_target_over_verify() -> None:
    """n-gram drafting costs nothing on the GPU, so speedup = τ·T_target/T_verify.

    At batch 1 a memory-bound 8B target reads its 16 GB of bf16 weights once per step whether it
    runs 1 or 5 query tokens; the extra activations/KV/logits of 4 more positions are < 5 % of the
    bytes, so τ/1.05 < speedup < τ (τ = 3.3616 for α = 0.8, k = 4).
    """
    r = predict("llama-3.1-8b", "h100-sxm", 1, 1024, 256, speculative="ngram:k=4,alpha=0.8")
    sd = r.speculative
    assert sd is not None
    plain = predict("llama-3.1-8b", "h100-sxm", 1, 1024, 256)
    assert 3.3616 / 1.05 < sd.speedup < 3.3616
    assert r.tpot_s == pytest.approx(plain.tpot_s / sd.speedup, rel=1e-9)
    assert r.ttft_s == plain.ttft_s  # prefill is untouched
    assert r.e2e_s == pytest.approx(r.ttft_s + r.decode_s)
    assert r.throughput_tok_s == pytest.approx(256 / r.e2e_s)


def test_batch1_eagle_gain_matches_hand_weight_count() -> None:
    """EAGLE head on Llama-3.1-8B: each draft step reads one decoder layer (4096·(4096 + 2·1024 + 4096)
    + 3·4096·14336 = 218.1 M params), the lm_head (128256·4096 = 525.3 M) and eh_proj (2·4096² = 33.6 M):
    777 M of the target's 8.03 B, ratio 0.0968. Memory-bound, speedup ≈ τ/(1 + k·0.0968) =
    3.3616/1.387 = 2.42 (the verify pass's extra bytes and the draft's launches take a few % more)."""
    r = predict("llama-3.1-8b", "h100-sxm", 1, 1024, 256, speculative="eagle:k=4,alpha=0.8")
    sd = r.speculative
    assert sd is not None
    assert sd.speedup == pytest.approx(3.3616 / (1 + 4 * 0.0968), rel=0.05)
    assert float(np.mean(sd.draft_s)) / float(np.mean(sd.verify_s)) == pytest.approx(4 * 0.0968, rel=0.15)


def test_gain_shrinks_with_batch_and_turns_into_a_loss() -> None:
    """As B·(k+1) passes the ridge the verify pass turns compute-bound: it costs ~(k + 1)× a plain step
    while emitting τ < k + 1 tokens, so the speedup falls below 1 (here τ = 2.18 for α = 0.6, k = 4)."""
    gains = [
        predict("llama-3.1-8b", "h100-sxm", b, 256, 128, speculative="eagle:k=4,alpha=0.6").speculative.speedup  # type: ignore[union-attr]
        for b in (1, 64, 256, 1024)
    ]
    assert gains[0] > 1.5
    assert all(a >= b for a, b in itertools.pairwise(gains))
    assert gains[-1] < 1.0


def test_interior_optimal_k_for_mtp() -> None:
    """DeepSeek-V3 MTP (α = 0.8, MTP-like acceptance): τ saturates at 1/(1 − α) = 5 while both the MTP
    draft (k MoE layers + lm_head) and the verify pass (more tokens touch more experts) grow with k,
    so the best k is neither 1 nor the largest tried."""
    ks = list(range(1, 13))
    tpot = [
        predict(
            "deepseek-v3", "h200-sxm", 1, 1024, 256, tp=8, weight_dtype="fp8", speculative=f"mtp:k={k},alpha=0.8"
        ).tpot_s
        for k in ks
    ]
    best = ks[int(np.argmin(tpot))]
    assert 1 < best < ks[-1]


def test_cli_spec_matches_api_and_fails_kindly() -> None:
    """`roofline predict --spec` gives the API's numbers in JSON and a one-paragraph error, no traceback."""
    import json

    from typer.testing import CliRunner

    from roofline.cli.app import app

    runner = CliRunner()
    res = runner.invoke(app, ["predict", "llama-3.1-8b", "h100-sxm", "--spec", "eagle:k=3,alpha=0.7", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    api = predict("llama-3.1-8b", "h100-sxm", speculative="eagle:k=3,alpha=0.7")
    assert doc["tpot_s"] == api.tpot_s
    assert doc["spec_k"] == 3 and doc["spec_speedup"] == api.speculative.speedup  # type: ignore[union-attr]
    bad = runner.invoke(app, ["predict", "llama-3.1-8b", "h100-sxm", "--spec", "eagle:k=3"])
    assert bad.exit_code != 0 and "Traceback" not in bad.output and "alpha" in bad.output
    table = runner.invoke(app, ["predict", "llama-3.1-8b", "h100-sxm", "--spec", "ngram:k=2,tau=2"])
    assert table.exit_code == 0 and "speedup vs plain decode" in table.output


def test_overhead_adds_to_every_step() -> None:
    """overhead=S adds S seconds to each speculative step: TPOT grows by exactly S/τ."""
    a = predict("llama-3.1-8b", "h100-sxm", 1, 512, 128, speculative="ngram:k=4,tau=2.5")
    b = predict("llama-3.1-8b", "h100-sxm", 1, 512, 128, speculative="ngram:k=4,tau=2.5,overhead=0.001")
    assert b.tpot_s - a.tpot_s == pytest.approx(0.001 / 2.5, rel=1e-9)
    with pytest.raises(RooflineError, match="overhead"):
        SpeculativeConfig.parse("ngram:k=4,tau=2,overhead=-1")


def test_medusa_heads_cost_one_pass_of_k_heads() -> None:
    """Medusa on Llama-2-7B: k = 4 heads each read h² (resblock) + V·h (own lm_head) = 16.8 M + 131.1 M
    params; 4·147.8 M = 591 M of the target's 6.74 B → draft ≈ 8.8 % of a memory-bound target step
    (bytes only: the profile's fixed per-kernel cost is set to 0 for this ratio)."""
    prof = default_profile()
    bytes_only = prof.model_copy(update={"overheads": prof.overheads.model_copy(update={"per_kernel_graph_s": 0.0})})
    r = predict(
        "llama-2-7b", "h100-sxm", 1, 512, 128, speculative="medusa:k=4,tau=2.3,verify=64", calibration=bytes_only
    )
    sd = r.speculative
    assert sd is not None
    plain_step = predict("llama-2-7b", "h100-sxm", 1, 512, 128, calibration=bytes_only).tpot_s
    assert float(np.mean(sd.draft_s)) / plain_step == pytest.approx(4 * 147.8e6 / 6.74e9, rel=0.1)


def test_drafter_memory_is_counted() -> None:
    """EAGLE head on Llama-3.1-8B in bf16: one layer (218.1 M params) + eh_proj (2·4096² = 33.6 M) = 251.7 M
    params = 503.4 MB, plus that layer's KV at 1280 tokens (1280 · 4096 B = 5.2 MB); a 70B draft model
    (141 GB of bf16 weights) cannot fit beside an 8B target on one 80 GB H100: not fits, NaN latencies."""
    r = predict("llama-3.1-8b", "h100-sxm", 1, 1024, 256, speculative="eagle:k=2,alpha=0.8")
    assert r.speculative is not None and r.fits
    assert r.speculative.draft_bytes_per_gpu == pytest.approx(251.7e6 * 2 + 1280 * 4096, rel=0.01)
    big = predict("llama-3.1-8b", "h100-sxm", 1, 1024, 256, speculative="draft:model=llama-3.1-70b,k=2,alpha=0.8")
    assert not big.fits and big.missing_bytes > 50e9 and np.isnan(big.tpot_s)
    assert big.summary()["spec_draft_bytes_per_gpu"] > 140e9
