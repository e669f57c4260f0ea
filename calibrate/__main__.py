"""``python -m calibrate --device cpu --budget 60 -o cpu.yaml``: calibrate without the typer CLI.

Exit codes: 0 profile written; 2 calibration error (message on stderr); 130 interrupted
by Ctrl-C after writing a profile from what was measured.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from calibrate.measure.records import SUITES
from roofline.errors import RooflineError


def parser() -> argparse.ArgumentParser:
    """The argument parser (also documents every option)."""
    p = argparse.ArgumentParser(prog="python -m calibrate", description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N] (default cpu)")
    p.add_argument("--budget", type=float, default=60.0, help="time budget in seconds (default 60)")
    p.add_argument("--model", default=None, help="take GEMM and attention shapes from this model (name or config)")
    p.add_argument("--tp", type=int, default=1, help="tensor parallelism that shards the model's shapes")
    p.add_argument("-o", "--output", type=Path, default=Path("calibration.yaml"), help="profile YAML to write")
    p.add_argument("--resume", action="store_true", help="reuse <output>.measurements.jsonl from an earlier run")
    p.add_argument("--force", action="store_true", help="overwrite an existing profile (implied by --resume)")
    p.add_argument("--quick", action="store_true", help="fewer sizes and shapes")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1; 0 = torch's default)")
    p.add_argument("--dtypes", default=None, help="comma-separated GEMM dtypes, e.g. fp32,bf16")
    p.add_argument("--suites", default=None, help=f"comma-separated suites out of {','.join(SUITES)}")
    p.add_argument("--no-progress", action="store_true", help="no progress bar or summary table")
    p.add_argument("--show", type=Path, default=None, help="only print the summary of an existing profile")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the calibration (or --show) and return the exit code."""
    args = parser().parse_args(argv)
    from calibrate.cli import run_calibration, show_profile

    try:
        if args.show is not None:
            print(show_profile(args.show))
            return 0
        from roofline.boundary.outputs import check_output

        check_output(args.output, force=args.force or args.resume, what="calibration profile")  # before measuring
        suites = tuple(s.strip() for s in args.suites.split(",")) if args.suites else None
        unknown = sorted(set(suites or ()) - set(SUITES))
        if unknown:
            print(f"error: unknown suite(s) {', '.join(unknown)}; choose from {', '.join(SUITES)}", file=sys.stderr)
            return 2
        profile = run_calibration(
            device=args.device,
            budget_s=args.budget,
            model=args.model,
            tp=args.tp,
            output=args.output,
            resume=args.resume,
            quick=args.quick,
            progress=not args.no_progress,
            threads=args.threads or None,
            dtypes=tuple(d.strip() for d in args.dtypes.split(",")) if args.dtypes else None,
            suites=suites,
        )
    except RooflineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"wrote {args.output}")
    if profile.provenance.get("interrupted"):
        from calibrate.cli import interrupted_message

        argv_now = list(sys.argv[1:] if argv is None else argv)
        resume = " ".join(["python -m calibrate", *[a for a in argv_now if a != "--resume"], "--resume"])
        print(f"error: {interrupted_message(args.output, resume)}", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
