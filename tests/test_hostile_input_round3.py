"""Regression tests for issue 31 (hostile input, round 3): each reproducer of the issue fails fast with the
project's one-line error naming the flag or field and a fix, never a hang, an exhausted memory, a traceback,
an "internal error" (exit 3) or a wrong result with exit 0.

No wall-clock assertions: where a reproducer used to hang, the work it would have started is replaced by a
function that fails the test, so the refusal is shown to come before any of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from roofline.boundary import limits
from roofline.cli.app import app
from roofline.cli.options import as_flags, parse_engine_set
from roofline.engine.presets import engine_preset
from roofline.errors import ScenarioError
from roofline.serving.plan.disagg import _check_plan_size, plan_disagg
from roofline.serving.plan.speculative import search_k
from roofline.serving.simulate import simulate
from roofline.serving.workload.arrivals import arrival_times
from roofline.serving.workload.stream import Workload
from roofline.serving.workload.trace import load_trace
from roofline.specs.disagg import DisaggConfig
from roofline.specs.library import hardware

runner = CliRunner()
M, HW = "llama-3.1-8b", "h100-sxm"
SMALL: dict[str, Any] = {"prompt_len": 128, "output_len": 8}


def refused(*args: str, flag: str, code: int = 2) -> str:
    """Run the CLI; it must exit ``code`` with one ``error:`` line naming ``flag``, no traceback, no exit 3."""
    res = runner.invoke(app, list(args))
    out = res.output
    assert "Traceback" not in out, out
    assert "internal error" not in out, out
    assert res.exit_code == code, out
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert out.startswith("error: "), out
    assert flag in out, out
    return out


def must_not_run(monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    """Replace ``target`` with a function that fails the test: the refusal must come before that work."""

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"{target} ran before the input was refused")

    monkeypatch.setattr(target, fail)


# --- item 1: the disaggregated pools' instance count -------------------------------------------------------------


@pytest.mark.parametrize("side", ["prefill", "decode"])
def test_disagg_pool_instances_are_bounded(monkeypatch: pytest.MonkeyPatch, side: str) -> None:
    """tp1x1000000000000 hung (prefill: a loop over 10^12 instances) or ran out of memory (decode: a list of
    10^12 link slots); now refused by name before any simulation."""
    must_not_run(monkeypatch, "roofline.serving.sim.disagg.run_disagg")
    pools = {"prefill": "h100-sxm:tp1x1", "decode": "h100-sxm:tp1x1"} | {side: "h100-sxm:tp1x1000000000000"}
    spec = f"prefill={pools['prefill']},decode={pools['decode']}"
    out = refused("simulate-disagg", M, "--disagg", spec, "--qps", "2", "-N", "100", flag=f"--disagg {side}")
    assert "MAX_POOL_INSTANCES" in out and "1,024" in out


def test_disagg_pool_limits_at_the_api() -> None:
    ok = DisaggConfig.parse(f"prefill=h100-sxm:tp1x{limits.MAX_POOL_INSTANCES},decode=h100-sxm:tp1x1")
    assert ok.prefill.count == limits.MAX_POOL_INSTANCES
    with pytest.raises(ScenarioError, match="MAX_POOL_INSTANCES"):
        DisaggConfig.parse(f"prefill=h100-sxm:tp1x{limits.MAX_POOL_INSTANCES + 1},decode=h100-sxm:tp1x1")
    with pytest.raises(ScenarioError, match="MAX_PARALLEL"):
        DisaggConfig.parse(f"prefill=h100-sxm:tp{limits.MAX_PARALLEL + 1}x1,decode=h100-sxm:tp1x1")
    with pytest.raises(ScenarioError, match="more than 18 digits"):  # int() of thousands of digits is not reached
        DisaggConfig.parse("prefill=h100-sxm:tp1x" + "9" * 5000 + ",decode=h100-sxm:tp1x1")


# --- item 1: plan-disagg's P × D + N cells -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("p", "d", "n", "flag"), [("100000", "1", "1", "--p-max 100,000"), ("1", "1", "1000000", "--n-max 1,000,000")]
)
def test_plan_disagg_cells_are_bounded(monkeypatch: pytest.MonkeyPatch, p: str, d: str, n: str, flag: str) -> None:
    must_not_run(monkeypatch, "roofline.serving.plan.disagg.simulate")
    args = ("plan-disagg", M, HW, "--qps", "2", "-N", "50", "--p-max", p, "--d-max", d, "--n-max", n)
    out = refused(*args, flag=flag)
    assert "MAX_PLAN_CELLS" in out


def test_plan_disagg_total_requests_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    must_not_run(monkeypatch, "roofline.serving.plan.disagg.simulate")
    out = refused("plan-disagg", M, HW, "--qps", "2", "-N", "100000", flag="--num-requests 100,000")
    assert "MAX_PLAN_SIM_REQUESTS" in out and "2,400,000" in out  # the default 4 × 4 + 8 = 24 deployments


def test_plan_disagg_counts_must_be_positive(monkeypatch: pytest.MonkeyPatch) -> None:
    must_not_run(monkeypatch, "roofline.serving.plan.disagg.simulate")
    refused("plan-disagg", M, HW, "--qps", "2", "--d-max", "0", flag="--d-max 0")
    with pytest.raises(ScenarioError, match="p_max"):
        plan_disagg(M, HW, 2.0, p_max=-1)


def test_plan_disagg_limits_admit_the_defaults() -> None:
    _check_plan_size(4, 4, 8, 1000)  # the CLI's defaults
    _check_plan_size(1, 1, limits.MAX_PLAN_CELLS - 1, 1)
    with pytest.raises(ScenarioError, match="MAX_PLAN_CELLS"):
        _check_plan_size(1, 1, limits.MAX_PLAN_CELLS, 1)


# --- item 1: spec-plan's k_max -------------------------------------------------------------------------------------


def test_spec_plan_k_max_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    must_not_run(monkeypatch, "roofline.serving.plan.speculative.predict")
    args = ("spec-plan", M, HW, "--spec", "eagle:alpha=0.7", "--batch", "1")
    out = refused(*args, "--k-max", "100000000", flag="--k-max")
    assert "MAX_SPEC_K" in out
    out = refused(
        "spec-plan", M, HW, "--spec", "eagle:alpha=0.7", "--batch", "1..10000:1", "--k-max", "200", flag="--k-max 200"
    )
    assert "MAX_SPEC_POINTS" in out and "2,000,000 points" in out


def test_spec_plan_limits_at_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    must_not_run(monkeypatch, "roofline.serving.plan.speculative.predict")
    for bad in (0, limits.MAX_SPEC_K + 1, 2.5, True):
        with pytest.raises(ScenarioError, match="k_max"):
            search_k(M, HW, "eagle:alpha=0.7", [1], bad)  # type: ignore[arg-type]
    with pytest.raises(ScenarioError, match="MAX_SPEC_POINTS"):
        search_k(M, HW, "eagle:alpha=0.7", range(1, 101), 101)


def test_spec_plan_largest_k_runs() -> None:
    plan = search_k(M, HW, "eagle:alpha=0.7", [1], limits.MAX_SPEC_K)
    assert {p.k for p in plan.points} <= set(range(1, limits.MAX_SPEC_K + 1))


# --- item 2: seeded replicas × requests ----------------------------------------------------------------------------


def test_replicas_times_requests_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """64 replicas × 20,000 requests took over two minutes; now refused before the first replica runs."""
    must_not_run(monkeypatch, "roofline.serving.simulate.run_replica")
    out = refused("simulate", M, HW, "--qps", "15", "-N", "20000", "--replicas", "64", flag="--replicas 64")
    assert "--num-requests 20,000" in out and "MAX_REPLICA_REQUESTS" in out and "at most 25 replicas" in out


def test_replicas_times_requests_at_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    must_not_run(monkeypatch, "roofline.serving.simulate.run_replica")
    n = limits.MAX_REPLICA_REQUESTS // 4 + 1
    with pytest.raises(ScenarioError, match="MAX_REPLICA_REQUESTS"):
        simulate(M, HW, qps=2.0, num_requests=n, replicas=4, **SMALL)


def test_replicas_within_the_bound_run() -> None:
    s = simulate(M, HW, qps=2.0, num_requests=10, replicas=3, **SMALL)
    assert len(s.config["replica_summaries"]) == 3


def test_replicas_of_a_long_trace_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace's length is known once read: the first replica runs, the others are refused by count."""
    monkeypatch.setattr("roofline.serving.simulate.MAX_REPLICA_REQUESTS", 5)
    path = tmp_path / "t.jsonl"
    path.write_text(
        "".join(json.dumps({"arrival_s": i, "prompt_tokens": 64, "output_tokens": 4}) + "\n" for i in range(3))
    )
    with pytest.raises(ScenarioError, match="replicas=2 × num_requests=3"):
        simulate(M, HW, trace=path, replicas=2)


# --- items 3-5: wrong results with exit 0 and internal errors ------------------------------------------------------


def test_tiny_qps_is_refused_not_truncated() -> None:
    """--qps 1e-308: the gaps overflowed to infinity and 45 of 50 requests never arrived (exit 0)."""
    out = refused("simulate", M, HW, "--qps", "1e-308", "-N", "50", flag="--qps")
    assert "MAX_SIM_SPAN_S" in out and "inf s" in out
    refused(
        "simulate-disagg",
        M,
        "--disagg",
        "prefill=h100-sxm:tp1x1,decode=h100-sxm:tp1x1",
        "--qps",
        "1e-308",
        "-N",
        "50",
        flag="--qps",
    )


def test_arrival_span_bound() -> None:
    rng = np.random.default_rng(0)
    n = 50
    slowest = (n - 1) / limits.MAX_SIM_SPAN_S
    t = arrival_times(n, slowest, "constant", 1.0, rng)
    assert t[-1] == pytest.approx(limits.MAX_SIM_SPAN_S)
    with pytest.raises(ScenarioError, match="MAX_SIM_SPAN_S"):
        arrival_times(n, slowest / 2, "constant", 1.0, rng)
    with pytest.raises(ScenarioError, match="MAX_SIM_SPAN_S"):  # a mean inside, a drawn span outside: refused too
        arrival_times(1000, 1000 / limits.MAX_SIM_SPAN_S, "gamma", 30.0, np.random.default_rng(3))


def test_slow_arrivals_within_the_span_all_count() -> None:
    """Every request of a run whose span is allowed is simulated and kept (none silently dropped)."""
    s = simulate(M, HW, qps=1e-7, num_requests=50, **SMALL)
    r = s.requests
    assert len(r) == 50
    assert np.isfinite(r["ttft_s"]).all() and (r["ttft_s"] > 0).all()
    assert float(r["ttft_s"].max() - r["ttft_s"].min()) < 1e-6  # alone each time: the same TTFT to the µs


def test_request_overhead_is_bounded() -> None:
    """request_overhead_s=1e300 with CV 10 gave negative TTFTs (send time lost in the sum) and exit 0."""
    args = (
        "simulate",
        M,
        HW,
        "--qps",
        "2",
        "-N",
        "50",
        "--engine-set",
        "request_overhead_s=1e300",
        "--engine-set",
        "request_overhead_cv=10",
    )
    out = refused(*args, flag="request_overhead_s")
    assert "MAX_OVERHEAD_S" in out and "(got 1e+300)" in out  # the value as given, not a 300-digit integer
    e = engine_preset("vllm", hardware(HW))
    for field in ("request_overhead_s", "step_overhead_s"):
        with pytest.raises(ScenarioError, match=field):
            e.with_overrides({field: limits.MAX_OVERHEAD_S * 2})
        assert getattr(e.with_overrides({field: limits.MAX_OVERHEAD_S}), field) == limits.MAX_OVERHEAD_S


def test_largest_request_overhead_keeps_ttft_finite_and_non_negative() -> None:
    over = {"request_overhead_s": limits.MAX_OVERHEAD_S, "request_overhead_cv": 10}
    s = simulate(M, HW, qps=2.0, num_requests=200, engine_overrides=over, **SMALL)
    ttft = s.requests["ttft_s"].to_numpy()
    assert len(ttft) == 200 and np.isfinite(ttft).all() and (ttft > 0).all()


@pytest.mark.parametrize("cv", ["1e-300", "1e300", "1000"])
def test_arrival_cv_out_of_range(cv: str) -> None:
    """--arrival-cv 1e-300: k = 1/CV² divided by zero (exit 3, internal error)."""
    out = refused(
        "simulate", M, HW, "--qps", "2", "-N", "50", "--arrival", "gamma", "--arrival-cv", cv, flag="--arrival-cv"
    )
    assert "ARRIVAL_CV" in out


def test_arrival_cv_bounds_run() -> None:
    rng = np.random.default_rng(0)
    t = arrival_times(50, 2.0, "gamma", limits.MIN_ARRIVAL_CV, rng)
    assert np.allclose(np.diff(t), 0.5)
    assert np.isfinite(arrival_times(50, 2.0, "gamma", limits.MAX_ARRIVAL_CV, rng)).all()


@pytest.mark.parametrize(
    ("length", "flag"),
    [
        ("normal:1024:inf", "--prompt: the spread inf"),
        ("uniform:1:inf", "--prompt: HIGH must be a finite"),
        ("lognormal:1024:nan", "--prompt: the spread nan"),
    ],
)
def test_infinite_length_parameters(length: str, flag: str) -> None:
    refused("simulate", M, HW, "--qps", "2", "-N", "50", "--prompt", length, flag=flag)
    refused("simulate", M, HW, "--qps", "2", "-N", "50", "--output", length, flag=flag.replace("prompt", "output"))


def test_negative_seed() -> None:
    """--seed -1 said numpy's 'expected non-negative integer'."""
    out = refused("simulate", M, HW, "--qps", "2", "-N", "5", "--seed", "-1", flag="--seed must be >= 0")
    assert "non-negative integer" not in out
    refused(
        "simulate-disagg",
        M,
        "--disagg",
        "prefill=h100-sxm:tp1x1,decode=h100-sxm:tp1x1",
        "--seed",
        "-1",
        flag="--seed must be >= 0",
    )
    with pytest.raises(ScenarioError, match="seed must be >= 0"):
        Workload(qps=1.0, seed=-1).draw()
    with pytest.raises(ScenarioError, match="seed must be >= 0"):
        Workload(concurrency=1, seed=True).draw()


def test_trace_lengths_and_span_are_bounded(tmp_path: Path) -> None:
    """A trace's token counts above 2^24 (1e300 raised OverflowError) and arrivals spanning 10^300 s."""
    path = tmp_path / "t.jsonl"
    path.write_text('{"arrival_s": 0, "prompt_tokens": 1e300, "output_tokens": 5}\n')
    with pytest.raises(ScenarioError, match=r"line 1: field 'prompt_tokens'.*MAX_SEQUENCE_TOKENS"):
        load_trace(path)
    path.write_text(
        '{"arrival_s": 0, "prompt_tokens": 8, "output_tokens": 5}\n'
        '{"arrival_s": 1e300, "prompt_tokens": 8, "output_tokens": 5}\n'
    )
    with pytest.raises(ScenarioError, match="MAX_SIM_SPAN_S"):
        load_trace(path)
    path.write_text(
        '{"timestamp": 1.7e12, "prompt_tokens": 8, "output_tokens": 5}\n'
        '{"timestamp": 1.7e12, "prompt_tokens": 8, "output_tokens": 5}\n'
    )
    assert list(load_trace(path).arrival_s) == [0.0, 0.0]  # epoch milliseconds: only the span counts


# --- the CLI's phrasing --------------------------------------------------------------------------------------------


def test_api_names_as_flags() -> None:
    assert as_flags("replicas=64 × num_requests=20,000 is") == "--replicas 64 × --num-requests 20,000 is"
    assert as_flags("p_max=3 × d_max=4 + n_max=5; lower k_max") == "--p-max 3 × --d-max 4 + --n-max 5; lower --k-max"
    assert as_flags("seed must be >= 0; seeded replicas") == "--seed must be >= 0; seeded replicas"
    assert as_flags("arrival_cv=0 (use arrival=constant)") == "--arrival-cv 0 (use --arrival constant)"
    assert as_flags("prompt_len: the spread inf") == "--prompt: the spread inf"
    assert as_flags("output_len='x' is not a length") == "--output='x' is not a length"
    assert as_flags("the prompt_len: kept inside a sentence") == "the prompt_len: kept inside a sentence"
    assert as_flags("prompt_len + output_len = 9 tokens") == "prompt_len + output_len = 9 tokens"


def test_engine_set_keeps_huge_numbers_as_floats() -> None:
    assert parse_engine_set(["request_overhead_s=1e300"]) == {"request_overhead_s": 1e300}
    assert parse_engine_set(["max_num_seqs=2k"]) == {"max_num_seqs": 2000}


# --- the disaggregated link and plan-disagg's other options ----------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ("link=1e-300B/s", "MIN_LINK_BYTES_PER_S"),
        ("latency=1e300s", "MAX_OVERHEAD_S"),
        ("latency=1e300s,first=decode", "MAX_OVERHEAD_S"),
    ],
)
def test_disagg_link_and_latency_are_bounded(monkeypatch: pytest.MonkeyPatch, extra: str, field: str) -> None:
    """link=1e-300B/s: an infinite transfer time (exit 3, OverflowError); latency=1e300s: a TPOT of 10^297 s
    and exit 0."""
    must_not_run(monkeypatch, "roofline.serving.sim.disagg.run_disagg")
    d = f"prefill=h100-sxm:tp1x1,decode=h100-sxm:tp1x1,{extra}"
    out = refused("simulate-disagg", M, "--disagg", d, "--qps", "2", "-N", "20", flag="--disagg " + extra[:4])
    assert field in out
    DisaggConfig.parse(f"prefill=h100-sxm:tp1x1,decode=h100-sxm:tp1x1,link=1MB/s,latency={limits.MAX_OVERHEAD_S:g}s")


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--ttft", "-5s"], "--ttft-slo must be a positive"),
        (["--tpot", "5"], "--tpot-slo: '5' has no unit"),
        (["--percentile", "95"], "--percentile 95"),
        (["--tp-prefill", "0"], "--tp-prefill 0"),
        (["--tp-colocated", "100000000"], "--tp-colocated 100000000"),
        (["--first", "bogus"], "--first"),
    ],
)
def test_plan_disagg_options(monkeypatch: pytest.MonkeyPatch, args: list[str], flag: str) -> None:
    """A negative SLO ran every cell and ended 'no deployment meets the SLOs'; the others named --disagg."""
    must_not_run(monkeypatch, "roofline.serving.plan.disagg.simulate")
    refused("plan-disagg", M, HW, "--qps", "2", "-N", "20", *args, flag=flag)


def test_replicas_out_of_range() -> None:
    refused("simulate", M, HW, "--qps", "2", "-N", "20", "--replicas", "0", flag="--replicas 0")


# --- files a workload reads ---------------------------------------------------------------------------------------


def test_trace_file_size_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    with path.open("wb") as fh:  # sparse: no disk used, nothing read
        fh.truncate(limits.MAX_TRACE_FILE_BYTES + 1)
    out = refused("simulate", M, HW, "--trace", str(path), flag="big.jsonl")
    assert "MAX_TRACE_FILE_BYTES" in out


def test_npy_length_file_is_bounded_and_never_unpickled(tmp_path: Path) -> None:
    big = tmp_path / "big.npy"
    with big.open("wb") as fh:
        fh.truncate(limits.MAX_DATA_FILE_BYTES + 1)
    out = refused("simulate", M, HW, "--qps", "2", "-N", "5", "--prompt", f"file:{big}", flag="--prompt")
    assert "limit" in out
    obj = tmp_path / "obj.npy"
    np.save(obj, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    refused("simulate", M, HW, "--qps", "2", "-N", "5", "--prompt", f"file:{obj}", flag="--prompt")
    junk = tmp_path / "junk.npy"
    junk.write_bytes(b"not an array")
    refused("simulate", M, HW, "--qps", "2", "-N", "5", "--prompt", f"file:{junk}", flag="--prompt")
    good = tmp_path / "good.npy"
    np.save(good, np.array([100, 200]))
    s = simulate(M, HW, qps=2.0, num_requests=4, prompt_len=f"file:{good}", output_len=4)
    assert list(s.requests["prompt_tokens"]) == [100, 200, 100, 200]


@pytest.mark.parametrize("c", [float("inf"), float("nan"), 3.5, -2.0, True, "4"])
def test_concurrency_must_be_a_whole_number(c: object) -> None:
    """concurrency=inf raised OverflowError and nan ValueError from int() (API), not a ScenarioError."""
    with pytest.raises(ScenarioError, match="concurrency must be a whole number"):
        Workload(concurrency=c).draw()  # type: ignore[arg-type]


def test_concurrency_as_a_whole_float_runs() -> None:
    """4.0 passed the check and then failed inside the engine (TypeError); it is 4 clients."""
    assert Workload(concurrency=4.0).concurrency == 4  # type: ignore[arg-type]
    s = simulate(M, HW, concurrency=np.int64(4), num_requests=8, **SMALL)  # type: ignore[arg-type]
    assert len(s.requests) == 8


def test_a_burst_states_the_engines_busy_rate_not_its_first_microseconds() -> None:
    """Every request sent within microseconds (--qps 1e9): the window up to the last arrival saw almost no work, so
    the stated sustainable rate is the whole run's busy-time rate, of the order of the screening tier's estimate
    (it stated 0.413 requests/s against the screening tier's 82.8 before)."""
    import re

    import roofline

    s = roofline.simulate("llama-3.1-8b", "h100-sxm", qps=1e9, num_requests=2000, prompt_len=16)
    assert s.saturated is not None
    rate = float(re.findall(r"about ([0-9.e+]+) requests/s", s.saturated)[0])
    screened = float(re.findall(r"sustainable rate at ([0-9.e+]+) requests/s", s.saturated)[0])
    assert screened / 3 < rate < screened * 3
