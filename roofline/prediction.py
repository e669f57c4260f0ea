"""predict, sweep: the Python API notebook users, the CLI and the report all call."""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from roofline.costs import ScenarioCosts, engine_cpu, scenario_costs, step_cost, with_cpu_step
from roofline.engine.config import EntryPoint, check_engine_options, step_seconds
from roofline.engine.presets import EngineArg, overrides_map
from roofline.engine.profiles import select_profile
from roofline.errors import ScenarioError
from roofline.evaluate import OpTiming, op_time, op_time_summed_over_context, step_host_launch_s
from roofline.latency import client_delays, latencies
from roofline.memory import (
    engine_for,
    kv_bytes_per_sequence,
    kv_bytes_per_sequence_all_gpus,
    kv_bytes_per_token,
    memory_budget,
)
from roofline.ops.expert_parallel import step_hidden_s
from roofline.ops.records import Op
from roofline.profile import CalibrationProfile, load_profile
from roofline.result import PredictionResult
from roofline.specs.hardware import ComputeDtype, HardwareSpec
from roofline.specs.library import hardware as load_hardware
from roofline.specs.library import model as load_model
from roofline.specs.model import ModelSpec
from roofline.specs.precision import Precision
from roofline.specs.scenario import Scenario, make_scenario
from roofline.specs.speculative import SpeculativeConfig

if TYPE_CHECKING:
    import pandas as pd

ModelArg = ModelSpec | str | Path
HardwareArg = HardwareSpec | str | Path
ProfileArg = CalibrationProfile | str | Path | None


def resolve(
    model: ModelArg, hardware: HardwareArg, calibration: ProfileArg, engine: EngineArg = None
) -> tuple[ModelSpec, HardwareSpec, CalibrationProfile]:
    """Specs and profile from names/paths. A measured profile's embedded device is found by its name.

    Without ``calibration`` the profile is the one shipped for (hardware, ``engine``), fitted to that engine's
    kernels on that GPU, or the shipped default where none is (:func:`roofline.engine.profiles.select_profile`).
    """
    given = load_profile(calibration) if calibration is not None else None
    if (
        given is not None
        and given.hardware is not None
        and not isinstance(hardware, HardwareSpec)
        and str(hardware) in (given.hardware.name, "profile")
    ):
        hw = given.hardware
    else:
        hw = load_hardware(hardware)
    prof = given if given is not None else select_profile(None, hw.name, engine)
    return load_model(model), hw, prof


def predict(
    model: ModelArg,
    hardware: HardwareArg,
    batch: int = 1,
    prompt_len: int = 1024,
    output_len: int = 128,
    *,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    replicas: int = 1,
    weight_dtype: str | Precision | dict[str, str] = "checkpoint",
    act_dtype: str | Precision | None = None,
    kv_dtype: str | Precision = "bf16",
    quantize_embeddings: bool = False,
    engine: EngineArg = None,
    engine_overrides: Mapping[str, object] | None = None,
    cuda_graphs: bool | None = None,
    calibration: ProfileArg = None,
    scenario: Scenario | None = None,
    speculative: SpeculativeConfig | str | None = None,
    dp: int = 1,
    redundant_experts: int = 0,
    moe_overlap: str = "none",
) -> PredictionResult:
    """Predict one static batch: TTFT, TPOT, E2E, throughput, memory and max batch.

    Options are those of :func:`make_scenario`; ``scenario`` replaces them all. Memory and
    ``max_batch`` follow the engine (default preset ``vllm``) and do not depend on ``batch``;
    a batch above the engine's ``max_num_seqs`` is refused. Every step (the prefill pass and each
    decode step) costs step_seconds(GPU, ``step_overhead_s``, ``async_scheduling``) as in the simulator;
    TTFT = y + prefill + k·TPOT and E2E = TTFT + decode with the engine's ``request_overhead_s`` y and
    ``output_lag_steps`` k. Engine options the static model cannot represent (the scheduler's
    prefix_caching, mixed_chunk, chunked_prefill, …) raise ScenarioError
    (:data:`roofline.engine.config.ENGINE_OPTION_SCOPE`).
    ``speculative`` (a :class:`SpeculativeConfig` or its text, e.g. ``"eagle:k=4,alpha=0.8"``)
    decodes with draft-and-verify steps (:mod:`roofline.speculation.decode`); ``result.speculative``
    then holds the verify/draft split and the speedup over plain decoding. ``dp``, ``redundant_experts`` and
    ``moe_overlap`` lay out a wide-EP MoE replica (:mod:`roofline.specs.moe_layout`): each DP rank runs its own
    ⌈batch/dp⌉ sequences (and its own ``max_num_seqs``).
    """
    if scenario is not None and not isinstance(scenario, Scenario):
        raise ScenarioError(f"scenario must be a roofline Scenario (see make_scenario), got {type(scenario).__name__}")
    for name, v in (("batch", batch), ("prompt_len", prompt_len), ("output_len", output_len)):
        if np.ndim(v) != 0:
            raise ScenarioError(f"{name} must be one whole number in predict() (got {v!r}); sweep() takes lists")
    check_engine_options(overrides_map(engine_overrides), "predict")
    m, hw, prof = resolve(model, hardware, calibration, scenario.engine if scenario is not None else engine)
    sc = scenario or make_scenario(
        hw,
        batch,
        prompt_len,
        output_len,
        tp=tp,
        pp=pp,
        ep=ep,
        replicas=replicas,
        dp=dp,
        redundant_experts=redundant_experts,
        moe_overlap=moe_overlap,
        weight_dtype=weight_dtype,
        act_dtype=act_dtype,
        kv_dtype=kv_dtype,
        quantize_embeddings=quantize_embeddings,
        engine=engine,
        engine_overrides=engine_overrides,
        cuda_graphs=cuda_graphs,
    )
    sc.validate_for(m, hw)
    check_batch_cap(sc, hw, "predict")
    r = evaluate_scenario(m, hw, sc, prof)
    if speculative is None:
        return r
    _check_speculative_engine(sc)
    from roofline.speculation.decode import with_speculation

    return with_speculation(r, speculative)


def check_batch_cap(sc: Scenario, hw: HardwareSpec, entry: EntryPoint) -> None:
    """Refuse a batch above the engine's ``max_num_seqs``: the engine never runs more sequences in one step."""
    eng = engine_for(sc, hw)
    top = float(np.max(np.asarray(sc.batch, dtype=np.float64)))
    if sc.dp > 1:  # every attention-DP rank has its own scheduler and cap
        top = math.ceil(top / sc.dp)
    if top > eng.max_num_seqs:
        b = int(top)
        raise ScenarioError(
            f"batch {b} is more than the engine's max_num_seqs {eng.max_num_seqs} ({eng.label} runs at most "
            f"{eng.max_num_seqs} sequences a step); {entry} prices one batch of that many at once: lower the batch "
            f"or raise the cap (engine_overrides={{'max_num_seqs': {b}}}, --engine-set max_num_seqs={b})"
        )


def _check_speculative_engine(sc: Scenario) -> None:
    """Refuse engine overheads with speculative decoding: its draft-and-verify steps are priced without them."""
    eng = sc.engine
    if eng is None:
        return
    for name in ("step_overhead_s", "request_overhead_s", "output_lag_steps"):
        if getattr(eng, name):
            raise ScenarioError(
                f"engine option {name} applies to plain decoding in predict and to the serving simulator; "
                f"predict(speculative=...) prices draft-and-verify steps without the engine's overheads: drop it "
                f"or use roofline simulate --spec"
            )


def evaluate_scenario(m: ModelSpec, hw: HardwareSpec, sc: Scenario, prof: CalibrationProfile) -> PredictionResult:
    """The scalar evaluation behind predict (no validation, specs already loaded)."""
    costs = scenario_costs(m, sc, hw, prof)
    pre, first, dec, dec_ops = costs.prefill, costs.first_step, costs.decode, costs.decode_ops
    lat = latencies(costs, sc)
    mem = memory_budget(m, hw, sc)
    b, p, o = (float(np.asarray(x)) for x in (sc.batch, sc.prompt_len, sc.output_len))
    fits = bool(mem.fits)
    nan = float("nan")

    def ok(x: np.ndarray) -> float:
        return float(x) if fits else nan

    contexts = p + np.arange(1, max(int(o), 2), dtype=np.float64)
    cpu = engine_cpu(sc)
    last_ops = [op.at_context(np.asarray(p + o - 1)) for op in dec_ops] if o > 2 else None
    last = step_cost(last_ops, hw, prof, costs.timings) if last_ops is not None else None
    last = first if last is None else with_cpu_step(last, *cpu)

    def steps_fn() -> np.ndarray:
        steps = (
            step_seconds(_step_times(dec_ops, hw, prof, contexts), *cpu) if o > 1 else np.asarray([float(first.time_s)])
        )
        return steps if fits else steps * nan

    fallback = hw.peak_flops_per_s(sc.gemm_compute_dtype(hw)) or nan
    pre_spf, dec_spf = (_seconds_per_peak_flop(ops, hw, fallback) for ops in (costs.prefill_ops, dec_ops))
    dec_bytes = float(dec.memory_bytes) / max(o - 1, 1) if o > 1 else float(first.memory_bytes)
    dec_flops = float(dec.flops) / max(o - 1, 1) if o > 1 else float(first.flops)
    mfu, mbu = _utilisation(hw, sc, pre_spf, float(pre.flops), float(pre.memory_bytes), float(pre.time_s))
    mfu_dec, mbu_dec = _utilisation(hw, sc, dec_spf, dec_flops, dec_bytes, float(lat.tpot_s))
    kv_seq = float(kv_bytes_per_sequence(m, p + o, sc.kv_dtype.bytes_per_element))
    return PredictionResult(
        model=m,
        hardware=hw,
        scenario=sc,
        profile=prof,
        fits=fits,
        missing_bytes=float(mem.missing_bytes),
        ttft_s=ok(lat.ttft_s),
        tpot_s=ok(lat.tpot_s),
        tpot_first_s=ok(first.time_s),
        tpot_last_s=ok(last.time_s),
        e2e_s=ok(lat.e2e_s),
        decode_s=ok(lat.decode_s),
        throughput_tok_s=ok(lat.throughput_tok_s),
        throughput_tok_s_per_gpu=ok(lat.throughput_tok_s_per_gpu),
        total_throughput_tok_s=ok(lat.total_throughput_tok_s),
        kv_bytes_per_token=_kv_bytes_per_token(m, sc.kv_dtype.bytes_per_element),
        kv_bytes_per_sequence=kv_seq,
        kv_cache_bytes=b * float(kv_bytes_per_sequence_all_gpus(m, sc, p + o)),
        weight_bytes_per_gpu=mem.weight_bytes,
        activation_peak_bytes=float(mem.activation_peak_bytes),
        memory=mem,
        max_batch=int(mem.max_batch),
        prefill_flops=float(pre.flops),
        prefill_bytes=float(pre.memory_bytes),
        decode_flops_per_step=dec_flops,
        decode_bytes_per_step=dec_bytes,
        mfu_prefill=mfu,
        mbu_prefill=mbu,
        mfu_decode=mfu_dec,
        mbu_decode=mbu_dec,
        bound_prefill=str(pre.bound),
        bound_decode=str(dec.bound if o > 1 else first.bound),
        ops_fn=lambda: ops_frame(costs.prefill_ops, dec_ops, hw, prof, p, o, engine_rows(costs, sc)),
        steps_fn=steps_fn,
    )


_KV_PER_TOKEN: dict[tuple[int, float], tuple[weakref.ref[ModelSpec], float]] = {}


def _kv_bytes_per_token(m: ModelSpec, kv_bytes: float) -> float:
    """:func:`kv_bytes_per_token` of a (frozen) model object and element size, computed once while it lives."""
    key = (id(m), kv_bytes)
    hit = _KV_PER_TOKEN.get(key)
    if hit is not None and hit[0]() is m:
        return hit[1]
    value = kv_bytes_per_token(m, kv_bytes)
    _KV_PER_TOKEN[key] = (weakref.ref(m, lambda _ref: _KV_PER_TOKEN.pop(key, None)), value)
    return value


def _utilisation(
    hw: HardwareSpec, sc: Scenario, seconds_per_flop: float, flops: float, mem_bytes: float, t: float
) -> tuple[float, float]:
    """(MFU, MBU) of one phase: per-GPU FLOPs × the seconds one FLOP takes at the datasheet peak of its own
    format (:func:`_seconds_per_peak_flop`) / t, and bytes / (t × datasheet bandwidth).

    Ops are per GPU over all layers; with pp each GPU holds 1/pp of them while stages run in turn.
    """
    if not t > 0:
        return float("nan"), float("nan")
    return flops * seconds_per_flop / sc.pp / t, mem_bytes / sc.pp / (t * hw.memory.bandwidth_bytes_per_s)


def _seconds_per_peak_flop(ops: list[Op], hw: HardwareSpec, fallback_peak: float) -> float:
    """Σ count·FLOPs / peak(op's format) ÷ Σ count·FLOPs over ``ops`` (s per FLOP): MFU's denominator when formats
    mix (an fp8-block checkpoint runs its experts at the fp8 peak, its attention at bf16's), so MFU never exceeds 1
    by dividing fp8 work by the bf16 peak. A format without a peak on ``hw`` counts at ``fallback_peak``."""
    by_dtype: dict[ComputeDtype, float] = {}  # Σ count·FLOPs per format, then one peak lookup per format
    for op in ops:
        f = op.flops
        by_dtype[op.dtype] = by_dtype.get(op.dtype, 0.0) + op.count * float(f if f.ndim == 0 else np.max(f))
    total = sum(by_dtype.values())
    at_peak = math.fsum(f / (hw.peak_flops_per_s(d) or fallback_peak) for d, f in by_dtype.items())
    return at_peak / total if total > 0 else 1.0 / fallback_peak


def _step_times(ops: list[Op], hw: HardwareSpec, prof: CalibrationProfile, contexts: np.ndarray) -> np.ndarray:
    """Decode step time at each context (vectorised over the contexts array), less what a two-batch overlap hides."""
    total = np.full(contexts.shape, prof.overheads.per_step_s)
    shares = []
    for op in ops:
        share = op.count * op_time(op.at_context(contexts), hw, prof).time_s
        shares.append(share)
        total = total + share
    hidden = step_hidden_s(ops, shares) if any(op.overlap for op in ops) else None
    total = total if hidden is None else total - hidden
    return np.maximum(total, prof.overheads.per_step_s + step_host_launch_s(ops, prof))  # run-ahead launches


#: The kind of an :func:`engine_rows` row that is not the engine's own: the host's exposed run-ahead launches.
_ENGINE_KIND = {"host_launch_exposed": "overhead"}


def engine_rows(costs: ScenarioCosts, sc: Scenario) -> list[tuple[str, str, float]]:
    """(phase, name, seconds) of the parts of TTFT and mean TPOT the ops do not show, those not 0: the host's
    launches beyond the GPU work (a run-ahead eager launch) of the prefill step and of the mean decode step, the
    CPU part of each, the request overhead y and the output lag k·TPOT (k × the prefill step when O = 1), all
    counted in the prefill phase but the decode launch and CPU parts."""
    o = float(np.asarray(sc.output_len))
    y, k = client_delays(sc)
    pre, dec = float(np.asarray(costs.prefill.cpu_s)), float(np.asarray(costs.decode.cpu_s))
    dec_cpu = dec / (o - 1) if o > 1 else float(np.asarray(costs.first_step.cpu_s))
    tpot = float(np.asarray(costs.decode.time_s)) / (o - 1) if o > 1 else float(np.asarray(costs.prefill.time_s))
    launch = (
        float(np.asarray(costs.decode.launch_s)) / (o - 1) if o > 1 else float(np.asarray(costs.first_step.launch_s))
    )
    rows = [
        ("prefill", "host_launch_exposed", float(np.asarray(costs.prefill.launch_s))),
        ("decode", "host_launch_exposed", launch),
        ("prefill", "engine_cpu", pre),
        ("decode", "engine_cpu", dec_cpu),
        ("prefill", "request_overhead", y),
        ("prefill", "output_lag", k * tpot),
        ("prefill", "moe_overlap_hidden", -float(np.asarray(costs.prefill.hidden_s))),
        ("decode", "moe_overlap_hidden", -float(np.asarray(costs.decode.hidden_s)) / max(o - 1, 1)),
    ]
    return [r for r in rows if r[2] != 0.0]


def ops_frame(
    pre_ops: list[Op],
    dec_ops: list[Op],
    hw: HardwareSpec,
    prof: CalibrationProfile,
    p: float,
    o: float,
    engine: Sequence[tuple[str, str, float]] = (),
) -> pd.DataFrame:
    """Per-op breakdown. Prefill rows sum to TTFT; decode rows (mean over steps) sum to mean TPOT.

    ``engine``: (phase, name, seconds) rows of the engine's CPU part, request overhead and output lag
    (:func:`engine_rows`), appended to their phase."""
    import pandas as pd

    rows: list[dict[str, object]] = []
    n_steps = max(o - 1, 1)
    lo, hi = (p + 1, p + o - 1) if o > 1 else (p + 1, p + 1)
    for phase, ops in (("prefill", pre_ops), ("decode", dec_ops)):
        for op in ops:
            ref = op if phase == "prefill" else op.at_context(np.asarray((lo + hi) / 2))
            t = op_time(ref, hw, prof)
            if phase == "prefill":
                time = op.count * float(t.time_s)
            else:
                time = op.count * float(op_time_summed_over_context(op, hw, prof, np.asarray(lo), np.asarray(hi)))
                time /= n_steps
            rows.append(_op_row(phase, op, ref, t, time))
        rows.append(_overhead_row(phase, "step_overhead", "overhead", prof.overheads.per_step_s))
        rows += [
            _overhead_row(phase, name, _ENGINE_KIND.get(name, "engine"), secs)
            for ph, name, secs in engine
            if ph == phase
        ]
    return pd.DataFrame(rows)


def _op_row(phase: str, op: Op, ref: Op, t: OpTiming, time_s: float) -> dict[str, object]:
    """One op's row of :func:`ops_frame`: its shape and bytes at the reference context, its time."""
    mem = float(ref.memory_bytes)
    return {
        "phase": phase, "name": op.name, "group": op.group, "kind": op.kind, "layer_kind": op.layer_kind,
        "count": op.count, "dtype": op.dtype, "m": float(ref.m), "n": float(ref.n), "k": float(ref.k),
        "flops": float(ref.flops), "weight_bytes": float(ref.weight_bytes), "act_bytes": float(ref.act_bytes),
        "kv_read_bytes": float(ref.kv_read_bytes), "kv_write_bytes": float(ref.kv_write_bytes),
        "comm_bytes": float(ref.comm_bytes), "intensity_flops_per_byte": float(ref.flops) / mem if mem else np.nan,
        "op_time_s": float(t.time_s), "time_s": time_s, "bound": str(t.bound),
    }  # fmt: skip


def _overhead_row(phase: str, name: str, group: str, seconds: float) -> dict[str, object]:
    """A row of :func:`ops_frame` for a time no op carries (the profile's per-step overhead, the engine's parts)."""
    return {
        "phase": phase, "name": name, "group": group, "kind": "overhead", "layer_kind": "model", "count": 1,
        "time_s": seconds, "op_time_s": seconds, "bound": "overhead", "flops": 0.0,
    }  # fmt: skip
