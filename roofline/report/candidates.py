"""A planner candidate as the report evaluates it: the options of :func:`roofline.predict` the planner priced it
with, and the prediction at its batch (the memory and ops behind the plan)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from roofline.engine.config import honoured_options

if TYPE_CHECKING:
    from roofline.report.content import ReportInputs
    from roofline.result import PredictionResult
    from roofline.serving.plan.result import Candidate
    from roofline.specs.hardware import HardwareSpec


class PlannerOptions(TypedDict):
    """The scenario options of :func:`roofline.predict` the planner evaluates a candidate with."""

    tp: int
    pp: int
    dp: int
    ep: int
    weight_dtype: str
    kv_dtype: str
    engine: str
    engine_overrides: dict[str, object]


def planner_options(inp: ReportInputs, cand: Candidate) -> PlannerOptions:
    """The scenario options the planner evaluates a candidate with (see ``roofline.serving.plan.planner``)."""
    return {
        "tp": cand.tp,
        "pp": cand.pp,
        "dp": cand.dp,
        "ep": cand.ep,
        "weight_dtype": cand.precision,
        "kv_dtype": cand.kv_dtype,
        "engine": inp.engine,
        "engine_overrides": honoured_options(inp.engine_overrides, "predict"),
    }


def candidate_prediction(inp: ReportInputs, hw: HardwareSpec, cand: Candidate) -> PredictionResult:
    """``roofline.predict`` at a candidate's batch and options: the memory and ops behind the plan."""
    from roofline.prediction import predict

    wl = inp.workload
    return predict(
        inp.model,
        hw,
        batch=int(cand.batch),
        prompt_len=wl.prompt_len,
        output_len=wl.output_len,
        calibration=inp.calibration_for(hw),
        **planner_options(inp, cand),
    )
