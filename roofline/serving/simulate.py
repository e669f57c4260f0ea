"""``roofline.simulate``: serve a request stream on one engine replica and measure it.

    s = roofline.simulate("llama-3.1-8b", "h100-sxm", engine="vllm", qps=10.0,
                          prompt_len=1024, output_len=256, num_requests=2000, seed=0)
    s.summary["ttft_p99_s"], s.requests, s.timeline, s.plot()

Workload: exactly one of ``qps`` (open loop; ``arrival`` poisson | gamma (with ``arrival_cv``) |
constant), ``concurrency`` (closed loop: each of C clients sends its next request when the
previous one finishes) or ``trace`` (JSONL replay, see :mod:`roofline.serving.workload.trace`). Lengths:
see :mod:`roofline.serving.workload.arrivals`. ``prefix_share`` ∈ [0, 1]: the first
round(share × mean prompt) tokens of every prompt are one common system prompt (prefix caching
then skips them after the first request).

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

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from roofline.boundary.limits import MAX_SIM_REQUESTS
from roofline.engine.config import EngineConfig
from roofline.engine.presets import EngineArg, overrides_map, resolve_engine
from roofline.errors import ScenarioError
from roofline.memory import kv_bytes_per_sequence_per_gpu, memory_budget, no_fit_reason
from roofline.prediction import HardwareArg, ModelArg, ProfileArg, resolve
from roofline.profile import CalibrationProfile
from roofline.serving.plan.screening import screen
from roofline.serving.sim.engine import EngineSim
from roofline.serving.sim.metrics import lockstep_share
from roofline.serving.sim.policy import Policy, policy_for, split_overrides
from roofline.serving.sim.result import SimulationResult, build_result
from roofline.serving.sim.steptime import StepModel
from roofline.serving.workload.arrivals import arrival_times, parse_length
from roofline.serving.workload.trace import block_hashes, load_trace
from roofline.specs.hardware import HardwareSpec
from roofline.specs.model import ModelSpec
from roofline.specs.precision import Precision
from roofline.specs.scenario import Scenario, weight_dtype_fields

#: ``config["lockstep"]`` when more than this share of a closed loop's later requests came in a half-population cohort.
LOCKSTEP_SHARE = 0.5


def simulate(
    model: ModelArg,
    hardware: HardwareArg,
    engine: EngineArg = "vllm",
    tp: int = 1,
    *,
    qps: float | None = None,
    concurrency: int | None = None,
    trace: str | Path | None = None,
    prompt_len: Any = 1024,
    output_len: Any = 256,
    num_requests: int = 2000,
    seed: int = 0,
    arrival: str = "poisson",
    arrival_cv: float = 1.0,
    prefix_share: float = 0.0,
    engine_overrides: Mapping[str, Any] | None = None,
    weight_dtype: str | Precision | None = None,
    kv_dtype: str | Precision | None = None,
    pp: int = 1,
    ep: int = 1,
    calibration: ProfileArg = None,
    trace_block_tokens: int = 512,
    progress: Callable[[int, int], None] | None = None,
    replicas: int = 1,
) -> SimulationResult:
    """Simulate serving ``num_requests`` requests (see the module docstring); deterministic given ``seed``.

    ``weight_dtype``/``kv_dtype`` None: the checkpoint's own format (KV in bf16 unless the checkpoint
    is fp16). ``engine_overrides`` takes EngineConfig fields and scheduler settings
    (``prefix_caching``, ``async_scheduling``, ``mixed_chunk``) under their engine option names.
    """
    if isinstance(replicas, bool) or not isinstance(replicas, int) or not 1 <= replicas <= 64:
        raise ScenarioError(f"replicas must be a whole number from 1 to 64 (got {replicas!r})")
    if replicas > 1:  # seeded replicas for the workload-randomness part of the intervals; compiled model reused
        kw = dict(qps=qps, concurrency=concurrency, trace=trace, prompt_len=prompt_len, output_len=output_len,
                  num_requests=num_requests, arrival=arrival, arrival_cv=arrival_cv, prefix_share=prefix_share,
                  engine_overrides=engine_overrides, weight_dtype=weight_dtype, kv_dtype=kv_dtype, pp=pp, ep=ep,
                  calibration=calibration, trace_block_tokens=trace_block_tokens)  # fmt: skip
        first = simulate(model, hardware, engine, tp, seed=seed, progress=progress, **kw)
        others = [simulate(model, hardware, engine, tp, seed=seed + i, **kw).summary for i in range(1, replicas)]
        first.config["replica_summaries"] = [first.summary, *others]
        return first
    rng = np.random.default_rng(seed)
    send, prompt, output, hashes = _workload(
        qps, concurrency, trace, prompt_len, output_len, num_requests, arrival, arrival_cv, rng, trace_block_tokens
    )
    rep = replica(
        model, hardware, engine, tp, pp=pp, ep=ep, engine_overrides=engine_overrides, weight_dtype=weight_dtype,
        kv_dtype=kv_dtype, calibration=calibration, prompt_mean=float(prompt.mean()), output_mean=float(output.mean()),
    )  # fmt: skip
    eng, step, bs = rep.engine, rep.step, rep.engine.kv_block_tokens
    rep.check_requests(prompt, output)
    if hashes is not None:
        hashes = [block_hashes(e, int(p), bs, trace_block_tokens) for e, p in zip(hashes, prompt, strict=True)]
    elif prefix_share > 0:
        hashes = _shared_prefix(prefix_share, prompt, bs)
    sim = rep.engine_sim(prompt, output, send, concurrency=concurrency, hashes=hashes, overhead_seed=seed)
    t0 = time.perf_counter()
    sim.run(None if progress is None else (lambda done: progress(done, len(prompt))))
    wall = time.perf_counter() - t0
    if sim.saturated:
        p_mean, o_mean = float(prompt.mean()), float(output.mean())
        sus = screen(step, np.array([1.0]), p_mean, o_mean, eng.max_num_batched_tokens, step.max_rows, rep.kv_tokens)
        sim.saturated += (
            f" The closed-form screening tier puts this configuration's sustainable rate at "
            f"{sus.sustainable_qps:.3g} requests/s for the mean request ({p_mean:.0f} + {o_mean:.0f} tokens)."
        )
    workload = _describe(qps, concurrency, trace, prompt_len, output_len, arrival, arrival_cv, prefix_share)
    config = rep.run_config(sim, tp=tp, policy=rep.policy, max_seqs=step.max_rows, wall_s=wall, seed=seed,
                            workload=workload)  # fmt: skip
    res = build_result(sim, send if send is not None else np.zeros(0), config)
    if concurrency is not None:  # closed loop: do identical clients stay in lock-step? (metrics.lockstep_share)
        r = res.requests
        share = lockstep_share(r["arrival_s"].to_numpy(), r["first_token_s"].to_numpy(), int(concurrency))
        res.config["lockstep_share"] = share
        res.config["lockstep"] = bool(share > LOCKSTEP_SHARE)
    return res


@dataclass(frozen=True)
class Replica:
    """One engine replica ready to simulate: specs, engine, policy, compiled step model, KV pool size."""

    model: ModelSpec
    hardware: HardwareSpec
    engine: EngineConfig
    policy: Policy
    scenario: Scenario
    step: StepModel
    kv_blocks: int
    kv_budget_bytes: float

    @property
    def kv_tokens(self) -> int:
        """Tokens the KV pool holds."""
        return self.kv_blocks * self.engine.kv_block_tokens

    def check_requests(self, prompt: np.ndarray, output: np.ndarray, budget: int | None = None) -> None:
        """Raise ScenarioError for a request this replica can never serve (context, KV pool, unchunked prompt)."""
        e = self.engine
        _check_requests(self.model.max_position_embeddings, prompt, output, e.kv_block_tokens, self.kv_blocks,
                        budget or e.max_num_batched_tokens, e.chunked_prefill, self.model.name)  # fmt: skip

    def engine_sim(
        self,
        prompt: np.ndarray,
        output: np.ndarray,
        send: np.ndarray | None,
        *,
        concurrency: int | None = None,
        hashes: list[tuple[Any, ...]] | None = None,
        cls: type[EngineSim] = EngineSim,
        step: Any = None,
        policy: Policy | None = None,
        max_seqs: int | None = None,
        request_overhead_s: float | None = None,
        lag_steps: float | None = None,
        overhead_seed: int = 0,
        **extra: Any,
    ) -> EngineSim:
        """The engine simulation of this replica for one request stream (``cls``/``step``/``policy``/
        ``max_seqs`` replace the replica's own for the speculative and disaggregated variants).

        Request overhead: mean y = ``request_overhead_s``; with ``request_overhead_cv`` = v > 0 each request's
        is drawn from a gamma distribution of mean y and coefficient of variation v (v = 1: exponential),
        seeded by ``overhead_seed`` apart from the workload's own draws; v = 0: exactly y for every request.
        Output lag: ``lag_steps`` (default: the engine's ``output_lag_steps``; see :mod:`roofline.serving.sim.engine`).
        """
        e = self.engine
        rows = self.step.max_rows if max_seqs is None else max_seqs
        y = e.request_overhead_s if request_overhead_s is None else request_overhead_s
        jitter = None
        if e.request_overhead_cv > 0 and y > 0:
            k = 1.0 / e.request_overhead_cv**2
            jitter = np.random.default_rng([overhead_seed, 1]).gamma(k, y / k, len(prompt)) - y
        return cls(
            self.step if step is None else step, self.policy if policy is None else policy,
            block_tokens=e.kv_block_tokens, total_blocks=self.kv_blocks, max_tokens=e.max_num_batched_tokens,
            max_seqs=rows, chunked=e.chunked_prefill, max_partial=e.max_partial_prefills, prompt=prompt,
            output=output, hashes=hashes, send_s=send, concurrency=concurrency,
            request_overhead_s=y, output_lag_steps=e.output_lag_steps if lag_steps is None else lag_steps,
            entry_extra_s=jitter, saturation_queue=max(2000, 2 * rows), **extra,
        )  # fmt: skip

    def run_config(
        self, sim: EngineSim, *, tp: int, policy: Policy, max_seqs: int, wall_s: float, seed: int, workload: str
    ) -> dict[str, Any]:
        """The ``config`` record of a finished run (what ran, how the pool was sized, token counts)."""
        m, hw, e, sc = self.model, self.hardware, self.engine, self.scenario
        return {
            "label": f"{m.name} on {hw.name} tp={tp}, {e.label}", "model": m.name, "hardware": hw.name, "tp": tp,
            "engine": e.label, "policy": policy, "kv_blocks": self.kv_blocks, "kv_block_tokens": e.kv_block_tokens,
            "kv_budget_bytes": self.kv_budget_bytes, "max_num_seqs": max_seqs,
            "max_num_batched_tokens": e.max_num_batched_tokens, "weight_dtype": sc.weight_dtype.value,
            "kv_dtype": sc.kv_dtype.value, "wall_s": wall_s, "seed": seed,
            "decode_tokens": sim.decode_tokens, "prefill_tokens": sim.prefill_tokens,
            "prefill_completions": sim.prefill_completions, "kv_blocks_used_at_end": sim.pool.used,
            "generated_tokens": sim.generated, "workload": workload,
        }  # fmt: skip


def replica(
    model: ModelArg,
    hardware: HardwareArg,
    engine: EngineArg = "vllm",
    tp: int = 1,
    *,
    pp: int = 1,
    ep: int = 1,
    engine_overrides: Mapping[str, Any] | None = None,
    weight_dtype: str | Precision | None = None,
    kv_dtype: str | Precision | None = None,
    calibration: ProfileArg = None,
    prompt_mean: float = 1024.0,
    output_mean: float = 256.0,
) -> Replica:
    """Resolve specs, engine and policy; size the KV pool with :func:`memory_budget`; compile the step model.

    KV blocks = floor(KV budget / (KV bytes per token per GPU × block tokens)); KV bytes per token are
    taken at the workload's mean context (exact for full attention; sliding-window layers hold min(L, W)).
    """
    m, hw, prof = resolve(model, hardware, calibration)
    eng_over, pol_over = split_overrides(overrides_map(engine_overrides))
    eng = resolve_engine(engine, hw, eng_over)
    policy = policy_for(eng.scheduler, pol_over)
    weights = weight_dtype_fields(weight_dtype)  # None or "checkpoint": the shipped checkpoint, as predict
    kd = Precision.parse(kv_dtype or (m.native_dtype if m.native_dtype in ("bf16", "fp16") else "bf16"), "kv_dtype")
    sc = Scenario(
        batch=1, prompt_len=max(1, round(prompt_mean)), output_len=max(1, round(output_mean)),
        kv_dtype=kd, tp=tp, pp=pp, ep=ep, engine=eng, **weights,
    )  # fmt: skip
    sc.validate_for(m, hw)
    bs = eng.kv_block_tokens
    budget = float(memory_budget(m, hw, sc).kv_budget_bytes)
    ref_ctx = bs * math.ceil((sc.prompt_len + sc.output_len) / bs)
    per_block = float(kv_bytes_per_sequence_per_gpu(m, sc, ref_ctx)) / ref_ctx * bs
    total_blocks = int(budget // per_block) if budget > 0 else 0
    if total_blocks < 1:
        raise ScenarioError(f"{m.name} on {hw.name} with {eng.label}: {no_fit_reason(m, hw, sc)}")
    max_seqs = min(eng.max_num_seqs, eng.max_num_batched_tokens)
    step = _compiled(m, sc, hw, prof, eng, max_seqs, policy.async_scheduling)
    return Replica(m, hw, eng, policy, sc, step, total_blocks, budget)


_CACHE: dict[str, StepModel] = {}


def _compiled(
    m: ModelSpec, sc: Scenario, hw: HardwareSpec, prof: CalibrationProfile, eng: EngineConfig, max_seqs: int,
    async_cpu: bool,
) -> StepModel:  # fmt: skip
    """The step model of this configuration, compiled once per process (a few recent ones are kept)."""
    key = "|".join(
        (
            m.model_dump_json(),
            hw.model_dump_json(),
            prof.model_dump_json(),
            repr(sc.with_shape(prompt_len=1, output_len=1)),
            str(max_seqs),
            str(async_cpu),
        )
    )
    if key not in _CACHE:
        if len(_CACHE) >= 8:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = StepModel(m, sc, hw, prof, eng.max_num_batched_tokens, max_seqs, eng.step_overhead_s, async_cpu)
    return _CACHE[key]


def _workload(
    qps: float | None, concurrency: int | None, trace: str | Path | None, prompt_len: Any, output_len: Any,
    n: int, arrival: str, cv: float, rng: np.random.Generator, trace_block_tokens: int,
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray, list[tuple[Any, ...]] | None]:  # fmt: skip
    """(send times or None for closed loop, prompt tokens, output tokens, per-request hash chains).

    Exactly one of ``qps`` (open loop), ``concurrency`` (closed loop) or ``trace`` (replay) is given.
    """
    if sum(x is not None for x in (qps, concurrency, trace)) != 1:
        raise ScenarioError("give exactly one of qps= (open loop), concurrency= (closed loop) or trace= (replay)")
    if trace is not None:
        tr = load_trace(trace, trace_block_tokens)
        return tr.arrival_s, tr.prompt_tokens, tr.output_tokens, tr.hashes
    if not isinstance(n, int | np.integer) or isinstance(n, bool) or n < 1:
        raise ScenarioError(f"num_requests must be a whole number >= 1 (got {n!r})")
    if n > MAX_SIM_REQUESTS:
        raise ScenarioError(
            f"num_requests={n:,} exceeds {MAX_SIM_REQUESTS:,} (roofline.boundary.limits MAX_SIM_REQUESTS); "
            "percentiles settle long before that: simulate fewer requests"
        )
    pl, ol = parse_length(prompt_len, "prompt_len"), parse_length(output_len, "output_len")
    send = None
    if qps is not None:
        send = arrival_times(n, float(qps), arrival, cv, rng)
    elif concurrency is None or isinstance(concurrency, bool) or int(concurrency) != concurrency or concurrency < 1:
        raise ScenarioError(f"concurrency must be a whole number >= 1 (got {concurrency!r})")
    return send, pl.sample(n, rng), ol.sample(n, rng), None


def _shared_prefix(share: float, prompt: np.ndarray, bs: int) -> list[tuple[Any, ...]]:
    """Hash chains where the first round(share × mean prompt) tokens are common to every request."""
    if not 0 <= share <= 1:
        raise ScenarioError(f"prefix_share must be between 0 and 1 (got {share})")
    s = round(share * float(prompt.mean()))
    common = tuple(("sys", b) for b in range(s // bs))
    return [common[: min(len(common), int(p) // bs)] for p in prompt]


def _check_requests(
    max_pos: int | None, prompt: np.ndarray, output: np.ndarray, bs: int, blocks: int, budget: int, chunked: bool,
    name: str,
) -> None:  # fmt: skip
    ctx = prompt + output
    if max_pos is not None and np.any(ctx > max_pos):
        i = int(np.argmax(ctx > max_pos))
        raise ScenarioError(
            f"request {i} needs {int(prompt[i])} prompt + {int(output[i])} output tokens = {int(ctx[i])}, beyond the "
            f"{max_pos}-token context of {name}; shorten prompt_len/output_len"
        )
    need = -(-ctx // bs)
    if np.any(need > blocks):
        i = int(np.argmax(need > blocks))
        raise ScenarioError(
            f"request {i} ({int(ctx[i])} tokens) needs {int(need[i])} KV blocks but the engine's whole KV pool holds "
            f"{blocks} ({blocks * bs} tokens): it can never finish; raise gpu_memory_utilization, tp, or shorten it"
        )
    if not chunked and np.any(prompt > budget):
        i = int(np.argmax(prompt > budget))
        raise ScenarioError(
            f"request {i} has a {int(prompt[i])}-token prompt but chunked prefill is off and one step takes at most "
            f"max_num_batched_tokens={budget}; enable chunked_prefill or raise max_num_batched_tokens"
        )


def _describe(
    qps: float | None, conc: int | None, trace: Any, pl: Any, ol: Any, arrival: str, cv: float, share: float
) -> str:
    if trace is not None:
        return f"trace {trace}"
    p, o = parse_length(pl, "prompt_len").describe(), parse_length(ol, "output_len").describe()
    load = f"{arrival} arrivals at {qps:g} req/s" if qps is not None else f"closed loop, concurrency {conc}"
    if arrival == "gamma" and qps is not None:
        load += f" (CV {cv:g})"
    extra = f", shared prefix {share:.0%}" if share else ""
    return f"{load}; prompt {p}, output {o} tokens{extra}"
