"""predict, sweep: the Python API notebook users, the CLI and the report all call."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from roofline.costs import prefill_cost, scenario_costs
from roofline.errors import ScenarioError
from roofline.evaluate import op_time, op_time_summed_over_context
from roofline.limits import MAX_SWEEP_POINTS
from roofline.memory import kv_bytes_per_sequence, kv_bytes_per_token, memory_budget
from roofline.ops.records import Op
from roofline.profile import CalibrationProfile, load_profile
from roofline.result import PredictionResult
from roofline.specs.hardware import HardwareSpec
from roofline.specs.library import hardware as load_hardware
from roofline.specs.library import model as load_model
from roofline.specs.model import ModelSpec
from roofline.specs.precision import Precision
from roofline.specs.scenario import EngineMemory, Scenario

if TYPE_CHECKING:
    import pandas as pd

ModelArg = ModelSpec | str | Path
HardwareArg = HardwareSpec | str | Path
ProfileArg = CalibrationProfile | str | Path | None


def resolve(
    model: ModelArg, hardware: HardwareArg, calibration: ProfileArg
) -> tuple[ModelSpec, HardwareSpec, CalibrationProfile]:
    """Specs and profile from names/paths. A measured profile's embedded device is found by its name."""
    prof = load_profile(calibration)
    if (
        prof.hardware is not None
        and not isinstance(hardware, HardwareSpec)
        and str(hardware) in (prof.hardware.name, "profile")
    ):
        hw = prof.hardware
    else:
        hw = load_hardware(hardware)
    return load_model(model), hw, prof


def make_scenario(
    batch: Any = 1,
    prompt_len: Any = 1024,
    output_len: Any = 128,
    *,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    replicas: int = 1,
    weight_dtype: str | Precision = "bf16",
    act_dtype: str | Precision | None = None,
    kv_dtype: str | Precision = "bf16",
    memory_utilization: float = 0.9,
    reserve_bytes: float | None = None,
    memory_capacity_bytes: float | None = None,
    max_batched_tokens: int | None = None,
    quantize_embeddings: bool = False,
    cuda_graphs: bool = True,
) -> Scenario:
    """Build a Scenario from plain values (names for formats).

    ``cuda_graphs`` (default True): decode steps replay as CUDA graphs (vLLM, SGLang,
    TensorRT-LLM ≥ 0.9 defaults); False launches every decode kernel eagerly.
    """
    return Scenario(
        batch=batch, prompt_len=prompt_len, output_len=output_len,
        weight_dtype=Precision.parse(weight_dtype, "weight_dtype"),
        act_dtype=None if act_dtype is None else Precision.parse(act_dtype, "act_dtype"),
        kv_dtype=Precision.parse(kv_dtype, "kv_dtype"), tp=tp, pp=pp, ep=ep, replicas=replicas,
        engine=EngineMemory(memory_utilization=memory_utilization, reserve_bytes=reserve_bytes,
                            capacity_bytes=memory_capacity_bytes, max_batched_tokens=max_batched_tokens),
        quantize_embeddings=quantize_embeddings, cuda_graphs=cuda_graphs,
    )  # fmt: skip


def predict(
    model: ModelArg,
    hardware: HardwareArg,
    batch: int = 1,
    prompt_len: int = 1024,
    output_len: int = 128,
    *,
    calibration: ProfileArg = None,
    scenario: Scenario | None = None,
    **kwargs: Any,
) -> PredictionResult:
    """Predict one scenario. ``kwargs`` are :func:`make_scenario` options (tp, weight_dtype, cuda_graphs, …)."""
    if scenario is not None and not isinstance(scenario, Scenario):
        raise ScenarioError(f"scenario must be a roofline Scenario (see make_scenario), got {type(scenario).__name__}")
    for name, v in (("batch", batch), ("prompt_len", prompt_len), ("output_len", output_len)):
        if np.ndim(v) != 0:
            raise ScenarioError(f"{name} must be one whole number in predict() (got {v!r}); sweep() takes lists")
    m, hw, prof = resolve(model, hardware, calibration)
    sc = scenario or make_scenario(batch, prompt_len, output_len, **kwargs)
    sc.validate_for(m, hw)
    return evaluate_scenario(m, hw, sc, prof)


def evaluate_scenario(m: ModelSpec, hw: HardwareSpec, sc: Scenario, prof: CalibrationProfile) -> PredictionResult:
    """The scalar evaluation behind predict (no validation, specs already loaded)."""
    pre_ops, pre, dec_ops, first, dec = scenario_costs(m, sc, hw, prof)
    mem = memory_budget(m, hw, sc)
    b, p, o = (float(np.asarray(x)) for x in (sc.batch, sc.prompt_len, sc.output_len))
    fits = bool(mem.fits)
    nan = float("nan")
    ttft = float(pre.time_s)
    dec_total = float(dec.time_s)
    tpot = dec_total / (o - 1) if o > 1 else float(first.time_s)
    e2e = ttft + dec_total
    contexts = p + np.arange(1, max(int(o), 2), dtype=np.float64)
    last = prefill_cost([op.at_context(np.asarray(p + o - 1)) for op in dec_ops], hw, prof) if o > 2 else first

    def steps_fn() -> np.ndarray:
        steps = _step_times(dec_ops, hw, prof, contexts) if o > 1 else np.asarray([float(first.time_s)])
        return steps if fits else steps * nan

    gpus = sc.num_gpus
    peak = hw.peak_flops_per_s(sc.gemm_compute_dtype(hw)) or nan
    dec_bytes = float(dec.memory_bytes) / max(o - 1, 1) if o > 1 else float(first.memory_bytes)
    dec_flops = float(dec.flops) / max(o - 1, 1) if o > 1 else float(first.flops)
    mfu, mbu = _utilisation(hw, sc, peak, float(pre.flops), float(pre.memory_bytes), ttft)
    mfu_dec, mbu_dec = _utilisation(hw, sc, peak, dec_flops, dec_bytes, tpot)
    out_tps = b * o / e2e * sc.replicas
    return PredictionResult(
        model=m, hardware=hw, scenario=sc, profile=prof, fits=fits, missing_bytes=float(mem.missing_bytes),
        ttft_s=ttft if fits else nan, tpot_s=tpot if fits else nan,
        tpot_first_s=float(first.time_s) if fits else nan, tpot_last_s=float(last.time_s) if fits else nan,
        e2e_s=e2e if fits else nan, decode_s=dec_total if fits else nan,
        throughput_tok_s=out_tps if fits else nan, throughput_tok_s_per_gpu=out_tps / gpus if fits else nan,
        total_throughput_tok_s=b * (p + o) / e2e * sc.replicas if fits else nan,
        kv_bytes_per_token=kv_bytes_per_token(m, sc.kv_dtype.bytes_per_element),
        kv_bytes_per_sequence=float(kv_bytes_per_sequence(m, p + o, sc.kv_dtype.bytes_per_element)),
        kv_cache_bytes=b * float(kv_bytes_per_sequence(m, p + o, sc.kv_dtype.bytes_per_element)),
        weight_bytes_per_gpu=mem.weight_bytes, activation_peak_bytes=float(mem.activation_peak_bytes),
        memory=mem, max_batch=int(mem.max_batch), prefill_flops=float(pre.flops), prefill_bytes=float(pre.memory_bytes),
        decode_flops_per_step=dec_flops, decode_bytes_per_step=dec_bytes, mfu_prefill=mfu, mbu_prefill=mbu,
        mfu_decode=mfu_dec, mbu_decode=mbu_dec,
        bound_prefill=str(pre.bound), bound_decode=str(dec.bound if o > 1 else first.bound),
        ops_fn=lambda: ops_frame(pre_ops, dec_ops, hw, prof, p, o), steps_fn=steps_fn,
    )  # fmt: skip


def _utilisation(
    hw: HardwareSpec, sc: Scenario, peak: float, flops: float, mem_bytes: float, t: float
) -> tuple[float, float]:
    """(MFU, MBU) of one phase: per-GPU FLOPs / (t × datasheet peak), bytes / (t × datasheet bandwidth).

    Ops are per GPU over all layers; with pp each GPU holds 1/pp of them while stages run in turn.
    """
    if not t > 0:
        return float("nan"), float("nan")
    return flops / sc.pp / (t * peak), mem_bytes / sc.pp / (t * hw.memory.bandwidth_bytes_per_s)


def _step_times(ops: list[Op], hw: HardwareSpec, prof: CalibrationProfile, contexts: np.ndarray) -> np.ndarray:
    """Decode step time at each context (vectorised over the contexts array)."""
    total = np.full(contexts.shape, prof.overheads.per_step_s)
    for op in ops:
        total = total + op.count * op_time(op.at_context(contexts), hw, prof).time_s
    return total


def ops_frame(
    pre_ops: list[Op], dec_ops: list[Op], hw: HardwareSpec, prof: CalibrationProfile, p: float, o: float
) -> pd.DataFrame:
    """Per-op breakdown. Prefill rows sum to TTFT; decode rows (mean over steps) sum to mean TPOT."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
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
            rows.append({
                "phase": phase, "name": op.name, "group": op.group, "kind": op.kind, "layer_kind": op.layer_kind,
                "count": op.count, "dtype": op.dtype, "m": float(ref.m), "n": float(ref.n), "k": float(ref.k),
                "flops": float(ref.flops), "weight_bytes": float(ref.weight_bytes), "act_bytes": float(ref.act_bytes),
                "kv_read_bytes": float(ref.kv_read_bytes), "kv_write_bytes": float(ref.kv_write_bytes),
                "comm_bytes": float(ref.comm_bytes),
                "intensity_flops_per_byte": float(ref.flops / ref.memory_bytes) if float(ref.memory_bytes) else np.nan,
                "op_time_s": float(t.time_s), "time_s": time, "bound": str(t.bound),
            })  # fmt: skip
        rows.append({
            "phase": phase, "name": "step_overhead", "group": "overhead", "kind": "overhead", "layer_kind": "model",
            "count": 1, "time_s": prof.overheads.per_step_s, "op_time_s": prof.overheads.per_step_s,
            "bound": "overhead", "flops": 0.0,
        })  # fmt: skip
    return pd.DataFrame(rows)


def sweep(
    model: ModelArg,
    hardware: HardwareArg,
    batch: Sequence[int] | int = 1,
    prompt_len: Sequence[int] | int = 1024,
    output_len: Sequence[int] | int = 128,
    *,
    tp: Sequence[int] | int = 1,
    calibration: ProfileArg = None,
    **kwargs: Any,
) -> pd.DataFrame:
    """Evaluate the full grid batch × prompt_len × output_len (× tp) vectorised; one row per point.

    Infeasible points keep their row with ``fits`` False, ``missing_bytes`` > 0 and NaN latencies.
    """
    import pandas as pd

    tps = _axis(tp, "tp")
    if np.any(tps != np.floor(tps)) or np.any(tps < 1) or np.any(tps > 2**31):
        raise ScenarioError(f"tp must be whole numbers >= 1 (got {tp!r})")
    b, pl, ol = (_axis(x, n) for x, n in ((batch, "batch"), (prompt_len, "prompt_len"), (output_len, "output_len")))
    points = math.prod(a.size for a in (b, pl, ol, tps))
    if points > MAX_SWEEP_POINTS:
        raise ScenarioError(
            f"the sweep grid has {points:,} points (batch × prompt_len × output_len × tp), more than "
            f"{MAX_SWEEP_POINTS:,} (roofline.limits); split it into several sweeps"
        )
    m, hw, prof = resolve(model, hardware, calibration)
    frames = []
    for t in tps:
        bg, pg, og = b[:, None, None], pl[None, :, None], ol[None, None, :]
        sc = make_scenario(bg, pg, og, tp=int(t), **kwargs)
        sc.validate_for(m, hw)
        frames.append(_grid_frame(m, hw, sc, prof, bg, pg, og))
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def _axis(x: Any, name: str) -> np.ndarray:
    """One sweep axis as a 1-d float64 array of finite numbers (booleans and text are not counts)."""
    try:
        arr = np.atleast_1d(np.asarray(x))
        ok = arr.ndim == 1 and arr.size > 0 and arr.dtype.kind in "iuf"
        out = arr.astype(np.float64) if ok else arr
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok or not np.all(np.isfinite(out)):
        raise ScenarioError(f"{name} must be a whole number or a flat list of whole numbers >= 1 (got {x!r})")
    return out


def _grid_frame(
    m: ModelSpec, hw: HardwareSpec, sc: Scenario, prof: CalibrationProfile, b: np.ndarray, p: np.ndarray,
    o: np.ndarray,
) -> pd.DataFrame:  # fmt: skip
    import pandas as pd

    _, pre, _, first, dec = scenario_costs(m, sc, hw, prof)
    mem = memory_budget(m, hw, sc)
    shape = np.broadcast_shapes(b.shape, p.shape, o.shape)
    full = [np.broadcast_to(x, shape).ravel() for x in (b, p, o)]
    ttft = np.broadcast_to(pre.time_s, shape).ravel()
    dec_t = np.broadcast_to(dec.time_s, shape).ravel()
    first_t = np.broadcast_to(first.time_s, shape).ravel()
    fits = np.broadcast_to(mem.fits, shape).ravel()
    e2e = ttft + dec_t
    tpot = np.where(full[2] > 1, dec_t / np.maximum(full[2] - 1, 1), first_t)
    out_tps = full[0] * full[2] / e2e * sc.replicas
    nan = np.nan
    return pd.DataFrame({
        "model": m.name, "hardware": hw.name, "tp": sc.tp, "batch": full[0].astype(np.int64),
        "prompt_len": full[1].astype(np.int64), "output_len": full[2].astype(np.int64), "fits": fits,
        "missing_bytes": np.broadcast_to(mem.missing_bytes, shape).ravel(),
        "ttft_s": np.where(fits, ttft, nan), "tpot_s": np.where(fits, tpot, nan), "e2e_s": np.where(fits, e2e, nan),
        "throughput_tok_s": np.where(fits, out_tps, nan),
        "throughput_tok_s_per_gpu": np.where(fits, out_tps / sc.num_gpus, nan),
        "kv_bytes_per_gpu": np.broadcast_to(mem.kv_bytes, shape).ravel(),
        "weight_bytes_per_gpu": mem.weight_bytes,
        "max_batch": np.broadcast_to(mem.max_batch, shape).ravel(),
        "bound_prefill": np.broadcast_to(pre.bound, shape).ravel(),
        "bound_decode": np.broadcast_to(dec.bound, shape).ravel(),
    })  # fmt: skip
