"""roofline: analytical performance modelling for LLM inference.

Public API (imports are lazy so ``import roofline`` stays fast and never needs torch)::

    r = roofline.predict("llama-3.1-70b", "h100-sxm", batch=8, prompt_len=2048, output_len=256, tp=4)
    r.ttft_s, r.tpot_s, r.throughput_tok_s, r.ops
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "hardware": "roofline.specs.library",
    "model": "roofline.specs.library",
    "list_hardware": "roofline.specs.library",
    "list_models": "roofline.specs.library",
    "json_schema": "roofline.specs.library",
    "HardwareSpec": "roofline.specs.hardware",
    "ModelSpec": "roofline.specs.model",
    "model_from_hf_config": "roofline.specs.hf_import",
    "RooflineError": "roofline.errors",
    "predict": "roofline.prediction",
    "sweep": "roofline.grid",
    "max_batch": "roofline.memory",
    "Scenario": "roofline.specs.scenario",
    "Precision": "roofline.specs.precision",
    "CalibrationProfile": "roofline.profile",
    "load_profile": "roofline.profile",
    "default_profile": "roofline.profile",
    "datasheet_profile": "roofline.profile",
    "plan": "roofline.serving.plan.planner",
    "Procurement": "roofline.serving.plan.procurement",
    "simulate": "roofline.serving.simulate",
    "Workload": "roofline.serving.workload.stream",
    "SimulationResult": "roofline.serving.sim.result",
}

__all__ = [*sorted(_LAZY), "__version__"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    if name == "report":
        import importlib

        return importlib.import_module("roofline.report")
    raise AttributeError(f"module 'roofline' has no attribute {name!r}")
