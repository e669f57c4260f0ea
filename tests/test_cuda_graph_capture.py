"""CUDA-graph capture limits: a decode batch the engine has no captured graph for launches every kernel eagerly.

Hand-derived: a decode step beyond the capture launches every op instance eagerly: the host's kernels ×
``per_kernel_s`` overlap its GPU time (the default profile's overlapped eager launch), so the instance takes
max(its graph-replayed time, kernels × ``per_kernel_s``), and nothing else moves; predict, sweep and the
simulator's compiled step model price it in the one place
(:func:`roofline.evaluate.launch_overhead_s`). The limits are each preset's, cited: vLLM 0.11 pads up to 512,
SGLang 0.5 captures 160 / 256 / 512 by GPU memory (8 below 35 GiB), TensorRT-LLM 1.0 replays only 1 … 32, 64, 128
(no padding).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import roofline
from roofline.engine.presets import engine_preset
from roofline.evaluate import host_launch_s, launch_overhead_s, step_host_launch_s
from roofline.ops import decode_ops, prefill_ops
from roofline.profile import default_profile
from roofline.serving.sim.steptime import StepModel
from roofline.specs.library import hardware
from roofline.specs.scenario import make_scenario

BIG = {"capacity_bytes": 1e15}


@pytest.mark.parametrize(
    ("engine", "hw", "limit"),
    [("vllm", "h100-sxm", 512), ("sglang", "h100-sxm", 160), ("sglang", "h200-sxm", 256), ("sglang", "b200", 512)],
)
def test_preset_capture_limits(engine: str, hw: str, limit: int) -> None:
    cfg = engine_preset(engine, hardware(hw))
    assert cfg.cuda_graph_max_batch == limit and cfg.cuda_graph_padding
    rows = np.array([1, limit - 1, limit, limit + 1, 4 * limit])
    assert cfg.graph_replays(rows).tolist() == [True, True, True, False, False]
    assert "cuda_graph" in cfg.sources["cuda_graph_max_batch"] or "capture" in cfg.sources["cuda_graph_max_batch"]


def test_trtllm_replays_only_its_exact_sizes() -> None:
    cfg = engine_preset("trtllm", hardware("h100-sxm"))
    assert cfg.cuda_graph_max_batch == 128 and not cfg.cuda_graph_padding
    sizes = np.arange(1, 300)
    replayed = sizes[cfg.graph_replays(sizes)].tolist()
    assert replayed == [*range(1, 33), 64, 128]
    padded = cfg.with_overrides({"enable_padding": True, "cuda_graph_max_bs": 256})
    assert padded.graph_replays(sizes).sum() == 256


def test_no_graphs_and_no_limit() -> None:
    cfg = engine_preset("vllm", hardware("h100-sxm"))
    assert not cfg.with_overrides({"cuda_graphs": False}).graph_replays([1, 8]).any()
    assert engine_preset("ideal", hardware("h100-sxm")).graph_replays([10**6]).all()


def _step_extra_s(model: str, hw: str, engine: str, batch: int, overrides: dict[str, object]) -> float:
    """The mean decode step's exposed host launches, hand-derived: the host runs ahead through each eager step, so
    a step of GPU time G_j (the graph-replayed ops, one gap per kernel either way) takes max(G_j, per_step + H),
    H = Σ over decode ops of count × kernels × per_kernel_s; the extra is the mean of max(0, per_step + H − G_j)
    over the 7 decode steps at contexts 513 … 519."""
    h = hardware(hw)
    prof = default_profile()
    sc = make_scenario(h, batch, 512, 8, engine=engine, engine_overrides=overrides)
    m = roofline.model(model)
    o = prof.overheads
    assert o.eager_launch == "run_ahead" and o.graph_kernels == "per_op"
    ops = decode_ops(m, sc, h, 513.0)
    host = sum(op.count * op.kernels * o.per_kernel_s for op in ops)
    extra = 0.0
    for ctx in range(513, 520):
        step = decode_ops(m, sc, h, float(ctx))
        gpu = o.per_step_s + sum(
            op.count * float(roofline.evaluate.op_time(replace(op, uncaptured=0.0), h, prof).time_s) for op in step
        )
        extra += max(0.0, o.per_step_s + host - gpu)
    return extra / 7


def test_a_batch_beyond_the_capture_pays_the_eager_launches_exactly() -> None:
    """With graphs captured up to 4 sequences, batch 5's TPOT is its graph-replayed TPOT (the limit lifted) plus
    exactly the host's launches its GPU work does not hide; inside the capture nothing moves. A batch far beyond it
    (SGLang's 160 on an H100, batch 161) is GPU-bound: the host's launches hide entirely."""
    kw = {"engine": "sglang", "prompt_len": 512, "output_len": 8}
    small = {**BIG, "cuda_graph_max_bs": 4}
    eager = roofline.predict("llama-3.1-8b", "h100-sxm", 5, engine_overrides=small, **kw)
    lifted = roofline.predict("llama-3.1-8b", "h100-sxm", 5, engine_overrides={**BIG, "cuda_graph_max_bs": 512}, **kw)
    extra = _step_extra_s("llama-3.1-8b", "h100-sxm", "sglang", 5, small)
    assert extra > 4e-4  # ~0.5 ms of the host's launches exposed beyond its ~7 ms of GPU work
    assert eager.tpot_s - lifted.tpot_s == pytest.approx(extra, rel=1e-9)
    at_limit = roofline.predict("llama-3.1-8b", "h100-sxm", 4, engine_overrides=small, **kw)
    lifted_4 = roofline.predict("llama-3.1-8b", "h100-sxm", 4, engine_overrides={**BIG, "cuda_graph_max_bs": 512}, **kw)
    assert at_limit.tpot_s == lifted_4.tpot_s  # inside the capture nothing moves
    big = roofline.predict("llama-3.1-8b", "h100-sxm", 161, engine_overrides=BIG, **kw)
    big_lifted = roofline.predict(
        "llama-3.1-8b", "h100-sxm", 161, engine_overrides={**BIG, "cuda_graph_max_bs": 512}, **kw
    )
    assert _step_extra_s("llama-3.1-8b", "h100-sxm", "sglang", 161, BIG) == 0.0
    assert big.tpot_s == pytest.approx(big_lifted.tpot_s, rel=1e-12)


def test_sweep_and_simulator_price_it_as_predict() -> None:
    h = hardware("h100-sxm")
    kw = {"engine": "sglang", "engine_overrides": BIG}
    df = roofline.sweep("llama-3.1-8b", "h100-sxm", batch=[159, 160, 161, 200], prompt_len=[512], output_len=[8], **kw)
    for row in df.itertuples():
        r = roofline.predict("llama-3.1-8b", "h100-sxm", row.batch, 512, 8, **kw)
        assert row.tpot_s == pytest.approx(r.tpot_s, rel=1e-12)
    sc = make_scenario(h, 1, 512, 8, engine="sglang", engine_overrides=BIG)
    m = roofline.model("llama-3.1-8b")
    steps = StepModel(m, sc, h, default_profile(), 8192, 512)
    for rows in (160, 161, 300):
        sc_r = make_scenario(h, rows, 512, 8, engine="sglang", engine_overrides=BIG)
        ops = decode_ops(m, sc_r, h, 513.0)
        static = sum(op.count * float(roofline.evaluate.op_time(op, h, default_profile()).time_s) for op in ops)
        static += default_profile().overheads.per_step_s
        floor = default_profile().overheads.per_step_s + roofline.evaluate.step_host_launch_s(ops, default_profile())
        assert steps.gpu_time(rows, (float(rows * 513),)) == pytest.approx(max(static, floor), rel=1e-9)


def test_launch_overhead_of_an_uncaptured_graph_op_is_the_eager_one() -> None:
    h = hardware("h100-sxm")
    prof = default_profile()
    sc = make_scenario(h, 200, 512, 8, engine="sglang", engine_overrides=BIG)
    ops = decode_ops(roofline.model("llama-3.1-8b"), sc, h, 513.0)
    o = prof.overheads
    for op in ops:
        assert op.launch == "graph" and float(np.asarray(op.uncaptured)) == 1.0
        assert float(launch_overhead_s(op, prof)) == pytest.approx(op.kernels * o.per_kernel_graph_s, rel=1e-12)
        assert float(host_launch_s(op, prof)) == pytest.approx(op.kernels * o.per_kernel_s, rel=1e-12)


def test_vllm_replays_piecewise_graphs_for_prefill_steps_inside_its_capture() -> None:
    """vLLM V1 (FULL_AND_PIECEWISE): a prefill step of at most 512 tokens replays piecewise graphs, so only its
    attention kernels are launched by the host (H = Σ attention count × kernels × per_kernel_s); beyond 512 tokens
    every kernel is; SGLang and TensorRT-LLM launch prefill steps eagerly; the simulator's one request agrees."""
    h, m, prof = hardware("h100-sxm"), roofline.model("llama-3.1-8b"), default_profile()
    per = prof.overheads.per_kernel_s
    short = prefill_ops(m, make_scenario(h, 1, 256, 8, engine="vllm"), h)
    assert all((op.launch == "graph") == (op.kind != "attention") for op in short)
    assert all(op.uncaptured == 0.0 for op in short if op.kind != "attention")
    attn_host = sum(op.count * op.kernels * per for op in short if op.kind == "attention")
    assert float(step_host_launch_s(short, prof)) == pytest.approx(attn_host, rel=1e-12)
    long = prefill_ops(m, make_scenario(h, 1, 1024, 8, engine="vllm"), h)
    assert all(op.launch == "eager" for op in long)
    all_host = sum(op.count * op.kernels * per for op in long)
    assert float(step_host_launch_s(long, prof)) == pytest.approx(all_host, rel=1e-12)
    for engine in ("sglang", "trtllm"):
        assert all(op.launch == "eager" for op in prefill_ops(m, make_scenario(h, 1, 256, 8, engine=engine), h))
    p = roofline.predict("llama-3.1-8b", "h100-sxm", 1, 256, 2, engine="vllm")
    s = roofline.simulate("llama-3.1-8b", "h100-sxm", num_requests=1, qps=1.0, prompt_len=256, output_len=2)
    assert s.summary["ttft_mean_s"] == pytest.approx(p.ttft_s, rel=1e-9)
