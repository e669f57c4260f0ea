"""Each engine's kernel inventory: cited, complete for the ops roofline builds, and paid exactly as stated.

The per-kernel cost is a fixed price per launched kernel, so a decode step's launch seconds are
per_kernel_graph_s × Σ count·kernels over its ops, on the kernel count the profile's cost was measured
against: the engine's (hand-summed here from the YAML) for the engine-kernel profiles, one per op for the
default profile, and one per op without an inventory (``ideal``, or an engine version none describes).
"""

from __future__ import annotations

import numpy as np
import pytest

import roofline
from roofline.engine.inventory import inventory_path, kernel_inventory, load_inventory, shipped_inventories
from roofline.engine.presets import engine_preset
from roofline.engine.profiles import shipped_engine_profile
from roofline.evaluate import launch_overhead_s
from roofline.ops.builder import build_ops, decode_ops, prefill_ops
from roofline.ops.records import Op
from roofline.profile import CalibrationProfile, default_profile
from roofline.specs.scenario import make_scenario

ENGINES = ("vllm", "sglang", "trtllm")
#: One bundled model per architecture family the inventories describe, at a tp that builds its collectives.
FAMILIES = {
    "dense": ("llama-3.1-8b", 2, "bf16"),
    "dense fp8": ("llama-3.1-70b", 4, "fp8"),
    "moe": ("mixtral-8x7b", 2, "bf16"),
    "mla moe": ("deepseek-v3", 8, "checkpoint"),
    "hybrid linear": ("qwen3.5-397b-a17b", 8, "bf16"),
    "gpt-oss": ("gpt-oss-120b", 2, "checkpoint"),
}
HW = roofline.hardware("h100-sxm")


def _ops(model: str, tp: int, w: str, engine: str, phase: str) -> list[Op]:
    sc = make_scenario(HW, batch=4, prompt_len=512, output_len=8, tp=tp, weight_dtype=w, engine=engine)
    m = roofline.model(model)
    return decode_ops(m, sc, HW, 512) if phase == "decode" else prefill_ops(m, sc, HW)


def test_one_inventory_per_engine_preset_at_its_version() -> None:
    assert [p.stem for p in shipped_inventories()] == sorted(ENGINES)
    for eng in ENGINES:
        inv = load_inventory(inventory_path(eng))
        assert inv.engine == eng
        assert inv.version == engine_preset(eng, HW).version, "the counts describe the preset's version"
        assert kernel_inventory(eng, inv.version) is inv or kernel_inventory(eng, inv.version) == inv
        assert kernel_inventory(eng, "0.0-not-a-version") is None


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_op_the_builders_emit_is_listed_and_cited(engine: str, family: str) -> None:
    inv = kernel_inventory(engine, engine_preset(engine, HW).version)
    assert inv is not None
    model, tp, w = FAMILIES[family]
    built = {(op.name, phase) for phase in ("prefill", "decode") for op in _ops(model, tp, w, "ideal", phase)}
    assert {n for n, _ in built} - set(inv.ops) == set(), f"{engine} inventory misses ops of {family}"
    for name, phase in built:
        entry = inv.ops[name]
        if entry.kernels.of(phase) == 0:
            assert entry.fused_into, f"{engine} {name} ({phase}): a fused op names the kernel it is fused into"


@pytest.mark.parametrize("engine", ENGINES)
def test_extras_hang_on_ops_that_exist(engine: str) -> None:
    inv = kernel_inventory(engine, engine_preset(engine, HW).version)
    assert inv is not None
    built = {op.name for f in FAMILIES.values() for ph in ("prefill", "decode") for op in _ops(*f, "ideal", ph)}
    for extra in inv.extra:
        assert extra.per in built, f"{engine} extra {extra.name} hangs on {extra.per}, which no builder emits"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_kernels_are_the_inventorys_hand_sum(engine: str, phase: str) -> None:
    """Mixtral bf16 at tp 2: each op's engine kernels = its listed count + the extras hung on it whose format and tp
    conditions hold (+ the sampler on lm_head), summed here from the YAML by hand."""
    inv = kernel_inventory(engine, engine_preset(engine, HW).version)
    assert inv is not None
    ops = _ops("mixtral-8x7b", 2, "bf16", engine, phase)
    for op in ops:
        want = inv.ops[op.name].kernels.of(phase)
        for e in inv.extra:
            arch_ok = e.architectures is None or "MixtralForCausalLM" in e.architectures
            fmt_ok = e.formats is None or op.weight_format in e.formats
            if e.per == op.name and e.min_tp <= 2 and e.min_hidden <= 4096 and arch_ok and fmt_ok:
                want += e.kernels.of(phase)
        want += inv.sampler.kernels if op.name == "lm_head" else 0
        assert op.engine_kernels == max(0, want), op.name


def test_ideal_and_an_unknown_version_know_no_engine_kernels() -> None:
    for op in _ops("mixtral-8x7b", 2, "bf16", "ideal", "decode"):
        assert op.engine_kernels == -1 and (op.kernels == 1 or op.name == "attn.kv_write")
    other = engine_preset("vllm", HW).model_copy(update={"version": "0.0-other"})
    sc = make_scenario(HW, batch=4, prompt_len=512, output_len=8, tp=2, weight_dtype="bf16", engine=other)
    assert all(o.engine_kernels == -1 for o in decode_ops(roofline.model("mixtral-8x7b"), sc, HW, 512))


def _tpot(engine: str, prof: CalibrationProfile) -> float:
    r = roofline.predict("llama-3.1-8b", "h100-sxm", 4, 512, 8, tp=2, engine=engine, calibration=prof)
    return r.tpot_s


@pytest.mark.parametrize("engine", ENGINES)
def test_graph_launch_is_paid_on_the_count_the_profile_measured_against(engine: str) -> None:
    """A decode step replayed as a CUDA graph pays per_kernel_graph_s × Σ count·kernels on the count the profile's
    per-kernel cost was measured against: the engine profile's (one engine GEMM kernel's excess in the engine's
    graph replay) on the engine's kernels, the default profile's (fitted to whole decode steps on one kernel per
    op) on one per op; the same profile read per op moves TPOT by exactly per_kernel_graph_s × Δkernels."""
    prof = shipped_engine_profile("h100-sxm", engine)
    assert prof is not None and prof.overheads.graph_kernels == "engine"
    base = default_profile()
    assert base.overheads.graph_kernels == "per_op"
    c = prof.overheads.per_kernel_graph_s
    on = _ops("llama-3.1-8b", 2, "bf16", engine, "decode")
    assert all(o.launch == "graph" for o in on)
    k_engine = sum(o.count * o.engine_kernels for o in on)
    k_op = sum(o.count * o.kernels for o in on)
    assert sum(o.count * launch_overhead_s(o, prof) for o in on) == pytest.approx(c * k_engine, rel=1e-12)
    c0 = base.overheads.per_kernel_graph_s
    assert sum(o.count * launch_overhead_s(o, base) for o in on) == pytest.approx(c0 * k_op, rel=1e-12)
    per_op = prof.model_copy(update={"overheads": prof.overheads.model_copy(update={"graph_kernels": "per_op"})})
    delta = _tpot(engine, prof) - _tpot(engine, per_op)
    assert delta == pytest.approx(c * (k_engine - k_op), rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("engine", ENGINES)
def test_format_conditions_pick_the_ops_weight_format(engine: str) -> None:
    """Llama-3.1-70B at tp 4 in fp8 vs bf16: each linear layer's kernels differ by exactly the extras conditioned on
    its weight format (activation quantisation before an FP8 GEMM, where the engine runs one); the 16-bit lm_head
    carries none of them."""
    inv = kernel_inventory(engine, engine_preset(engine, HW).version)
    assert inv is not None
    fp8 = {o.name: o for o in _ops("llama-3.1-70b", 4, "fp8", engine, "decode")}
    bf16 = {o.name: o for o in _ops("llama-3.1-70b", 4, "bf16", engine, "decode")}
    assert fp8["attn.qkv_proj"].weight_format == "fp8" and fp8["lm_head"].weight_format == "bf16"
    assert fp8["lm_head"].engine_kernels == bf16["lm_head"].engine_kernels

    def conditioned(name: str, fmt: str) -> int:
        return sum(
            e.kernels.decode
            for e in inv.extra
            if e.per == name
            and e.formats
            and fmt in e.formats
            and (e.architectures is None or "LlamaForCausalLM" in e.architectures)
        )

    for name in ("attn.qkv_proj", "attn.o_proj", "ffn.gate_up_proj", "ffn.down_proj"):
        assert fp8[name].engine_kernels - bf16[name].engine_kernels == conditioned(name, "fp8") - conditioned(
            name, "bf16"
        ), name


def test_builder_counts_are_arrays_free_of_the_grid() -> None:
    """Kernel counts are integers per op, the same at every batch of a vectorised build."""
    sc = make_scenario(HW, batch=np.array([1, 64, 512]), prompt_len=512, output_len=8, tp=2, engine="vllm")
    m = roofline.model("mixtral-8x7b")
    ops = build_ops(m, sc, HW, "decode", sc.batch, np.ones(3), np.full(3, 511.0))
    assert all(isinstance(o.engine_kernels, int) and o.engine_kernels >= 0 for o in ops)
