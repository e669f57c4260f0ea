"""Bounded fuzzing of the serving simulator's surfaces (issue 31): ``roofline simulate`` closed loop, trace replay
and open loop with a client protocol, ``simulate-disagg``, ``spec-plan``, ``plan-disagg``, ``plan --simulate``,
``accuracy --coverage``, and the ``roofline.simulate(...)`` API, plain and disaggregated (``disagg=``).

The cases are drawn by the strategies of ``tests/fuzz_serving_cases.py`` (one per surface); the properties asserted
on every one (:func:`cli_outcome`, :func:`api_outcome`):

* the CLI exits 0, 1 or 2 (never 3, "internal error"), prints no traceback, and every error it reports comes
  from :class:`~roofline.errors.RooflineError` (a ValueError or OSError phrased by the CLI's last guard counts as
  a failure: its message names no flag), no flag is garbled (``----qps``); the process stays under
  ``RSS_BUDGET_BYTES``;
* the API raises only :class:`~roofline.errors.RooflineError`, whatever the type or value of an argument (wrong
  types, booleans, floats for counts, huge, negative, NaN and infinite numbers, None, dicts missing keys);
* a result that comes back (exit 0, or a returned :class:`~roofline.serving.sim.result.SimulationResult`) has no
  negative, NaN or infinite figure (TPOT and ITL are undefined, and NaN, only for one-token answers; margins and
  headroom are signed) and is not silently truncated: every request asked for is simulated, with the lengths
  asked for.

Runs are derandomized like ``tests/test_fuzz.py`` (the same cases every run) and small (tens of requests on
llama-3.1-8b / H100); ``FUZZ_SCALE`` multiplies the cases and draws fresh ones. ``benchmarks/fuzz_long.py``
drives these strategies over 10,000+ inputs with a 30 s watchdog and a memory cap and prints a summary.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import math
import os
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
from fuzz_serving_cases import EXAMPLES, SURFACES
from hypothesis import HealthCheck, given, settings
from test_fuzz import reset_peak, rss_bytes  # one peak-memory reading for both fuzz suites
from typer.testing import CliRunner

import roofline.cli.app as cli_app
from roofline.errors import RooflineError

SCALE = max(1, int(os.environ.get("FUZZ_SCALE", "1")))
RSS_BUDGET_BYTES = 3 * 2**30
FUZZ = settings(
    max_examples=10 * SCALE,
    deadline=None,  # no wall-clock gate: benchmarks/fuzz_long.py times every case against its 30 s watchdog
    derandomize=SCALE == 1,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
runner = CliRunner()

#: Figures that are NaN (JSON null) when they are undefined: TPOT and ITL of one-token answers, and the decode pool's
#: batch when no request decodes.
UNDEFINED_OK = re.compile(r"(^|\.)(tpot|itl)_|decode_mean_batch")
#: Figures signed by definition: a sizing check's margin and headroom (negative: the SLO or the load is missed).
SIGNED = re.compile(r"(_margin|headroom)$")


# ---- checking one answer ----------------------------------------------------------------------------------------
@contextlib.contextmanager
def foreign_errors() -> Iterator[list[str]]:
    """Collect the exceptions the CLI's last guard phrased that are not the project's (ValueError, OSError, …)."""
    seen: list[str] = []
    real = cli_app.describe_error

    def spy(exc: BaseException) -> tuple[int, str]:
        if not isinstance(exc, RooflineError):
            seen.append(f"non-project {type(exc).__name__}: {str(exc)[:200]}")
        return real(exc)

    cli_app.describe_error = spy
    try:
        yield seen
    finally:
        cli_app.describe_error = real


def figure_problems(doc: Any, path: str = "") -> list[str]:
    """Negative, NaN (JSON null) or infinite figures of a JSON answer; nulls count only among simulated figures."""
    if isinstance(doc, dict):
        return [p for k, v in doc.items() for p in figure_problems(v, f"{path}.{k}")]
    if isinstance(doc, list):
        return [p for i, v in enumerate(doc) for p in figure_problems(v, f"{path}[{i}]")]
    simulated = re.search(r"\.(summary|intervals_80)\.|\.(disagg|colocated)\[\d+\]\.(ttft|tpot)_s$", path)
    if doc is None and simulated and not UNDEFINED_OK.search(path):
        return [f"NaN figure {path}"]
    number = isinstance(doc, int | float) and not isinstance(doc, bool)
    if number and not (math.isfinite(doc) and (doc >= 0 or SIGNED.search(path))):
        return [f"figure {path} = {doc}"]
    return []


def count_problems(args: list[str], doc: dict[str, Any]) -> list[str]:
    """Requests asked for (``-N``, plus warm-up) that an exit-0 answer did not simulate (truncation)."""
    opts = dict(itertools.pairwise(args))
    n, warm = opts.get("-N", "").strip(), opts.get("--warmup", "0").strip()
    if not (n.isascii() and n.isdigit() and warm.isascii() and warm.isdigit()) or "--trace" in args:
        return []
    want = int(n) + int(warm)
    cfg, summary = doc.get("config", {}), doc.get("summary", {})
    got = summary.get("completed", cfg.get("prefill_completions"))
    if args[0] == "simulate" and isinstance(got, int | float) and got < want:  # preemption re-prefills count twice
        return [f"truncated: {got} of {want} requests simulated"]
    if args[0] == "simulate-disagg" and got != int(n):
        return [f"truncated: {got} of {n} requests completed"]
    return []


def cli_outcome(args: list[str]) -> tuple[str, list[str]]:
    """Run the CLI in this process: ``exit N`` and what is wrong with its answer (empty: nothing)."""
    reset_peak()  # a new peak-memory window for this case
    with foreign_errors() as foreign:
        res = runner.invoke(cli_app.app, args)
    out, problems = res.output, list(foreign)
    if res.exit_code not in (0, 1, 2):
        problems.append(f"exit {res.exit_code}: {out[-300:]}")
    if "Traceback" in out:
        problems.append("traceback in the output")
    if "----" in out.replace("─", ""):  # an API name turned into a flag twice (issue 31: "----qps")
        problems.append(f"garbled flag: {out[-300:]}")
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        problems.append(f"non-project {type(res.exception).__name__} escaped: {res.exception}")
    if rss_bytes() >= RSS_BUDGET_BYTES:
        problems.append(f"peak memory {rss_bytes() / 2**30:.1f} GiB")
    if res.exit_code in (0, 1) and "--json" in args:  # exit 1: infeasible or saturated, with its figures printed
        try:
            doc = json.loads(res.stdout)
        except ValueError:
            lost = [f"exit 0 without JSON: {res.stdout[:200]!r}"] if res.exit_code == 0 else []
            return f"exit {res.exit_code}", problems + lost
        problems += figure_problems(doc)
        problems += count_problems(args, doc) if isinstance(doc, dict) and res.exit_code == 0 else []
    return f"exit {res.exit_code}", problems


def result_problems(res: Any, kw: dict[str, Any]) -> list[str]:
    """What is wrong with a SimulationResult the API returned for ``kw``: negative/NaN figures, lost requests."""
    r, problems = res.requests, []
    one_token = r["output_tokens"].to_numpy() <= 1
    for col in ("ttft_s", "e2e_s", "tpot_s", "arrival_s", "finish_s"):
        x = r[col].to_numpy(dtype=float)
        ok = np.isfinite(x) & (x >= 0) | (np.isnan(x) & one_token if col == "tpot_s" else False)
        if not ok.all():
            problems.append(f"{col} {x[~ok][:3].tolist()}")
    for col in ("prompt_tokens", "output_tokens"):
        if not (r[col].to_numpy() >= 1).all():
            problems.append(f"{col} below 1: {r[col].min()}")
    for key, v in res.summary.items():
        if isinstance(v, float) and not (math.isfinite(v) and v >= 0) and not UNDEFINED_OK.search(key):
            problems.append(f"summary {key} = {v}")
    n, w = kw.get("num_requests", 2000), kw.get("warmup", 0)
    measured = int((~r["warmup"]).sum()) if "warmup" in r else len(r)
    if kw.get("trace") is None and not isinstance(n, bool) and isinstance(n, int) and measured != n:
        problems.append(f"truncated: {measured} of {n} requests (warm-up {w!r}) simulated")
    for key, col in (("prompt_len", "prompt_tokens"), ("output_len", "output_tokens")):
        v = kw.get(key)
        if kw.get("trace") is None and isinstance(v, int) and not isinstance(v, bool) and (r[col] != v).any():
            problems.append(f"{col} {r[col].iloc[0]} differs from {key}={v}")
    return problems


def api_outcome(kw: dict[str, Any]) -> tuple[str, list[str]]:
    """Call ``roofline.simulate(**kw)``: ``returned`` or the error's class, and what is wrong (empty: nothing)."""
    from roofline.serving.simulate import simulate

    try:
        res = simulate(**copy.deepcopy(kw))
    except RooflineError as exc:
        return type(exc).__name__, []
    except Exception as exc:  # what the fuzz looks for: anything but the project's errors
        return type(exc).__name__, [f"non-project {type(exc).__name__}: {str(exc)[:200]}"]
    return "returned", result_problems(res, kw)


def outcome(case: Any) -> tuple[str, list[str]]:
    """The outcome of one case of any surface (a CLI argument list or ``roofline.simulate`` keywords) and its
    problems."""
    return cli_outcome(case) if isinstance(case, list) else api_outcome(case)


def _fuzz(surface: str) -> Any:
    """A hypothesis test asserting that no case of ``surface`` has a problem."""

    @settings(FUZZ, max_examples=EXAMPLES[surface] * SCALE)
    @given(case=SURFACES[surface])
    def test(case: Any) -> None:
        _, found = outcome(case)
        assert not found, (case, found)

    test.__doc__ = f"No case of {surface} fails internally, escapes the project's errors or answers a wrong figure."
    return test


test_simulate_closed_loop = _fuzz("simulate closed loop")
test_simulate_trace = _fuzz("simulate trace")
test_simulate_open_loop_protocol = _fuzz("simulate open loop")
test_simulate_disagg = _fuzz("simulate-disagg")
test_spec_plan = _fuzz("spec-plan")
test_plan_disagg = _fuzz("plan-disagg")
test_plan_simulate = _fuzz("plan --simulate")
test_accuracy_coverage = _fuzz("accuracy --coverage")
test_simulate_api = _fuzz("API simulate")
test_simulate_disagg_api = _fuzz("API simulate disagg=")
