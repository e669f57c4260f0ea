"""Every engine option at every entry point: honoured as the physics says, or refused by name (issue #25).

GIVEN each EngineConfig field (and each engine option name accepted as its alias) set to a value off the
vLLM preset, WHEN it is passed to predict, sweep, max_batch, plan and simulate, THEN the result changes, or
a ScenarioError names the option. Where an entry point honours an option is the one table
``roofline.engine.config.ENGINE_OPTION_SCOPE``; the walk checks each entry point against it. The physics of
the timing options is then checked by hand: the simulator's step rule step_seconds(GPU, c, async) at batch 1
(synchronous: TPOT_new − TPOT_old = c exactly), TTFT = y + prefill + k·TPOT, and the plan's sizing.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import roofline
from roofline.cli.app import app
from roofline.engine import EngineConfig, engine_preset
from roofline.engine.config import ALIASES, ENGINE_OPTION_SCOPE, OVERRIDABLE
from roofline.errors import ScenarioError
from roofline.profile import CalibrationProfile, default_profile
from roofline.serving.sim.policy import policy_for

M, HW = "llama-3.1-8b", "h100-sxm"
GIB = 2**30
#: preset structure, not launch options: what the engine's code does (e.g. which model classes SGLang fuses the shared
#: expert of; its --disable-shared-experts-fusion switch is not an option here)
NOT_OPTIONS = {
    "name",
    "version",
    "scheduler",
    "sources",
    "memory_fraction_of",
    "cuda_graph_from_max_num_seqs",
    "shared_expert_fusion",
}
FIELDS = sorted(set(EngineConfig.model_fields) - NOT_OPTIONS)

#: a value off the vLLM preset (H100) for each option, and the options its effect needs alongside it
#: (applied to both runs where the entry point honours them)
VALUES: dict[str, tuple[Any, dict[str, Any]]] = {
    "memory_fraction": (0.5, {}),
    "kv_block_tokens": (1024, {}),
    "max_num_seqs": (8, {}),
    "max_num_batched_tokens": (2048, {}),
    "chunked_prefill": (False, {"max_partial_prefills": 4}),  # one partial prefill at a time hides it
    "cuda_graphs": (False, {}),
    "cuda_graph_max_batch": (2, {}),  # batch 4 (sweep), the plan's batch and 8 clients run eagerly
    "cuda_graph_padding": (False, {"cuda_graph_max_batch": 512}),  # only 1 … 32 and powers of two replay
    "mixed_graphs": (False, {}),  # prefill steps of at most 512 tokens launch eagerly (walked at 256-token prompts)
    "runtime_reserve_bytes": (40 * GIB, {}),
    "reserve_bytes": (30 * GIB, {}),
    "capacity_bytes": (60e9, {}),
    "max_partial_prefills": (4, {}),
    "step_overhead_s": (0.005, {}),
    "request_overhead_s": (0.02, {}),
    "request_overhead_cv": (1.0, {"request_overhead_s": 0.02}),  # a spread needs a mean
    "output_lag_steps": (2.0, {}),
    "prefix_caching": (False, {}),
    "async_scheduling": (True, {"step_overhead_s": 0.02}),  # overlap needs a CPU part to hide
    "mixed_chunk": (False, {}),
    "pipeline_micro_batches": (1, {}),  # one batch at a time instead of a micro-batch per stage
    "dp_load_balance": ("pooled", {}),  # one pooled running set instead of vLLM's per-rank balancer
}
#: refusals the table does not hold: vLLM's scheduler always mixes decodes into a prefill step
SCHEDULER_REFUSES = {("mixed_chunk", "simulate")}
#: options an entry point honours that cannot show at its walk's batch (1 sequence, or batches of 1 … 8, which every
#: capture replays): checked there at batch 40 instead (:func:`_predict_at_40`)
BATCH_BLIND = {
    ("cuda_graph_max_batch", "predict"),
    ("cuda_graph_padding", "predict"),
    ("cuda_graph_padding", "sweep"),
    ("cuda_graph_padding", "simulate"),
}


#: the graph options act through the eager launches of an uncaptured decode step, which the host's run-ahead hides
#: behind the GPU work of these steps on the shipped profile: they are walked under a host slow enough to bind
#: (300 µs a kernel), where every eager decode step shows them
GRAPH_FIELDS = {"cuda_graphs", "cuda_graph_max_batch", "cuda_graph_padding", "mixed_graphs"}


@functools.cache
def _slow_host() -> CalibrationProfile:
    prof = default_profile()
    return prof.model_copy(update={"overheads": prof.overheads.model_copy(update={"per_kernel_s": 300e-6})})


def _calibration(slow: bool) -> CalibrationProfile | None:
    return _slow_host() if slow else None


@functools.cache
def _predict_at_40(over: tuple[tuple[str, Any], ...], slow: bool = False) -> tuple[float, ...]:
    r = roofline.predict(M, HW, 40, 1024, 64, engine_overrides=dict(over), calibration=_calibration(slow))
    return (r.ttft_s, r.tpot_s, r.e2e_s)


def _key(over: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(over.items()))


@functools.cache
def _predict(over: tuple[tuple[str, Any], ...], slow: bool = False) -> tuple[float, ...]:
    r = roofline.predict(M, HW, 1, 1024, 64, engine_overrides=dict(over), calibration=_calibration(slow))
    return (
        r.ttft_s,
        r.tpot_s,
        r.e2e_s,
        r.throughput_tok_s,
        r.max_batch,
        float(r.memory.kv_budget_bytes),
        r.activation_peak_bytes,
    )


@functools.cache
def _sweep(over: tuple[tuple[str, Any], ...], slow: bool = False) -> tuple[float, ...]:
    df = roofline.sweep(M, HW, [1, 4], 1024, 64, engine_overrides=dict(over), calibration=_calibration(slow))
    cols = ["ttft_s", "tpot_s", "e2e_s", "max_batch", "kv_bytes_per_gpu"]
    return tuple(float(x) for x in df[cols].to_numpy().ravel())


@functools.cache
def _max_batch(over: tuple[tuple[str, Any], ...], slow: bool = False) -> tuple[float, ...]:
    return (float(roofline.max_batch(M, HW, 1088, engine_overrides=dict(over))),)


@functools.cache
def _plan(over: tuple[tuple[str, Any], ...], slow: bool = False) -> tuple[float, ...]:
    res = roofline.plan(
        M,
        qps=20.0,
        prompt_len=1024,
        output_len=256,
        ttft_slo_s=0.5,
        tpot_slo_s=0.05,
        hardware=[HW],
        tp_options=[1],
        engine_overrides=dict(over),
        calibration=_calibration(slow),
    )
    c = res.candidates[0]
    return (c.batch, c.replicas, c.ttft_s, c.tpot_s, c.max_batch_memory, c.t_prefill_s, c.t_decode_s)


@functools.cache
def _simulate(over: tuple[tuple[str, Any], ...], slow: bool = False) -> tuple[float, ...]:
    s = roofline.simulate(
        M,
        HW,
        concurrency=8,
        prompt_len=3000,
        output_len=64,
        num_requests=40,
        prefix_share=0.5,
        engine_overrides=dict(over),
        calibration=_calibration(slow),
    )
    sm, cfg = s.summary, s.config
    return (sm["ttft_mean_s"], sm["tpot_mean_s"], sm["e2e_mean_s"], cfg["kv_blocks"], cfg["max_num_seqs"])


ENTRIES = {"predict": _predict, "sweep": _sweep, "max_batch": _max_batch, "plan": _plan, "simulate": _simulate}


@functools.cache
def _pipelined(entry: str, over: tuple[tuple[str, Any], ...], slow: bool = False) -> tuple[float, ...]:
    """The entry point on a two-stage pipeline (pp = 2), where the pipeline's options can show."""
    if entry == "predict":
        r = roofline.predict(M, HW, 40, 1024, 64, pp=2, engine_overrides=dict(over))
        return (r.ttft_s, r.tpot_s, r.e2e_s)
    if entry == "sweep":
        df = roofline.sweep(M, HW, [1, 4], 1024, 64, pp=2, engine_overrides=dict(over))
        return tuple(float(x) for x in df[["ttft_s", "tpot_s"]].to_numpy().ravel())
    s = roofline.simulate(
        M, HW, pp=2, concurrency=8, prompt_len=1024, output_len=64, num_requests=24, engine_overrides=dict(over)
    )
    return (s.summary["ttft_mean_s"], s.summary["tpot_mean_s"])


@functools.cache
def _short(entry: str, over: tuple[tuple[str, Any], ...], slow: bool = False) -> tuple[float, ...]:
    """The entry point at 256-token prompts, whose prefill steps fit the engine's piecewise graphs (512 tokens)."""
    kw: dict[str, Any] = {"engine_overrides": dict(over), "calibration": _calibration(slow)}
    if entry == "predict":
        r = roofline.predict(M, HW, 1, 256, 64, **kw)
        return (r.ttft_s, r.tpot_s)
    if entry == "sweep":
        df = roofline.sweep(M, HW, [1], 256, 64, **kw)
        return tuple(float(x) for x in df[["ttft_s", "tpot_s"]].to_numpy().ravel())
    if entry == "plan":
        slo = {"ttft_slo_s": 0.5, "tpot_slo_s": 0.05}
        c = roofline.plan(
            M, qps=5.0, prompt_len=256, output_len=64, hardware=[HW], tp_options=[1], **slo, **kw
        ).candidates[0]
        return (c.ttft_s, c.tpot_s, c.t_prefill_s)
    s = roofline.simulate(M, HW, concurrency=1, prompt_len=256, output_len=16, num_requests=8, **kw)
    return (s.summary["ttft_mean_s"], s.summary["tpot_mean_s"])


@functools.cache
def _data_parallel(entry: str, over: tuple[tuple[str, Any], ...], slow: bool = False) -> tuple[float, ...]:
    """The simulator on an attention-DP replica (Qwen3-30B-A3B, dp 2), where the DP balancer can show."""
    kw: dict[str, Any] = {"qps": 20.0, "prompt_len": "lognormal:1024:0.5", "output_len": 64, "num_requests": 40}
    s = roofline.simulate("qwen3-30b-a3b", HW, dp=2, engine_overrides=dict(over), **kw)
    return (s.summary["ttft_mean_s"], s.summary["tpot_mean_s"])


#: options that only an attention-DP replica shows in the simulator, walked there (:func:`_data_parallel`)
DP_ONLY = {"dp_load_balance"}
#: options that only short prompts show (prefill steps inside the piecewise capture), walked there (:func:`_short`)
SHORT_PROMPTS = {"mixed_graphs"}
#: options that only a pipeline-parallel replica shows, walked there (:func:`_pipelined`)
PIPELINE_ONLY = {"pipeline_micro_batches"}


def _refused(field: str, entry: str) -> bool:
    return entry not in ENGINE_OPTION_SCOPE[field][0] or (field, entry) in SCHEDULER_REFUSES


def _base(field: str, entry: str) -> dict[str, Any]:
    """The options ``field`` needs alongside it, those the entry point honours."""
    return {k: v for k, v in VALUES[field][1].items() if not _refused(k, entry)}


def test_the_walk_covers_every_field_and_alias() -> None:
    assert set(VALUES) == set(FIELDS) == set(OVERRIDABLE) == set(ENGINE_OPTION_SCOPE)
    assert set(ALIASES.values()) <= set(FIELDS)
    assert {"enable_prefix_caching", "enable_block_reuse", "enable_mixed_chunk"} <= set(ALIASES)


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@pytest.mark.parametrize("field", FIELDS)
def test_every_field_is_honoured_or_refused_by_name(field: str, entry: str) -> None:
    run, base = ENTRIES[entry], _base(field, entry)
    value = VALUES[field][0]
    if _refused(field, entry):
        with pytest.raises(ScenarioError, match=f"engine option {field}"):
            run(_key({**base, field: value}))
        return
    if (field, entry) in BATCH_BLIND:
        run = _predict_at_40
    if field in PIPELINE_ONLY:
        run = functools.partial(_pipelined, entry)
    if field in DP_ONLY:
        run = functools.partial(_data_parallel, entry)
    if field in SHORT_PROMPTS:
        run = functools.partial(_short, entry)
    slow = field in GRAPH_FIELDS
    assert run(_key({**base, field: value}), slow) != run(_key(base), slow), f"{entry} ignores {field}={value!r}"


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_every_alias_acts_as_its_field(alias: str, entry: str) -> None:
    field = ALIASES[alias]
    run, base = ENTRIES[entry], _base(field, entry)
    value = VALUES[field][0]
    if _refused(field, entry):
        with pytest.raises(ScenarioError, match=f"engine option {alias}" if entry != "simulate" else field):
            run(_key({**base, alias: value}))
        return
    assert run(_key({**base, alias: value})) == run(_key({**base, field: value}))


# ---- the timing options by hand ---------------------------------------------------------------------


def _sim_batch_one(over: dict[str, Any]) -> dict[str, float]:
    """simulate one client at a time with fixed lengths: every request is a batch of 1 on an idle engine."""
    s = roofline.simulate(M, HW, concurrency=1, prompt_len=1024, output_len=64, num_requests=3, engine_overrides=over)
    return {k: float(s.summary[f"{k}_mean_s"]) for k in ("ttft", "tpot", "e2e")}


def _predict_batch_one(over: dict[str, Any] | None) -> roofline.PredictionResult:
    return roofline.predict(M, HW, 1, 1024, 64, engine_overrides=over)


def test_step_overhead_at_batch_one_is_the_simulators_step_pricing() -> None:
    """Synchronous: each of the O steps (the prefill and O − 1 decodes) costs GPU + c, so with c = 5 ms
    TTFT and TPOT rise by exactly 5 ms and E2E by O·5 ms = 320 ms; the simulator at batch 1 gives the same."""
    old, new = _predict_batch_one(None), _predict_batch_one({"step_overhead_s": 0.005})
    assert new.tpot_s - old.tpot_s == pytest.approx(0.005, abs=1e-12)
    assert new.ttft_s - old.ttft_s == pytest.approx(0.005, abs=1e-12)
    assert new.e2e_s - old.e2e_s == pytest.approx(64 * 0.005, abs=1e-11)
    assert new.tpot_first_s - old.tpot_first_s == pytest.approx(0.005, abs=1e-12)
    assert np.allclose(new.tpot_steps_s - old.tpot_steps_s, 0.005, rtol=0, atol=1e-12)
    assert new.throughput_tok_s == pytest.approx(64 / new.e2e_s, rel=1e-12)
    for over, r in ((None, old), ({"step_overhead_s": 0.005}, new)):
        sim = _sim_batch_one(over or {})
        assert (sim["ttft"], sim["tpot"], sim["e2e"]) == pytest.approx((r.ttft_s, r.tpot_s, r.e2e_s), rel=1e-9)


def test_async_scheduling_overlaps_the_cpu_part_as_the_simulator() -> None:
    """Overlapped: step = max(GPU, c). c = 20 ms, above every decode step (~7 ms) and below the prefill (~26 ms):
    TPOT = 20 ms, TTFT unchanged; c inside the decode steps' range: TPOT = mean of max(step, c) over the steps;
    both as simulated at batch 1."""
    old = _predict_batch_one(None)
    steps = old.tpot_steps_s
    big = _predict_batch_one({"step_overhead_s": 0.02, "async_scheduling": True})
    assert big.tpot_s == pytest.approx(0.02, rel=1e-12) and big.ttft_s == old.ttft_s > 0.02
    c = float(np.median(steps))
    mid = _predict_batch_one({"step_overhead_s": c, "async_scheduling": True})
    assert mid.tpot_s == pytest.approx(float(np.maximum(steps, c).mean()), rel=1e-12)
    for over, r in (
        ({"step_overhead_s": 0.02, "async_scheduling": True}, big),
        ({"step_overhead_s": c, "async_scheduling": True}, mid),
    ):
        sim = _sim_batch_one(over)
        assert (sim["ttft"], sim["tpot"], sim["e2e"]) == pytest.approx((r.ttft_s, r.tpot_s, r.e2e_s), rel=1e-9)
    assert _predict_batch_one({"async_scheduling": True}).tpot_s == _predict_batch_one(None).tpot_s  # no CPU part


def test_request_overhead_and_output_lag_delay_what_the_client_sees() -> None:
    """y = 20 ms adds 20 ms to TTFT and E2E; a lag of k = 2 steps adds 2·TPOT to both; TPOT stays; as simulated."""
    old = _predict_batch_one(None)
    y = _predict_batch_one({"request_overhead_s": 0.02})
    lag = _predict_batch_one({"output_lag_steps": 2.0})
    assert (y.ttft_s - old.ttft_s, y.e2e_s - old.e2e_s, y.tpot_s) == pytest.approx((0.02, 0.02, old.tpot_s))
    assert lag.ttft_s - old.ttft_s == pytest.approx(2 * old.tpot_s, rel=1e-12)
    assert lag.e2e_s - old.e2e_s == pytest.approx(2 * old.tpot_s, rel=1e-12)
    for over, r in (({"request_overhead_s": 0.02}, y), ({"output_lag_steps": 2.0}, lag)):
        sim = _sim_batch_one(over)
        assert (sim["ttft"], sim["tpot"], sim["e2e"]) == pytest.approx((r.ttft_s, r.tpot_s, r.e2e_s), rel=1e-9)
    ops = _predict_batch_one({"request_overhead_s": 0.02, "step_overhead_s": 0.005}).ops
    both = _predict_batch_one({"request_overhead_s": 0.02, "step_overhead_s": 0.005})
    assert ops[ops.phase == "prefill"].time_s.sum() == pytest.approx(both.ttft_s, rel=1e-12)


def test_sweep_prices_the_engine_as_predict_does() -> None:
    over = {"step_overhead_s": 0.0075, "async_scheduling": True, "request_overhead_s": 0.01, "output_lag_steps": 1.0}
    df = roofline.sweep(M, HW, [1, 8], [128, 2048], [1, 2, 96], engine_overrides=over)
    for row in df.itertuples():
        r = roofline.predict(M, HW, int(row.batch), int(row.prompt_len), int(row.output_len), engine_overrides=over)
        assert (row.ttft_s, row.tpot_s, row.e2e_s) == pytest.approx((r.ttft_s, r.tpot_s, r.e2e_s), rel=1e-12)


def test_plan_sizes_with_the_engine_overheads() -> None:
    """t_pre and t_dec(B) carry the CPU part (+5 ms each, synchronous); y adds to the reported TTFT only."""
    kw: dict[str, Any] = {
        "qps": 20.0,
        "prompt_len": 1024,
        "output_len": 256,
        "ttft_slo_s": 0.5,
        "tpot_slo_s": 0.05,
        "hardware": [HW],
        "tp_options": [1],
    }
    old = roofline.plan(M, **kw).candidates[0]
    cpu = roofline.plan(M, engine_overrides={"step_overhead_s": 0.005}, **kw).candidates[0]
    assert cpu.t_prefill_s - old.t_prefill_s == pytest.approx(0.005, abs=1e-12)
    at_b = roofline.predict(M, HW, cpu.batch, 1024, 256, engine_overrides={"step_overhead_s": 0.005})
    assert cpu.t_decode_s == pytest.approx(at_b.tpot_s, rel=1e-12)
    y = roofline.plan(M, engine_overrides={"request_overhead_s": 0.1}, **kw).candidates[0]
    assert (y.batch, y.replicas, y.t_prefill_s) == (old.batch, old.replicas, old.t_prefill_s)
    assert y.ttft_s - old.ttft_s == pytest.approx(0.1, abs=1e-12)
    capped = roofline.plan(M, engine_overrides={"max_num_seqs": 8}, **kw).candidates[0]
    assert (capped.batch, capped.limited_by) == (8, "max_num_seqs")


def test_memory_fraction_moves_the_kv_budget_by_its_share_of_capacity() -> None:
    """vLLM's fraction is of total memory: KV = f·C − W − A − R, so f 0.9 → 0.5 takes 0.4·C off the budget."""
    old, new = _predict_batch_one(None), _predict_batch_one({"gpu_memory_utilization": 0.5})
    cap = float(old.memory.capacity_bytes)
    assert float(old.memory.kv_budget_bytes) - float(new.memory.kv_budget_bytes) == pytest.approx(0.4 * cap, rel=1e-9)
    assert new.max_batch == roofline.max_batch(M, HW, 1024 + 64, engine_overrides={"gpu_memory_utilization": 0.5})


def test_a_batch_above_max_num_seqs_is_refused() -> None:
    with pytest.raises(ScenarioError, match="max_num_seqs 8"):
        roofline.predict(M, HW, 16, engine_overrides={"max_num_seqs": 8})
    with pytest.raises(ScenarioError, match="max_num_seqs 8"):
        roofline.sweep(M, HW, [1, 16], engine_overrides={"max_running_requests": 8})
    assert roofline.predict(M, HW, 8, engine_overrides={"max_num_seqs": 8}).fits


def test_mixed_chunk_acts_on_the_prefill_first_scheduler() -> None:
    kw: dict[str, Any] = {"concurrency": 8, "prompt_len": 3000, "output_len": 64, "num_requests": 40}
    off = roofline.simulate(M, HW, engine="sglang", **kw).summary
    on = roofline.simulate(M, HW, engine="sglang", engine_overrides={"enable_mixed_chunk": "on"}, **kw).summary
    assert on["ttft_mean_s"] != off["ttft_mean_s"]


# ---- one object: the policy is derived, switches parse as before --------------------------------------


def test_policy_is_derived_from_the_engine() -> None:
    hw = roofline.hardware(HW)
    want = {  # prefill_first, mixed_chunk, reserve_full, prefix_caching, async_scheduling (the former POLICIES)
        "vllm": ("vllm_v1", False, True, False, True, False),
        "sglang": ("sglang", True, False, False, True, True),
        "trtllm": ("trtllm_inflight", False, True, True, True, True),
        "ideal": ("ideal", False, True, False, True, False),
    }
    for name, row in want.items():
        eng = engine_preset(name, hw)
        p = policy_for(eng)
        assert (p.name, p.prefill_first, p.mixed_chunk, p.reserve_full, p.prefix_caching, p.async_scheduling) == row
        assert all(eng.sources.get(f) for f in ("prefix_caching", "async_scheduling", "mixed_chunk")), name
    eng = engine_preset("trtllm", hw).with_overrides({"enable_block_reuse": "off", "async_scheduling": "0"})
    assert (policy_for(eng).prefix_caching, policy_for(eng).async_scheduling) == (False, False)
    assert eng.sources["prefix_caching"] == "user override"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("ON", True),
        ("1", True),
        ("false", False),
        ("off", False),
        ("0", False),
        (True, True),
        (0, False),
    ],
)
def test_switches_take_true_false_on_off_one_zero(text: Any, value: bool) -> None:
    eng = engine_preset("vllm", roofline.hardware(HW)).with_overrides({"prefix_caching": text, "chunked_prefill": text})
    assert eng.prefix_caching is value and eng.chunked_prefill is value


def test_a_switch_that_is_not_one_is_refused() -> None:
    with pytest.raises(ScenarioError, match="true or false"):
        engine_preset("vllm", roofline.hardware(HW)).with_overrides({"async_scheduling": "maybe"})


# ---- the CLI -----------------------------------------------------------------------------------------


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def test_cli_predict_prices_and_refuses_engine_options() -> None:
    base = json.loads(_cli("predict", M, HW, "-n", "64", "--json").stdout)
    cpu = json.loads(_cli("predict", M, HW, "-n", "64", "--json", "--engine-set", "step_overhead_s=5e-3").stdout)
    assert cpu["tpot_s"] - base["tpot_s"] == pytest.approx(0.005, abs=1e-12)
    res = _cli("predict", M, HW, "--engine-set", "enable_prefix_caching=false")
    assert res.exit_code == 2 and "engine option enable_prefix_caching (prefix_caching)" in res.output
    res = _cli("predict", M, HW, "--batch", "16", "--engine-set", "max_num_seqs=8")
    assert res.exit_code == 2 and "max_num_seqs 8" in res.output


def test_cli_simulate_honours_engine_options() -> None:
    args = ("simulate", M, HW, "--concurrency", "8", "-p", "3000", "-n", "64", "-N", "40", "--json")
    base = json.loads(_cli(*args).stdout)["summary"]
    capped = json.loads(_cli(*args, "--engine-set", "max_num_seqs=2").stdout)["summary"]
    assert capped["ttft_mean_s"] > base["ttft_mean_s"]
    res = _cli(*args, "--engine-set", "mixed_chunk=false")
    assert res.exit_code == 2 and "mixed_chunk" in res.output


PLAN = ("plan", M, "--qps", "20", "--ttft-slo", "500ms", "--tpot-slo", "50ms", "-p", "1024", "-n", "256",
        "-H", HW, "--tp", "1,2", "--precision", "checkpoint")  # fmt: skip


def test_plan_simulate_passes_engine_set_to_its_finalists() -> None:
    """--engine-set max_num_seqs=8 reaches the simulated finalists (they were simulated without it): each runs
    at most 8 sequences, so it needs more replicas than the uncapped engine."""
    base = json.loads(_cli(*PLAN, "--simulate", "--json").stdout)["simulated"]
    capped = json.loads(_cli(*PLAN, "--simulate", "--json", "--engine-set", "max_num_seqs=8").stdout)["simulated"]
    assert [s["label"] for s in capped] == [s["label"] for s in base]
    assert all(c["replicas"] > b["replicas"] for b, c in zip(base, capped, strict=True))
    res = _cli(*PLAN, "--engine-set", "prefix_caching=false")
    assert res.exit_code == 2 and "use plan --simulate" in res.output
    res = _cli(*PLAN, "--simulate", "--json", "--engine-set", "prefix_caching=false")
    assert res.exit_code == 0, res.output


def test_speculative_predict_refuses_engine_overheads() -> None:
    """predict(speculative=...) prices draft-and-verify steps without the engine's overheads: it says so."""
    with pytest.raises(ScenarioError, match="engine option step_overhead_s"):
        roofline.predict(M, HW, 1, speculative="eagle:k=3,alpha=0.7", engine_overrides={"step_overhead_s": 0.005})
    assert roofline.predict(M, HW, 1, speculative="eagle:k=3,alpha=0.7").speculative is not None


def test_vllm_capture_follows_a_max_num_seqs_override() -> None:
    """vLLM captures decode batches up to min(2 x max_num_seqs, 512) (presets.VLLM_GRAPHS): max_num_seqs 64 -> 128,
    200 -> 400, 1024 -> 512; an explicit cuda_graph_max_batch wins; SGLang's capture does not follow max_num_seqs."""
    vllm = engine_preset("vllm", roofline.hardware(HW))
    assert vllm.cuda_graph_max_batch == 512
    for n, cap in ((64, 128), (200, 400), (1024, 512)):
        e = vllm.with_overrides({"max_num_seqs": n})
        assert (
            e.cuda_graph_max_batch == cap
            and "derived from the max_num_seqs override" in e.sources["cuda_graph_max_batch"]
        )
    assert vllm.with_overrides({"max_num_seqs": 64, "cuda_graph_max_batch": 32}).cuda_graph_max_batch == 32
    sglang = engine_preset("sglang", roofline.hardware(HW))
    assert sglang.with_overrides({"max_num_seqs": 16}).cuda_graph_max_batch == sglang.cuda_graph_max_batch
