"""``roofline calibrate``: a thin front for the ``calibrate`` package (torch is imported only when it runs)."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Annotated

import typer

from roofline.cli.options import OptionError, parse_duration_opt

TORCH_HINT = "pip install 'roofline[calibrate]'"

calibrate_app = typer.Typer(help="Measure this machine and write a calibration profile (needs PyTorch).")


def _calibrate_module() -> ModuleType:
    """``calibrate.cli``, or a usage error saying what to install."""
    try:
        return importlib.import_module("calibrate.cli")
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing.split(".")[0] in ("torch", "pynvml", "nvidia_ml_py"):
            raise OptionError(
                f"calibration needs PyTorch and nvidia-ml-py ({missing} is missing): {TORCH_HINT}"
            ) from None
        if missing in ("calibrate", "calibrate.cli"):
            raise OptionError(
                f"the calibration tools ({missing}) are not part of this installation; reinstall with {TORCH_HINT}"
            ) from None
        raise


def _default_device() -> str:
    """cuda:0 when PyTorch sees a GPU, else a usage error pointing at --device cpu."""
    try:
        import torch
    except ModuleNotFoundError:
        raise OptionError(f"calibration needs PyTorch, which is not installed: {TORCH_HINT}") from None
    if torch.cuda.is_available():
        return "cuda:0"
    raise OptionError(
        "no CUDA device is visible to PyTorch; pass --device cpu to calibrate the CPU, or run on a GPU host"
    )


@calibrate_app.callback(invoke_without_command=True)
def calibrate_cmd(
    ctx: typer.Context,
    device: Annotated[str | None, typer.Option("--device", help="cuda:0 (default when available) or cpu.")] = None,
    budget: Annotated[str, typer.Option("--budget", metavar="DURATION", help="Time budget, e.g. 60s or 5min.")] = "60s",
    model: Annotated[str | None, typer.Option("--model", help="Also measure this model's layer shapes.")] = None,
    tp: Annotated[int, typer.Option("--tp", help="Tensor parallelism of the shapes to measure.")] = 1,
    out: Annotated[Path | None, typer.Option("--out", "-o", metavar="FILE", help="Profile YAML to write.")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue an interrupted run from its checkpoint.")] = False,
    quick: Annotated[bool, typer.Option("--quick", help="A short smoke run with fewer shapes.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing profile (--resume: implied).")] = False,
) -> None:
    """Run the calibration suites; `roofline calibrate show PROFILE` prints an existing profile."""
    if ctx.invoked_subcommand is not None:
        return
    budget_s = parse_duration_opt(budget, "--budget")
    if tp < 1:
        raise OptionError(f"--tp must be >= 1, got {tp}")
    from roofline.boundary.outputs import check_output
    from roofline.errors import Interrupted

    output = out if out is not None else Path("calibration.yaml")  # calibrate's default file name
    check_output(output, force=force or resume, what="calibration profile")  # before minutes of measuring
    cli = _calibrate_module()
    dev = device or _default_device()
    profile = cli.run_calibration(
        device=dev, budget_s=budget_s, model=model, tp=tp, resume=resume, quick=quick, progress=True, output=output
    )
    if profile.provenance.get("interrupted"):
        again = ["roofline calibrate", f"--device {dev}", f"--budget {budget}", f"--tp {tp}", f"-o {output}"]
        again += [f"--model {model}"] if model else []
        again += ["--quick"] if quick else []
        raise Interrupted(cli.interrupted_message(output, " ".join([*again, "--resume"])))


@calibrate_app.command("show")
def calibrate_show(profile: Annotated[Path, typer.Argument(help="A calibration profile YAML.")]) -> None:
    """Summarise a calibration profile: ceilings, curves, overheads and provenance."""
    typer.echo(_calibrate_module().show_profile(profile))


AIC_HINT = 'pip install -e ".[aic]"'


def _check_choice(flag: str, value: str | None, known: list[str]) -> None:
    """A usage error naming ``flag`` and its known values when ``value`` is not one of them."""
    if value is not None and value not in known:
        raise OptionError(f"{flag} must be one of {', '.join(known)}, got {value!r}")


@calibrate_app.command("import-aiconfigurator")
def calibrate_import_aiconfigurator(
    compare: Annotated[
        bool, typer.Option("--compare", help="Time roofline's equivalent op for every row; summarise the ratios.")
    ] = False,
    gpu: Annotated[str | None, typer.Option("--gpu", help="AIConfigurator GPU folder, e.g. h100_sxm.")] = None,
    framework: Annotated[
        str | None, typer.Option("--framework", help="vllm, sglang, trtllm or nccl (NCCL's own tables).")
    ] = None,
    op: Annotated[str | None, typer.Option("--op", help="gemm, allreduce, attention, mla or moe.")] = None,
    engine_profiles: Annotated[
        bool,
        typer.Option(
            "--engine-profiles",
            help="--compare under each table's shipped engine-kernel profile (its GPU and engine) instead of the "
            "default profile.",
        ),
    ] = False,
    json: Annotated[bool, typer.Option("--json", help="Print JSON (units in the field names).")] = False,
    fit: Annotated[
        bool, typer.Option("--fit", help="Fit the engine-kernel profile of --gpu/--framework; needs -o.")
    ] = False,
    ship: Annotated[
        bool,
        typer.Option(
            "--ship", help="Re-fit every shipped engine profile into roofline/data/engine_profiles (--force)."
        ),
    ] = False,
    out: Annotated[Path | None, typer.Option("--out", "-o", metavar="FILE", help="Profile YAML --fit writes.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing profile.")] = False,
) -> None:
    """AIConfigurator 0.12.0's kernel tables (needs `pip install -e ".[aic]"`): list them, --compare or --fit.

    --compare reports, per (gpu, framework, version, op, dtype, regime), the rows and the median,
    p10 and p90 of roofline's predicted / measured time under the default profile (--engine-profiles: under
    each table's shipped engine-kernel profile). --fit -o FILE
    writes the profile of one engine's kernels on one GPU (per-kernel graph cost, decode attention floor,
    custom all-reduce latency, GEMM compute efficiency per format, MoE grouped-GEMM rates; each parameter
    from its own regime's rows); --ship --force re-fits every profile roofline ships and selects by
    (hardware, engine).
    """
    try:
        from calibrate.aic import render
    except ModuleNotFoundError as exc:
        raise OptionError(f"the AIConfigurator import needs {exc.name}: {AIC_HINT}") from None
    from roofline.cli.options import console, dumps

    tables = render.installed_tables()
    known = render.known_values(tables)
    for flag, value in (("--gpu", gpu), ("--framework", framework), ("--op", op)):
        _check_choice(flag, value, known[flag])
    if fit:
        _write_fit(gpu, framework, out, force, json, [t.gpu for t in tables if t.hardware is not None])
        return
    if ship:
        _ship(force, json)
        return
    if engine_profiles and not compare:
        raise OptionError("--engine-profiles prices --compare's rows; add --compare")
    if not compare:
        chosen = [t for t in tables if gpu in (None, t.gpu) and framework in (None, t.framework)]
        if json:
            typer.echo(dumps(render.listing_records(chosen)))
        else:
            console().print(render.listing_table(chosen))
        return
    mapped = sorted({t.gpu for t in tables if t.hardware is not None})
    if gpu is not None and gpu not in mapped:
        raise OptionError(
            f"--gpu {gpu} has no roofline hardware spec, so it is not compared; mapped: {', '.join(mapped)}"
        )
    summary = render.comparison_summary(tables, gpu, framework, op, engine_profiles)
    if json:
        typer.echo(dumps(render.summary_records(summary)))
    else:
        console().print(render.summary_table(summary, engine_profiles))


def _write_fit(
    gpu: str | None, framework: str | None, out: Path | None, force: bool, json: bool, mapped: list[str]
) -> None:
    """``--fit``: fit the engine-kernel profile of (gpu, framework) and write it to ``out``."""
    from calibrate.aic.engine_profile import fit_engine_profile, summary_lines
    from roofline.boundary.outputs import check_output
    from roofline.cli.options import dumps

    if gpu is None or framework is None or framework == "nccl" or out is None:
        raise OptionError("--fit needs --gpu, --framework (vllm, sglang or trtllm) and -o PROFILE.yaml")
    if gpu not in mapped:
        raise OptionError(f"--gpu {gpu} has no roofline hardware spec; mapped: {', '.join(sorted(set(mapped)))}")
    check_output(out, force=force, what="calibration profile")
    profile = fit_engine_profile(gpu, framework)
    profile.save(out, force=force)
    if json:
        typer.echo(dumps({"profile": str(out), **profile.provenance}))
        return
    for line in summary_lines(profile):
        typer.echo(line)
    typer.echo(f"wrote {out} ({profile.name}); use it with --calibration {out}")


def _ship(force: bool, json: bool) -> None:
    """``--ship``: re-fit every shippable (gpu, engine) profile into the bundled engine-profile folder."""
    from calibrate.aic.engine_profile import ship_all
    from roofline.cli.options import dumps

    if not force:
        raise OptionError("--ship replaces the bundled engine profiles; add --force to do it")
    written = ship_all()
    if json:
        typer.echo(dumps([str(p) for p in written]))
        return
    for p in written:
        typer.echo(f"wrote {p}")
