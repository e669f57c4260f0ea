"""``overheads.per_kernel_graph_s`` of the default profile: fitted to decode steps we measured on an H200.

The derivation (see :func:`fit_graph_overhead`): for each CUDA-graph decode step of
``validation/closedloop/h200-sxm_*.csv`` (written by ``calibrate/gpu_check.sh`` and the closed-loop
harness: real torch decoders with random weights, replayed as CUDA graphs, timed with CUDA events),
with t₀ the predicted graph-mode step at ``per_kernel_graph_s`` = 0, x the harness's price of the
unfused extra kernels eager torch runs and k the kernels the cost model counts for the step,
c = (T − x − t₀) / k; ``per_kernel_graph_s`` = max(0, median c). It is the GPU-side time a kernel
costs beyond its bytes and FLOPs at the streaming ceiling (launch gap, DRAM latency, ramp and tail),
assumed the same on other GPUs. The public graph/eager decode steps of :data:`DECODE_STEP_POINTS`
are out-of-sample checks, recorded and never fitted.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

from roofline.errors import CalibrationError
from roofline.profile import CalibrationProfile
from roofline.published.rows import published_csv_path
from roofline.specs.library import hardware as load_hardware


@dataclass(frozen=True)
class DecodeStepPoint:
    """A published time of one decode step (not a row of ``published.csv``), and its role in the fit.

    ``context`` (tokens attended) is ``None`` when the source does not state it; the fit then
    uses :data:`UNSTATED_CONTEXT`.
    """

    key: str
    url: str
    quote: str
    model: str
    hardware: str
    weight_dtype: str
    batch: int
    context: int | None
    cuda_graphs: bool
    step_s: float
    role: str


_CLOUDAI_URL = "https://cloudai.pt/tag/cuda-graphs/"
_CLOUDAI_QUOTE = (
    "A single decode step for Llama 3.1 8B on an H100 SXM5 takes 8.4 milliseconds in eager mode. "
    "Capture that same forward pass as a CUDA graph and it drops to 5.1 milliseconds"
)
#: Public decode-step times with and without CUDA graphs (bf16 assumed: the source states no
#: quantisation; batch 1: "a single decode step"). Both are out-of-sample checks: the graph point of
#: ``per_kernel_graph_s`` (fitted to our H200 measurements), the eager point of ``per_kernel_s``.
DECODE_STEP_POINTS: tuple[DecodeStepPoint, ...] = (
    DecodeStepPoint("cloudai-llama-3.1-8b-h100-graph", _CLOUDAI_URL, _CLOUDAI_QUOTE, "llama-3.1-8b", "h100-sxm",
                    "bf16", 1, None, True, 5.1e-3, "out-of-sample check of per_kernel_graph_s (not fitted)"),
    DecodeStepPoint("cloudai-llama-3.1-8b-h100-eager", _CLOUDAI_URL, _CLOUDAI_QUOTE, "llama-3.1-8b", "h100-sxm",
                    "bf16", 1, None, False, 8.4e-3, "out-of-sample check of per_kernel_s (not fitted)"),
)  # fmt: skip
#: Attended tokens used when a decode-step source states none. At batch 1 the K/V read of
#: Llama-3.1-8B at 128 tokens (16 MiB) is 0.1 % of its 16 GB of weights, so the choice is immaterial.
UNSTATED_CONTEXT = 128


@dataclass(frozen=True)
class MeasuredStep:
    """One decode step we measured (a row of ``validation/closedloop/<hardware>_<model>.csv``)."""

    source: str
    model: str
    hardware: str
    weight_dtype: str
    batch: int
    context: int
    step_s: float
    extra_s: float  # the harness's price of eager torch's unfused extra kernels (not in the cost model)


def closedloop_dir() -> Path:
    """The shipped ``validation/closedloop`` folder (decode and prefill steps measured on our GPUs)."""
    return published_csv_path().parent / "closedloop"


def measured_decode_steps(folder: Path | None = None, paths: Sequence[Path] | None = None) -> list[MeasuredStep]:
    """The CUDA-graph decode steps of the closed-loop CSVs ``paths`` (default: every ``h200-sxm_*.csv`` in
    ``folder``, itself by default :func:`closedloop_dir`). Rows timed otherwise (perf_counter, eager) are skipped."""
    files = sorted(paths) if paths is not None else sorted((folder or closedloop_dir()).glob("h200-sxm_*.csv"))
    out = []
    for path in files:
        try:
            with Path(path).open(newline="", encoding="utf-8") as fh:
                for line, r in enumerate(csv.DictReader(fh), start=2):
                    step = _step(Path(path).name, line, r)
                    if step is not None:
                        out.append(step)
        except OSError as exc:
            raise CalibrationError(f"cannot read the closed-loop table {path}: {exc.strerror or exc}") from None
    return out


_STEP_FIELDS = ("phase", "method", "model", "hardware", "dtype", "batch", "context", "measured_s", "eager_extra_s")


def _step(name: str, line: int, r: dict[str, str]) -> MeasuredStep | None:
    """The CUDA-graph decode step of one table row (None for other rows); a bad row names its line and field."""
    missing = [f for f in _STEP_FIELDS if not r.get(f)]
    if missing:
        raise CalibrationError(
            f"{name} line {line}: field '{missing[0]}' is missing or empty; closed-loop tables are written by "
            "`python -m calibrate.closedloop.validate -o TABLE.csv`"
        )
    if r["phase"] != "decode" or r["method"] != "cuda_graph":
        return None
    try:
        nums = (int(r["batch"]), int(r["context"]), float(r["measured_s"]), float(r["eager_extra_s"]))
    except ValueError as exc:
        raise CalibrationError(f"{name} line {line}: {exc}; batch and context are whole numbers, times in s") from None
    return MeasuredStep(name, r["model"], r["hardware"], r["dtype"], *nums)


def _load_step_model(name: str) -> Any:
    from roofline.specs.library import model as load_model

    own = closedloop_dir() / f"{name}.yaml"  # per-GPU shards of bigger models live beside the measurements
    return load_model(str(own) if own.exists() else name)


def decode_step_time(
    profile: CalibrationProfile,
    model: str,
    hardware: str,
    weight_dtype: str,
    batch: int,
    context: int,
    cuda_graphs: bool,
) -> tuple[float, int, float]:
    """(predicted step time s, kernels per step, HBM-roofline floor s) of one decode step at ``context`` tokens."""
    from roofline.costs import step_cost
    from roofline.ops import decode_ops
    from roofline.prediction import make_scenario

    m, hw = _load_step_model(model), load_hardware(hardware)
    sc = make_scenario(hw, batch, context - 1, 2, weight_dtype=weight_dtype, cuda_graphs=cuda_graphs)
    ops = decode_ops(m, sc, hw, float(context))
    step = float(step_cost(ops, hw, profile).time_s)
    kernels = int(sum(op.count * op.kernels for op in ops))
    floor = float(sum(op.count * op.memory_bytes for op in ops)) / profile.memory_ceiling(hw)
    return step, kernels, floor


def decode_step(profile: CalibrationProfile, point: DecodeStepPoint, cuda_graphs: bool) -> tuple[float, int, float]:
    """(predicted step time s, kernels per step, HBM-roofline floor s) of ``point``'s decode step."""
    ctx = point.context if point.context is not None else UNSTATED_CONTEXT
    return decode_step_time(profile, point.model, point.hardware, point.weight_dtype, point.batch, ctx, cuda_graphs)


def _measured_rows(per_step: list[tuple[MeasuredStep, float, int, float, float]], c: float) -> list[dict[str, object]]:
    """One record per measured step: kernels, measured and predicted seconds at per_kernel_graph_s = ``c``."""
    measured = []
    for s, t0, k, floor, c_s in per_step:
        pred = t0 + k * c + s.extra_s
        measured.append(
            {
                "source": s.source,
                "model": s.model,
                "hardware": s.hardware,
                "batch": s.batch,
                "context": s.context,
                "kernels_per_step": k,
                "measured_s": round(s.step_s, 9),
                "extra_s": round(s.extra_s, 9),
                "t0_s": round(t0, 9),
                "hbm_floor_s": round(floor, 9),
                "per_kernel_s": round(c_s, 12),
                "predicted_s": round(pred, 9),
                "error_pct": round((pred - s.step_s) / s.step_s * 100.0, 2),
            }
        )
    return measured


def _public_checks(fitted: CalibrationProfile) -> list[dict[str, object]]:
    """The public decode-step points of :data:`DECODE_STEP_POINTS` predicted with the fitted profile (reported,
    not fitted)."""
    checks = []
    for p in DECODE_STEP_POINTS:
        pred, k, fl = decode_step(fitted, p, p.cuda_graphs)
        checks.append(
            {
                "key": p.key,
                "url": p.url,
                "quote": p.quote,
                "model": p.model,
                "hardware": p.hardware,
                "weight_dtype": p.weight_dtype,
                "batch": p.batch,
                "context": p.context if p.context is not None else f"not stated; {UNSTATED_CONTEXT} assumed",
                "cuda_graphs": p.cuda_graphs,
                "role": p.role,
                "kernels_per_step": k,
                "measured_s": p.step_s,
                "predicted_s": round(pred, 9),
                "hbm_floor_s": round(fl, 9),
                "error_pct": round((pred - p.step_s) / p.step_s * 100.0, 2),
            }
        )
    return checks


def fit_graph_overhead(
    profile: CalibrationProfile, folder: Path | None = None, paths: Sequence[Path] | None = None, public: bool = True
) -> CalibrationProfile:
    """``profile`` with ``per_kernel_graph_s`` fitted to our measured decode steps (module docstring).

    c = (T − x − t₀) / k per measured step (t₀ = predicted graph-mode step at per_kernel_graph_s = 0,
    x = the unfused extras eager torch runs, k = kernels the cost model counts);
    per_kernel_graph_s = max(0, median c). The public points of :data:`DECODE_STEP_POINTS` are then
    predicted and only reported. Everything goes to ``residuals["decode_step_points"]``.
    """
    steps = measured_decode_steps(folder, paths)
    if not steps:
        raise CalibrationError(
            "no CUDA-graph decode steps in the closed-loop tables to fit per_kernel_graph_s from: run "
            "`python -m calibrate.closedloop.validate --device cuda:0 ...` (decode points, graphs on) first"
        )
    zero = profile.model_copy(update={"overheads": profile.overheads.model_copy(update={"per_kernel_graph_s": 0.0})})
    per_step = []
    for s in steps:
        t0, k, floor = decode_step_time(zero, s.model, s.hardware, s.weight_dtype, s.batch, s.context, True)
        per_step.append((s, t0, k, floor, (s.step_s - s.extra_s - t0) / k))
    unclamped = float(median(c for *_, c in per_step))
    per_kernel_graph_s = round(max(0.0, unclamped), 9)
    files = sorted({s.source for s in steps})
    src = f"per_kernel_graph_s: median over {len(steps)} CUDA-graph decode steps measured closed loop ("
    src += ", ".join(files) + "; see residuals.decode_step_points)"
    ov = profile.overheads.model_copy(
        update={"per_kernel_graph_s": per_kernel_graph_s, "sources": (*profile.overheads.sources, src)}
    )
    fitted = profile.model_copy(update={"overheads": ov})
    measured = _measured_rows(per_step, per_kernel_graph_s)
    checks = _public_checks(fitted) if public else []
    errs = [abs(t0 + k * per_kernel_graph_s + s.extra_s - s.step_s) / s.step_s * 100.0 for s, t0, k, _, _ in per_step]
    held_out = []  # each model predicted with the median c of the other models' steps (needs two models)
    models = sorted({s.model for s in steps})
    for model in models if len(models) > 1 else ():
        c_other = max(0.0, float(median(c for s, *_, c in per_step if s.model != model)))
        held_out += [
            abs(t0 + k * c_other + s.extra_s - s.step_s) / s.step_s * 100.0
            for s, t0, k, _, _ in per_step
            if s.model == model
        ]
    derivation = {
        "method": "roofline.published.graph_overhead.fit_graph_overhead: max(0, median((T - x - t0) / kernels))",
        "steps": len(steps),
        "files": files,
        "unclamped_s": round(unclamped, 12),
        "clamped_at_zero": unclamped <= 0,
        "per_step_range_s": [round(min(c for *_, c in per_step), 12), round(max(c for *_, c in per_step), 12)],
        "median_abs_error_pct_after_fit": round(float(median(errs)), 2),
        "median_abs_error_pct_leave_one_model_out": round(float(median(held_out)), 2) if held_out else None,
        "max_abs_error_pct_leave_one_model_out": round(float(max(held_out)), 2) if held_out else None,
        "note": "GPU-side time of one kernel in a replayed CUDA graph beyond its bytes and FLOPs at the "
        "profile's ceilings (launch gap, DRAM latency, ramp and tail), from whole decode steps",
    }
    residuals = {
        **profile.residuals,
        "decode_step_points": {"per_kernel_graph_s": derivation, "measured": measured, "points": checks},
    }
    return fitted.model_copy(update={"residuals": residuals})
