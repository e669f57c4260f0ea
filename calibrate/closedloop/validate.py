"""Closed-loop validation: time a real torch decoder built from a ModelSpec against ``roofline.predict``.

For every grid point the real model (:mod:`calibrate.closedloop.model`, random weights) runs one
forward pass and the cost model predicts the same pass:

* **prefill** of B sequences × P tokens from an empty cache → ``predict(...).ttft_s``;
* **decode step** of B sequences at context L (the new token attends L positions, L − 1
  cached) → ``predict(prompt_len=L − 1, output_len=2).tpot_first_s``.

Timing uses calibration's timers (:mod:`calibrate.measure.timing`): warm-up, then the median of
``rounds`` rounds; perf_counter over calls on CPU, CUDA events around CUDA-graph replays on
GPU (eager when capture is impossible, e.g. MoE routing syncs with the host). The error of
a point is predicted / measured − 1. Each row also carries the *ideal* prediction of the
same profile with every efficiency 1 and no overheads (:func:`ideal_profile`): a roofline
that should never be slower than reality, a one-sided check that needs no fitting.

Run ``python -m calibrate.closedloop.validate --help``; ``roofline validate`` is the same harness.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from calibrate.closedloop.grid import GRIDS, Grid, Point, combine_pairs, format_table, parse_grid
from calibrate.closedloop.profiles import ideal_profile, profile_for_dtype, profile_hardware
from roofline.errors import CalibrationError, RooflineError, ScenarioError
from roofline.profile import CalibrationProfile, load_profile
from roofline.specs.hardware import HardwareSpec
from roofline.specs.model import ModelSpec

if TYPE_CHECKING:
    import pandas as pd

    from calibrate.closedloop.runner import Runner

__all__ = [
    "GRIDS",
    "Grid",
    "Point",
    "calibrate_and_validate",
    "format_table",
    "ideal_profile",
    "parse_grid",
    "run",
    "validate",
]


# ---- prediction -------------------------------------------------------------------------------
def predict_point(
    spec: ModelSpec, hw: HardwareSpec, prof: CalibrationProfile, pt: Point, dtype: str, graphs: bool = False
) -> float:
    """Predicted seconds of one prefill pass or one decode step (``graphs``: decode replayed as a CUDA graph).

    Memory capacity is set huge: the point ran on the device, so feasibility is not in question.
    """
    import roofline

    kw: dict[str, Any] = {
        "weight_dtype": dtype,
        "kv_dtype": dtype,
        "engine": "ideal",
        "engine_overrides": {"capacity_bytes": 1e18},
        "cuda_graphs": graphs,
    }
    if pt.phase == "prefill":
        r = roofline.predict(spec, hw, pt.batch, pt.tokens, 2, calibration=prof, **kw)
        return float(r.ttft_s)
    r = roofline.predict(spec, hw, pt.batch, pt.tokens - 1, 2, calibration=prof, **kw)
    return float(r.tpot_first_s)


def modelled_kernels(spec: ModelSpec, hw: HardwareSpec, prof: CalibrationProfile, pt: Point, dtype: str) -> int:
    """Kernels the cost model counts for one pass of ``pt`` (Σ count × kernels over the phase's ops)."""
    from roofline.ops import decode_ops, prefill_ops
    from roofline.prediction import make_scenario

    sc = make_scenario(
        hw,
        pt.batch,
        pt.tokens if pt.phase == "prefill" else pt.tokens - 1,
        2,
        weight_dtype=dtype,
        kv_dtype=dtype,
        engine="ideal",
    )
    ops = prefill_ops(spec, sc, hw) if pt.phase == "prefill" else decode_ops(spec, sc, hw, pt.tokens)
    return int(sum(op.count * op.kernels for op in ops))


# ---- the loop -----------------------------------------------------------------------------------
def validate(
    spec: ModelSpec,
    prof: CalibrationProfile,
    device: str = "cpu",
    grid: Grid | None = None,
    dtype: str | None = None,
    hardware: str | HardwareSpec | None = None,
    rounds: int = 5,
    graphs: bool = True,
    threads: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Measure and predict every point of ``grid`` for ``spec`` (already scaled) on ``device``.

    ``dtype`` defaults to fp32 on CPU and bf16 on GPU; ``threads`` (CPU) defaults to the count the
    profile was measured with. Returns one row per point: phase, batch, prompt_len, context,
    measured_s, predicted_s (``roofline.predict``), eager_extra_s (the unfused kernels eager
    torch adds, :mod:`calibrate.closedloop.extras`), error_pct ((predicted + extra) / measured − 1,
    in %), error_model_only_pct (predicted / measured − 1), ideal_s (efficiency-1 roofline),
    spread_pct of the timing rounds, timing method, kernel counts and note.
    """
    import pandas as pd

    hw = profile_hardware(prof, hardware)
    dtype = dtype or ("fp32" if device == "cpu" else "bf16")
    prof = profile_for_dtype(prof, dtype)
    grid = grid or parse_grid(None, device)
    ideal = ideal_profile(prof)
    rows = []
    from calibrate.closedloop.runner import Runner

    with _cpu_threads(device, threads or _profile_threads(prof)):
        runner = Runner(spec, device, dtype, rounds=rounds, graphs=graphs)
        rows = [_row(runner, spec, hw, prof, ideal, pt, dtype, device, progress) for pt in grid.points()]
    return pd.DataFrame(rows)


@contextlib.contextmanager
def _cpu_threads(device: str, threads: int | None) -> Iterator[None]:
    """torch's intra-op CPU threads set to ``threads`` for the block (no-op on GPU or when None)."""
    import torch

    old = torch.get_num_threads()
    if device == "cpu" and threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _row(
    runner: Runner,
    spec: ModelSpec,
    hw: HardwareSpec,
    prof: CalibrationProfile,
    ideal: CalibrationProfile,
    pt: Point,
    dtype: str,
    device: str,
    progress: Callable[[str], None] | None,
) -> dict[str, Any]:
    """Predict (calibrated and ideal), measure, and return one result row."""
    from calibrate.closedloop.extras import eager_extra_s

    pred = predict_point(spec, hw, prof, pt, dtype, runner.decode_graphs)
    extra = eager_extra_s(spec, hw, prof, pt.phase, pt.batch, pt.tokens, dtype, runner.decode_graphs)
    low = predict_point(spec, hw, ideal, pt, dtype, runner.decode_graphs)
    modelled = modelled_kernels(spec, hw, prof, pt, dtype)
    m = runner.measure(pt)
    row = {
        "model": spec.name,
        "hardware": hw.name,
        "profile": prof.name,
        "device": device,
        "dtype": dtype,
        "phase": pt.phase,
        "batch": pt.batch,
        "prompt_len": pt.tokens if pt.phase == "prefill" else pt.tokens - 1,
        "context": pt.tokens,
        "measured_s": m.median_s,
        "predicted_s": pred,
        "eager_extra_s": extra,
        "error_pct": 100.0 * ((pred + extra) / m.median_s - 1.0),
        "error_model_only_pct": 100.0 * (pred / m.median_s - 1.0),
        "ideal_s": low,
        "ideal_le_measured": low <= m.median_s,
        "spread_pct": 100.0 * m.spread,
        "rounds": m.rounds,
        "calls_per_round": m.calls_per_round,
        "method": m.method,
        "kernels": m.kernels,
        "modelled_kernels": modelled,
        "note": m.note,
    }
    if progress is not None:
        progress(
            f"{pt.phase:7s} B={pt.batch:<4d} {'P' if pt.phase == 'prefill' else 'L'}={pt.tokens:<6d} "
            f"measured {m.median_s * 1e3:9.3f} ms  predicted {pred * 1e3:9.3f} + {extra * 1e3:.3f} ms  "
            f"error {row['error_pct']:+7.1f}% (model only {row['error_model_only_pct']:+.1f}%)"
        )
    return row


def calibrate_and_validate(
    spec: ModelSpec,
    device: str = "cpu",
    budget_s: float = 30.0,
    grid: Grid | None = None,
    workdir: str | Path | None = None,
    threads: int | None = 1,
    quick: bool = True,
    rounds: int = 5,
    profile_path: str | Path | None = None,
    pairs: int = 1,
    progress: Callable[[str], None] | None = None,
) -> tuple[CalibrationProfile, pd.DataFrame]:
    """Calibrate ``device`` for ``spec``'s own GEMM shapes, then validate ``spec``, in one job.

    Calibration and measurement back to back keep the machine's drift between them small:
    a shared host's memory bandwidth wanders by ±25% within a minute and several-fold over
    half an hour, so a profile from another moment mis-predicts memory-bound points. With
    ``pairs`` > 1 the calibrate-then-measure pair is repeated and each point reports the
    median over pairs (:func:`~calibrate.closedloop.grid.combine_pairs`). The scaled spec is
    written as YAML so the calibration's GEMM suite measures exactly its (N, K) shapes. The
    last profile is saved to ``profile_path``, else ``workdir/profile.yaml`` (a temporary
    folder when ``workdir`` is None); it is the one returned.
    """
    from calibrate.cli import run_calibration
    from roofline.specs.hf_import import spec_to_yaml

    frames = []
    with contextlib.ExitStack() as stack:
        folder = Path(workdir) if workdir is not None else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        folder.mkdir(parents=True, exist_ok=True)
        spec_path = folder / f"{spec.name}.yaml"
        spec_path.write_text(spec_to_yaml(spec), encoding="utf-8")
        final = Path(profile_path) if profile_path is not None else folder / "profile.yaml"
        for k in range(max(1, pairs)):
            out = final if k == pairs - 1 else folder / f"profile.pair{k}.yaml"
            prof = run_calibration(
                device, budget_s, model=str(spec_path), output=out, quick=quick, progress=False, threads=threads
            )
            frames.append(validate(spec, prof, device, grid, rounds=rounds, threads=threads, progress=progress))
    return prof, combine_pairs(frames)


def run(
    model: str | ModelSpec,
    calibration: str | Path | CalibrationProfile | None,
    device: str = "cpu",
    scale: str = "tiny",
    grid: str | None = None,
    output: str | Path | None = None,
    threads: int | None = None,
    rounds: int = 5,
    graphs: bool = True,
    hardware: str | None = None,
    calibrate_budget_s: float | None = None,
    progress: Callable[[str], None] | None = None,
    force: bool = True,
) -> pd.DataFrame:
    """Load, scale, validate, and save a CSV: the body of both command lines.

    With ``calibrate_budget_s`` a quick calibration for the scaled model runs first in the same
    job and is saved to ``calibration`` (or next to ``output``). ``threads`` sets torch's CPU
    threads (default: the count the profile was measured with).
    """
    import roofline
    from calibrate.closedloop.model import scale_spec
    from roofline.boundary.outputs import check_output, write_output

    out_target = check_output(output, force=force, what="CSV table") if output is not None else None

    if scale not in ("tiny", "small", "full"):
        raise ScenarioError(f"--scale must be tiny, small or full, not '{scale}'")
    scaled = scale_spec(roofline.model(model), scale)  # type: ignore[arg-type]
    points = parse_grid(grid, device)
    if calibrate_budget_s is not None:
        where = Path(output).parent if output is not None else None
        target = calibration if isinstance(calibration, str | Path) else None
        _, df = calibrate_and_validate(
            scaled,
            device,
            calibrate_budget_s,
            points,
            where,
            threads or 1,
            rounds=rounds,
            profile_path=target,
            progress=progress,
        )
    elif calibration is None:
        raise CalibrationError("validation needs a measured profile: pass --calibration PROFILE or --calibrate SECONDS")
    else:
        df = validate(
            scaled,
            load_profile(calibration),
            device,
            points,
            hardware=hardware,
            rounds=rounds,
            graphs=graphs,
            threads=threads,
            progress=progress,
        )
    if out_target is not None:
        write_output(out_target, df.to_csv(index=False))
    return df


def _profile_threads(prof: CalibrationProfile) -> int | None:
    """torch CPU threads the profile was measured with (``provenance.threads.torch_threads``), if recorded."""
    threads = prof.provenance.get("threads")
    n = threads.get("torch_threads") if isinstance(threads, dict) else None
    return n if isinstance(n, int) and n > 0 else None


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m calibrate.closedloop.validate``: measure, predict, print the table, save the CSV."""
    ap = argparse.ArgumentParser(
        prog="python -m calibrate.closedloop.validate", description=(__doc__ or "").split("\n\n")[0]
    )
    ap.add_argument("--model", required=True, help="model spec name or YAML path, e.g. llama-3.1-8b")
    ap.add_argument("--device", default="cpu", help="cpu or cuda:N")
    ap.add_argument("--calibration", default=None, help="measured calibration profile YAML")
    ap.add_argument(
        "--calibrate",
        type=float,
        default=None,
        metavar="SECONDS",
        help="measure a quick profile for the scaled model first (same job), saved to --calibration",
    )
    ap.add_argument("--scale", default="tiny", choices=("tiny", "small", "full"))
    ap.add_argument("--grid", default=None, help=f"preset ({', '.join(GRIDS)}) or prefill=BxP,…;decode=BxL,…")
    ap.add_argument("-o", "--output", default=None, help="CSV of predicted vs measured per point")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: the profile's)")
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds per point (median taken)")
    ap.add_argument("--no-graphs", action="store_true", help="time eager CUDA launches instead of graph replays")
    ap.add_argument("--hardware", default=None, help="hardware slug to predict (default: the profile's device)")
    a = ap.parse_args(argv)
    try:
        df = run(
            a.model,
            a.calibration,
            a.device,
            a.scale,
            a.grid,
            a.output,
            a.threads,
            max(1, a.rounds),
            not a.no_graphs,
            a.hardware,
            a.calibrate,
            progress=lambda s: print(s, flush=True),
        )
    except RooflineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print()
    print(format_table(df))
    if a.output:
        print(f"\nsaved {a.output}")
    return 0 if math.isfinite(float(df["error_pct"].abs().median())) else 1


if __name__ == "__main__":
    sys.exit(main())
