"""Eager launches overlapped with the GPU (``overheads.eager_launch`` = "overlapped", the default profile's).

GIVEN an op launched eagerly, WHEN the host's launch cost (kernels × per_kernel_s) is longer than the op's GPU time
(roofline terms + kernels × per_kernel_graph_s), THEN the op takes the host's time, else its GPU time: a hand-derived
golden in both regimes; the closed forms (sums over decode contexts, decode stretches in the simulator) equal the
step-by-step sums; the simulator's prefill step equals the evaluator's ops; an overlapped launch is never slower
than an additive one; and an additive profile keeps time = GPU time + kernels × per_kernel_s.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import roofline
from roofline.evaluate import host_launch_s, op_time, op_time_summed_over_context, sum_max_affine_floor
from roofline.ops import decode_ops
from roofline.ops.records import elementwise, gemm
from roofline.prediction import make_scenario
from roofline.profile import CalibrationProfile, default_profile
from roofline.serving.sim.stretch import FlooredStretch

HOST_S, GAP_S = 20e-6, 5e-6


def _prof(mode: str, host_s: float = HOST_S, gap_s: float = GAP_S) -> CalibrationProfile:
    p = default_profile()
    ov = p.overheads.model_copy(update={"per_kernel_s": host_s, "per_kernel_graph_s": gap_s, "eager_launch": mode})
    return p.model_copy(update={"overheads": ov})


def test_default_profile_overlaps_eager_launches() -> None:
    ov = default_profile().overheads
    assert ov.eager_launch == "overlapped"
    assert ov.per_kernel_s > ov.per_kernel_graph_s > 0  # the host's launch costs more than the GPU's gap


def test_hand_derived_eager_op_in_both_regimes(h100: roofline.HardwareSpec) -> None:
    """A tiny elementwise op (GPU time ≪ 20 µs) takes the host's 20 µs; a large GEMM its GPU time + 5 µs."""
    over, add = _prof("overlapped"), _prof("additive")
    tiny = elementwise("norm", "norm", "test", 1, "bf16", 4096.0, 2.0, 2.0, 0.0)
    t_over, t_add = op_time(tiny, h100, over), op_time(tiny, h100, add)
    gpu = float(np.maximum(t_over.compute_s, t_over.memory_s))
    assert gpu + GAP_S < HOST_S
    assert float(t_over.time_s) == pytest.approx(HOST_S, rel=1e-12)  # host-bound
    assert str(roofline.evaluate.BOUNDS[int(t_over.bound_code)]) == "overhead"
    assert float(t_add.time_s) == pytest.approx(gpu + HOST_S, rel=1e-12)  # additive: GPU + host
    big = gemm("qkv", "gemm", "test", 1, "bf16", 4096.0, 6144.0, 4096.0, 2.0, 2.0)
    g_over, g_add = op_time(big, h100, over), op_time(big, h100, add)
    roof = float(np.maximum(g_over.compute_s, g_over.memory_s))
    assert roof > HOST_S
    assert float(g_over.time_s) == pytest.approx(roof + GAP_S, rel=1e-12)  # GPU-bound: the host's launch hidden
    assert float(g_add.time_s) == pytest.approx(roof + HOST_S, rel=1e-12)
    assert host_launch_s(replace(big, launch="graph"), over) == 0.0  # a captured graph op has no host launch


@pytest.mark.parametrize("seed", range(5))
def test_sum_max_affine_floor_is_the_brute_force_sum(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p, u = rng.uniform(0, 5, 2)
    q, v = rng.uniform(0, 0.5, 2) * rng.integers(0, 2, 2)  # flat lines too
    h = rng.uniform(0, 20)
    a, b = sorted(rng.integers(0, 60, 2))
    brute = sum(max(p + q * s, u + v * s, h) for s in range(a, b + 1))
    assert float(sum_max_affine_floor(p, q, u, v, h, a, b)) == pytest.approx(brute, rel=1e-12, abs=1e-12)


def test_eager_decode_attention_summed_over_contexts(h100: roofline.HardwareSpec) -> None:
    """Without graphs, a decode step at a short context is host-bound; the closed-form sum crosses into the
    GPU-bound regime as the context grows and equals the step-by-step sum."""
    prof = _prof("overlapped", host_s=40e-6)
    m = roofline.model("llama-3.1-8b")
    sc = make_scenario(h100, 1, 16, 4000, cuda_graphs=False)
    attn = [op for op in decode_ops(m, sc, h100, 17.0) if op.context_dependent]
    assert attn
    for op in attn:
        times = [float(op_time(op.at_context(np.asarray(float(c))), h100, prof).time_s) for c in range(17, 4017)]
        assert min(times) == pytest.approx(op.kernels * 40e-6) and max(times) > op.kernels * 40e-6
        total = float(op_time_summed_over_context(op, h100, prof, np.asarray(17.0), np.asarray(4016.0)))
        assert total == pytest.approx(sum(times), rel=1e-9)


@pytest.mark.parametrize("async_cpu", [False, True])
def test_floored_stretch_is_the_step_by_step_sum(async_cpu: bool) -> None:
    lines = ((1e-4, 2e-7, 5e-5, 4e-7), (2e-5, 0.0, 1e-5, 1e-7))
    st = FlooredStretch(3e-3, lines, (2e-4, 1.5e-4), 3.2e-3, async_cpu)
    steps = [st.step(j) for j in range(2000)]
    gpu0 = 3e-3 + 2e-4 + 1.5e-4  # both terms on their floors at step 0
    assert steps[0] == pytest.approx(max(gpu0, 3.2e-3) if async_cpu else gpu0 + 3.2e-3)
    for k in (1, 7, 300, 2000):
        assert st.total(k) == pytest.approx(sum(steps[:k]), rel=1e-12)
    dt = sum(steps[:500]) - 1e-9
    assert st.steps_until(dt, 2000) == 500


def test_simulated_prefill_step_is_the_evaluators_prefill() -> None:
    """One request: the simulator's TTFT is predict's (the prefill op list under the same overlapped launches)."""
    kw = {"prompt_len": 566, "output_len": 2}
    p = roofline.predict("llama-3.1-8b", "h100-sxm", 1, **kw)
    s = roofline.simulate("llama-3.1-8b", "h100-sxm", num_requests=1, qps=1.0, engine="ideal", **kw)
    assert s.summary["ttft_mean_s"] == pytest.approx(p.ttft_s, rel=1e-9)


@pytest.mark.parametrize("name", ["llama-3.1-8b", "qwen3-32b", "mixtral-8x7b"])
def test_overlapped_prefill_never_slower_than_additive(name: str) -> None:
    kw = {"batch": 1, "prompt_len": 566, "output_len": 8, "tp": 2 if "mixtral" in name else 1}
    over = roofline.predict(name, "h100-sxm", calibration=_prof("overlapped"), **kw)
    add = roofline.predict(name, "h100-sxm", calibration=_prof("additive"), **kw)
    assert over.ttft_s < add.ttft_s
    assert over.tpot_s == pytest.approx(add.tpot_s, rel=0.02)  # decode replays graphs: only eager extras differ
