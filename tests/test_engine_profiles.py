"""Shipped engine-kernel profiles: re-derived from the tables, selected by (hardware, engine), physics of the new terms.

The README's test command installs the ``aic`` extra (aiconfigurator-core 0.12.0), so the tables are present.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import roofline
from calibrate.aic.engine_profile import fit_engine_profile, shippable
from calibrate.aic.tables import AIC_HARDWARE
from roofline.engine.profiles import (
    engine_profile_path,
    select_profile,
    shipped_engine_profile,
    shipped_engine_profiles,
)
from roofline.evaluate import comm_bandwidth_bytes_per_s, comm_time_s, op_time
from roofline.ops.builder import decode_ops, prefill_ops
from roofline.ops.comm import all_gather, all_reduce
from roofline.profile import default_profile, load_profile
from roofline.specs.library import hardware, model
from roofline.specs.scenario import Scenario
from roofline.specs.topology import comm_path


def _dump(p: roofline.CalibrationProfile) -> dict[str, object]:
    d = p.model_dump(mode="json")
    d.pop("created")
    return d


@pytest.mark.parametrize(("gpu", "engine"), shippable())
def test_shipped_profile_rederives_from_the_tables(gpu: str, engine: str) -> None:
    """Each shipped profile is exactly what ``calibrate import-aiconfigurator --ship`` fits from the tables."""
    shipped = shipped_engine_profile(AIC_HARDWARE[gpu], engine)
    assert shipped is not None, f"{gpu}/{engine} has tables but no shipped profile: run --ship --force"
    assert _dump(fit_engine_profile(gpu, engine)) == _dump(shipped)


def test_every_shipped_profile_has_tables_and_none_is_missing() -> None:
    expected = sorted((AIC_HARDWARE[g], e) for g, e in shippable())
    assert shipped_engine_profiles() == expected
    assert len(expected) == 24  # 8 mapped GPUs x 3 engines


def test_selection_by_hardware_and_engine() -> None:
    on = {"engine_kernels": True}
    assert select_profile(None, "h100-sxm", "vllm", **on).name == "h100-sxm_vllm"
    assert select_profile(None, "h200-sxm", "tensorrt-llm", **on).name == "h200-sxm_trtllm"
    assert select_profile(None, "mi300x", "vllm", **on) is default_profile()  # no tables: the default, stated
    assert select_profile(None, "h100-sxm", "ideal", **on) is default_profile()
    assert select_profile(default_profile(), "h100-sxm", "vllm", **on) is default_profile()  # explicit wins
    assert select_profile(None, "h100-sxm", "vllm") is default_profile()  # off by default (module docstring)
    path = engine_profile_path("h100-sxm", "sglang")
    r = roofline.predict("llama-3.1-8b", "h100-sxm", 8, 512, 64, engine="sglang", calibration=path)
    assert r.profile.name == "h100-sxm_sglang"
    assert any("fitted to sglang" in line for line in r.evidence)
    assert roofline.predict("llama-3.1-8b", "mi300x", 8, 512, 64).profile.name == "default"


def test_simulate_and_predict_use_the_same_profile() -> None:
    """One truth: a single request through the simulator equals predict with the engine's profile."""
    cal = engine_profile_path("h100-sxm", "vllm")
    p = roofline.predict("llama-3.1-8b", "h100-sxm", 1, 512, 32, engine="vllm", calibration=cal)
    s = roofline.simulate(
        "llama-3.1-8b", "h100-sxm", concurrency=1, num_requests=1, prompt_len=512, output_len=32, calibration=cal
    )
    assert s.summary["ttft_mean_s"] == pytest.approx(p.ttft_s, rel=1e-6)
    assert s.summary["tpot_mean_s"] == pytest.approx(p.tpot_s, rel=1e-6)


def test_custom_allreduce_latency_replaces_base_and_hops_only_where_the_custom_kernel_runs() -> None:
    """Hand-derived: H100 tp 2, 16 KiB one-shot: wire 16 KiB / (path × the engine's measured efficiency at 16 KiB)
    + custom latency; 64 MiB: NCCL ring latency terms, the same measured curve at 64 MiB."""
    hw, prof = hardware("h100-sxm"), shipped_engine_profile("h100-sxm", "vllm")
    assert prof is not None
    lat2 = prof.comm.custom_allreduce_latency_s[2]
    path_bw = comm_path(hw, 2).bandwidth_bytes_per_s
    small = all_reduce("ar", "comm", "x", 1, "bf16", 16384.0, 2, hw)
    assert float(small.custom_collective) == 1.0
    curve = prof.comm.allreduce_curve(small.launch, 2)
    assert curve is not None
    bw = path_bw * float(curve(16384.0))
    assert float(comm_time_s(small, hw, prof)) == pytest.approx(16384.0 / bw + lat2, rel=1e-12)
    big = all_reduce("ar", "comm", "x", 1, "bf16", 64 * 2**20, 2, hw)
    assert float(big.custom_collective) == 0.0  # above vLLM's 8 MiB cap: NCCL's ring
    ring_lat = prof.comm.latency_s + 2 * prof.comm.hop_latency("nvlink")
    bw = path_bw * float(curve(64 * 2**20))
    assert float(comm_time_s(big, hw, prof)) == pytest.approx(float(big.comm_bytes) / bw + ring_lat, rel=1e-12)


def test_allreduce_curve_applies_inside_one_node_only() -> None:
    """The measured all-reduce efficiency replaces link_efficiency for all-reduces within a node; tp 16 across two
    H100 nodes keeps the link efficiency on its path; other collectives never take the curve."""
    hw, prof = hardware("h100-sxm"), shipped_engine_profile("h100-sxm", "vllm")
    assert prof is not None and prof.comm.allreduce_efficiency
    msg = 4.0 * 2**20
    inside = all_reduce("ar", "comm", "x", 1, "bf16", msg, 8, hw)
    curve = prof.comm.allreduce_curve(inside.launch, 8)
    assert curve is not None
    assert float(comm_bandwidth_bytes_per_s(inside, hw, prof)) == comm_path(hw, 8).bandwidth_bytes_per_s * float(
        curve(msg)
    )
    across = all_reduce("ar", "comm", "x", 1, "bf16", msg, 16, hw)
    assert comm_path(hw, 16).nodes == 2
    assert comm_bandwidth_bytes_per_s(across, hw, prof) == prof.link_bytes_per_s(hw, 16)
    gather = all_gather("ag", "comm", "x", 1, "bf16", msg, 8)
    assert comm_bandwidth_bytes_per_s(gather, hw, prof) == prof.link_bytes_per_s(hw, 8)


@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_each_attention_floor_is_added_to_its_own_calls_only(phase: str) -> None:
    """A decode step's decode attention pays ``decode_fixed_s`` and nothing else moves; a prefill pass's
    attention pays ``prefill_fixed_s`` (each op's time with the floor − without = the floor, to 1e-15 s)."""
    hw, sc = hardware("h100-sxm"), Scenario(batch=4, prompt_len=256, output_len=8)
    prof = shipped_engine_profile("h100-sxm", "vllm")
    assert prof is not None and prof.attention.decode_fixed_s > 0 and prof.attention.prefill_fixed_s > 0
    m = model("llama-3.1-8b")
    ops = decode_ops(m, sc, hw, 300.0) if phase == "decode" else prefill_ops(m, sc, hw)
    for field in ("decode_fixed_s", "prefill_fixed_s"):
        zero = prof.model_copy(update={"attention": prof.attention.model_copy(update={field: 0.0})})
        for op in ops:
            gap = float(np.max(op_time(op, hw, prof).time_s - op_time(op, hw, zero).time_s))
            own = op.kind == "attention" and field == f"{phase}_fixed_s"
            assert gap == pytest.approx(getattr(prof.attention, field) if own else 0.0, abs=1e-15), (op.name, field)


def test_fitted_parameters_are_in_their_physical_ranges() -> None:
    for hw_name, eng in shipped_engine_profiles():
        p = shipped_engine_profile(hw_name, eng)
        assert p is not None and p.device is None  # relative: efficiencies of the datasheet peaks
        assert 1e-6 < p.overheads.per_kernel_graph_s < 1e-5, (hw_name, eng)  # a few µs per kernel in a graph
        assert 0 <= p.attention.decode_fixed_s < 3e-5 and 0 <= p.attention.prefill_fixed_s < 3e-5
        for gpus, v in p.comm.custom_allreduce_latency_s.items():
            # A few µs inside one board; across GB300 compute trays (4 GPUs each, multi-node NVLink) AIC measures
            # far more: gb300 sglang 0.5.14, graph, 128 B: 3.4 µs on 2 GPUs, 26.9 µs on 8 (fit 25.8 µs).
            bound = 5e-5 if hw_name == "gb300" and gpus > 4 else 1e-5
            assert 0 <= v < bound, (hw_name, eng, gpus, v)
        assert 0.3 < (p.compute["bf16"].efficiency or 0) <= 1.0
        assert p.provenance["kind"] == "aiconfigurator" and p.provenance["hardware"] == hw_name


def test_mixtral_tp2_decode_on_h100_vllm_matches_the_measured_moe_kernel_better() -> None:
    """The step the BLIS study measured (Mixtral-8x7B, tp 2, H100, vLLM): the engine profile moves TPOT toward
    the measured ITL (18.4–20.7 ms at the study's loads) from the default's 26.8 ms at batch 32."""
    kw = {"tp": 2, "engine": "vllm"}
    before = roofline.predict("mixtral-8x7b", "h100-sxm", 32, 1024, 256, calibration=default_profile(), **kw)
    after = roofline.predict(
        "mixtral-8x7b", "h100-sxm", 32, 1024, 256, calibration=engine_profile_path("h100-sxm", "vllm"), **kw
    )
    assert before.tpot_s > 0.025
    assert after.tpot_s < 0.85 * before.tpot_s  # 26.8 -> 21.1 ms


def test_engine_profile_path_names() -> None:
    assert engine_profile_path("h100-sxm", "vllm").name == "h100-sxm_vllm.yaml"


def test_quantised_moe_kernels_take_their_own_rates() -> None:
    """A grouped GEMM of 4-bit weights dequantised to bf16 (int4 / MXFP4 on Hopper) streams at the rate fitted
    to those kernels (``by_format['bf16:0.5']``), a 16-bit one at the 16-bit kernel's; hand-derived bandwidth."""
    from roofline.evaluate import ceilings
    from roofline.ops.ffn import grouped_rows
    from roofline.ops.records import gemm
    from roofline.profile_moe import format_key

    hw, prof = hardware("h100-sxm"), shipped_engine_profile("h100-sxm", "vllm")
    assert prof is not None and {"fp8:1.0", "bf16:0.5"} <= set(prof.grouped_gemm.by_format)
    assert format_key("bf16", 0.53125) == "bf16:0.5" and format_key("fp4", 0.5625) == "fp4:0.5"
    assert format_key("fp8", 1.000244140625) == "fp8:1.0" and format_key("bf16", 2.0) == "bf16:2.0"
    n, k = 2 * 2048.0, 4096.0
    for w_bytes, key in ((2.0, None), (0.53125, "bf16:0.5")):
        op = grouped_rows(gemm("moe.experts_gate_up", "moe", "x", 1, "bf16", 4.0, n, k, w_bytes, 2.0, 8.0), 8.0)
        _, bw = ceilings(op, hw, prof)
        curve = prof.grouped_gemm.by_format[key].memory_efficiency_by_size if key else None
        curve = curve or prof.grouped_gemm.memory_efficiency_by_size
        assert curve is not None
        expect = prof.memory_ceiling(hw) * float(curve(n * k))
        assert float(bw) == pytest.approx(expect, rel=1e-12)


def test_mxfp4_checkpoints_take_the_native_mxfp4_kernel_and_integer_4_bit_marlin() -> None:
    """Two kernel families under one format key (``bf16:0.5``): an MXFP4 checkpoint's experts (gpt-oss) take the
    rates fitted to the engine's native MXFP4 rows (``bf16:0.5/mxfp4``), an integer 4-bit checkpoint's the Marlin
    int4 rows (``bf16:0.5``); a profile without the family falls back to the format's rates; hand-derived compute
    ceilings."""
    from roofline.evaluate import ceilings
    from roofline.ops.ffn import grouped_rows
    from roofline.ops.records import gemm, with_fields
    from roofline.profile_moe import base_format, format_key

    assert (
        format_key("bf16", 0.53125, "mxfp4") == "bf16:0.5/mxfp4" and format_key("bf16", 0.53125, "int4") == "bf16:0.5"
    )
    assert format_key("fp8", 1.0, "mxfp4") == "fp8:1.0" and base_format("bf16:0.5/mxfp4") == "bf16:0.5"
    hw, prof = hardware("h100-sxm"), shipped_engine_profile("h100-sxm", "vllm")
    assert prof is not None
    gg = prof.grouped_gemm
    native, marlin = gg.by_format["bf16:0.5/mxfp4"], gg.by_format["bf16:0.5"]
    assert any("w4a16_mxfp4" in s for s in native.sources) and any("int4_wo" in s for s in marlin.sources)
    m, n, k = 1024.0, 2 * 2048.0, 4096.0  # 128 rows per expert over 8 touched experts: compute-bound
    base = grouped_rows(gemm("moe.experts_gate_up", "moe", "x", 1, "bf16", m, n, k, 0.53125, 2.0, 8.0), 8.0)
    dense = prof.compute_ceiling(hw, "bf16") * float(prof.gemm_curve("bf16", "")(base.m))
    dense *= float(prof.gemm_k.factor(hw.name, "bf16", k))
    for fmt, rates in (("mxfp4", native), ("int4", marlin)):
        c, _ = ceilings(with_fields(base, weight_format=fmt), hw, prof)
        assert rates.compute_efficiency_by_rows is not None
        assert float(c) == pytest.approx(dense * float(rates.compute_efficiency_by_rows(base.m)), rel=1e-12)
    assert float(native.compute_efficiency_by_rows(base.m)) > 1.5 * float(marlin.compute_efficiency_by_rows(base.m))
    pooled = prof.model_copy(update={"grouped_gemm": gg.model_copy(update={"by_format": {"bf16:0.5": marlin}})})
    c_fallback, _ = ceilings(with_fields(base, weight_format="mxfp4"), hw, pooled)
    c_int4, _ = ceilings(with_fields(base, weight_format="int4"), hw, prof)
    assert float(c_fallback) == pytest.approx(float(c_int4), rel=1e-12)


@pytest.mark.parametrize(
    ("model", "hw", "engine", "tp"),
    [
        ("mixtral-8x7b", "h100-sxm", "vllm", 2),
        ("deepseek-v3", "h200-sxm", "sglang", 8),
        ("qwen3-30b-a3b", "h100-sxm", "vllm", 1),
    ],
)
def test_engine_profile_moe_decode_never_cheaper_with_batch(model: str, hw: str, engine: str, tp: int) -> None:
    """Under the shipped engine profile a MoE decode step's routed experts never get cheaper as its batch grows:
    a measured layer's seconds never fall with its assignments, and the generic curves' streaming rows curve never
    rises after its best knot and the compute curve rises at most with the rows (the range covers 1–2 rows per
    expert up to ~50, where the measured rates rise then fall). The MoE rows are checked, not the whole step: the
    engines' custom all-reduce switches to its faster two-shot kernel at 256 KiB (DeepSeek-V3, tp 8: batch 18 → 19
    takes the step's all-reduces from 999 to 571 µs), a real drop of the step time."""
    prof = engine_profile_path(hw, engine)
    big = {"engine_overrides": {"capacity_bytes": 1e15}}
    moe = []
    for b in range(1, 97):
        ops = roofline.predict(model, hw, b, 256, 16, tp=tp, engine=engine, calibration=prof, **big).ops
        moe.append(float(ops[(ops["phase"] == "decode") & ops["name"].str.startswith("moe.experts")]["time_s"].sum()))
    assert moe[0] > 0 and all(b >= a * (1 - 1e-12) for a, b in itertools.pairwise(moe))


def test_evidence_says_whether_the_models_moe_layer_was_measured() -> None:
    """The evidence names the scenario's MoE layer shape and whether the profile holds its measured seconds:
    Mixtral-8x7B (bf16) on H100 vLLM at tp 2 and at tp 4 with ep 2 yes; DeepSeek-V3's fp8 layer on H200 SGLang no
    (only the 16-bit and Marlin kernels' layers ship); the default profile holds no layers."""
    prof = engine_profile_path("h100-sxm", "vllm")
    yes = roofline.predict("mixtral-8x7b", "h100-sxm", 8, 256, 16, tp=2, engine="vllm", calibration=prof).evidence
    assert any(
        e.startswith("MoE layer h4096.i7168.e8.k2.gated: its own kernel seconds measured on h100-sxm (bf16:2.0")
        for e in yes
    )
    off = roofline.predict("mixtral-8x7b", "h100-sxm", 8, 256, 16, tp=4, ep=2, engine="vllm", calibration=prof)
    assert any("h4096.i14336.e4.k2.gated" in e for e in off.evidence)  # ep 2: whole experts, 4 per GPU: measured
    ds = roofline.predict(
        "deepseek-v3",
        "h200-sxm",
        8,
        256,
        16,
        tp=8,
        engine="sglang",
        calibration=engine_profile_path("h200-sxm", "sglang"),
    )
    assert "MoE layer h7168.i256.e256.k8.gated: this profile holds no measured layer of this shape" in "; ".join(
        ds.evidence
    )
    default = roofline.predict("mixtral-8x7b", "h100-sxm", 8, 256, 16, tp=2, engine="vllm").evidence
    assert not any(e.startswith("MoE layer") for e in default)


def test_marlin_layers_ship_and_price_kimi_at_its_measured_rows() -> None:
    """Integer 4-bit (Marlin) layers ship beside the 16-bit ones (calibrate.aic.engine_profile.LAYER_FITS): Kimi-K2.5's
    shape at moe_tp 8 on H200 vLLM is priced at its table's seconds, e.g. 4 tokens (32 assignments per GPU, the
    table's 76 µs row: act and launches subtracted, so the layer's two GEMMs hold less than that), not the separable
    curves' 1.7× at that size."""
    prof = load_profile(engine_profile_path("h200-sxm", "vllm"))
    key = "bf16:0.5|h7168.i256.e384.k8.gated"
    assert key in prof.grouped_gemm.layers
    layer = prof.grouped_gemm.layers[key]
    assert 20e-6 < float(np.interp(32.0, layer.x, layer.y)) < 76e-6
    assert not any(k.startswith(("fp8:", "fp4:")) for k in prof.grouped_gemm.layers)  # other quantised kernels: none


def test_blackwell_prices_integer_4_bit_at_marlin_and_mxfp4_at_the_16_bit_rates() -> None:
    """B200 vLLM (fp4 tensor cores, no int4 MMA): an integer 4-bit checkpoint's experts take the Marlin rates fitted
    to the int4_wo rows; an MXFP4 checkpoint's take the 16-bit kernel's rates (its W4A8 / W4A4 kernels are not
    W4A16), exactly as with no 4-bit entry at all; hand-derived compute ceilings."""
    from roofline.evaluate import ceilings
    from roofline.ops.ffn import grouped_rows
    from roofline.ops.records import gemm, with_fields

    hw, prof = hardware("b200"), shipped_engine_profile("b200", "vllm")
    assert prof is not None
    gg = prof.grouped_gemm
    marlin, mxfp4 = gg.by_format["bf16:0.5"], gg.by_format["bf16:0.5/mxfp4"]
    assert any("int4_wo" in s for s in marlin.sources) and any("16-bit kernel's rates" in s for s in mxfp4.sources)
    assert mxfp4.compute_efficiency_by_rows == gg.compute_efficiency_by_rows and mxfp4.fixed_s == 0.0
    base = grouped_rows(
        gemm("moe.experts_gate_up", "moe", "x", 1, "bf16", 1024.0, 4096.0, 4096.0, 0.53125, 2.0, 8.0), 8.0
    )
    without = prof.model_copy(
        update={
            "grouped_gemm": gg.model_copy(
                update={"by_format": {k: v for k, v in gg.by_format.items() if k[:8] != "bf16:0.5"}}
            )
        }
    )
    c_mx, _ = ceilings(with_fields(base, weight_format="mxfp4"), hw, prof)
    c_mx_before, _ = ceilings(with_fields(base, weight_format="mxfp4"), hw, without)
    c_int4, _ = ceilings(with_fields(base, weight_format="int4"), hw, prof)
    assert float(c_mx) == pytest.approx(float(c_mx_before), rel=1e-12)
    assert marlin.compute_efficiency_by_rows is not None and float(c_int4) < 0.8 * float(c_mx)
