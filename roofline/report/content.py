"""Assemble everything a report shows from the public API: plan, predict, sensitivity, evidence.

The report never computes a number of its own: TTFT, TPOT, GPUs and cost come from
:func:`roofline.plan`; throughput per GPU, max batch and memory from :func:`roofline.predict`
at the planned configuration. Renderers only format what :class:`ReportData` holds.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.engine.config import honoured_options
from roofline.memory import kv_bytes_per_token
from roofline.profile import CalibrationProfile, load_profile
from roofline.report.candidates import candidate_prediction
from roofline.result import PredictionResult
from roofline.serving.plan.loadcurve import tokens_per_s_per_gpu
from roofline.serving.plan.planner import Candidate, PlanResult, plan
from roofline.serving.plan.procurement import Procurement
from roofline.serving.workload.presets import WorkloadPreset
from roofline.specs.hardware import HardwareSpec
from roofline.specs.library import hardware as load_hardware
from roofline.specs.library import model as load_model
from roofline.specs.model import ModelSpec

if TYPE_CHECKING:
    from roofline.report.evidence import Evidence, Reproduce
    from roofline.report.sensitivity import SensitivityRow
    from roofline.report.whatif import WhatIf
    from roofline.serving.plan.finalists import Finalist
    from roofline.serving.workload.mix import WorkloadMix

# table columns: key, header, unit, which direction is better (None: not ranked). Latencies and tok/s per GPU
# are at the planned load (latencies at the workload's SLO percentiles, simulated); capacity is the maximum
# sustainable rate of the whole deployment, its own concept.
COLUMNS: tuple[tuple[str, str, str, str | None], ...] = (
    ("ttft_s", "TTFT", "at load", "min"),
    ("tpot_s", "TPOT", "at load", "min"),
    ("tok_s_per_gpu", "Tok/s per GPU", "at load", "max"),
    ("capacity_rps", "Capacity", "req/s max", "max"),
    ("slo_capacity_rps", "SLO capacity", "req/s", "max"),
    ("headroom", "Headroom", "", "max"),
    ("gpus", "GPUs", "", "min"),
    ("usd_per_hour", "Cost", "$/h", "min"),
    ("usd_per_million_output_tokens", "Cost", "$/M tok", "min"),
    ("kwh_per_million_output_tokens", "Energy", "kWh/M tok", "min"),
)


@dataclass(frozen=True)
class ReportInputs:
    """What the user asked for, resolved to specs."""

    model: ModelSpec
    hardware: tuple[HardwareSpec, ...]
    hardware_args: tuple[str, ...]
    workload: WorkloadPreset
    precisions: tuple[str, ...]
    tp_options: tuple[int, ...] | None
    max_gpus: int | None
    prices: Mapping[str, float]
    profile: CalibrationProfile
    calibration_path: Path | None
    model_arg: str
    kv_dtype: str | None = None
    engine: str = "vllm"
    confidence: float = 0.8
    min_headroom: float | None = None
    usd_per_kwh: float | None = None
    engine_overrides: Mapping[str, object] = field(default_factory=dict)
    calibrated: bool = False
    seed: int = 0
    num_requests: int = 1000
    procurement: Procurement = field(default_factory=Procurement)
    variant: Callable[[CalibrationProfile], CalibrationProfile] | None = None
    mix: WorkloadMix | None = None  # a workload mix; ``workload`` is then its mean request (report.mixreport)
    dp_options: tuple[int, ...] | None = None  # MoE attention-DP sizes the plan tries (None: the planner's default)

    def profile_for(self, hw: HardwareSpec) -> CalibrationProfile:
        """The profile that prices ``hw``: the given calibration, else the engine's kernel profile on ``hw`` (or the
        default where none is shipped), through the sensitivity ``variant`` when one is set."""
        from roofline.engine.profiles import select_profile

        base = self.profile if self.calibrated else select_profile(None, hw.name, self.engine)
        return self.variant(base) if self.variant is not None else base

    def calibration_for(self, hw: HardwareSpec) -> CalibrationProfile | None:
        """What to pass as ``calibration=`` for ``hw``: None when the entry point's own selection applies."""
        return self.profile_for(hw) if self.calibrated or self.variant is not None else None

    def plan_calibration(self) -> dict[str, CalibrationProfile] | None:
        """``calibration=`` for :func:`plan` over every hardware (None: each hardware's own selection)."""
        if not self.calibrated and self.variant is None:
            return None
        return {hw.name: self.profile_for(hw) for hw in self.hardware}


@dataclass(frozen=True)
class HardwareRow:
    """The best configuration the planner found on one hardware, with its prediction."""

    hardware: HardwareSpec
    candidate: Candidate | None
    prediction: PredictionResult | None
    reason: str
    values: dict[str, float] = field(default_factory=dict)
    best: frozenset[str] = frozenset()
    finalist: Finalist | None = None
    rank: int = 0

    @property
    def feasible(self) -> bool:
        """True when some configuration on this hardware meets the SLOs on the simulator."""
        return self.finalist is not None and self.finalist.meets_slo


@dataclass(frozen=True)
class ReportData:
    """Everything the report renders (no formatting)."""

    inputs: ReportInputs
    plan: PlanResult
    rows: tuple[HardwareRow, ...]
    recommended: HardwareRow | None
    risks: tuple[tuple[float, str], ...]
    sensitivity: tuple[SensitivityRow, ...]
    evidence: Evidence
    reproduce: Reproduce
    seconds: float = 0.0
    whatifs: tuple[WhatIf, ...] = ()


def hw_name(hw: str | HardwareSpec) -> str:
    """Slug of a candidate's hardware (the planner may hold a slug or a spec)."""
    return hw if isinstance(hw, str) else str(hw.name)


def resolve_inputs(
    model: ModelSpec | str | Path,
    hardware: str | Sequence[str | Path],
    workload: WorkloadPreset,
    *,
    precisions: str | Sequence[str] = ("checkpoint",),
    tp_options: Sequence[int] | None = None,
    max_gpus: int | None = None,
    prices: Mapping[str, float] | None = None,
    calibration: CalibrationProfile | str | Path | None = None,
    kv_dtype: str | None = None,
    engine: str = "vllm",
    confidence: float = 0.8,
    min_headroom: float | None = None,
    usd_per_kwh: float | None = None,
    engine_overrides: Mapping[str, object] | None = None,
    seed: int = 0,
    procurement: Procurement | None = None,
    mix: WorkloadMix | None = None,
) -> ReportInputs:
    """Load specs and the profile; split comma-separated lists; check the engine options on every hardware (the
    report simulates, so every option the simulator takes applies)."""
    from roofline.engine.config import check_engine_options
    from roofline.engine.presets import overrides_map, resolve_engine

    overrides = overrides_map(engine_overrides)
    check_engine_options(overrides, "simulate")
    hw_args = tuple(_split(hardware))
    hws = tuple(load_hardware(h) for h in hw_args)
    for hw in hws:
        resolve_engine(engine, hw, overrides)
    precs = tuple(_split(precisions))
    cal_path = Path(calibration) if isinstance(calibration, str | Path) else None
    return ReportInputs(
        model=load_model(model),
        hardware=hws,
        hardware_args=hw_args,
        workload=workload,
        precisions=precs,
        tp_options=tuple(tp_options) if tp_options else None,
        max_gpus=max_gpus,
        prices=dict(prices or {}),
        profile=load_profile(calibration),
        calibrated=calibration is not None,
        calibration_path=cal_path,
        model_arg=model.name if isinstance(model, ModelSpec) else str(model),
        kv_dtype=kv_dtype,
        engine=engine,
        confidence=confidence,
        min_headroom=min_headroom,
        usd_per_kwh=usd_per_kwh,
        engine_overrides=overrides,
        seed=seed,
        procurement=procurement or Procurement(),
        mix=mix,
    )


def _split(value: str | Sequence[Any]) -> list[str]:
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    return [s.strip() for s in items if s.strip()]


def run_plan(inp: ReportInputs, profile: CalibrationProfile | None = None) -> PlanResult:
    """Call :func:`roofline.plan` with the report's inputs (optionally another profile)."""
    wl = inp.workload
    return plan(
        inp.model,
        qps=wl.qps,
        prompt_len=wl.prompt_len,
        output_len=wl.output_len,
        ttft_slo_s=wl.ttft_slo_s,
        tpot_slo_s=wl.tpot_slo_s,
        hardware=list(inp.hardware_args),
        precisions=inp.precisions,
        tp_options=inp.tp_options,
        max_gpus=inp.max_gpus,
        prices=dict(inp.prices) or None,
        calibration=profile if profile is not None else inp.plan_calibration(),
        kv_dtype=inp.kv_dtype,
        engine=inp.engine,
        engine_overrides=honoured_options(inp.engine_overrides, "plan"),
        procurement=inp.procurement,
        dp_options=inp.dp_options,
    )


def num(x: float | None) -> float:
    """A planner value as float: None (e.g. no price) becomes NaN."""
    return math.nan if x is None else float(x)


def row_values(inp: ReportInputs, f: Finalist) -> dict[str, float]:
    """The comparison-table numbers of one simulator-sized deployment, at the planned load.

    Tok/s per GPU = qps × output_len / GPUs (what each GPU produces at the planned load);
    capacity = replicas × the replica's sustainable rate; headroom = capacity / qps − 1; SLO capacity = the
    highest rate the SLOs hold at (:mod:`roofline.serving.plan.slo_capacity`).
    """
    wl = inp.workload
    per_gpu = float(tokens_per_s_per_gpu(wl.qps, wl.output_len, f.gpus))
    return {
        "ttft_s": f.ttft_s,
        "tpot_s": f.tpot_s,
        "tok_s_per_gpu": per_gpu,
        "capacity_rps": f.capacity_rps,
        "slo_capacity_rps": f.slo_capacity_rps,
        "headroom": f.headroom,
        "gpus": float(f.gpus),
        "usd_per_hour": num(f.total_usd_per_hour),
        "usd_per_million_output_tokens": num(f.usd_per_million_output_tokens),
        "kwh_per_million_output_tokens": num(f.kwh_per_million_output_tokens),
    }


def hardware_rows(
    inp: ReportInputs, plan_result: PlanResult, jobs: int | None = 1, done: Sequence[Any] | None = None
) -> tuple[HardwareRow, ...]:
    """One row per hardware: its cheapest simulator-sized deployment (:mod:`roofline.report.sizing`) on up to ``jobs``
    processes (:func:`roofline.serving.plan.parallel.map_jobs`), or ``done``: :func:`size_on` of each, already run."""
    from functools import partial

    from roofline.report.sizing import rank_key
    from roofline.serving.plan.parallel import map_jobs

    results = done if done is not None else map_jobs(partial(size_on, inp, plan_result.candidates), inp.hardware, jobs)
    sized = {hw.name: r for hw, r in zip(inp.hardware, results, strict=True)}
    rows = []
    for hw in inp.hardware:
        f, why = sized[hw.name]
        if f is None:
            cands = [c for c in plan_result.candidates if hw_name(c.hardware) == hw.name]
            reasons = [f"tp {c.tp} {c.precision}: {c.reason}" for c in cands if c.reason]
            text = why or "; ".join(reasons) or "no configuration was evaluated"
            rows.append(HardwareRow(hw, None, None, text))
            continue
        c = f.candidate
        rows.append(HardwareRow(hw, c, candidate_prediction(inp, hw, c), "", row_values(inp, f), finalist=f))
    order = sorted((r for r in rows if r.finalist is not None), key=lambda r: rank_key(r.finalist))  # type: ignore[arg-type]
    ranks = {r.hardware.name: i + 1 for i, r in enumerate(order)}
    rows = [replace(r, rank=ranks.get(r.hardware.name, 0)) for r in rows]
    return _mark_best(rows)


def size_on(inp: ReportInputs, cands: Sequence[Candidate], hw: HardwareSpec) -> tuple[Finalist | None, str]:
    """The cheapest simulator-sized deployment on ``hw`` from its planner candidates (a worker process's task)."""
    from roofline.report.sizing import size_hardware

    return size_hardware(inp, hw, [c for c in cands if hw_name(c.hardware) == hw.name])


def recommended_row(rows: Sequence[HardwareRow]) -> HardwareRow | None:
    """The feasible row ranked first by :data:`roofline.report.sizing.RANK_RULE`."""
    ok = [r for r in rows if r.feasible and r.rank > 0]
    return min(ok, key=lambda r: r.rank) if ok else None


def tie_note(rows: Sequence[HardwareRow]) -> str:
    """A sentence naming rows that tie on cost and how the tie was broken ('' when no tie)."""
    ok = sorted((r for r in rows if r.feasible), key=lambda r: r.rank)
    notes = []
    for a, b in itertools.pairwise(ok):
        ca, cb = a.values["usd_per_hour"], b.values["usd_per_hour"]
        if math.isfinite(ca) and math.isfinite(cb) and math.isclose(ca, cb, rel_tol=1e-9):
            if a.values["gpus"] != b.values["gpus"]:
                by = "fewer GPUs"
            elif a.values["tpot_s"] != b.values["tpot_s"]:
                by = "lower TPOT"
            else:
                by = "smaller tp"
            notes.append(
                f"{a.hardware.display_name} and {b.hardware.display_name} tie at {ca:,.2f} $/h: ranked by {by}"
            )
    return "; ".join(notes)


def _mark_best(rows: list[HardwareRow]) -> tuple[HardwareRow, ...]:
    """Flag, per ranked column, the feasible rows holding the best finite value."""
    best: dict[str, set[str]] = {r.hardware.name: set() for r in rows}
    for key, _, _, direction in COLUMNS:
        vals = [(r.values[key], r.hardware.name) for r in rows if r.feasible and math.isfinite(r.values[key])]
        if direction is None or len(vals) < 2:
            continue
        target = min(v for v, _ in vals) if direction == "min" else max(v for v, _ in vals)
        for v, name in vals:
            if math.isclose(v, target, rel_tol=1e-9):
                best[name].add(key)
    return tuple(replace(r, best=frozenset(best[r.hardware.name])) for r in rows)


def model_facts(inp: ReportInputs, kv_bytes_per_element: float = 2.0) -> dict[str, float]:
    """Parameter counts and KV bytes per token of the model (whole model, all layers)."""
    m = inp.model
    return {
        "params": float(m.param_count()),
        "active_params": float(m.active_param_count()),
        "kv_bytes_per_token": float(kv_bytes_per_token(m, kv_bytes_per_element)),
    }


def checkpoint_note(inp: ReportInputs) -> str:
    """'' or a sentence on a checkpoint shipped in a format other than bf16/fp16 (e.g. DeepSeek's FP8)."""
    m = inp.model
    ck = m.checkpoint
    groups = [getattr(ck, g) for g in ("attention", "dense_ffn", "routed_experts", "shared_experts")] if ck else []
    fmts = sorted({str(v) for v in groups} or {str(m.native_dtype)})
    low = [f for f in fmts if f not in ("bf16", "fp16", "fp32")]
    if not low:
        return ""
    return (
        f"{m.display_name} ships its checkpoint in {', '.join(fmts).upper()}; "
        "the default precision ('checkpoint') plans on those formats."
    )


def precision_label(inp: ReportInputs, precision: str) -> str:
    """A plan's weight precision as read: 'checkpoint (bf16)', 'checkpoint (fp8-block)' or the format given."""
    if precision != "checkpoint":
        return precision
    from roofline.serving.plan.finalists import checkpoint_format

    return f"checkpoint ({checkpoint_format(inp.model) or inp.model.native_dtype})"
