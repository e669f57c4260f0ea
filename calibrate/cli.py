"""Entry points for ``roofline calibrate`` and ``python -m calibrate``.

``run_calibration`` measures, fits, saves and returns a CalibrationProfile;
``show_profile`` renders one as text. torch is imported only when measuring, so
importing this module keeps ``roofline --help`` fast.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from calibrate.measure.records import Record
from roofline.errors import CalibrationError, Interrupted
from roofline.profile import CalibrationProfile, load_profile

if TYPE_CHECKING:
    from rich.table import Table


class CalibrationInterrupted(CalibrationError, Interrupted):
    """Ctrl-C before enough was measured to fit a profile: a calibration error with exit code 130."""

    exit_code = 130


@contextmanager
def _progress_bar(enabled: bool, budget_s: float) -> Iterator[Callable[[str, str, str, float], None] | None]:
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("[bold]calibrating[/]"),
        BarColumn(),
        TextColumn("{task.completed:.0f}/{task.total:.0f} s"),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        transient=True,
    ) as bar:
        task = bar.add_task("", total=budget_s)

        def update(suite: str, key: str, status: str, elapsed: float) -> None:
            bar.update(task, completed=min(elapsed, budget_s), description=f"{key} [{status}]")

        yield update


def run_calibration(
    device: str = "cpu",
    budget_s: float = 60.0,
    model: str | None = None,
    tp: int = 1,
    output: Path = Path("calibration.yaml"),
    resume: bool = False,
    quick: bool = False,
    progress: bool = True,
    threads: int | None = 1,
    dtypes: tuple[str, ...] | None = None,
    suites: tuple[str, ...] | None = None,
    on_record: Callable[[Record], None] | None = None,
) -> CalibrationProfile:
    """Measure ``device`` ("cpu" or "cuda[:N]") for about ``budget_s`` seconds, fit and save a profile.

    Measurements stream to ``<output stem>.measurements.jsonl`` as they finish; ``resume``
    reuses that file. ``threads`` sets torch's CPU threads (None keeps torch's default).
    ``progress`` shows a progress bar and, at the end, the summary table. Ctrl-C stops the
    measuring early and still writes the profile from what was measured (its provenance
    says ``interrupted: true``). Raises CalibrationError (e.g. "no CUDA device; use
    --device cpu") when nothing can be measured or fitted.
    """
    start = time.monotonic()
    from calibrate.fitting.build import build_profile
    from calibrate.fitting.fit import fit
    from calibrate.measure.context import World
    from calibrate.measure.runner import RunConfig, Runner

    output = Path(output)
    progress = progress and World.from_env().rank == 0
    cfg = RunConfig(device, float(budget_s), model, tp, output, resume, quick, threads, dtypes, suites)
    with _progress_bar(progress, float(budget_s)) as bar:
        runner = Runner(cfg, progress=bar, on_record=on_record, start=start)
        result = runner.run()
    if result.world.rank != 0:
        return _follower_profile(output)
    try:
        primary = "bf16" if result.target.is_cuda else "fp32"
        profile = build_profile(fit(result.records, primary), result, cfg)
        profile.save(output)
    except CalibrationError as exc:
        if result.interrupted:  # Ctrl-C: exit 130 like any interrupted command, saying how to go on
            from calibrate.measure.store import measurements_path

            raise CalibrationInterrupted(
                f"interrupted before enough was measured ({exc}). Every finished measurement is kept in "
                f"{measurements_path(output)}: rerun the same command with --resume to continue"
            ) from None
        raise
    finally:
        _release_followers()  # other ranks wait for the profile (or its absence) before reading it
    if load_profile(output).model_dump(mode="json") != profile.model_dump(mode="json"):
        raise CalibrationError(f"{output} does not read back as the profile written; please report this")
    if progress:
        from rich.console import Console

        from calibrate.render import reference_hardware, summary_table

        Console(stderr=True).print(summary_table(profile, reference_hardware(profile)))
    return profile


def interrupted_message(output: Path, command: str) -> str:
    """What an interrupted calibration kept and the command that continues it (``command`` ends with --resume)."""
    from calibrate.measure.store import measurements_path

    return (
        f"calibration interrupted (Ctrl-C): {output} was written from the measurements finished so far, and each "
        f"of them is kept in {measurements_path(output)}. Continue where it stopped with: {command}"
    )


def _follower_profile(output: Path) -> CalibrationProfile:
    """Non-zero ranks wait for rank 0 to write the profile, then read it."""
    import torch.distributed as dist

    dist.barrier()
    dist.destroy_process_group()
    if not output.exists():
        raise CalibrationError(f"rank 0 wrote no profile to {output}; see its error message")
    return load_profile(output)


def _release_followers() -> None:
    try:
        import torch.distributed as dist
    except ImportError:
        return
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def show_profile(path: str | Path) -> str:
    """A text summary of the profile at ``path``: ceilings vs peaks, curves, overheads, notes."""
    from calibrate.render import render_profile, render_text

    profile = load_profile(Path(path))
    return render_text(render_profile(profile))


def summary(profile: CalibrationProfile) -> Table:
    """The rich summary table of ``profile`` (for callers that print it themselves)."""
    from calibrate.render import reference_hardware, summary_table

    return summary_table(profile, reference_hardware(profile))
