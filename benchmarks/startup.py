"""Wall-clock start-up of the ``roofline`` command and of a first ``predict()``: median and min over N runs.

Usage::

    python benchmarks/startup.py [-n 15] [--baseline DIR] [--no-bytecode] [--only LABEL ...]

Each command runs N times in a fresh subprocess of the installed entry point (the
``roofline`` next to this interpreter, else on PATH, else ``python -m roofline``), after
one untimed warm-up run (so the OS file cache is warm). ``first predict()`` is a fresh
``python -c`` that imports roofline and calls ``predict("llama-3.1-8b", "h100-sxm")`` once;
it reports the call itself (spec lookup and parse, imports it triggers, the physics) and the
whole process. Targets (issue #28): ``--help`` ≤ 0.2 s; ``predict llama-3.1-8b h100-sxm``
< 0.8 s.

``--baseline DIR`` (a source tree holding another ``roofline/`` package, e.g. a
``git archive`` of an older commit) times that tree too, alternating run by run with this
one (``PYTHONPATH`` selects the package, so the two share the OS cache and the machine's
load), and prints both medians.

``--no-bytecode`` times a first run from a fresh checkout: each tree's ``roofline/`` is copied
without its ``__pycache__`` and run with ``PYTHONDONTWRITEBYTECODE=1``, so every run compiles
roofline's modules again (the installed libraries keep the bytecode pip wrote for them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLAN = ["plan", "llama-3.1-70b", "--qps", "20", "--ttft-slo", "500ms", "--tpot-slo", "50ms"]
COMMANDS: list[tuple[str, list[str], float]] = [
    ("--help", ["--help"], 0.2),
    ("predict", ["predict", "llama-3.1-8b", "h100-sxm"], 0.8),
    ("predict --json", ["predict", "llama-3.1-8b", "h100-sxm", "--json"], 0.8),
    ("plan (3 hw)", [*PLAN, "--hardware", "h100-sxm,h200-sxm,a100-80gb-sxm"], float("inf")),
]
FIRST_PREDICT = (
    "import json, time\n"
    "t0 = time.perf_counter()\n"
    "import roofline\n"
    "t1 = time.perf_counter()\n"
    "roofline.predict('llama-3.1-8b', 'h100-sxm')\n"
    "t2 = time.perf_counter()\n"
    "print(json.dumps({'import': t1 - t0, 'call': t2 - t1}))\n"
)


def entry_point() -> list[str]:
    """The roofline executable of this interpreter's environment."""
    venv = Path(sys.executable).with_name("roofline")
    exe = str(venv) if venv.exists() else shutil.which("roofline")
    return [exe] if exe else [sys.executable, "-m", "roofline"]


def tree_env(tree: Path, no_bytecode: bool = False) -> dict[str, str]:
    """The environment that imports the ``roofline`` package of ``tree`` first (compiling it every run when
    ``no_bytecode``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH", "")]))
    if no_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def fresh_copy(tree: Path, into: Path) -> Path:
    """``tree``'s ``roofline/`` package (and the spec folders it reads) copied under ``into`` without bytecode."""
    import tempfile

    dest = Path(tempfile.mkdtemp(dir=into))
    shutil.copytree(tree / "roofline", dest / "roofline", ignore=shutil.ignore_patterns("__pycache__"))
    for data in ("hardware_specs", "model_specs", "validation"):
        if (tree / data).is_dir():
            (dest / data).symlink_to((tree / data).resolve())
    return dest


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Seconds of wall time of one run and its stdout; raises if the command fails."""
    t0 = time.perf_counter()
    res = subprocess.run(argv, capture_output=True, check=True, env=env, text=True)
    return time.perf_counter() - t0, res.stdout


def time_alternating(
    argv: list[str], n: int, trees: list[Path], no_bytecode: bool = False
) -> list[list[tuple[float, str]]]:
    """``n`` runs of ``argv`` per tree (after one warm-up each), the trees taking turns run by run."""
    envs = [tree_env(t, no_bytecode) for t in trees]
    for env in envs:
        run_once(argv, env)
    out: list[list[tuple[float, str]]] = [[] for _ in trees]
    for _ in range(n):
        for i, env in enumerate(envs):
            out[i].append(run_once(argv, env))
    return out


def _verdict(med: float, target: float) -> str:
    if target == float("inf"):
        return ""
    return f"≤ {target:.1f} s {'ok' if med <= target else 'MISSED'}"


def main() -> None:
    """Print one line per command (and tree): median, min, max and the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=15, help="runs per command (default 15)")
    parser.add_argument("--baseline", type=Path, help="another source tree to time alternately with this one")
    parser.add_argument("--no-bytecode", action="store_true", help="compile roofline's modules every run")
    parser.add_argument(
        "--only", action="append", metavar="LABEL", help="time only this command (repeatable), e.g. --only=--help"
    )
    args = parser.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        trees = [ROOT] if args.baseline is None else [args.baseline.resolve(), ROOT]
        if args.no_bytecode:
            trees = [fresh_copy(t, Path(tmp)) for t in trees]
        _report(args, trees)


def _report(args: argparse.Namespace, trees: list[Path]) -> None:
    base = entry_point()
    labels = ["this tree"] if args.baseline is None else ["baseline", "this tree"]
    cold = "; no bytecode for roofline" if args.no_bytecode else ""
    print(
        f"entry point: {' '.join(base)}; {args.n} runs each"
        + (f"; baseline {args.baseline}" if args.baseline else "")
        + cold
    )
    print(f"{'command':<26} {'tree':<10} {'median':>8} {'min':>8} {'max':>8}  target")
    for label, extra, target in COMMANDS:
        if args.only and label not in args.only:
            continue
        timed = time_alternating([*base, *extra], args.n, trees, args.no_bytecode)
        for tree_label, runs in zip(labels, timed, strict=True):
            t = [w for w, _ in runs]
            med = statistics.median(t)
            print(f"{label:<26} {tree_label:<10} {med:>7.3f}s {min(t):>7.3f}s {max(t):>7.3f}s  {_verdict(med, target)}")
    if args.only and "first predict" not in args.only:
        return
    argv = [sys.executable, "-P", "-c", FIRST_PREDICT]  # -P: the package from PYTHONPATH, not the cwd
    for tree_label, runs in zip(labels, time_alternating(argv, args.n, trees, args.no_bytecode), strict=True):
        calls = [json.loads(out)["call"] for _, out in runs]
        imports = [json.loads(out)["import"] for _, out in runs]
        walls = [w for w, _ in runs]
        print(
            f"{'first predict() call':<26} {tree_label:<10} {statistics.median(calls):>7.3f}s {min(calls):>7.3f}s "
            f"{max(calls):>7.3f}s  (import roofline {statistics.median(imports):.3f} s; "
            f"whole process {statistics.median(walls):.3f} s)"
        )


if __name__ == "__main__":
    main()
