"""Refit a measured profile's per-kernel CUDA-graph cost from its own closed-loop decode steps.

Calibration times each kernel alone; a real decode step replayed as one CUDA graph costs more
than the sum of those kernels (on an H200, 11–30 % more for Llama-3.1-8B, Qwen3-32B and a tp = 8
shard of Llama-3.1-70B: a near-constant few microseconds per kernel). This sets
``overheads.per_kernel_graph_s`` of the profile to the median over the closed-loop CUDA-graph decode
steps of (measured − extras − predicted with no per-kernel graph cost) / kernels the cost model
counts, the derivation the default profile uses (:func:`roofline.published.graph_overhead.fit_graph_overhead`),
and records every step's residual under ``residuals.decode_step_points``.

Run after ``python -m calibrate.closedloop.validate --device cuda:0 --calibration P.yaml -o steps.csv``::

    python -m calibrate.closedloop.graphcost --calibration P.yaml steps.csv [more.csv ...] -o P.yaml --force

``calibrate/gpu_check.sh`` does both.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from roofline.errors import RooflineError
from roofline.profile import CalibrationProfile, load_profile


def refit_graph_cost(profile: CalibrationProfile, tables: Sequence[Path]) -> CalibrationProfile:
    """``profile`` with ``per_kernel_graph_s`` fitted to the CUDA-graph decode rows of ``tables``."""
    from roofline.published.graph_overhead import fit_graph_overhead

    before = profile.overheads.per_kernel_graph_s
    fitted = fit_graph_overhead(profile, paths=list(tables), public=False)
    prov = dict(fitted.provenance)
    prov["graph_cost_refit"] = (
        f"per_kernel_graph_s {before * 1e6:.2f} us (chain of tiny kernels) -> "
        f"{fitted.overheads.per_kernel_graph_s * 1e6:.2f} us from closed-loop decode steps: "
        + ", ".join(Path(t).name for t in tables)
    )
    return fitted.model_copy(update={"provenance": prov})


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m calibrate.closedloop.graphcost``: refit, print the change, save the profile."""
    from roofline.boundary.outputs import check_output, write_output

    ap = argparse.ArgumentParser(
        prog="python -m calibrate.closedloop.graphcost", description=(__doc__ or "").split("\n\n")[0]
    )
    ap.add_argument("tables", nargs="+", help="closed-loop CSVs written by calibrate.closedloop.validate")
    ap.add_argument("--calibration", required=True, help="the measured profile the tables were predicted with")
    ap.add_argument("-o", "--output", required=True, help="where to write the refitted profile")
    ap.add_argument("--force", action="store_true", help="replace an existing output file")
    a = ap.parse_args(argv)
    try:
        target = check_output(a.output, force=a.force, what="profile")
        prof = load_profile(a.calibration)
        fitted = refit_graph_cost(prof, [Path(t) for t in a.tables])
        write_output(target, fitted.to_yaml())
    except RooflineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    d = fitted.residuals["decode_step_points"]["per_kernel_graph_s"]
    lomo = d["median_abs_error_pct_leave_one_model_out"]
    print(
        f"per_kernel_graph_s {prof.overheads.per_kernel_graph_s * 1e6:.2f} us -> "
        f"{fitted.overheads.per_kernel_graph_s * 1e6:.2f} us over {d['steps']} decode steps; median |error| "
        f"after {d['median_abs_error_pct_after_fit']} %, leave one model out "
        f"{'n/a (one model)' if lomo is None else f'{lomo} %'}; saved {a.output}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
