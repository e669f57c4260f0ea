"""Derive the shipped default CalibrationProfile from public microbenchmark rows.

Inputs: the ``gemm_tflops`` and ``hbm_gb_s`` rows of ``validation/published.csv``.
Each fitted value cites the row IDs it came from. The derivation is deterministic, so
``tests/test_default_profile.py`` re-derives it and compares with the shipped YAML.

* compute efficiency (per dtype class) = median over best-shape large-GEMM rows of
  achieved / datasheet dense peak; AMD gets its own value (its rows differ by 30 points).
* memory efficiency = median over STREAM-like copy/triad/dot/read rows of achieved / datasheet.
* GEMM fixed cost = median over 1024³ GEMM rows of (measured − roofline time): the fixed
  cost a small kernel pays beyond its FLOPs and bytes (kept in ``residuals``; it is only
  used to derive the M curve).
* GEMM efficiency against M = median per M of the efficiency that shape-resolved
  compute-bound rows imply after that fixed cost, made monotone; below the 64-row MMA
  tile the efficiency falls as M/64 (padding of the tile). Rows shorter than
  ``MIN_KERNEL_FIXED_COSTS`` × the fixed cost are left out (their time is mostly fixed
  cost, so what remains says nothing about M), and so are rows with N or K below
  ``MIN_LLM_NK`` (thin GEMMs are limited by their N/K tiles; LLM layers are never that
  thin). "Monotone" is a weighted pool-adjacent-violators fit, not a running maximum.
* per-kernel and per-step overheads = the non-negative least-squares fit of relative
  time residuals over the grade-A end-to-end rows (``roofline.published.overhead_fit``), with the
  in-sample, leave-one-table-out and leave-one-source-out errors recorded in ``residuals``.
  Those rows all ran TensorRT-LLM 0.5/0.6 ``gptSessionBenchmark`` without CUDA graphs, so
  ``per_kernel_s`` is the cost of an *eagerly launched* kernel.
* per-kernel cost inside a replayed CUDA graph (``per_kernel_graph_s``) = from our own decode
  steps measured on an H200 (:func:`measured_decode_steps`: ``validation/closedloop/h200-sxm_*.csv``,
  written by ``calibrate/gpu_check.sh`` and the closed-loop harness: real torch decoders with random
  weights, replayed as CUDA graphs, timed with CUDA events). For each point, with t₀ the predicted
  graph-mode step at ``per_kernel_graph_s`` = 0, x the harness's price of the unfused extra kernels
  eager torch runs (RoPE, a second V copy, a separate gate multiply) and k the kernels the cost model
  counts for the step, ``c = (T − x − t₀) / k``; ``per_kernel_graph_s`` = max(0, median c). It is the
  GPU-side time a kernel costs beyond its bytes and FLOPs at the streaming ceiling (launch gap,
  DRAM latency, ramp and tail), and assumed the same on other GPUs. The public graph/eager decode
  steps of :data:`DECODE_STEP_POINTS` are out-of-sample checks (recorded, never fitted). All land
  in ``residuals["decode_step_points"]``.
* GEMM rate against the inner dimension K (``gemm_k``) = measured on an H200
  (:mod:`roofline.published.gemm_k`), on the devices with that SM; ``residuals["gemm_k"]``.
* grouped expert GEMMs (``grouped_gemm.memory_efficiency``) = the median grouped / dense streaming
  rate of the MoE grouped GEMMs measured on an H200 (:mod:`roofline.published.grouped_gemm`), on the
  devices with that SM; ``residuals["grouped_gemm"]``.
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

from roofline.profile import Attention, CalibrationProfile, Ceiling, Comm, Curve, Overheads
from roofline.published.gemm_k import fit_gemm_k
from roofline.published.graph_overhead import fit_graph_overhead
from roofline.published.grouped_gemm import fit_grouped_gemm
from roofline.published.monotone import isotonic_increasing
from roofline.published.rows import published_csv_path
from roofline.specs.library import hardware as load_hardware

#: csv hardware label (prefix) -> bundled slug whose datasheet peaks apply
HARDWARE_MAP = {
    "A100-SXM-80GB": "a100-80gb-sxm", "A100-PCIe": "a100-80gb-pcie", "A100-80GB": "a100-80gb-sxm",
    "A100 (variant": "a100-80gb-sxm", "H100-SXM-80GB": "h100-sxm", "H100 (sm_90)": "h100-sxm",
    "H100 (variant": "h100-sxm", "H100-PCIe-80GB": "h100-pcie", "H800-SXM5-80GB": "h100-sxm",
    "GH200-SXM": "h200-sxm", "H200-SXM-141GB": "h200-sxm", "H200 (file": "h200-sxm", "B200-SXM": "b200",
    "MI300X": "mi300x", "MI325X": "mi325x",
}  # fmt: skip
MMA_TILE_M = 64
MIN_KERNEL_FIXED_COSTS = 4.0
MIN_LLM_NK = 1024
END_TO_END_GRADE = "A"


def _slug(label: str) -> str | None:
    return next((s for k, s in HARDWARE_MAP.items() if label.startswith(k)), None)


def _rows(path: Path) -> list[dict[str, Any]]:
    out = []
    with path.open(newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if r["metric"] not in ("gemm_tflops", "hbm_gb_s"):
                continue
            slug = _slug(r["hardware"])
            if slug is None:
                continue
            shape = re.search(r"M,N,K=(\d+),(\d+),(\d+)", r["notes"] or "")
            out.append(
                {
                    **r,
                    "slug": slug,
                    "value": float(r["value"]),
                    "mnk": tuple(int(x) for x in shape.groups()) if shape else None,
                }
            )
    return out


def _dtype(r: dict[str, Any]) -> str:
    w = r["weight_dtype"].lower()
    return "fp8" if "fp8" in w else "fp16" if "fp16" in w else "bf16"


FA3_SOURCE = (
    "FlashAttention-3 (Shah et al. 2024, arXiv 2407.08608 v2) Fig. 5, forward, causal, BF16, H100 80GB SXM5 "
    "(batch x seqlen = 16k, heads x head_dim = 2048), FlashAttention-3 bars: head dim 128: 292, 423, 521, 579, "
    "602, 616 TFLOPS/s at seqlen 512 ... 16k; head dim 64: 197, 265, 371, 420, 460, 473; divided by the "
    "989.5 TFLOPS dense BF16 peak. Assumed to hold as a fraction of peak on other devices and engines."
)
_FA3_SEQ = (512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0)
_H100_BF16_TFLOPS = 989.5
FA3_PREFILL_CURVES = {
    d: Curve(x=_FA3_SEQ, y=tuple(round(t / _H100_BF16_TFLOPS, 4) for t in tflops), sources=("arXiv 2407.08608 Fig. 5",))
    for d, tflops in ((64, (197, 265, 371, 420, 460, 473)), (128, (292, 423, 521, 579, 602, 616)))
}
NCCL_TUNING_SOURCE = (
    "NCCL src/graph/tuning.cc (NVIDIA/nccl commit 01afd20a77b5804e0ecf1042509dd9d20ebf9e93): ring latency "
    "= baseLat + nsteps x hwLat[link], nsteps = 2(p-1) for all-reduce; LL protocol (small messages): baseLat "
    "3.6 us, hwLat NVLink 0.47 / PCI 1.0 / NET 2.7 us; xgmi and ici assumed NVLink-class, ethernet "
    "(Gaudi RoCE mesh) assumed NET-class"
)
NCCL_BASE_LATENCY_S = 3.6e-6
NCCL_HOP_LATENCY_S = {
    "nvlink": 0.47e-6, "xgmi": 0.47e-6, "ici": 0.47e-6, "pcie": 1.0e-6, "ethernet": 2.7e-6, "network": 2.7e-6,
}  # fmt: skip


def derive_default_profile(path: Path | None = None) -> CalibrationProfile:
    """Fit the default profile: microbenchmark ceilings and curves, then end-to-end overheads (module docstring)."""
    rows = _rows(path or published_csv_path())
    gemm = [r for r in rows if r["metric"] == "gemm_tflops"]
    eff: dict[str, list[tuple[float, str]]] = defaultdict(list)
    amd: list[tuple[float, str]] = []
    for r in gemm:
        title = r["table_or_figure"]
        large = "Maximum Achievable" in title or (r["mnk"] is not None and min(r["mnk"]) >= 16384)
        if not large:
            continue
        hw = load_hardware(r["slug"])
        dt = _dtype(r)
        peak = hw.peak_flops_per_s("fp8" if dt == "fp8" else "bf16")
        assert peak is not None
        e = r["value"] * 1e12 / peak
        (amd if hw.vendor == "AMD" else eff["fp8" if dt == "fp8" else "16bit"]).append((e, r["id"]))
    c16, c8 = _med(eff["16bit"]), _med(eff["fp8"])
    mem_rows = [
        r
        for r in rows
        if r["metric"] == "hbm_gb_s" and "STREAM" in r["model"] and re.search(r"Copy|Triad|Dot|read|triad", r["model"])
    ]
    mems = [(r["value"] * 1e9 / load_hardware(r["slug"]).memory.bandwidth_bytes_per_s, r["id"]) for r in mem_rows]
    mem = _med(mems)
    overhead, curve = _fit_small_shapes(gemm, c16[0], c8[0], mem[0])
    compute = {dt: Ceiling(efficiency=round(c16[0], 4), sources=c16[1]) for dt in ("fp32", "tf32", "bf16", "fp16")} | {
        dt: Ceiling(efficiency=round(c8[0], 4), sources=c8[1]) for dt in ("fp8", "int8", "fp4")
    }
    amd_e = _med(amd)
    base = CalibrationProfile(
        name="default",
        created="2026-11-29",
        provenance={
            "kind": "public microbenchmarks",
            "data": "validation/published.csv (gemm_tflops, hbm_gb_s rows)",
            "method": "roofline.published.default_profile.derive_default_profile",
            "notes": "fp4 and int8 assume the fp8 efficiency (no public rows); tf32/fp32 assume the 16-bit one. "
            "per_kernel_s is fitted to grade-A TensorRT-LLM 0.5/0.6.1 end-to-end rows, which launched every "
            "kernel eagerly (no CUDA graphs); decode steps of CUDA-graph engines (Scenario.cuda_graphs, the "
            "default) pay per_kernel_graph_s instead, derived from decode steps measured on an H200 "
            "(validation/closedloop, residuals.decode_step_points).",
        },
        compute=compute,
        vendor_compute_efficiency={"AMD": {dt: round(amd_e[0], 4) for dt in ("bf16", "fp16", "fp8", "int8")}},
        gemm_m_efficiency=curve,
        memory=Ceiling(efficiency=round(mem[0], 4), sources=mem[1]),
        attention=Attention(
            compute_efficiency=1.0,
            memory_efficiency=1.0,
            gqa_kv_reuse=1.0,
            prefill_compute_efficiency=FA3_PREFILL_CURVES,
            sources=(
                "compute/memory_efficiency: assumed same as GEMM/HBM (decode attention)",
                "gqa_kv_reuse 1: K/V read once per KV head (XQA, FlashInfer, FA)",
                f"prefill_compute_efficiency: {FA3_SOURCE}",
            ),
        ),
        overheads=Overheads(per_kernel_s=overhead[0], per_step_s=0.0, sources=overhead[1]),
        comm=Comm(
            link_efficiency=0.8,
            latency_s=NCCL_BASE_LATENCY_S,
            hop_latency_s=dict(NCCL_HOP_LATENCY_S),
            sources=(
                "link_efficiency 0.8: assumed (NCCL ring reaches ~80% of the link)",
                f"latency_s, hop_latency_s: {NCCL_TUNING_SOURCE}",
            ),
        ),
        residuals={"gemm_fixed_cost_s": overhead[0], "gemm_fixed_cost_sources": list(overhead[1])},
    )
    # per_kernel_graph_s first (the run-ahead end-to-end fit prices each eager kernel's GPU gap with it), then
    # again on the fitted profile, which records its residuals and public checks under the final overheads
    return fit_grouped_gemm(fit_graph_overhead(fit_end_to_end(fit_graph_overhead(fit_gemm_k(base)), path)))


def fit_end_to_end(base: CalibrationProfile, path: Path | None = None) -> CalibrationProfile:
    """``base`` with per_kernel_s / per_step_s fitted to the grade-A end-to-end rows (see module docstring)."""
    from roofline.published.accuracy import expressed_cases
    from roofline.published.overhead_fit import (
        cross_validate,
        direct_errors,
        error_summary,
        fit_overheads,
        kernel_curves,
    )

    cases, _ = expressed_cases(path or published_csv_path())
    run_ahead = base.model_copy(update={"overheads": base.overheads.model_copy(update={"eager_launch": "run_ahead"})})
    terms = kernel_curves([c for c in cases if c.grade == END_TO_END_GRADE], run_ahead)
    x = fit_overheads(terms)
    ids = tuple(sorted(t.case.id for t in terms))
    fitted = run_ahead.overheads.model_copy(
        update={
            "per_kernel_s": round(float(x[0]), 9),
            "per_step_s": round(float(x[1]), 6),
            "sources": ids,
        }
    )
    profile = base.model_copy(update={"overheads": fitted})
    in_sample = direct_errors([t.case for t in terms], profile)
    cv = cross_validate(terms, by="table")
    loso = cross_validate(terms, by="source")
    end_to_end = {
        "method": "roofline.published.overhead_fit.fit_overheads: least squares of relative time residuals over "
        "grade-A rows, eager launches run ahead (each step max(Σ GPU time, Σ kernels × per_kernel_s))",
        "rows": list(ids),
        "in_sample": error_summary(in_sample),
        "leave_one_table_out": error_summary(cv),
        "leave_one_source_out": error_summary(loso),
        "error_pct": {r["id"]: round(r["error_pct"], 2) for r in in_sample},
        "cv_table_error_pct": {r["id"]: round(r["error_pct"], 2) for r in cv},
        "cv_source_error_pct": {r["id"]: round(r["error_pct"], 2) for r in loso},
    }
    return profile.model_copy(update={"residuals": {**base.residuals, "end_to_end_fit": end_to_end}})


def _med(vals: list[tuple[float, str]]) -> tuple[float, tuple[str, ...]]:
    if not vals:
        raise ValueError("no published rows to derive from")
    return median(v for v, _ in vals), tuple(sorted(i for _, i in vals))


def _fit_small_shapes(
    gemm: list[dict[str, Any]], c16: float, c8: float, mem: float
) -> tuple[tuple[float, tuple[str, ...]], Curve]:
    """Per-kernel overhead from 1024³ rows, then the M-efficiency curve from shape-resolved rows."""

    # r: a csv row (str columns) with parsed slug/value/mnk (_rows); its mnk is unpacked unchecked here
    def roof(r: dict[str, Any], e_m: float) -> tuple[float, float, float]:
        m, n, k = r["mnk"]
        hw = load_hardware(r["slug"])
        dt = _dtype(r)
        b = 1.0 if dt == "fp8" else 2.0
        peak = hw.peak_flops_per_s("fp8" if dt == "fp8" else "bf16") or 0.0
        flops = 2.0 * m * n * k
        t_c = flops / (peak * (c8 if dt == "fp8" else c16) * e_m)
        t_m = (m * k + k * n + m * n) * b / (hw.memory.bandwidth_bytes_per_s * mem)
        return flops, t_c, t_m

    cube = [r for r in gemm if r["mnk"] == (1024, 1024, 1024)]
    ov = []
    for r in cube:
        flops, t_c, t_m = roof(r, 1.0)
        ov.append((max(flops / (r["value"] * 1e12) - max(t_c, t_m), 0.0), r["id"]))
    overhead = _med(ov)
    by_m: dict[int, list[tuple[float, str]]] = defaultdict(list)
    for r in gemm:
        if r["mnk"] is None or r["slug"] in ("mi300x", "mi325x") or r["mnk"] == (1024, 1024, 1024):
            continue
        flops, t_c, t_m = roof(r, 1.0)
        t_measured = flops / (r["value"] * 1e12)
        t_kernel = t_measured - overhead[0]
        if t_measured < MIN_KERNEL_FIXED_COSTS * overhead[0]:  # mostly fixed cost: says nothing about M
            continue
        if min(r["mnk"][1:]) < MIN_LLM_NK:  # thin N or K: limited by the N/K tiles, not by M
            continue
        if t_m > 0.8 * t_kernel:  # memory-bound rows say nothing about compute
            continue
        by_m[r["mnk"][0]].append((min(t_c / t_kernel, 1.0), r["id"]))
    xs = sorted(m for m in by_m if m >= MMA_TILE_M)
    meds = [_med(by_m[m]) for m in xs]
    # weighted isotonic: a median below its left neighbour is pooled with it, so one row cannot lift every larger M
    weights = np.asarray([len(by_m[m]) for m in xs], dtype=np.float64)
    ys = [float(v) for v in isotonic_increasing(np.asarray([v for v, _ in meds]), weights)]
    src = [i for _, ids in meds for i in ids]
    x = [1.0, float(MMA_TILE_M)] if xs and xs[0] > MMA_TILE_M else [1.0]
    y0 = ys[0] if ys else 1.0
    y = [y0 / MMA_TILE_M, y0] if len(x) == 2 else [y0 / MMA_TILE_M]
    curve = Curve(x=tuple(x + [float(m) for m in xs]), y=tuple(round(v, 4) for v in y + ys), sources=tuple(src))
    return (round(overhead[0], 9), overhead[1]), curve


def main() -> None:  # pragma: no cover - maintenance entry point
    """Re-derive and write roofline/data/default_profile.yaml."""
    from roofline.profile import DEFAULT_PROFILE_PATH

    derive_default_profile().save(DEFAULT_PROFILE_PATH)
    print(f"wrote {DEFAULT_PROFILE_PATH}")


if __name__ == "__main__":  # pragma: no cover
    main()
