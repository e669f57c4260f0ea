"""Kernel-launch mode: decode steps replayed as CUDA graphs vs launched eagerly.

GIVEN a scenario with ``cuda_graphs`` (the default) or without, WHEN it is predicted, THEN every
decode op is a graph op paying ``overheads.per_kernel_graph_s`` (eager ops pay ``per_kernel_s``),
decode is never slower with graphs, prefill is unaffected, and the shipped graph cost is the
documented derivation from the decode steps we measured on an H200 (validation/closedloop), with
the public Llama-3.1-8B / H100 decode-step times as out-of-sample checks.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import roofline
from roofline.evaluate import launch_overhead_s, op_time, op_time_summed_over_context
from roofline.ops import decode_ops, prefill_ops
from roofline.prediction import make_scenario
from roofline.profile import CalibrationProfile, default_profile
from roofline.published.graph_overhead import (
    DECODE_STEP_POINTS,
    decode_step,
    decode_step_time,
    fit_graph_overhead,
    measured_decode_steps,
)


def _with_costs(eager_s: float, graph_s: float) -> CalibrationProfile:
    """The default profile with these per-kernel costs, eager launches additive (the overlapped form has its own
    tests, tests/test_eager_overlap.py)."""
    prof = default_profile()
    ov = prof.overheads.model_copy(
        update={"per_kernel_s": eager_s, "per_kernel_graph_s": graph_s, "eager_launch": "additive"}
    )
    return prof.model_copy(update={"overheads": ov})


def test_decode_ops_are_graph_ops_only_with_cuda_graphs(h100: roofline.HardwareSpec) -> None:
    m = roofline.model("llama-3.1-70b")
    for graphs in (True, False):
        sc = make_scenario(h100, 8, 512, 64, tp=4, cuda_graphs=graphs)
        dec = decode_ops(m, sc, h100, 513.0)
        assert {op.launch for op in dec} == {"graph" if graphs else "eager"}
        assert {op.launch for op in prefill_ops(m, sc, h100)} == {"eager"}  # prefill always launches eagerly
        assert {op.at_context(np.asarray(900.0)).launch for op in dec} == {"graph" if graphs else "eager"}
    assert make_scenario(h100).cuda_graphs is True


def test_op_time_uses_the_overhead_of_the_launch_mode(h100: roofline.HardwareSpec) -> None:
    prof = _with_costs(10e-6, 1e-6)
    m = roofline.model("llama-3.1-8b")
    sc = make_scenario(h100, 4, 1000, 50, cuda_graphs=False)
    for op in decode_ops(m, sc, h100, 1001.0):
        graph = replace(op, launch="graph")
        assert launch_overhead_s(op, prof) == pytest.approx(op.kernels * 10e-6)
        assert launch_overhead_s(graph, prof) == pytest.approx(op.kernels * 1e-6)
        assert float(op_time(op, h100, prof).overhead_s) == pytest.approx(op.kernels * 10e-6)
        assert float(op_time(graph, h100, prof).overhead_s) == pytest.approx(op.kernels * 1e-6)
        d = float(op_time(op, h100, prof).time_s) - float(op_time(graph, h100, prof).time_s)
        assert d == pytest.approx(op.kernels * 9e-6, rel=1e-9)
        # the closed-form sum over contexts charges the same per-step launch cost
        lo, hi = np.asarray(1001.0), np.asarray(1100.0)
        steps = sum(float(op_time(graph.at_context(np.asarray(c)), h100, prof).time_s) for c in range(1001, 1101))
        assert float(op_time_summed_over_context(graph, h100, prof, lo, hi)) == pytest.approx(steps, rel=1e-9)


@pytest.mark.parametrize(
    ("name", "hw", "tp", "wd"),
    [
        ("llama-3.1-8b", "h100-sxm", 1, "bf16"),
        ("mixtral-8x7b", "h200-sxm", 2, "fp8"),
        ("gemma-2-9b", "a100-80gb-sxm", 1, "bf16"),
    ],
)
@pytest.mark.parametrize("graph_s", [0.0, 2e-6])
def test_graphs_never_slow_decode_and_leave_prefill_alone(name: str, hw: str, tp: int, wd: str, graph_s: float) -> None:
    prof = _with_costs(15e-6, graph_s)
    kw = {"batch": 8, "prompt_len": 1024, "output_len": 64, "tp": tp, "weight_dtype": wd, "calibration": prof}
    graphs = roofline.predict(name, hw, cuda_graphs=True, **kw)
    eager = roofline.predict(name, hw, cuda_graphs=False, **kw)
    assert graphs.ttft_s == eager.ttft_s
    assert graphs.tpot_s < eager.tpot_s and graphs.decode_s < eager.decode_s
    assert graphs.throughput_tok_s > eager.throughput_tok_s
    # the whole difference is the launch cost of the decode kernels
    kernels = sum(op.count * op.kernels for op in decode_ops(graphs.model, graphs.scenario, graphs.hardware, 1025.0))
    assert eager.tpot_s - graphs.tpot_s == pytest.approx(kernels * (15e-6 - graph_s), rel=1e-9)


def test_llama_3_1_8b_h100_batch1_decode_against_the_public_step_times() -> None:
    """cloudai.pt: one Llama-3.1-8B decode step on H100 SXM5 takes 5.1 ms as a CUDA graph, 8.4 ms eagerly.

    Both are out of sample (recorded, not fitted). The eager point checks ``per_kernel_s`` (from
    TensorRT-LLM 0.5/0.6 rows); the graph point sits below what our own H200 steps imply (it would
    need 94 % of the H100's datasheet bandwidth with no per-kernel cost), so only its order is checked.
    """
    graphs = roofline.predict("llama-3.1-8b", "h100-sxm", 1, 1024, 128)
    eager = roofline.predict("llama-3.1-8b", "h100-sxm", 1, 1024, 128, cuda_graphs=False)
    assert eager.tpot_s == pytest.approx(8.4e-3, rel=0.2)
    assert 5.1e-3 < graphs.tpot_s < eager.tpot_s


def test_decode_steps_measured_on_h200_within_ten_percent() -> None:
    """Every CUDA-graph decode step we measured (3 models, batch 1-256, context 512-32k) within 10 %."""
    prof = default_profile()
    steps = measured_decode_steps()
    assert len(steps) >= 20 and {s.model for s in steps} >= {"llama-3.1-8b", "qwen3-32b", "llama-3.1-70b-tp8-shard"}
    for s in steps:
        t, _, floor = decode_step_time(prof, s.model, s.hardware, s.weight_dtype, s.batch, s.context, True)
        assert floor < s.step_s
        assert t + s.extra_s == pytest.approx(s.step_s, rel=0.10), s


def test_shipped_graph_overhead_is_the_documented_derivation() -> None:
    prof = default_profile()
    again = fit_graph_overhead(prof)
    assert again.overheads.per_kernel_graph_s == prof.overheads.per_kernel_graph_s
    rec = prof.residuals["decode_step_points"]
    assert rec == again.residuals["decode_step_points"]
    zero = prof.model_copy(update={"overheads": prof.overheads.model_copy(update={"per_kernel_graph_s": 0.0})})
    per_kernel = []
    for s in measured_decode_steps():
        t0, kernels, _ = decode_step_time(zero, s.model, s.hardware, s.weight_dtype, s.batch, s.context, True)
        per_kernel.append((s.step_s - s.extra_s - t0) / kernels)
    assert prof.overheads.per_kernel_graph_s == pytest.approx(max(0.0, float(np.median(per_kernel))), abs=1e-9)
    assert 1e-6 < prof.overheads.per_kernel_graph_s < 20e-6  # a few microseconds per kernel, not a fudge
    assert all("not fitted" in p["role"] for p in rec["points"])
    graph = next(p for p in DECODE_STEP_POINTS if p.cuda_graphs)
    t, kernels, _ = decode_step(prof, graph, True)
    t0, _, _ = decode_step(zero, graph, True)
    assert t - t0 == pytest.approx(kernels * prof.overheads.per_kernel_graph_s, rel=1e-9)


def test_fp8_activations_keep_16bit_attention(h100: roofline.HardwareSpec) -> None:
    """FP8 attention is opt-in in every engine: W8A8 GEMMs run at the FP8 peak, attention at bf16's."""
    m = roofline.model("llama-3.1-8b")
    fp8 = make_scenario(h100, 8, 1024, 16, weight_dtype="fp8", kv_dtype="fp8")
    assert fp8.gemm_compute_dtype(h100) == "fp8" and fp8.attention_compute_dtype(h100) == "bf16"
    assert make_scenario(h100, weight_dtype="fp16").attention_compute_dtype(h100) == "fp16"
    attn = [op for op in prefill_ops(m, fp8, h100) if op.kind == "attention"]
    assert attn and {op.dtype for op in attn} == {"bf16"}
