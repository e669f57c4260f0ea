"""``grouped_gemm`` of the default profile: MoE grouped GEMMs measured on an H200.

Two measurements (``python -m calibrate.closedloop.moe_stream`` on the lent H200; the per-GPU expert
layouts of DeepSeek-V3 tp 8, Qwen3-235B ep 4, gpt-oss-120b, MiniMax-M2.5 tp 4 and Qwen3-30B-A3B, one
CUTLASS grouped GEMM (``torch._grouped_mm``) per layer half, in CUDA graphs):

* ``moe_stream_h200-sxm.csv`` — decode batches 1–128 (1–8 rows per expert), each next to a dense GEMM
  streaming the same weight bytes. **memory_efficiency(m)** = grouped / dense bytes per second against
  the rows per expert m: the median per octave of m, made non-decreasing (pool-adjacent violators in
  log), held flat beyond the largest m measured.
* ``moe_prefill_h200-sxm.csv`` (``--prefill``) — 1,024–16,384 routed tokens. **compute_efficiency** =
  median, over the cases the model (with the memory curve above) calls compute-bound, of the model's
  compute time at the dense ceiling × g(m) / the measured time.

Both apply on the devices with the H200's streaming multiprocessor (:data:`SAME_SM`); other devices get
1, as nothing was measured there. Every case's residual lands in ``residuals["grouped_gemm"]``.
"""

from __future__ import annotations

import csv
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from roofline.profile import CalibrationProfile, Curve, GroupedGemm
from roofline.published.graph_overhead import closedloop_dir
from roofline.published.monotone import bucket_log2, monotone_log_fit

if TYPE_CHECKING:
    from roofline.ops.records import Op

#: Bundled devices built on the H200's GH100 Hopper SM (same grouped-GEMM kernels and per-SM memory
#: pipeline; they differ in HBM size and speed, which the memory ceiling already carries).
SAME_SM = ("h100-nvl", "h100-pcie", "h100-sxm", "h20", "h200-sxm")
#: The device the grouped-GEMM and GEMM-K tables were measured on (the lent H200).
MEASURED_ON = "h200-sxm"
DECODE = "moe_stream_h200-sxm.csv"
PREFILL = "moe_prefill_h200-sxm.csv"


class PrefillCase(TypedDict):
    """One measured prefill case against the model (:func:`prefill_efficiencies`); times in s."""

    layout: str
    tokens: int
    half: str
    rows_per_expert: float
    compute_s: float
    memory_s: float
    measured_s: float
    compute_bound: bool
    compute_efficiency: float


def _rows(name: str, folder: Path | None) -> list[dict[str, str]]:
    with ((folder or closedloop_dir()) / name).open(newline="", encoding="utf-8") as fh:
        return [r for r in csv.DictReader(fh) if r["half"] != "copy"]


def decode_ratios(folder: Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows per expert, grouped / dense bytes per second) of every measured decode case."""
    rs = _rows(DECODE, folder)
    m = np.array([float(r["rows"]) / float(r["touched"]) for r in rs])
    ratio = np.array([float(r["grouped_bytes_per_s"]) / float(r["dense_bytes_per_s"]) for r in rs])
    return m, ratio


def _expert_op(r: dict[str, str]) -> Op:
    from roofline.ops.ffn import grouped_rows
    from roofline.ops.records import gemm

    touched = float(r["touched"])
    per_expert = gemm(
        "moe.experts",
        "moe",
        "moe",
        1,
        "bf16",
        float(r["rows"]) / touched,
        float(r["n"]),
        float(r["k"]),
        2.0,
        2.0,
        touched,
    )
    return grouped_rows(per_expert, np.asarray(touched))


def prefill_efficiencies(profile: CalibrationProfile, folder: Path | None = None) -> list[PrefillCase]:
    """Per measured prefill case: model compute and memory times (compute factor 1), ratio to the measurement."""
    from roofline.evaluate import ceilings, hbm_bytes
    from roofline.specs.library import hardware

    hw = hardware("h200-sxm")
    probe = profile.model_copy(
        update={"grouped_gemm": profile.grouped_gemm.model_copy(update={"compute_efficiency": 1.0})}
    )
    out: list[PrefillCase] = []
    for r in _rows(PREFILL, folder):
        op = _expert_op(r)
        c, bw = ceilings(op, hw, probe)
        tc, tm, t = float(np.max(op.flops / c)), float(np.max(hbm_bytes(op, probe) / bw)), float(r["grouped_s"])
        out.append(
            {
                "layout": r["layout"],
                "tokens": int(r["tokens"]),
                "half": r["half"],
                "rows_per_expert": round(float(np.max(op.m)), 3),
                "compute_s": tc,
                "memory_s": tm,
                "measured_s": t,
                "compute_bound": tc > tm,
                "compute_efficiency": tc / t,
            }
        )
    return out


def fit_grouped_gemm(profile: CalibrationProfile, folder: Path | None = None) -> CalibrationProfile:
    """``profile`` with ``grouped_gemm`` fitted to the two H200 measurements (module docstring)."""
    m, ratio = decode_ratios(folder)
    ux, fitted = monotone_log_fit(bucket_log2(m), ratio)
    curve = Curve(
        x=tuple(float(v) for v in ux),
        y=tuple(round(float(v), 4) for v in fitted),
        sources=(f"validation/closedloop/{DECODE}",),
    )
    with_curve = profile.model_copy(update={"grouped_gemm": GroupedGemm(devices=SAME_SM, memory_efficiency=curve)})
    cases = prefill_efficiencies(with_curve, folder)
    bound = [c["compute_efficiency"] for c in cases if c["compute_bound"]]
    eff = round(min(1.0, float(median(bound))), 4) if bound else 1.0
    src = (
        f"measured on an H200 (validation/closedloop/{DECODE}: memory_efficiency vs rows per expert over "
        f"{len(m)} decode cases; {PREFILL}: compute_efficiency = median over {len(bound)} compute-bound prefill "
        f"cases); applied to devices with the same Hopper SM: {', '.join(SAME_SM)}"
    )
    grouped = GroupedGemm(
        devices=SAME_SM, measured_on=MEASURED_ON, memory_efficiency=curve, compute_efficiency=eff, sources=(src,)
    )
    record = {
        "method": "roofline.published.grouped_gemm.fit_grouped_gemm (module docstring)",
        "decode_cases": len(m),
        "decode_ratio_median": round(float(np.median(ratio)), 4),
        "decode_ratio_range": [round(float(ratio.min()), 4), round(float(ratio.max()), 4)],
        "prefill_cases": [{k: (round(v, 9) if isinstance(v, float) else v) for k, v in c.items()} for c in cases],
        "compute_bound_cases": len(bound),
    }
    return profile.model_copy(
        update={"grouped_gemm": grouped, "residuals": {**profile.residuals, "grouped_gemm": record}}
    )
