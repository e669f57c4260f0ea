"""Assemble everything a report shows from the public API: plan, predict, sensitivity, evidence.

The report never computes a number of its own: TTFT, TPOT, GPUs and cost come from
:func:`roofline.plan`; throughput per GPU, max batch and memory from :func:`roofline.predict`
at the planned configuration. Renderers only format what :class:`ReportData` holds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.memory import kv_bytes_per_token
from roofline.profile import CalibrationProfile, load_profile
from roofline.result import PredictionResult
from roofline.serving.planner import Candidate, PlanResult, plan, tokens_per_s_per_gpu
from roofline.serving.workloads import Workload
from roofline.specs.hardware import HardwareSpec
from roofline.specs.library import hardware as load_hardware
from roofline.specs.library import model as load_model
from roofline.specs.model import ModelSpec

if TYPE_CHECKING:
    from roofline.report.sensitivity import SensitivityRow

# table columns: key, header, unit, which direction is better (None: not ranked)
COLUMNS: tuple[tuple[str, str, str, str | None], ...] = (
    ("ttft_s", "TTFT", "", "min"),
    ("tpot_s", "TPOT", "", "min"),
    ("tok_s_per_gpu", "Tok/s per GPU", "", "max"),
    ("max_batch", "Max batch", "", "max"),
    ("gpus", "GPUs", "", "min"),
    ("usd_per_hour", "Cost", "$/h", "min"),
    ("usd_per_million_output_tokens", "Cost", "$/M tok", "min"),
)


@dataclass(frozen=True)
class ReportInputs:
    """What the user asked for, resolved to specs."""

    model: ModelSpec
    hardware: tuple[HardwareSpec, ...]
    hardware_args: tuple[str, ...]
    workload: Workload
    precisions: tuple[str, ...]
    tp_options: tuple[int, ...] | None
    max_gpus: int | None
    prices: Mapping[str, float]
    profile: CalibrationProfile
    calibration_path: Path | None
    model_arg: str
    kv_dtype: str | None = None
    engine: str = "vllm"


@dataclass(frozen=True)
class HardwareRow:
    """The best configuration the planner found on one hardware, with its prediction."""

    hardware: HardwareSpec
    candidate: Candidate | None
    prediction: PredictionResult | None
    reason: str
    values: dict[str, float] = field(default_factory=dict)
    best: frozenset[str] = frozenset()

    @property
    def feasible(self) -> bool:
        """True when some configuration on this hardware meets the SLOs."""
        return self.candidate is not None and self.candidate.feasible


@dataclass(frozen=True)
class ReportData:
    """Everything the report renders (no formatting)."""

    inputs: ReportInputs
    plan: PlanResult
    rows: tuple[HardwareRow, ...]
    recommended: HardwareRow | None
    risks: tuple[tuple[float, str], ...]
    sensitivity: tuple[Any, ...]
    evidence: Any
    reproduce: Any
    seconds: float = 0.0


def hw_name(hw: Any) -> str:
    """Slug of a candidate's hardware (the planner may hold a slug or a spec)."""
    return hw if isinstance(hw, str) else str(hw.name)


def resolve_inputs(
    model: ModelSpec | str | Path,
    hardware: str | Sequence[str | Path],
    workload: Workload,
    *,
    precisions: str | Sequence[str] = ("checkpoint",),
    tp_options: Sequence[int] | None = None,
    max_gpus: int | None = None,
    prices: Mapping[str, float] | None = None,
    calibration: CalibrationProfile | str | Path | None = None,
    kv_dtype: str | None = None,
    engine: str = "vllm",
) -> ReportInputs:
    """Load specs and the profile; split comma-separated lists."""
    hw_args = tuple(_split(hardware))
    precs = tuple(_split(precisions))
    cal_path = Path(calibration) if isinstance(calibration, str | Path) else None
    return ReportInputs(
        model=load_model(model), hardware=tuple(load_hardware(h) for h in hw_args), hardware_args=hw_args,
        workload=workload, precisions=precs, tp_options=tuple(tp_options) if tp_options else None,
        max_gpus=max_gpus, prices=dict(prices or {}), profile=load_profile(calibration), calibration_path=cal_path,
        model_arg=model.name if isinstance(model, ModelSpec) else str(model), kv_dtype=kv_dtype, engine=engine,
    )  # fmt: skip


def _split(value: str | Sequence[Any]) -> list[str]:
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    return [s.strip() for s in items if s.strip()]


def run_plan(inp: ReportInputs, profile: CalibrationProfile | None = None) -> PlanResult:
    """Call :func:`roofline.plan` with the report's inputs (optionally another profile)."""
    wl = inp.workload
    return plan(
        inp.model, qps=wl.qps, prompt_len=wl.prompt_len, output_len=wl.output_len, ttft_slo_s=wl.ttft_slo_s,
        tpot_slo_s=wl.tpot_slo_s, hardware=list(inp.hardware_args), precisions=inp.precisions,
        tp_options=inp.tp_options, max_gpus=inp.max_gpus, prices=dict(inp.prices) or None,
        calibration=profile if profile is not None else inp.profile, kv_dtype=inp.kv_dtype, engine=inp.engine,
    )  # fmt: skip


def num(x: Any) -> float:
    """A planner value as float: None (e.g. no price) becomes NaN."""
    return math.nan if x is None else float(x)


def planner_options(inp: ReportInputs, cand: Candidate) -> dict[str, Any]:
    """The scenario options the planner evaluates a candidate with (see ``roofline.serving.planner``)."""
    return {
        "tp": cand.tp, "pp": cand.pp, "weight_dtype": cand.precision, "kv_dtype": cand.kv_dtype,
        "engine": inp.engine,
    }  # fmt: skip


def candidate_prediction(inp: ReportInputs, hw: HardwareSpec, cand: Candidate) -> PredictionResult:
    """``roofline.predict`` at a candidate's batch and options: the memory and ops behind the plan."""
    from roofline.prediction import predict

    wl = inp.workload
    return predict(
        inp.model, hw, batch=int(cand.batch), prompt_len=wl.prompt_len, output_len=wl.output_len,
        calibration=inp.profile, **planner_options(inp, cand),
    )  # fmt: skip


def _rank_key(c: Candidate) -> tuple[float, float]:
    cost = num(c.usd_per_hour)
    return (cost if math.isfinite(cost) else math.inf, float(c.gpus))


def row_values(inp: ReportInputs, c: Candidate) -> dict[str, float]:
    """The comparison-table numbers of one candidate, all straight from the plan.

    Throughput per GPU is the replica's sustained output rate at the planned batch:
    replica_rps × output_len / GPUs per replica.
    """
    per_replica = c.tp * c.pp
    return {
        "ttft_s": float(c.ttft_s), "tpot_s": float(c.tpot_s),
        "tok_s_per_gpu": float(tokens_per_s_per_gpu(c.replica_rps, inp.workload.output_len, per_replica)),
        "max_batch": float(c.max_batch_memory), "gpus": float(c.gpus), "usd_per_hour": num(c.usd_per_hour),
        "usd_per_million_output_tokens": num(c.usd_per_million_output_tokens),
    }  # fmt: skip


def hardware_rows(inp: ReportInputs, plan_result: PlanResult) -> tuple[HardwareRow, ...]:
    """One row per hardware: the recommended candidate if on it, else its cheapest feasible one."""
    rec = plan_result.recommended
    rows = []
    for hw in inp.hardware:
        cands = [c for c in plan_result.candidates if hw_name(c.hardware) == hw.name]
        feasible = [c for c in cands if c.feasible]
        if rec is not None and hw_name(rec.hardware) == hw.name:
            chosen = rec
        elif feasible:
            chosen = min(feasible, key=_rank_key)
        else:
            reasons = [f"tp {c.tp} {c.precision}: {c.reason}" for c in cands if c.reason]
            rows.append(HardwareRow(hw, None, None, "; ".join(reasons) or "no configuration was evaluated"))
            continue
        rows.append(HardwareRow(hw, chosen, candidate_prediction(inp, hw, chosen), "", row_values(inp, chosen)))
    return _mark_best(rows)


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
    return tuple(
        HardwareRow(r.hardware, r.candidate, r.prediction, r.reason, r.values, frozenset(best[r.hardware.name]))
        for r in rows
    )


def model_facts(inp: ReportInputs, kv_bytes_per_element: float = 2.0) -> dict[str, float]:
    """Parameter counts and KV bytes per token of the model (whole model, all layers)."""
    m = inp.model
    return {
        "params": float(m.param_count()),
        "active_params": float(m.active_param_count()),
        "kv_bytes_per_token": float(kv_bytes_per_token(m, kv_bytes_per_element)),
    }


def risks(
    data_rows: Sequence[HardwareRow], rec: HardwareRow | None, inp: ReportInputs, sens: Sequence[SensitivityRow]
) -> list[tuple[float, str]]:
    """(severity, sentence) pairs, most severe first; the first is the report's main risk."""
    out: list[tuple[float, str]] = []
    wl = inp.workload
    if rec is None or rec.candidate is None:
        return [(9.0, "No hardware meets the SLOs for this workload; see the reasons in the comparison table.")]
    c = rec.candidate
    for key, slo, label in (("tpot_s", wl.tpot_slo_s, "TPOT"), ("ttft_s", wl.ttft_slo_s, "TTFT")):
        ratio = (c.tpot_s if key == "tpot_s" else c.ttft_s) / slo
        if ratio > 0.85:
            out.append((
                1.0 + ratio,
                f"At the planned load {label} is already {ratio:.0%} of its SLO: kernels {1 / ratio - 1:.0%} slower "
                "than predicted would miss it; add a replica or choose a larger tensor-parallel size.",
            ))  # fmt: skip
    headroom = num(c.headroom)
    if math.isfinite(headroom) and headroom < 0.15:
        out.append((
            1.6 - headroom,
            f"Spare capacity is only {headroom:.0%}: sustained traffic above {wl.qps * (1 + headroom):.3g} "
            "requests/s breaks the TPOT SLO and queues requests; provision an extra replica for bursts.",
        ))  # fmt: skip
    for s in sens:
        if not s.changes_choice or s.label == "datasheet":
            continue
        if s.hardware is None:
            out.append((1.5, f"If the {s.description}, no configuration meets the SLOs; measure before buying."))
            continue
        cost = f" at {s.usd_per_hour:,.2f} $/h" if math.isfinite(s.usd_per_hour) else ""
        plan_text = f"{s.gpus:.0f} × {s.display_name}{cost}"
        if s.downside:
            out.append((1.5, f"If the {s.description}, the plan needs {plan_text} (see Sensitivity)."))
        else:
            out.append((0.4, f"If the {s.description}, {plan_text} suffice: measuring may save money."))
    if inp.profile.device is None:
        out.append((
            0.5, "The ceilings come from a profile not measured on the target machines; real kernels, drivers and "
            "serving engines can be 10-30% away from them. Run `roofline calibrate` on the hardware to confirm.",
        ))  # fmt: skip
    return sorted(out, key=lambda x: -x[0])
