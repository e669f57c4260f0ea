"""How fast hostile input is answered (not a test): the issue-15 rows and every fuzz case.

Run: ``python benchmarks/hostile_input.py [--no-fuzz] [--strict]``.

1. Each hostile input of ``tests/test_hostile_input.py`` that used to carry a time limit, answered
   through the CLI (typer's runner, in this process) or the API, with its target: a refusal before any
   work < 5 s (a report to a symbolic link or a folder, ``--output 1G``, sweep ranges of a billion
   values, ``model import /dev/zero``, an alias bomb in the spec folder, ``python -m calibrate`` onto
   an existing file), a billion-layer model spec < 2 s, ``plan --qps 1e12`` < 10 s, the API planning
   1e9 requests/s on at most 8 GPUs < 60 s.
2. Every case of ``tests/test_fuzz.py`` (the same derandomized cases as the suite), timed one by one
   per fuzz test, against the per-case target of 5 s. The suite checks what these inputs answer
   (the project's errors, exit codes, memory); the seconds are measured here.

``--strict`` exits 1 when any target is missed.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1] / "tests"
CASE_TARGET_S = 5.0


def _cli(*args: str, env: dict[str, str] | None = None) -> Callable[[], Any]:
    from typer.testing import CliRunner

    from roofline.cli.app import app

    return lambda: CliRunner().invoke(app, list(args), env=env)


def rows(tmp: Path) -> list[tuple[str, Callable[[], Any], float]]:
    """(label, call, target seconds) for each timed row of tests/test_hostile_input.py."""
    import roofline
    from calibrate.__main__ import main as calibrate_main
    from roofline.errors import RooflineError
    from roofline.specs.library import spec_path

    link = tmp / "r.html"
    link.symlink_to(tmp / "elsewhere.html")
    folder = tmp / "existing-dir"
    folder.mkdir()
    text = spec_path("model", "llama-3.1-8b").read_text(encoding="utf-8")
    layers = tmp / "layers.yaml"
    layers.write_text(
        "\n".join("num_layers: 1000000000" if ln.startswith("num_layers:") else ln for ln in text.splitlines()) + "\n",
        encoding="utf-8",
    )
    bombs = tmp / "bomb"
    bombs.mkdir()
    bomb = "".join(
        f"{a}: &{a} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['lol'] * 9)}]\n"
        for p, a in zip(["", "a", "b", "c", "d", "e", "f", "g"], "abcdefgh", strict=True)
    )
    (bombs / "bomb.yaml").write_text(bomb + "name: bomb\naliases: *h\n", encoding="utf-8")
    existing = tmp / "existing"
    existing.write_text("keep", encoding="utf-8")

    def billion_layers() -> None:
        try:
            roofline.model(str(layers))
        except RooflineError:
            return
        raise AssertionError("a billion-layer spec loaded")

    def plan_1e9() -> None:
        roofline.plan(
            "llama-3.1-70b",
            qps=1e9,
            prompt_len=2048,
            output_len=256,
            ttft_slo_s=2,
            tpot_slo_s=0.1,
            hardware=["h100-sxm"],
            max_gpus=8,
        )

    plan = ("plan", "llama-3.1-70b", "--qps", "1e12", "--ttft-slo", "2s", "--tpot-slo", "100ms")
    report = ("report", "llama-3.1-8b", "-H", "h100-sxm", "-o")
    bomb_env = {"ROOFLINE_SPECS_PATH": str(bombs)}
    return [
        ("row 1: report -o <symlink> --force", _cli(*report, str(link), "--force"), 5.0),
        ("row 2: plan --qps 1e12", _cli(*plan), 10.0),
        ("row 2: API plan qps=1e9, max 8 GPUs", plan_1e9, 60.0),
        ("row 3: model with 1e9 layers", billion_layers, 2.0),
        ("row 4: predict with an alias bomb", _cli("predict", "llama-2-7b", "h100-sxm", "--json", env=bomb_env), 5.0),
        ("row 5: predict --output 1G", _cli("predict", "llama-2-7b", "h100-sxm", "--output", "1G"), 5.0),
        ("row 6: sweep --batch 1..1e9:1", _cli("sweep", "llama-2-7b", "h100-sxm", "--batch", "1..1000000000:1"), 5.0),
        ("row 6: sweep --prompt 1..1e6:1", _cli("sweep", "llama-2-7b", "h100-sxm", "--prompt", "1..1000000:1"), 5.0),
        ("row 7: model import /dev/zero", _cli("model", "import", "/dev/zero"), 5.0),
        ("row 10: report -o <folder>", _cli(*report, str(folder)), 5.0),
        ("row 10: report -o ''", _cli(*report, ""), 5.0),
        (
            "row 10: python -m calibrate onto a file",
            lambda: calibrate_main(["--device", "cpu", "-o", str(existing)]),
            5.0,
        ),
    ]


class _Factory:
    """Stands in for pytest's tmp_path_factory."""

    def __init__(self, root: Path) -> None:
        self.root, self.n = root, 0

    def mktemp(self, name: str) -> Path:
        self.n += 1
        path = self.root / f"{name}{self.n}"
        path.mkdir()
        return path


def fuzz(tmp: Path) -> list[tuple[str, list[float]]]:
    """Seconds of each case of each fuzz test (hypothesis' inner test wrapped with a timer)."""
    sys.path.insert(0, str(TESTS))
    import test_fuzz

    out = []
    factory = _Factory(tmp)
    for name in sorted(n for n in dir(test_fuzz) if n.startswith("test_")):
        test = getattr(test_fuzz, name)
        inner = test.hypothesis.inner_test
        times: list[float] = []

        def timed(*a: Any, _inner: Any = inner, _times: list[float] = times, **k: Any) -> None:
            t0 = time.perf_counter()
            try:
                _inner(*a, **k)
            finally:
                _times.append(time.perf_counter() - t0)

        test.hypothesis.inner_test = timed
        if "tmp_path_factory" in inspect.signature(inner).parameters:
            test(tmp_path_factory=factory)
        else:
            test()
        out.append((name, times))
    return out


def main() -> int:
    """Print each row and each fuzz test against its target; return the exit code."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-fuzz", action="store_true", help="only the hostile-input rows")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    a = ap.parse_args()
    import roofline

    roofline.predict("llama-2-7b", "h100-sxm")  # warm imports and spec caches, as in the test process
    missed = 0
    with tempfile.TemporaryDirectory(prefix="roofline-bench-") as d:
        tmp = Path(d)
        print(f"{'hostile input':<42} {'seconds':>8}  target")
        for label, call, target in rows(tmp):
            with contextlib.redirect_stderr(io.StringIO()):  # the refusals' messages
                t0 = time.perf_counter()
                call()
                s = time.perf_counter() - t0
            missed += s >= target
            print(f"{label:<42} {s:>8.3f}  < {target:g} s {'ok' if s < target else 'MISSED'}")
        if not a.no_fuzz:
            (tmp / "fuzz").mkdir()
            print(f"\n{'fuzz test':<50} {'cases':>5} {'median':>8} {'max':>8}  target per case")
            with contextlib.redirect_stderr(io.StringIO()):  # warnings the hostile inputs draw
                results = fuzz(tmp / "fuzz")
            for name, times in results:
                worst = max(times, default=0.0)
                missed += worst >= CASE_TARGET_S
                print(
                    f"{name:<50} {len(times):>5} {statistics.median(times or [0.0]):>8.3f} {worst:>8.3f}  "
                    f"< {CASE_TARGET_S:g} s {'ok' if worst < CASE_TARGET_S else 'MISSED'}"
                )
    print(f"\n{missed} target(s) missed")
    return 1 if a.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
