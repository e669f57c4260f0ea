"""``grouped_gemm.memory_efficiency`` of the default profile: measured MoE grouped GEMMs on an H200.

``validation/closedloop/moe_stream_h200-sxm.csv`` (``python -m calibrate.closedloop.moe_stream`` on the
lent H200): for the per-GPU expert layouts of DeepSeek-V3 (tp 8), Qwen3-235B (ep 4), gpt-oss-120b,
MiniMax-M2.5 (tp 4) and Qwen3-30B-A3B at decode batches 1–128, the routed rows' experts ran as one
CUTLASS grouped GEMM (``torch._grouped_mm``) per layer half in a CUDA graph, next to a dense GEMM
streaming the same weight bytes. The efficiency is the median over those 40 cases of
grouped / dense bytes per second: what a grouped expert GEMM with a few rows per expert loses
against the dense streaming the memory ceiling describes. It is applied to the devices with the
H200's streaming multiprocessor (:data:`SAME_SM`); others keep 1, as nothing was measured there.
"""

from __future__ import annotations

import csv
from pathlib import Path
from statistics import median

from roofline.profile import CalibrationProfile, GroupedGemm
from roofline.published.graph_overhead import closedloop_dir

#: Bundled devices built on the H200's GH100 Hopper SM (same grouped-GEMM kernels and memory
#: pipeline per SM; they differ in HBM size/speed, which the memory ceiling already carries).
SAME_SM = ("h100-nvl", "h100-pcie", "h100-sxm", "h20", "h200-sxm")
MEASUREMENT = "moe_stream_h200-sxm.csv"


def grouped_ratios(path: Path | None = None) -> list[dict[str, float | str]]:
    """One record per measured case: layout, batch, half, rows per expert and grouped/dense bandwidth."""
    out: list[dict[str, float | str]] = []
    with (path or closedloop_dir() / MEASUREMENT).open(newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if r["half"] == "copy":
                continue
            out.append({
                "layout": r["layout"], "batch": float(r["batch"]), "half": r["half"],
                "rows_per_expert": float(r["rows"]) / float(r["touched"]),
                "ratio": float(r["grouped_bytes_per_s"]) / float(r["dense_bytes_per_s"]),
            })  # fmt: skip
    return out


def fit_grouped_gemm(profile: CalibrationProfile, path: Path | None = None) -> CalibrationProfile:
    """``profile`` with ``grouped_gemm.memory_efficiency`` = the median grouped/dense ratio on :data:`SAME_SM`."""
    cases = grouped_ratios(path)
    eff = round(float(median(float(c["ratio"]) for c in cases)), 4)

    def med(key: str, value: object) -> float:
        return round(float(median(float(c["ratio"]) for c in cases if c[key] == value)), 4)

    src = (
        f"median over {len(cases)} decode-step MoE grouped GEMMs (CUTLASS, torch._grouped_mm, CUDA graph) of "
        f"grouped / dense bytes per second, measured on an H200 (validation/closedloop/{MEASUREMENT}); "
        f"applied to devices with the same Hopper SM: {', '.join(SAME_SM)}"
    )
    grouped = GroupedGemm(memory_efficiency=dict.fromkeys(SAME_SM, eff), sources=(src,))
    record = {
        "method": "roofline.published.grouped_gemm.fit_grouped_gemm: median(grouped / dense bytes per s)",
        "cases": len(cases),
        "median": eff,
        "range": [round(min(float(c["ratio"]) for c in cases), 4), round(max(float(c["ratio"]) for c in cases), 4)],
        "by_half": {h: med("half", h) for h in sorted({str(c["half"]) for c in cases})},
        "by_batch": {str(int(b)): med("batch", b) for b in sorted({float(c["batch"]) for c in cases})},
    }
    return profile.model_copy(
        update={"grouped_gemm": grouped, "residuals": {**profile.residuals, "grouped_gemm": record}}
    )
