"""Eager launches run ahead of the GPU through a step (``overheads.eager_launch`` = "run_ahead", the default
profile's).

GIVEN a step whose kernels are launched eagerly, WHEN the host's launch time H = Σ kernels × per_kernel_s is
longer than the step's GPU work G (each op's roofline terms + kernels × per_kernel_graph_s), THEN the step takes
per_step + H, else per_step + G: the host enqueues ahead of the GPU (no synchronisation inside a forward pass), so
short kernels no longer expose their launches one by one. Hand-derived goldens in both regimes; the closed forms
(decode sums over contexts in predict, floored decode stretches in the simulator) equal the step-by-step sums; the
simulator's prefill step equals the evaluator's; run-ahead is never slower than the per-op overlap nor the additive
launch; and the per-op breakdown still sums to TTFT, the exposed launch time a row of its own.
"""

from __future__ import annotations

import numpy as np
import pytest

import roofline
from roofline.costs import scenario_costs, step_cost
from roofline.evaluate import host_launch_s, op_time, step_host_launch_s
from roofline.ops import decode_ops, prefill_ops
from roofline.ops.records import elementwise, gemm
from roofline.prediction import make_scenario
from roofline.profile import CalibrationProfile, default_profile
from roofline.serving.sim.steptime import StepModel
from roofline.serving.sim.stretch import FlooredStretch

HOST_S, GAP_S, STEP_S = 20e-6, 5e-6, 1e-4


def _prof(mode: str, host_s: float = HOST_S, gap_s: float = GAP_S, step_s: float = STEP_S) -> CalibrationProfile:
    p = default_profile()
    ov = p.overheads.model_copy(
        update={"per_kernel_s": host_s, "per_kernel_graph_s": gap_s, "eager_launch": mode, "per_step_s": step_s}
    )
    return p.model_copy(update={"overheads": ov})


def test_default_profile_runs_eager_launches_ahead() -> None:
    ov = default_profile().overheads
    assert ov.eager_launch == "run_ahead"
    assert ov.per_kernel_s > ov.per_kernel_graph_s > 0  # the host's launch costs more than the GPU's gap


def test_per_op_overlap_profile_is_refused_with_a_fix() -> None:
    with pytest.raises(ValueError, match=r"run_ahead.*re-fit"):
        default_profile().overheads.model_validate({"eager_launch": "overlapped"})


def test_hand_derived_step_in_both_regimes(h100: roofline.HardwareSpec) -> None:
    """100 tiny norms: G = 100 × (bytes / HBM + 5 µs) < H = 100 × 20 µs, so the step is per_step + H; with a
    large GEMM added, G > H and the step is per_step + G (the host's launches hidden). Additive: Σ (G_i + H_i)."""
    run, add = _prof("run_ahead"), _prof("additive")
    tiny = elementwise("norm", "norm", "test", 100, "bf16", 4096.0, 2.0, 2.0, 0.0)
    t = op_time(tiny, h100, run)
    g_tiny = 100 * float(t.time_s)
    roof = float(np.maximum(t.compute_s, t.memory_s))
    assert float(t.time_s) == pytest.approx(roof + GAP_S, rel=1e-12)  # the op's GPU time carries the gap only
    assert float(host_launch_s(tiny, run)) == pytest.approx(HOST_S)
    assert g_tiny < 100 * HOST_S
    c = step_cost([tiny], h100, run)
    assert float(c.time_s) == pytest.approx(STEP_S + 100 * HOST_S, rel=1e-12)
    assert float(c.launch_s) == pytest.approx(100 * HOST_S - g_tiny, rel=1e-12)
    big = gemm("qkv", "gemm", "test", 1, "bf16", 32768.0, 6144.0, 4096.0, 2.0, 2.0)
    g_big = float(op_time(big, h100, run).time_s)
    assert g_big + g_tiny > 101 * HOST_S
    both = step_cost([tiny, big], h100, run)
    assert float(both.time_s) == pytest.approx(STEP_S + g_tiny + g_big, rel=1e-12)
    assert float(both.launch_s) == 0.0
    assert float(step_host_launch_s([tiny, big], run)) == pytest.approx(101 * HOST_S)
    additive = step_cost([tiny, big], h100, add)
    assert float(additive.time_s) == pytest.approx(STEP_S + 100 * (roof + HOST_S) + (g_big - GAP_S + HOST_S))
    assert host_launch_s(big.__class__(**{**big.__dict__, "launch": "graph"}), run) == 0.0  # a replayed graph


def _crossing_profile(m: roofline.ModelSpec, h100: roofline.HardwareSpec) -> tuple[CalibrationProfile, object]:
    """A run-ahead profile whose host time per step falls between the GPU time of the first and last decode step
    of a 16-sequence batch decoding 4,000 tokens without graphs, so the sum crosses from host- to GPU-bound."""
    sc = make_scenario(h100, 16, 16, 4000, cuda_graphs=False)
    base = _prof("run_ahead", host_s=1e-6)
    first = step_cost(decode_ops(m, sc, h100, 17.0), h100, base, launch=False).time_s
    last = step_cost(decode_ops(m, sc, h100, 4015.0), h100, base, launch=False).time_s
    kernels = float(step_host_launch_s(decode_ops(m, sc, h100, 17.0), base)) / 1e-6
    host = (float(first) + float(last)) / 2 / kernels
    return _prof("run_ahead", host_s=host), sc


def test_eager_decode_summed_over_contexts_is_the_step_by_step_sum(h100: roofline.HardwareSpec) -> None:
    m = roofline.model("llama-3.1-8b")
    prof, sc = _crossing_profile(m, h100)
    steps = [float(step_cost(decode_ops(m, sc, h100, float(c)), h100, prof).time_s) for c in range(17, 4016)]
    floor = STEP_S + float(step_host_launch_s(decode_ops(m, sc, h100, 17.0), prof))
    assert min(steps) == pytest.approx(floor) and max(steps) > floor * 1.1  # both regimes inside the run
    dec = scenario_costs(m, sc, h100, prof).decode
    assert float(dec.time_s) == pytest.approx(sum(steps), rel=1e-9)
    raw = sum(
        float(step_cost(decode_ops(m, sc, h100, float(c)), h100, prof, launch=False).time_s) for c in range(17, 4016)
    )
    assert float(dec.launch_s) == pytest.approx(sum(steps) - raw, rel=1e-6)


@pytest.mark.parametrize(("async_cpu", "cpu_s"), [(False, 3.2e-3), (True, 3.2e-3), (True, 1e-3)])
def test_floored_stretch_is_the_step_by_step_sum(async_cpu: bool, cpu_s: float) -> None:
    lines = ((1e-4, 2e-7, 5e-5, 4e-7), (2e-5, 0.0, 1e-5, 1e-7))
    floor = 3e-3 + 2.5e-4  # reached by the GPU after about 180 steps
    st = FlooredStretch(3e-3, lines, floor, cpu_s, async_cpu)
    steps = [st.step(j) for j in range(2000)]
    gpu0 = max(3e-3 + 1e-4 + 2e-5, floor)
    assert steps[0] == pytest.approx(max(gpu0, cpu_s) if async_cpu else gpu0 + cpu_s)
    for k in (1, 7, 180, 300, 2000):
        assert st.total(k) == pytest.approx(sum(steps[:k]), rel=1e-12)
    dt = sum(steps[:500]) - 1e-9
    assert st.steps_until(dt, 2000) == 500


def test_simulated_eager_decode_step_is_predicts(h100: roofline.HardwareSpec) -> None:
    """The compiled step model prices an eager decode step as predict's step_cost, on both sides of the floor,
    and its floored stretch sums those steps."""
    m = roofline.model("llama-3.1-8b")
    prof, sc = _crossing_profile(m, h100)
    sm = StepModel(m, sc, h100, prof, 64, 64)
    for ctx in (17.0, 4015.0):
        want = float(step_cost(decode_ops(m, sc, h100, ctx), h100, prof).time_s)
        assert sm.step_time(16, (16 * ctx,)) == pytest.approx(want, rel=1e-9)
    st = sm.decode_affine(16, (16 * 17.0,), (16.0,))
    assert isinstance(st, FlooredStretch)
    assert st.total(3999) == pytest.approx(sum(sm.step_time(16, (16 * (17.0 + j),)) for j in range(3999)), rel=1e-9)


def test_simulated_prefill_step_is_the_evaluators_prefill() -> None:
    """One request: the simulator's TTFT is predict's (the prefill op list under the same run-ahead launches)."""
    kw = {"prompt_len": 566, "output_len": 2}
    p = roofline.predict("llama-3.1-8b", "h100-sxm", 1, **kw)
    s = roofline.simulate("llama-3.1-8b", "h100-sxm", num_requests=1, qps=1.0, engine="ideal", **kw)
    assert s.summary["ttft_mean_s"] == pytest.approx(p.ttft_s, rel=1e-9)


@pytest.mark.parametrize("name", ["llama-3.1-8b", "qwen3-32b", "mixtral-8x7b"])
def test_run_ahead_prefill_never_slower_than_per_op_or_additive(name: str, h100: roofline.HardwareSpec) -> None:
    """max(Σ G_i, Σ H_i) ≤ Σ max(G_i, H_i) ≤ Σ (G_i + H_i): the step-level form is the fastest of the three."""
    m = roofline.model(name)
    sc = make_scenario(h100, 1, 566, 8, tp=2 if "mixtral" in name else 1)
    run = _prof("run_ahead")
    ops = prefill_ops(m, sc, h100)
    per_op = STEP_S + sum(
        op.count * max(float(op_time(op, h100, run).time_s), float(host_launch_s(op, run))) for op in ops
    )
    t_run = float(step_cost(ops, h100, run).time_s)
    t_add = float(step_cost(ops, h100, _prof("additive")).time_s)
    assert t_run <= per_op * (1 + 1e-12) and per_op < t_add


def test_breakdown_sums_to_ttft_with_the_exposed_launch_row() -> None:
    prof = _prof(
        "run_ahead", host_s=200e-6
    )  # a host slow enough to bind an eager prefill (beyond vLLM's 512-token pieces)
    r = roofline.predict("llama-3.1-8b", "h100-sxm", 1, prompt_len=1024, output_len=4, calibration=prof)
    ops = r.ops_frame() if callable(getattr(r, "ops_frame", None)) else r.ops
    pre = ops[ops["phase"] == "prefill"]
    assert float(pre["time_s"].sum()) == pytest.approx(r.ttft_s, rel=1e-9)
    exposed = pre[pre["name"] == "host_launch_exposed"]
    assert len(exposed) == 1 and float(exposed["time_s"].iloc[0]) > 0
