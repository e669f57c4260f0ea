"""Closed-loop validation: the torch model built from a ModelSpec is the model predicted, and on a
CPU a quick calibration plus the tiny model's measured prefill and decode agree with the prediction.

Tolerance of the CPU closed loop (measurements in validation/results/README.md). On this kind
of host (2 shared vCPUs) a point's time moves by ±15–50% between runs minutes apart and its
memory bandwidth wanders several-fold over half an hour, so calibration and measurement run
back to back in this one test: one thread, fp32, median of 5 rounds per point. Back to back,
the run-to-run spread of a point's measured time was 9–23% (median over points, five batches
of three runs). The median |error| per phase of 13 single runs was 6–39% (typically 15–25%):
30% was met by 9 of 13, 35% by 11, 40% by all 13. TOLERANCE = 40%, with a run that misses
redone once (only two misses in a row fail): reliable on this host, yet a factor-2 error in the
bytes or FLOPs of the dominant ops (weights counted twice, a missing FFN) moves a phase by
50–100% and fails. Finer physics is checked by the other tests and by the GPU run.
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
import torch

import roofline
from calibrate.closedloop.extras import eager_extra_ops
from calibrate.closedloop.grid import GRIDS, combine_pairs, format_table, summarize
from calibrate.closedloop.model import Block, KVCache, MoE, Rope, build_model, count_parameters, scale_spec
from calibrate.closedloop.validate import calibrate_and_validate, ideal_profile, parse_grid
from roofline.errors import ScenarioError, SpecError

TOLERANCE_PCT = 40.0  # median |error| per phase; justified in the module docstring
IDEAL_BELOW_FRACTION = 0.9  # share of points where the efficiency-1 roofline must not exceed the measurement


# ---- the built model is the predicted model -----------------------------------------------------
@pytest.mark.parametrize(
    ("name", "scale"),
    [
        ("llama-3.1-8b", "tiny"),
        ("llama-3.1-8b", "small"),
        ("qwen2.5-7b", "tiny"),  # QKV biases
        ("mixtral-8x7b", "tiny"),  # MoE, top-2 of 8
        ("qwen3-30b-a3b", "tiny"),  # MoE + QK-norm
    ],
)
def test_param_count_of_built_model_equals_spec(name: str, scale: str) -> None:
    # GIVEN a bundled spec scaled down WHEN the torch model is built THEN it has exactly param_count() elements
    spec = scale_spec(roofline.model(name), scale)  # type: ignore[arg-type]
    model = build_model(spec)
    assert count_parameters(model) == spec.param_count()


def test_tied_embeddings_counted_once() -> None:
    spec = scale_spec(roofline.model("llama-3.1-8b"), "tiny").model_copy(update={"tie_word_embeddings": True})
    model = build_model(spec)
    assert model.lm_head.weight is model.embed.weight
    assert count_parameters(model) == spec.param_count()


def test_scale_spec_keeps_shape_ratios() -> None:
    full = roofline.model("llama-3.1-8b")
    tiny = scale_spec(full, "tiny")
    r = tiny.hidden_size / full.hidden_size  # 256 / 4096
    assert (tiny.num_layers, tiny.hidden_size, tiny.vocab_size) == (2, 256, 4096)
    assert tiny.attention.head_dim == full.attention.head_dim
    assert tiny.attention.num_heads == round(full.attention.num_heads * r)
    assert tiny.attention.num_heads % tiny.attention.num_kv_heads == 0
    assert tiny.ffn.intermediate_size == round(full.ffn.intermediate_size * r)
    assert tiny.name == "llama-3.1-8b-tiny"
    assert scale_spec(full, "full") is full


def test_unsupported_architecture_is_a_clear_error() -> None:
    with pytest.raises(SpecError, match="sliding-window"):
        build_model(scale_spec(roofline.model("phi-3-mini-4k"), "tiny"))


@pytest.mark.parametrize("name", ["llama-3.1-8b", "mixtral-8x7b"])
def test_decode_with_cache_equals_full_recompute(name: str) -> None:
    # GIVEN a prompt of 17 tokens WHEN 16 are prefilled and the 17th decoded against the cache
    # THEN the logits equal a prefill of all 17 (the cache write and cache attention are right)
    spec = scale_spec(roofline.model(name), "tiny")
    model = build_model(spec, dtype=torch.float64)
    dev = torch.device("cpu")
    tokens = torch.randint(0, spec.vocab_size, (2, 17), generator=torch.Generator().manual_seed(0))
    rope = Rope(spec.attention.head_dim, 32, dev)
    with torch.inference_mode():
        full = model(tokens, KVCache(spec, 2, 32, dev, torch.float64), rope, 0)
        cache = KVCache(spec, 2, 32, dev, torch.float64)
        model(tokens[:, :16], cache, rope, 0)
        step = model(tokens[:, 16:], cache, rope, 16)
    assert full.shape == (2, spec.vocab_size)
    torch.testing.assert_close(step, full, rtol=1e-9, atol=1e-9)


def test_moe_routes_each_token_to_top_k_experts() -> None:
    # GIVEN the tiny Mixtral MoE block WHEN it runs on 12 tokens THEN its output equals the reference
    # Σ_{e in top-k} softmax(top-k logits)_e · expert_e(x), token by token
    spec = scale_spec(roofline.model("mixtral-8x7b"), "tiny")
    model = build_model(spec, dtype=torch.float64)
    moe = model.layers[0].ffn
    assert isinstance(moe, MoE)
    assert spec.moe is not None and moe.top_k == spec.moe.top_k == 2
    x = torch.randn(3, 4, spec.hidden_size, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        out = moe(x)
        ref = torch.zeros_like(x).reshape(-1, spec.hidden_size)
        for t, xt in enumerate(x.reshape(-1, spec.hidden_size)):
            w, idx = moe.router(xt).topk(spec.moe.top_k)
            for wi, e in zip(w.softmax(-1), idx.tolist(), strict=True):
                gate, up = (moe.w_up[e] @ xt).chunk(2)
                ref[t] += wi * (moe.w_down[e] @ (torch.nn.functional.silu(gate) * up))
    torch.testing.assert_close(out, ref.reshape(x.shape))


def test_rotation_copies_follow_the_calibration_pool_rule() -> None:
    # GIVEN the tiny model (15 MB of weights) WHEN a point's weights + cache are far below 2 × LLC
    # THEN calls rotate through enough copies to exceed it; a point already beyond it needs one copy
    from calibrate.closedloop.runner import ROTATE_MAX_COPIES, Runner

    runner = Runner(scale_spec(roofline.model("llama-3.1-8b"), "tiny"), "cpu", "fp32")
    runner.llc_bytes, runner.max_bytes = 64 * 2**20, 1e12
    n = runner.copies_for(0)
    assert n * runner.weight_bytes >= 2 * runner.llc_bytes and n <= ROTATE_MAX_COPIES
    assert runner.copies_for(2 * runner.llc_bytes) == 1


def test_rotated_copies_run_their_own_weights() -> None:
    # GIVEN a model whose forward pass has gathered its tensors WHEN it is deep-copied for rotation
    # THEN the copy's gathered tensors are the copy's parameters, not the original's
    spec = scale_spec(roofline.model("llama-3.1-8b"), "tiny")
    model = build_model(spec)
    dev = torch.device("cpu")
    with torch.inference_mode():
        model(torch.zeros(1, 4, dtype=torch.long), KVCache(spec, 1, 4, dev, torch.float32), Rope(128, 4, dev), 0)
    twin = copy.deepcopy(model)
    assert twin._plan is not None and twin._plan[0] is twin.embed.weight
    layer = twin.layers[0]
    assert isinstance(layer, Block) and twin._plan[1][0].attn.qkv_w is layer.attn.qkv.weight
    assert twin.embed.weight.data_ptr() != model.embed.weight.data_ptr()


def test_eager_extras_count_the_unfused_passes() -> None:
    # GIVEN the tiny model's prefill of 2 × 64 tokens in fp32 (M = 128; hq = 2, hkv = 1, d = 128, i = 896)
    # THEN the extras are: RoPE reads and writes Q and K once; the unfused SwiGLU makes 2 passes
    # over M·i more than the fused kernel; the V copy reads K and V once; one instance per layer
    spec = scale_spec(roofline.model("llama-3.1-8b"), "tiny")
    ops = {op.name: op for op in eager_extra_ops(spec, "prefill", 2, 64, "fp32", graphs=False)}
    m = 128
    assert float(ops["eager.rope"].act_bytes) == m * (2 + 1) * 128 * 2 * 4
    assert float(ops["eager.swiglu_mul"].act_bytes) == m * 896 * 2 * 4
    assert float(ops["eager.v_copy_read"].act_bytes) == m * 2 * 1 * 128 * 4
    assert {op.count for op in ops.values()} == {spec.num_layers} and all(op.launch == "eager" for op in ops.values())


# ---- grids and summaries ------------------------------------------------------------------------
def test_parse_grid_presets_and_explicit() -> None:
    assert parse_grid(None, "cpu") == GRIDS["cpu"]
    assert parse_grid(None, "cuda:0") == GRIDS["gpu"]
    g = parse_grid("prefill=1x128,4x512;decode=8x2048", "cpu")
    assert g.prefill == ((1, 128), (4, 512)) and g.decode == ((8, 2048),)
    with pytest.raises(ScenarioError, match="--grid"):
        parse_grid("prefill=1by128", "cpu")


def test_combine_pairs_takes_medians_per_point() -> None:
    # GIVEN three calibrate-then-measure pairs of one point WHEN combined THEN times and errors are their medians
    rows = [(1.0, 0.8), (1.2, 1.1), (0.9, 0.9)]
    base = {
        "phase": "decode",
        "batch": 1,
        "context": 64,
        "eager_extra_s": 0.0,
        "error_model_only_pct": 0.0,
        "ideal_s": 0.5,
        "ideal_le_measured": True,
        "spread_pct": 1.0,
        "note": "x",
    }
    frames = [
        pd.DataFrame([{**base, "measured_s": m, "predicted_s": p, "error_pct": 100 * (p / m - 1)}]) for m, p in rows
    ]
    out = combine_pairs(frames)
    assert len(out) == 1 and out["pairs"].iloc[0] == 3
    assert out["measured_s"].iloc[0] == 1.0 and out["predicted_s"].iloc[0] == 0.9
    assert out["error_pct"].iloc[0] == pytest.approx(-100 * (1 - 1.1 / 1.2))  # median of -20, -8.3, 0
    assert out["error_min_pct"].iloc[0] == pytest.approx(-20.0) and out["error_max_pct"].iloc[0] == 0.0


# ---- closed loop on CPU ---------------------------------------------------------------------------
def _closed_loop_failures(df: pd.DataFrame) -> list[str]:
    """Why one closed-loop run misses its targets (empty when it meets them)."""
    problems = [
        f"{phase}: median |error| {s['median_abs_error_pct']:.1f}% > {TOLERANCE_PCT}%"
        for phase, s in summarize(df).items()
        if s["median_abs_error_pct"] > TOLERANCE_PCT
    ]
    if df["ideal_le_measured"].mean() < IDEAL_BELOW_FRACTION:
        problems.append(f"efficiency-1 roofline above the measurement at {(~df['ideal_le_measured']).sum()} points")
    return problems


def test_cpu_closed_loop_tiny_llama_within_tolerance() -> None:
    # GIVEN a quick CPU calibration measured for the tiny model's own shapes, in the same job
    # WHEN its prefill and decode steps are timed over the CPU grid
    # THEN the median |error| of each phase is within TOLERANCE_PCT, and the efficiency-1 roofline
    #      of the same profile (a lower bound) is not slower than the measurement for ≥ 90% of points.
    # A shared host can change speed between the calibration and the measurement (see the module
    # docstring), so a run that misses is redone once: only two misses in a row fail the test.
    # Its wall time is measured by benchmarks/validation.py closed-loop.
    spec = scale_spec(roofline.model("llama-3.1-8b"), "tiny")
    reports = []
    for _attempt in range(2):
        prof, df = calibrate_and_validate(spec, "cpu", budget_s=30.0, grid=GRIDS["cpu"], threads=1, rounds=5)
        assert set(df["phase"]) == {"prefill", "decode"}
        assert np.all(df["measured_s"] > 0) and np.all(np.isfinite(df["predicted_s"]))
        assert prof.device == "host-cpu" and prof.hardware is not None
        problems = _closed_loop_failures(df)
        if not problems:
            break
        reports.append("; ".join(problems) + "\n" + format_table(df))
    else:
        pytest.fail("closed loop missed its targets twice:\n\n" + "\n\n".join(reports))


def test_ideal_profile_is_the_pure_roofline_of_the_device() -> None:
    # GIVEN the shipped profile WHEN made ideal THEN every ceiling is the device's peak, with no curve or overhead:
    # its predictions equal the datasheet-only profile's (roofline.datasheet_profile) on a bundled GPU
    ideal = ideal_profile(roofline.default_profile())
    assert ideal.device is None and ideal.overheads.per_kernel_s == ideal.overheads.per_step_s == 0.0
    assert float(ideal.gemm_m_efficiency(1.0)) == 1.0 and ideal.memory_size_efficiency is None
    assert ideal.attention.compute_efficiency == ideal.attention.memory_efficiency == 1.0
    kw = {"calibration": ideal, "weight_dtype": "bf16"}
    a = roofline.predict("llama-3.1-8b", "h100-sxm", 4, 1024, 8, **kw)
    b = roofline.predict("llama-3.1-8b", "h100-sxm", 4, 1024, 8, calibration=roofline.datasheet_profile())
    assert a.ttft_s == pytest.approx(b.ttft_s, rel=1e-9) and a.tpot_s == pytest.approx(b.tpot_s, rel=1e-9)
