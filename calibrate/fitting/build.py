"""Turn a fit and its run into a CalibrationProfile (and, for unbundled devices, a HardwareSpec).

On a bundled GPU the profile names its slug as ``device``; every ceiling carries the
absolute measured ``value`` and ``efficiency`` = value / datasheet peak, so it also
applies, relatively, to other devices. A CPU (``host-cpu``) or an unrecognised GPU has
no datasheet: the profile embeds a HardwareSpec whose "peaks" are the best medians
measured in this run (stated in its sources), and efficiencies are relative to those.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from calibrate.fitting.fit import FitResult
from calibrate.fitting.residuals import residual_table
from calibrate.measure.runner import RunConfig, RunResult
from roofline.errors import CalibrationError
from roofline.profile import Attention, CalibrationProfile, Ceiling, Comm, Curve, Overheads
from roofline.specs.hardware import COMPUTE_DTYPES, ComputeDtype, HardwareSpec
from roofline.specs.topology import comm_path

if TYPE_CHECKING:
    from roofline.specs.jsontypes import JsonObject


def _num(x: float) -> str:
    return f"{x!r}"


def measured_spec(fit: FitResult, run: RunResult) -> HardwareSpec:
    """A HardwareSpec for a device without a datasheet: peaks = best measured medians."""
    t = run.target
    if fit.memory is None or not fit.compute:
        raise CalibrationError("cannot describe this device: no bandwidth or GEMM was measured; raise --budget")
    tensor = [d for d in fit.compute if d != "fp32"]
    if not tensor:
        raise CalibrationError(
            "a HardwareSpec needs at least one tensor-format peak (bf16, fp16, …) but only fp32 GEMMs were "
            "measured; include bf16 in --dtypes or raise --budget"
        )
    cpu = run.info.get("cpu", {})
    threads = run.info.get("threads", {}).get("torch_threads")
    if t.is_cuda:
        gpu = run.info.get("gpu", {})
        display, capacity = t.name, gpu.get("total_memory_bytes")
        vendor = "AMD" if "AMD" in t.name or run.info["versions"].get("hip") else "NVIDIA"
        form, cap_src = "GPU", "torch.cuda.get_device_properties().total_memory"
    else:
        display = f"{cpu.get('model_name', 'CPU')} ({threads} thread{'s' if threads != 1 else ''})"
        capacity, vendor, form, cap_src = (
            cpu.get("mem_total_bytes"),
            cpu.get("vendor", "unknown"),
            "host CPU",
            "/proc/meminfo MemTotal",
        )
    when = run.info.get("started", "")
    ref = (
        f"measured best by calibrate on this device, {when}, torch {run.info['versions']['torch']}, "
        f"{threads} thread(s): no datasheet exists, so each 'peak' is the highest median rate of the run"
    )
    data: dict[str, Any] = {
        "name": t.label,
        "display_name": display,
        "vendor": vendor,
        "form_factor": form,
        "memory": {"capacity": f"{_num(float(capacity or 1))} B", "bandwidth": f"{_num(fit.memory.best)} B/s"},
        "peak_dense": {d: f"{_num(c.best)} FLOPS" for d, c in fit.compute.items() if d in COMPUTE_DTYPES},
        "sources": [
            {"fields": "peak_dense, memory.bandwidth", "ref": ref},
            {"fields": "memory.capacity", "ref": cap_src},
            {"fields": "display_name, vendor", "ref": "torch.cuda.get_device_name" if t.is_cuda else "/proc/cpuinfo"},
        ],
        "notes": "Peaks are measured bests, not a datasheet; they depend on threads, clocks and the torch build.",
    }
    return HardwareSpec.model_validate(data)


def _eff(value: float, peak: float | None, what: str, notes: list[str]) -> float | None:
    if not peak:
        return None
    e = value / peak
    if e > 1.5:
        notes.append(f"{what}: measured {value:.3g} is {e:.2f}× the peak {peak:.3g}; efficiency left out")
        return None
    return round(e, 4)


def _spread(x: float | None) -> float | None:
    return round(x, 4) if x is not None and math.isfinite(x) else None


PREFILL_DTYPE_ORDER = ("bf16", "fp16", "fp32", "tf32", "fp8")


def prefill_curves(fit: FitResult, hw: HardwareSpec, what: str) -> dict[int, Curve]:
    """``attention.prefill_compute_efficiency``: per head_dim, measured prefill rate / peak against S
    (the first of bf16, fp16, fp32, … measured; values clipped to the profile's (0, 1.5])."""
    out: dict[int, Curve] = {}
    for head_dim in sorted({d for _, d in fit.prefill_rates}):
        dtype = next((t for t in PREFILL_DTYPE_ORDER if (t, head_dim) in fit.prefill_rates), None)
        peak = hw.peak_flops_per_s(dtype) if dtype in COMPUTE_DTYPES else None
        if dtype is None or not peak:
            continue
        pts = fit.prefill_rates[(dtype, head_dim)]
        ys = tuple(round(min(max(rate / peak, 1e-4), 1.5), 4) for _, rate in pts)
        src = f"measured: {dtype} causal prefill at S = {', '.join(f'{s:g}' for s, _ in pts)} vs {what} peak"
        out[head_dim] = Curve(x=tuple(s for s, _ in pts), y=ys, sources=(src,))
    return out


def build_profile(fit: FitResult, run: RunResult, cfg: RunConfig) -> CalibrationProfile:
    """The CalibrationProfile of ``fit``; raises CalibrationError when a required part is missing."""
    if not fit.compute or fit.gemm_curve is None:
        raise CalibrationError(
            f"no usable GEMM measurement, so no compute ceiling can be fitted (kept in {run.store_path}); "
            "raise --budget, then rerun with --resume to add to it"
        )
    if fit.memory is None:
        raise CalibrationError(
            f"no usable memory-bandwidth measurement (kept in {run.store_path}); raise --budget and rerun with --resume"
        )
    hw = run.target.datasheet
    embedded = None if hw is not None else measured_spec(fit, run)
    ref_hw = hw or embedded
    assert ref_hw is not None
    from calibrate.measure.power import board_power

    power = board_power(run.info.get("nvml_before"), list(run.info.get("gemm_power_samples_w") or []))
    profile = fitted_profile(
        fit,
        ref_hw,
        name=f"measured-{run.target.label}",
        device=run.target.label,
        hardware=embedded,
        provenance=_provenance(run, cfg, fit),
        notes=list(run.notes) + fit.notes,
        what="datasheet" if hw is not None else "measured best (no datasheet)",
    )
    return profile if power is None else profile.model_copy(update={"power": power})


def _ceilings(
    fit: FitResult, ref_hw: HardwareSpec, what: str, notes: list[str]
) -> tuple[dict[ComputeDtype, Ceiling], Ceiling, Comm]:
    """Measured compute ceilings per dtype, the memory ceiling and the collectives, each with its efficiency
    against ``ref_hw``'s ``what`` peak (a note in ``notes`` where an efficiency is implausible)."""
    assert fit.memory is not None
    compute = {}
    for d, c in fit.compute.items():
        if d not in COMPUTE_DTYPES:
            continue
        compute[d] = Ceiling(
            value=c.value,
            efficiency=_eff(c.value, ref_hw.peak_flops_per_s(d), f"compute {d}", notes),
            spread=_spread(c.spread),
            sources=(f"measured: {c.n} {d} GEMMs, plateau of a monotone fit in log2 M; efficiency vs {what} peak",),
        )
    p = fit.params
    memory = Ceiling(
        value=fit.memory.value,
        efficiency=_eff(fit.memory.value, ref_hw.memory.bandwidth_bytes_per_s, "memory", notes),
        spread=_spread(fit.memory.spread),
        sources=(
            f"measured: median over copy/read/GEMV of the largest transfers beyond 2× the last-level cache "
            f"({fit.memory.n} cases); efficiency vs {what} bandwidth",
        ),
    )
    comm = Comm(sources=("not measured (single process); defaults",))
    if p.comm_bps is not None:
        link = comm_path(ref_hw, int(fit.comm_detail.get("world") or 2)).bandwidth_bytes_per_s
        eff = min(1.5, p.comm_bps / link)
        comm = Comm(
            link_efficiency=eff,
            latency_s=p.comm_latency_s,
            sources=(
                f"measured: {fit.comm_detail.get('world')} ranks, wire bytes/s of the largest messages "
                f"vs {link:.3g} B/s per direction; latency = intercept of the smallest",
            ),
        )
    return compute, memory, comm


def fitted_profile(
    fit: FitResult,
    ref_hw: HardwareSpec,
    *,
    name: str,
    device: str,
    hardware: HardwareSpec | None = None,
    provenance: JsonObject | None = None,
    notes: list[str] | None = None,
    what: str = "datasheet",
) -> CalibrationProfile:
    """The CalibrationProfile of ``fit`` against ``ref_hw``'s peaks, with its residuals: every record the
    fit used, costed by the real evaluator under this very profile (:mod:`calibrate.fitting.residuals`)."""
    assert fit.gemm_curve is not None and fit.memory is not None
    notes = list(notes or [])
    compute, memory, comm = _ceilings(fit, ref_hw, what, notes)
    p = fit.params
    curves = {d: {"x": list(c.x), "y": list(c.y)} for d, c in fit.gemm_curves_by_dtype.items()}
    residuals: dict[str, Any] = {"gemm_m_efficiency_by_dtype": curves}
    if fit.rejected:
        residuals["rejected"] = fit.rejected
    if notes:
        residuals["notes"] = notes
    profile = CalibrationProfile(
        name=name,
        device=device,
        provenance=provenance or {},
        hardware=hardware,
        compute=compute,
        gemm_m_efficiency=Curve(
            x=fit.gemm_curve.x,
            y=fit.gemm_curve.y,
            sources=(
                f"measured: {fit.gemm_curve_dtype} GEMMs, median over shapes, monotone in log2 M; memory-bound M "
                "take the next larger M's value; other dtypes' curves under residuals.gemm_m_efficiency_by_dtype",
            ),
        ),
        gemm_m_efficiency_by_dtype={
            d: Curve(x=c.x, y=c.y, sources=(f"measured: {d} GEMMs, median over shapes, monotone in log2 M",))
            for d, c in fit.gemm_curves_by_dtype.items()
        },
        memory=memory,
        memory_size_efficiency=(
            Curve(x=p.memory_curve.x, y=p.memory_curve.y, sources=("measured: copy/read/GEMV, monotone in log2 bytes",))
            if p.memory_curve is not None
            else None
        ),
        attention=Attention(
            compute_efficiency=round(p.attention_compute, 4),
            memory_efficiency=round(p.attention_memory, 4),
            gqa_kv_reuse=round(p.gqa_kv_reuse, 3),
            prefill_compute_efficiency=prefill_curves(fit, ref_hw, what),
            sources=(
                "measured: scaled_dot_product_attention prefill and decode (with and without GQA), joint fit",
                f"prefill_compute_efficiency: measured causal prefill FLOPs / (time − launch cost) / {what} peak",
            ),
        ),
        overheads=Overheads(
            per_kernel_s=p.per_kernel_s,
            per_kernel_graph_s=p.per_kernel_graph_s,
            per_step_s=fit.per_step_s,
            sources=(
                f"per kernel (eager): {fit.per_kernel_method}",
                f"per kernel (graph): {fit.per_kernel_graph_method}",
                f"per step: {fit.per_step_method}",
            ),
        ),
        comm=comm,
        residuals=residuals,
    )
    suites = residual_table(fit.records, profile, ref_hw)
    return profile.model_copy(update={"residuals": {**suites, **residuals}})


def _provenance(run: RunResult, cfg: RunConfig, fit: FitResult) -> dict[str, Any]:
    info = run.info
    prov: dict[str, Any] = {
        "kind": "measured",
        "tool": "calibrate (python -m calibrate / roofline calibrate)",
        "device": run.target.label,
        "device_name": run.target.name if run.target.is_cuda else info.get("cpu", {}).get("model_name"),
        "started": info.get("started"),
        "finished": info.get("finished"),
        "wall_s": round(run.wall_s, 2),
        "interrupted": run.interrupted,
        "config": {
            "device": cfg.device,
            "budget_s": cfg.budget_s,
            "quick": cfg.quick,
            "model": cfg.model,
            "tp": cfg.tp,
            "threads": cfg.threads,
            "dtypes": list(cfg.dtypes or []),
            "suites": list(cfg.suites or []),
        },
        "versions": info.get("versions"),
        "threads": info.get("threads"),
        "cpu": info.get("cpu"),
        "measurements": run.store_path.name,
        "counts": run.log.counts,
        "reused": run.reused,
        "method": "calibrate.fitting.fit: overhead, memory, GEMM (isotonic in log2 M), attention, collectives",
    }
    for key in ("gpu", "nvml_before", "nvml_after"):
        if key in info:
            prov[key] = info[key]
    if run.log.stopped:
        prov["stopped"] = run.log.stopped
    prov["overheads_detail"] = {k: float(v) for k, v in fit.overhead_detail.items()}
    return prov
