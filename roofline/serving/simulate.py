"""``roofline.simulate``: the one front door of the serving simulator; serve a request stream and measure it.

    s = roofline.simulate("llama-3.1-8b", "h100-sxm", engine="vllm", qps=10.0,
                          prompt_len=1024, output_len=256, num_requests=2000, seed=0)
    s.summary["ttft_p99_s"], s.requests, s.timeline, s.plot()
    roofline.simulate("llama-3.1-8b", "h100-sxm", qps=5.0, speculative="eagle:k=3,alpha=0.7")
    roofline.simulate("llama-3.1-70b", disagg="prefill=h100-sxm:tp4x2,decode=h100-sxm:tp8x1", qps=4.0)

Every variant returns one :class:`~roofline.serving.sim.result.SimulationResult`. ``speculative`` (a
:class:`~roofline.specs.speculative.SpeculativeConfig` or its text) runs verify steps with sampled acceptance
(:mod:`roofline.serving.sim.speculative`); ``disagg`` (a :class:`~roofline.specs.disagg.DisaggConfig` or its
text) runs a prefill pool and a decode pool and the KV transfer between them (:mod:`roofline.serving.sim.disagg`;
open loop; ``prefill_overrides`` / ``decode_overrides`` apply to one pool's engine over ``engine_overrides``).
Replicas come from the one builder, :func:`roofline.serving.replica.replica`.

Workload (a :class:`~roofline.serving.workload.stream.Workload`, or its fields as keywords): exactly one of
``qps`` (open loop; ``arrival`` poisson | gamma (with ``arrival_cv``) | constant), ``concurrency`` (closed
loop: each of C clients sends its next request when the previous one finishes) or ``trace`` (JSONL replay, see
:mod:`roofline.serving.workload.trace`). Lengths: see :mod:`roofline.serving.workload.arrivals`.
``prefix_share`` ∈ [0, 1]: the first round(share × mean prompt) tokens of every prompt are one common system
prompt (prefix caching then skips them after the first request). ``mix`` (a
:class:`~roofline.serving.workload.mix.WorkloadMix`, ``"chat:0.7,rag:0.3"`` or a mix YAML path) draws each
request's class from the shares and its lengths and prefix from its class; the request frame then has a ``class``
column and ``result.class_summary`` gives TTFT and TPOT at each class's percentiles (plain decoding only).

Memory comes from :func:`roofline.memory.memory_budget` (the engine's KV budget), step times from
the compiled cost model (:mod:`roofline.serving.sim.steptime`), batching from the engine's scheduler
policy (:mod:`roofline.serving.sim.policy`). The engine's ``step_overhead_s`` is CPU time per step
(added to each step, or overlapped under ``async_scheduling``); ``request_overhead_s`` is the mean
time between a request's send and its entry into the engine's queue (it counts in TTFT and E2E), each
request's drawn from a gamma law of coefficient of variation ``request_overhead_cv`` (0, the default:
the same for every request; 1: exponential). A spread matters beyond its mean: identical closed-loop
clients with a constant overhead settle into a rhythm in which no two prefills ever meet.
``output_lag_steps`` = k delays every token of a request on its way to the client by k of the request's
own inter-token intervals (TTFT and E2E + k·TPOT, TPOT and ITL unchanged; :mod:`roofline.serving.sim.lifecycle`).

Lock-step (closed loop): ``config["lockstep_share"]`` is the share of the later half of requests whose first
token came together with at least half of the clients' (:func:`roofline.serving.sim.metrics.lockstep_share`), and
``config["lockstep"]`` is True when it exceeds ``LOCKSTEP_SHARE``: identical clients then prefill, finish and
resend together wave after wave, and TTFT is that of a synchronised burst. The answer hinges on it: Qwen3-32B on
2 × H100, 8 clients of 1,024 + 1,024 tokens, 418 ms in lock-step, 88 ms once a 2 % spread of answer lengths lets
the clients drift apart, 154 ms measured (vLLM 0.12, ``validation/serving/knee.py``). On the public closed-loop
rows the drift is no better: it takes held-out TTFT error from 26 to 56 % on vLLM (measured TTFT is longer still).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from roofline.boundary.limits import MAX_REPLICA_REQUESTS
from roofline.engine.presets import EngineArg
from roofline.errors import ScenarioError
from roofline.prediction import HardwareArg, ModelArg, ProfileArg
from roofline.serving.plan.screening import screen
from roofline.serving.replica import Deployment, Replica
from roofline.serving.sim.metrics import lockstep_share
from roofline.serving.sim.result import SimulationResult, build_result
from roofline.serving.sim.starvation import starvation
from roofline.serving.workload.arrivals import LengthArg
from roofline.serving.workload.mix import WorkloadMix
from roofline.serving.workload.stream import TRACE_BLOCK_TOKENS, Requests, Workload, check_types
from roofline.specs.disagg import DisaggConfig
from roofline.specs.precision import Precision
from roofline.specs.speculative import SpeculativeConfig

#: ``config["lockstep"]`` when more than this share of a closed loop's later requests came in a half-population cohort.
LOCKSTEP_SHARE = 0.5

#: The keyword arguments of :func:`simulate` that describe its workload (the fields of :class:`Workload`).
WORKLOAD_FIELDS = frozenset(f.name for f in fields(Workload))

#: Most seeded replicas one call runs.
MAX_REPLICAS = 64

EngineOverrides = Mapping[str, object] | None
ProgressFn = Callable[[int, int], None]


def simulate(
    model: ModelArg,
    hardware: HardwareArg | None = None,
    engine: EngineArg = "vllm",
    tp: int = 1,
    *,
    workload: Workload | None = None,
    qps: float | None = None,
    concurrency: int | None = None,
    trace: str | Path | None = None,
    prompt_len: LengthArg = 1024,
    output_len: LengthArg = 256,
    num_requests: int = 2000,
    seed: int = 0,
    arrival: str = "poisson",
    arrival_cv: float = 1.0,
    prefix_share: float = 0.0,
    trace_block_tokens: int = TRACE_BLOCK_TOKENS,
    max_concurrency: int | None = None,
    warmup: int = 0,
    warmup_drained: bool = True,
    ramp_s: float = 0.0,
    client: str | None = None,
    mix: WorkloadMix | str | Path | None = None,
    engine_overrides: EngineOverrides = None,
    weight_dtype: str | Precision | None = None,
    kv_dtype: str | Precision | None = None,
    pp: int = 1,
    ep: int = 1,
    calibration: ProfileArg = None,
    speculative: SpeculativeConfig | str | None = None,
    disagg: DisaggConfig | str | None = None,
    prefill_overrides: EngineOverrides = None,
    decode_overrides: EngineOverrides = None,
    progress: ProgressFn | None = None,
    replicas: int = 1,
    dp: int = 1,
    redundant_experts: int = 0,
    moe_overlap: str = "none",
) -> SimulationResult:
    """Simulate serving a workload (see the module docstring); deterministic given the workload's seed.

    The workload is ``workload=`` or its fields as keywords (``qps`` | ``concurrency`` | ``trace``, lengths,
    ``num_requests``, ``seed``, ...), not both. ``weight_dtype``/``kv_dtype`` None: the checkpoint's own format (KV
    bf16 unless fp16). ``engine_overrides`` takes every EngineConfig field and the scheduler settings
    (``prefix_caching``, ``async_scheduling``, ``mixed_chunk``) under their engine option names. ``replicas`` = N > 1
    runs N seeded replicas (seeds seed … seed + N − 1): the first is returned, every one's summary is in
    ``config["replica_summaries"]``. ``dp`` / ``redundant_experts`` / ``moe_overlap``: wide-EP MoE (:mod:`.sim.ranks`).
    """
    given = {name: value for name, value in locals().items() if name in WORKLOAD_FIELDS}  # the keyword workload
    wl = _the_workload(workload, given)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or not 1 <= replicas <= MAX_REPLICAS:
        raise ScenarioError(f"replicas={replicas!r} must be a whole number from 1 to {MAX_REPLICAS}")
    if replicas > 1 and wl.trace is None:
        _check_replica_requests(replicas, wl.num_requests)
    spec, pools = _variants(speculative, disagg, progress)
    moe = (dp, redundant_experts, moe_overlap)
    dep = Deployment(model, hardware, engine, tp, pp, ep, engine_overrides, weight_dtype, kv_dtype, calibration, *moe)
    pool_overrides = prefill_overrides is not None or decode_overrides is not None
    _check_variant(spec, pools, dep, wl, progress=progress, pool_overrides=pool_overrides)

    def one(w: Workload, prog: ProgressFn | None) -> SimulationResult:
        req = w.draw()
        if pools is not None:
            from roofline.serving.sim.disagg import run_disagg

            return run_disagg(dep, pools, w, req, prefill_overrides, decode_overrides)
        rep = dep.replica(req.prompt_mean, req.output_mean)
        if spec is not None:
            from roofline.serving.sim.speculative import run_speculative

            return run_speculative(rep, spec, w, req, prog)
        return run_replica(rep, w, req, prog)

    first = one(wl, progress)
    if replicas > 1:  # seeded replicas for the workload-randomness part of the intervals; compiled model reused
        _check_replica_requests(replicas, len(first.requests))  # a trace's length is known once it is read
        others = [one(wl.with_seed(wl.seed + i), None).summary for i in range(1, replicas)]
        first.config["replica_summaries"] = [first.summary, *others]
    return first


def _variants(
    speculative: SpeculativeConfig | str | None, disagg: DisaggConfig | str | None, progress: ProgressFn | None
) -> tuple[SpeculativeConfig | None, DisaggConfig | None]:
    """``speculative`` and ``disagg`` parsed from their text (or as given); any other type refused by name, and a
    ``progress`` that is not a callable."""
    for name, value, kind, example in (
        ("speculative", speculative, SpeculativeConfig, "'eagle:k=3,alpha=0.7'"),
        ("disagg", disagg, DisaggConfig, "'prefill=h100-sxm:tp1x1,decode=h100-sxm:tp1x1'"),
    ):
        if value is not None and not isinstance(value, str | kind):
            raise ScenarioError(
                f"{name} must be its text or a {kind.__name__} (got {type(value).__name__} {value!r:.60}); give "
                f"e.g. {name}={example}, or None"
            )
    if progress is not None and not callable(progress):
        raise ScenarioError(f"progress must be a callable(done, total) or None (got {type(progress).__name__})")
    spec = SpeculativeConfig.parse(speculative) if isinstance(speculative, str) else speculative
    return spec, DisaggConfig.parse(disagg) if isinstance(disagg, str) else disagg


def _differs(value: object, default: object) -> bool:
    """``value`` is not the field's default (an array or an object without a truth value counts as given)."""
    if value is default:
        return False
    try:
        return bool(value != default)
    except (TypeError, ValueError):  # numpy arrays compare element-wise
        return True


def _check_replica_requests(replicas: int, n: object) -> None:
    """replicas × requests at most MAX_REPLICA_REQUESTS (roofline.boundary.limits), before the replicas run."""
    if not isinstance(n, int | np.integer) or isinstance(n, bool):
        return  # Workload.draw refuses it by name
    n = int(n)
    if replicas * n > MAX_REPLICA_REQUESTS:
        raise ScenarioError(
            f"replicas={replicas} × num_requests={n:,} is {replicas * n:,} simulated requests, more than "
            f"{MAX_REPLICA_REQUESTS:,} (roofline.boundary.limits MAX_REPLICA_REQUESTS): the spread of the intervals "
            f"settles with fewer; give at most {max(1, MAX_REPLICA_REQUESTS // n):,} replicas or fewer requests"
        )


def _the_workload(workload: Workload | None, given: dict[str, Any]) -> Workload:
    """``workload`` itself, or the one its keyword fields describe; not both (each field's type checked)."""
    if workload is None:
        wl = Workload(**given)
        check_types(wl)
        return wl
    if not isinstance(workload, Workload):
        raise ScenarioError(f"workload must be a roofline Workload (got {type(workload).__name__})")
    check_types(workload)
    defaults = {f.name: f.default for f in fields(Workload)}
    clash = [k for k, v in given.items() if _differs(v, defaults[k])]
    if clash:
        raise ScenarioError(
            f"give the workload either as workload= or as keywords, not both (also given: {', '.join(clash)})"
        )
    return workload


def _check_variant(
    spec: SpeculativeConfig | None,
    pools: DisaggConfig | None,
    dep: Deployment,
    wl: Workload,
    *,
    progress: ProgressFn | None,
    pool_overrides: bool,
) -> None:
    """Refuse, with the option named, what a variant cannot run."""
    hardware, tp, pp, ep = dep.hardware, dep.tp, dep.pp, dep.ep
    if spec is not None and pools is not None:
        raise ScenarioError("speculative= and disagg= cannot be combined yet: simulate one of them")
    if wl.mix is not None and (spec is not None or pools is not None):
        raise ScenarioError(
            "a workload mix runs on the plain-decoding simulator: drop speculative= / disagg=, or simulate one "
            "class at a time with its lengths"
        )
    if pools is None and pool_overrides:
        raise ScenarioError("prefill_overrides / decode_overrides apply to disaggregated pools: give disagg= too")
    if spec is not None and (pp != 1 or ep != 1 or wl.prefix_share > 0):
        raise ScenarioError(
            "speculative simulation runs tp-only replicas without prefix sharing: drop pp/ep/prefix_share"
        )
    if pools is None:
        return
    if hardware is not None and not _same_hardware(hardware, pools):
        raise ScenarioError(
            f"disagg= names each pool's hardware ({pools.label()}); hardware={hardware!r} differs: drop hardware="
        )
    if tp != 1 or pp != 1 or ep != 1:
        raise ScenarioError("with disagg= each pool sets its own tp and ep (prefill=GPU:tpNxCOUNT,...): drop tp/pp/ep")
    if wl.closed_loop and (wl.warmup or wl.max_concurrency is not None):
        raise ScenarioError(
            "disaggregated simulation runs an open loop or a closed loop of concurrency= clients without warm-up: "
            "drop warmup= / max_concurrency="
        )
    if wl.prefix_share > 0 or progress is not None:
        raise ScenarioError("disaggregated simulation has no prefix sharing or progress callback yet: drop them")


def _same_hardware(hardware: HardwareArg, pools: DisaggConfig) -> bool:
    from roofline.specs.library import hardware as load_hardware

    name = hardware.name if not isinstance(hardware, str | Path) else load_hardware(hardware).name
    return all(load_hardware(p.hardware).name == name for p in (pools.prefill, pools.decode))


def run_replica(rep: Replica, wl: Workload, req: Requests, progress: ProgressFn | None = None) -> SimulationResult:
    """Serve the drawn requests ``req`` of ``wl`` on one replica (plain decoding)."""
    eng, step = rep.engine, rep.step
    rep.check_requests(req.prompt, req.output)
    hashes = req.hashes(eng.kv_block_tokens, wl.prefix_share)
    sim = rep.engine_sim(
        req.prompt,
        req.output,
        req.send_s,
        concurrency=req.slots,
        hashes=hashes,
        overhead_seed=wl.seed,
        release_s=req.release_s,
        warmup=req.warmup,
        warmup_drained=req.warmup_drained,
    )
    t0 = time.perf_counter()
    sim.run(None if progress is None else (lambda done: progress(done, len(req.prompt))))
    wall = time.perf_counter() - t0
    if sim.saturated:
        p_mean, o_mean = req.prompt_mean, req.output_mean
        sus = screen(step, np.array([1.0]), p_mean, o_mean, eng.max_num_batched_tokens, step.max_rows, rep.kv_tokens)
        sim.saturated += (
            f" The closed-form screening tier puts this configuration's sustainable rate at "
            f"{sus.sustainable_qps:.3g} requests/s for the mean request ({p_mean:.0f} + {o_mean:.0f} tokens)."
        )
    config = rep.run_config(sim, policy=rep.policy, wall_s=wall, seed=wl.seed, workload=wl.describe())
    res = build_result(sim, req.send_s if req.send_s is not None else np.zeros(0), config)
    res.config["starvation"] = starvation(
        eng, rep.policy.prefill_first, req.prompt, req.output, rep.kv_tokens, res.summary["mean_batch"],
        res.timeline_columns(), wl.concurrency,
    )  # fmt: skip
    if req.mix is not None and req.klass is not None:  # a mix: each request's class (workload.mix)
        res.requests["class"] = np.asarray(req.mix.names, dtype=object)[req.klass[: len(res.requests)]]
        res.config["mix"] = req.mix
    if wl.concurrency is not None:  # closed loop: do identical clients stay in lock-step? (metrics.lockstep_share)
        r = res.requests
        share = lockstep_share(r["arrival_s"].to_numpy(), r["first_token_s"].to_numpy(), int(wl.concurrency))
        res.config["lockstep_share"] = share
        res.config["lockstep"] = bool(share > LOCKSTEP_SHARE)
    return res
