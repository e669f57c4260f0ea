"""Which devices roofline's public validation sets measure: the count of public measurements per hardware spec.

A prediction on a device no public measurement covers rests on its datasheet and on rules fitted elsewhere, and
says so (:func:`roofline.provenance.device_evidence`). The counts come from the validation folder:

* ``published.csv``: the static end-to-end rows roofline expresses (:func:`roofline.published.rows.express`);
* ``serving/aic_silicon_agg.csv`` and ``serving/aic_silicon_disagg.csv``: closed-loop and disaggregated serving
  rows (their ``hardware`` column is a roofline name);
* ``serving/qwen3_32b_vllm_sweeps.csv``: vLLM concurrency sweeps (``gpu`` "H100 SXM");
* ``results/serving_blis.csv``: the vLLM 0.15.1 open-loop stages of the BLIS study (H100 SXM, per its SOURCES.md).

Left out: Spec-Bench's "A100 80GB" and "RTX 3090" rows (variant not stated; no spec). ``python -m
roofline.published.device_coverage`` rewrites ``roofline/data/device_validation.yaml``; a test re-derives it.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

from roofline.published.rows import RowCase, express, published_csv_path, read_rows

OUT = Path(__file__).resolve().parents[1] / "data" / "device_validation.yaml"
GPU_NAMES = {"H100 SXM": "h100-sxm"}


def _column(path: Path, col: str) -> list[str]:
    with path.open(encoding="utf-8", newline="") as fh:
        return [row[col] for row in csv.DictReader(fh)]


def coverage(validation: Path | None = None) -> dict[str, dict[str, int]]:
    """{hardware: {source: measurements}} over the validation folder (module docstring), sorted."""
    root = validation or published_csv_path().parent
    out: dict[str, Counter[str]] = {}

    def add(names: list[str], source: str) -> None:
        for name in names:
            out.setdefault(name, Counter())[source] += 1

    static = [c for c in map(express, read_rows(root / "published.csv")) if isinstance(c, RowCase)]
    add([c.hardware for c in static], "static end-to-end rows (published.csv)")
    serving = root / "serving"
    add(_column(serving / "aic_silicon_agg.csv", "hardware"), "closed-loop serving rows (AIConfigurator sample)")
    add(_column(serving / "aic_silicon_disagg.csv", "hardware"), "disaggregated serving rows (AIConfigurator sample)")
    sweeps = [GPU_NAMES[g] for g in _column(serving / "qwen3_32b_vllm_sweeps.csv", "gpu") if g in GPU_NAMES]
    add(sweeps, "vLLM concurrency sweeps (Qwen3-32B)")
    blis = root / "results" / "serving_blis.csv"
    if blis.is_file():
        add(["h100-sxm"] * len(_column(blis, "stage")), "vLLM 0.15.1 open-loop stages (BLIS)")
    return {hw: dict(sorted(c.items())) for hw, c in sorted(out.items())}


def render(cov: dict[str, dict[str, int]]) -> str:
    """The YAML text of ``roofline/data/device_validation.yaml``."""
    lines = [
        "# Public measurements per hardware spec in roofline's validation sets (roofline/published/device_coverage.py;",
        "# regenerate with `python -m roofline.published.device_coverage`). A device not listed has none.",
    ]
    for hw, sources in cov.items():
        lines.append(f"{hw}:")
        lines += [f"  {src!r}: {n}" for src, n in sources.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover
    OUT.write_text(render(coverage()), encoding="utf-8")
    print(f"wrote {OUT}")
