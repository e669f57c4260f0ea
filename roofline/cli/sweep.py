"""``roofline sweep``: evaluate a grid of scenarios, one CSV/JSON row per point (wraps :func:`roofline.sweep`).

Heavy libraries are imported inside the command.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from roofline.cli.options import (
    RANGE_HELP,
    OptionError,
    check_grid_size,
    console,
    frame_format,
    output_target,
    parse_int_list,
    write_frame,
)
from roofline.cli.predict import (
    Calibration,
    Engine,
    EngineSet,
    Ep,
    Graphs,
    HardwareArg,
    KvDtype,
    MemUtil,
    ModelArg,
    Pp,
    WeightDtype,
    parse_level,
    scenario_kwargs,
)

if TYPE_CHECKING:
    import pandas as pd

    from roofline.profile import CalibrationProfile
    from roofline.specs.hardware import HardwareSpec
    from roofline.specs.model import ModelSpec


def sweep_cmd(
    model: ModelArg,
    hardware: HardwareArg,
    batch: Annotated[str, typer.Option("--batch", "-b", metavar="LIST", help="Batch values. " + RANGE_HELP)] = "1",
    prompt: Annotated[
        str, typer.Option("--prompt", "-p", metavar="LIST", help="Prompt lengths (same syntax).")
    ] = "1024",
    output: Annotated[
        str, typer.Option("--output", "-n", metavar="LIST", help="Output lengths (same syntax).")
    ] = "128",
    tp: Annotated[
        str, typer.Option("--tp", metavar="LIST", help="Tensor-parallel values (same syntax), e.g. 1,2,4,8.")
    ] = "1",
    pp: Pp = 1,
    ep: Ep = 1,
    weight_dtype: WeightDtype = "checkpoint",
    kv_dtype: KvDtype = "bf16",
    calibration: Calibration = None,
    engine: Engine = "vllm",
    engine_set: EngineSet = None,
    memory_utilization: MemUtil = None,
    cuda_graphs: Graphs = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", metavar="FILE", help="Write to FILE (.csv or .json) instead of stdout."),
    ] = None,
    fmt: Annotated[
        str | None,
        typer.Option("--format", "-f", metavar="csv|json", help="csv or json (default: FILE suffix, else csv)."),
    ] = None,
    json: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
    csv: Annotated[bool, typer.Option("--csv", help="Same as --format csv.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing output file.")] = False,
    interval: Annotated[
        str | None,
        typer.Option(
            "--interval",
            metavar="LEVEL",
            help="Add <figure>_low/_high columns: the LEVEL (e.g. 0.8) prediction interval of each headline figure.",
        ),
    ] = None,
) -> None:
    """Evaluate the grid batch × prompt × output (× tp): one CSV/JSON row per point.

    Points that do not fit keep their row with fits=false, missing_bytes > 0 and empty latencies.
    """
    from roofline.prediction import resolve

    flags = [f for f, on in (("json", json), ("csv", csv)) if on]
    if len(flags) + (fmt is not None) > 1:
        raise OptionError("choose one output format: --format csv|json, --json or --csv")
    fmt = flags[0] if flags else fmt
    target = output_target(out, force, "CSV or JSON table")
    frame_format(out, fmt)
    axes = {n: parse_int_list(v, f"--{n}") for n, v in (("batch", batch), ("prompt", prompt), ("output", output))}
    tps = parse_int_list(tp, "--tp")
    check_grid_size(len(axes["batch"]) * len(axes["prompt"]) * len(axes["output"]) * len(tps))
    lv = parse_level(interval, "--interval") if interval is not None else None
    m, hw, prof = resolve(model, hardware, calibration, engine)
    kw = scenario_kwargs(1, pp, ep, weight_dtype, kv_dtype, engine, engine_set, memory_utilization, cuda_graphs)
    kw.pop("tp")
    df = _sweep_grid(m, hw, prof, axes, tps, kw)
    if lv is not None:
        from roofline.published.uncertainty import interval_columns

        df = interval_columns(df, lv, prof)
    kind = write_frame(df, target, fmt)
    if out is not None:
        n_fit = int(df["fits"].sum())
        console(stderr=True).print(f"wrote {len(df)} rows ({n_fit} fit in memory) as {kind} to {out}")


def _sweep_grid(
    m: ModelSpec,
    hw: HardwareSpec,
    prof: CalibrationProfile,
    axes: dict[str, list[int]],
    tps: list[int],
    kw: dict[str, Any],
) -> pd.DataFrame:
    """The sweep over batch × prompt × output for each tp, in chunks of about 20,000 points (progress bar)."""
    import pandas as pd

    from roofline.grid import sweep

    per_batch = len(axes["prompt"]) * len(axes["output"])
    chunk = max(1, 20000 // per_batch)
    batches = axes["batch"]
    jobs = [(t, batches[i : i + chunk]) for t in tps for i in range(0, len(batches), chunk)]
    frames = []
    with _progress(len(jobs), len(batches) * per_batch * len(tps)) as advance:
        for t, bs in jobs:
            frames.append(sweep(m, hw, bs, axes["prompt"], axes["output"], tp=t, calibration=prof, **kw))
            advance()
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


class _progress:
    """Context manager yielding an ``advance()`` callable; a rich bar on stderr for long sweeps on a terminal."""

    def __init__(self, jobs: int, points: int) -> None:
        self.jobs, self.points = jobs, points
        self._bar: Any = None

    def __enter__(self) -> Any:
        con = console(stderr=True)
        if self.jobs < 2 or not con.is_terminal:
            return lambda: None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        cols = (
            TextColumn(f"sweeping {self.points:,} points"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
        )
        self._bar = Progress(*cols, console=con, transient=True)
        self._bar.start()
        task = self._bar.add_task("sweep", total=self.jobs)
        return lambda: self._bar.advance(task)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
