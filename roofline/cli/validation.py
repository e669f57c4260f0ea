"""``roofline accuracy``: predictions against published real-world measurements.

The command is a thin renderer over :func:`roofline.published.accuracy.evaluate_rows`. Heavy
libraries load inside the commands.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from roofline.boundary.outputs import write_output
from roofline.cli.options import OptionError, console, dumps, output_target, parse_duration_opt, write_frame

if TYPE_CHECKING:
    from rich.table import Table

    from roofline.published.accuracy import AccuracyReport

GRADE_HELP = "Keep rows of this grade or better (A > A- > B+ > B); default: every expressible row."


def accuracy_command(
    data: Annotated[
        Path | None, typer.Option("--data", help="Published-measurements CSV (default: the shipped validation set).")
    ] = None,
    grade: Annotated[str | None, typer.Option("--grade", help=GRADE_HELP)] = None,
    calibration: Annotated[
        str | None, typer.Option("--calibration", "-c", help="Calibration profile YAML (default: the default profile).")
    ] = None,
    json: Annotated[bool, typer.Option("--json", help="Print JSON: rows, skipped rows, summary.")] = False,
    csv: Annotated[bool, typer.Option("--csv", help="Print the per-row predictions as CSV.")] = False,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write JSON/CSV to this file.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing output file.")] = False,
    coverage: Annotated[
        bool,
        typer.Option(
            "--coverage",
            help="Instead: held-out coverage of the prediction intervals by regime (each source held out entirely).",
        ),
    ] = False,
    level: Annotated[str, typer.Option("--level", metavar="FRACTION", help="Interval level for --coverage.")] = "0.8",
) -> None:
    """Predictions vs published measurements: error per row, median and p90 per metric, hardware, source.

    APE = |predicted − measured| / measured; each row uses its own metric definition.

    Example: TensorRT-LLM out tok/s/GPU = OSL·BS / total latency / GPUs (prefill included).

    Rows that cannot be expressed (unknown model, batch not stated, microbenchmarks) are listed with the reason.
    """
    from roofline.published.accuracy import evaluate_rows
    from roofline.published.rows import GRADES

    if json and csv:
        raise OptionError("--json and --csv are exclusive; pick one")
    if coverage:
        _coverage(level, json, bool(data or calibration or grade or csv or output))
        return
    if grade is not None and grade not in GRADES:
        raise OptionError(f"--grade must be one of {', '.join(GRADES)}, got {grade!r}")
    if data is not None and not data.is_file():
        raise OptionError(f"--data {data}: no such file; omit --data to use the shipped validation/published.csv")
    target = output_target(output, force, "JSON or CSV table")
    report = evaluate_rows(data, calibration)
    if grade is not None:
        report = report.grade(grade)
    if json or (output is not None and output.suffix == ".json" and not csv):
        text = dumps(report.to_dict()) + "\n"
        if target is None:
            typer.echo(text, nl=False)
        else:
            write_output(target, text)
        return
    if csv or output is not None:
        write_frame(report.rows, target, "csv")
        return
    _print(report)


def _coverage(level: str, json: bool, other_options: bool) -> None:
    """Print the held-out coverage table (:func:`roofline.published.coverage.coverage`)."""
    from rich.table import Table

    from roofline.cli.predict import parse_level
    from roofline.published.coverage import coverage
    from roofline.published.serving_error import serving_summary

    if other_options:
        raise OptionError(
            "--coverage is measured on the shipped rows with the default profile; "
            "drop --data, --calibration, --grade, --csv and --output (keep --json or --level)"
        )
    lv = parse_level(level, "--level")
    rows = coverage(lv)
    serving = serving_summary(lv)
    if json:
        typer.echo(dumps({"level": lv, "coverage": rows, "serving": serving}))
        return
    t = Table(
        title=f"held-out coverage of the {100 * lv:.0f} % prediction interval (each public source held out entirely)",
        title_justify="left",
        caption="inside = measured value within the interval built without its source; width = (high − low)/predicted",
        caption_justify="left",
    )
    for h in ("regime", "rows", "inside", "coverage", "median width", "interval from"):
        t.add_column(h, justify="left" if h in ("regime", "interval from") else "right")
    for r in rows:
        t.add_row(
            r["regime"],
            str(r["n"]),
            str(r["covered"]),
            f"{100 * r['coverage']:.0f}%",
            f"{r['width_pct']:.0f}%",
            r["pooled_from"],
        )
    console().print(t)
    s = Table(
        title=f"serving simulator: its {100 * lv:.0f} % interval on public serving rows and its coverage with each "
        "model family held out of its engine's pool",
        title_justify="left",
        caption="interval = factors on a simulated value (asymmetric); roofline.published.serving_error",
        caption_justify="left",
    )
    for h in ("engine", "rows", "TTFT", "TPOT", "E2E", "coverage TTFT / TPOT / E2E"):
        s.add_column(h, justify="left" if h == "engine" else "right")
    for r in serving:
        f, figs = r["figures"], ("ttft", "tpot", "e2e")
        s.add_row(
            r["engine"],
            str(r["rows"]),
            *(f"×{f[x]['low']:.2f}–×{f[x]['high']:.2f}" for x in figs),
            " / ".join(f"{100 * f[x]['coverage']:.0f}%" for x in figs),
        )
    console().print(s)


def _print(report: AccuracyReport) -> None:
    con = console()
    con.print(rows_table(report))
    con.print(summary_table(report))
    for line in mapping_lines(report):
        con.print(line, soft_wrap=True)
    for key, engine in report.engines().items():
        con.print(f"engine semantics for {key}: {engine}", soft_wrap=True)
    con.print(skipped_table(report))


def rows_table(report: AccuracyReport) -> Table:
    """One line per predicted row: measured, predicted, signed error."""
    from rich.table import Table

    t = Table(title=f"accuracy vs published measurements (profile: {report.profile})", title_justify="left")
    for h in (
        "id",
        "source",
        "grade",
        "hardware",
        "model",
        "tp",
        "batch",
        "ISL/OSL",
        "metric",
        "measured",
        "predicted",
        "error",
    ):
        t.add_column(h, justify="right" if h in ("tp", "batch", "measured", "predicted", "error") else "left")
    for r in report.rows.to_dict("records"):
        t.add_row(
            *(str(r[k]) for k in ("id", "source", "grade", "hardware", "model", "tp", "batch")),
            f"{r['input_len']}/{r['output_len']}",
            str(r["metric"]),
            _num(r["measured"]),
            _num(r["predicted"]),
            f"{r['error_pct']:+.1f}%",
        )
    return t


def _num(x: float) -> str:
    """Thousands separators for large values, 3 significant digits for small ones."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def summary_table(report: AccuracyReport) -> Table:
    """Median and p90 APE per metric kind, metric, hardware and source."""
    from rich.table import Table

    t = Table(title="absolute percentage error (APE): median and 90th percentile", title_justify="left")
    for h in ("by", "value", "rows", "median APE", "p90 APE", "median error"):
        t.add_column(h, justify="left" if h in ("by", "value") else "right")
    for r in report.summary().itertuples(index=False):
        t.add_row(
            str(r.group),
            str(r.value),
            str(r.n),
            f"{r.median_ape_pct:.1f}%",
            f"{r.p90_ape_pct:.1f}%",
            f"{r.median_error_pct:+.1f}%",
        )
    return t


def mapping_lines(report: AccuracyReport) -> list[str]:
    """'label -> slug: why' for every model label of the data that maps to a spec of another name."""
    from roofline.published.rows import MODEL_LABELS

    labels = set(report.rows.get("model_label", [])) | set(report.skipped.get("model_label", []))
    found = [(lb, MODEL_LABELS[lb]) for lb in sorted(labels) if lb in MODEL_LABELS]
    return [f"model {lb} -> {m.slug}: {m.note}" for lb, m in found if m.note != "same checkpoint"]


def skipped_table(report: AccuracyReport) -> Table:
    """Skipped rows grouped by reason (row ids listed)."""
    from rich.table import Table

    groups: dict[str, list[str]] = defaultdict(list)
    for r in report.skipped.itertuples(index=False):
        groups[str(r.reason)].append(str(r.id))
    t = Table(title=f"rows not expressed ({len(report.skipped)})", title_justify="left")
    t.add_column("rows", justify="right")
    t.add_column("ids")
    t.add_column("reason")
    for reason, ids in sorted(groups.items(), key=lambda kv: kv[1][0]):
        t.add_row(str(len(ids)), _id_ranges(ids), reason)
    return t


def _id_ranges(ids: list[str]) -> str:
    """'V001, V010, V015–V016' style compaction of sorted row ids."""
    nums = sorted(int(i[1:]) for i in ids if i[1:].isdigit())
    if len(nums) != len(ids):
        return ", ".join(sorted(ids))
    parts: list[str] = []
    start = prev = nums[0]
    for n in [*nums[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(f"V{start:03d}" if start == prev else f"V{start:03d}–V{prev:03d}")
        if n is not None:
            start = prev = n
    return ", ".join(parts)


# ---- roofline validate (closed loop against a real torch model) ---------------------------------
VALIDATE_GRID_HELP = (
    "Points to time: a preset (cpu, cpu-quick, gpu, gpu-quick; default cpu on CPU, gpu on CUDA) or "
    "'prefill=1x128,4x512;decode=1x512,8x2048' (batch x prompt length; batch x context)."
)


def validate_command(
    model: Annotated[str, typer.Argument(help="Model spec name or YAML path, e.g. llama-3.1-8b.")],
    device: Annotated[str, typer.Option("--device", help="Where to run the torch model: cpu or cuda:N.")] = "cpu",
    calibration: Annotated[
        str | None,
        typer.Option("--calibration", "-c", help="Measured calibration profile of this device (roofline calibrate)."),
    ] = None,
    scale: Annotated[
        str, typer.Option("--scale", help="tiny (2 layers, hidden 256), small (4 layers, hidden 1024) or full.")
    ] = "tiny",
    grid: Annotated[str | None, typer.Option("--grid", help=VALIDATE_GRID_HELP)] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the per-point table as CSV.")] = None,
    calibrate: Annotated[
        str | None,
        typer.Option(
            "--calibrate",
            metavar="DURATION",
            help="First measure a quick profile for the scaled model: its budget, e.g. 30s.",
        ),
    ] = None,
    threads: Annotated[
        int | None, typer.Option("--threads", help="torch CPU threads (default: the profile's).")
    ] = None,
    rounds: Annotated[int, typer.Option("--rounds", min=1, help="Timed rounds per point; the median is used.")] = 5,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing output file.")] = False,
) -> None:
    """Closed loop: time a real torch decoder built from MODEL against the prediction, point by point.

    Random weights; Llama-family dense or MoE blocks with fused QKV and gate_up, a preallocated KV cache and scaled-dot-product attention. Prints measured vs predicted per point and the median and worst |error| per phase.

    Example: roofline validate llama-3.1-8b --device cpu --calibrate 30s (measure a quick profile first). Needs torch.
    """  # noqa: E501
    try:
        import torch  # noqa: F401
    except ImportError:
        raise OptionError("roofline validate needs torch: pip install 'roofline[calibrate]'") from None
    from calibrate.closedloop.validate import format_table, run

    if scale not in ("tiny", "small", "full"):
        raise OptionError(f"--scale must be tiny, small or full, got {scale!r}")
    if calibration is None and calibrate is None:
        raise OptionError(
            "validation compares with a profile measured on this device: add --calibrate 30s (a quick one first) or "
            "--calibration PROFILE (roofline calibrate)"
        )
    output_target(output, force, "CSV table")  # checked before the model is timed
    df = run(
        model,
        calibration,
        device,
        scale,
        grid,
        output,
        threads,
        rounds,
        calibrate_budget_s=parse_duration_opt(calibrate, "--calibrate") if calibrate is not None else None,
        progress=lambda line: typer.echo(line, err=True),
        force=force,
    )
    typer.echo(format_table(df))
    if output is not None:
        typer.echo(f"saved {output}")
