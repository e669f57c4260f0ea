"""One engine replica ready to simulate: specs and engine resolved, KV pool sized, step model compiled.

:func:`replica` is the one deployment builder: the plain, speculative and disaggregated simulations and the
planner's finalists all build their replicas here. Memory comes from :func:`roofline.memory.memory_budget`
(the engine's KV budget), step times from the compiled cost model (:mod:`roofline.serving.sim.steptime`),
batching from the engine's scheduler policy (:mod:`roofline.serving.sim.policy`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from roofline.advice import no_fit_reason
from roofline.engine.config import EngineConfig, check_engine_options, latency_basis
from roofline.engine.presets import EngineArg, overrides_map, resolve_engine
from roofline.errors import NoFitError, ScenarioError
from roofline.memory import kv_bytes_per_sequence_per_gpu, memory_budget
from roofline.pipeline import pipeline_lanes
from roofline.prediction import HardwareArg, ModelArg, ProfileArg, resolve
from roofline.profile import CalibrationProfile
from roofline.provenance import scenario_evidence
from roofline.serving.sim.engine import EngineSim
from roofline.serving.sim.policy import Policy, policy_for
from roofline.serving.sim.ranks import DPStepModel, ranked_step
from roofline.serving.sim.steptime import StepModel
from roofline.serving.workload.trace import HashChain
from roofline.specs.disagg import Pool
from roofline.specs.hardware import HardwareSpec
from roofline.specs.model import ModelSpec
from roofline.specs.precision import Precision
from roofline.specs.scenario import Scenario, make_scenario


@dataclass(frozen=True)
class Replica:
    """One engine replica ready to simulate: specs, profile, engine, policy, compiled step model, KV pool size."""

    model: ModelSpec
    hardware: HardwareSpec
    profile: CalibrationProfile
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
        _check_requests(
            self.model.max_position_embeddings,
            prompt,
            output,
            e.kv_block_tokens,
            self.kv_blocks,
            budget or e.max_num_batched_tokens,
            e.chunked_prefill,
            self.model.name,
        )

    def engine_sim(
        self,
        prompt: np.ndarray,
        output: np.ndarray,
        send: np.ndarray | None,
        *,
        concurrency: int | None = None,
        hashes: list[HashChain] | None = None,
        cls: type[EngineSim] = EngineSim,
        step: Any = None,  # a StepModel, or the speculative variant's duck-typed SpecStepModel
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
        sm = self.step if step is None else step
        ranks = int(getattr(sm, "ranks", 1))  # batches a step runs at once, each with its own budget (sim.ranks)
        common = dict(
            prompt=prompt,
            output=output,
            hashes=hashes,
            send_s=send,
            concurrency=concurrency,
            request_overhead_s=y,
            output_lag_steps=e.output_lag_steps if lag_steps is None else lag_steps,
            entry_extra_s=jitter,
            saturation_queue=max(2000, 2 * rows),
            **extra,
        )
        if isinstance(sm, DPStepModel) and e.dp_load_balance != "pooled" and cls.plain_rows:
            from roofline.serving.sim.dpranks import DPReplicaSim  # each rank its own scheduler and KV pool

            return DPReplicaSim(
                sm,
                self.policy if policy is None else policy,
                balance=e.dp_load_balance,
                engine_cls=cls,
                block_tokens=e.kv_block_tokens,
                total_blocks=self.kv_blocks // ranks,
                max_tokens=e.max_num_batched_tokens,
                max_seqs=rows,
                chunked=e.chunked_prefill,
                max_partial=e.max_partial_prefills,
                max_chunk=e.max_num_batched_tokens,
                **common,
            )
        return cls(
            sm,
            self.policy if policy is None else policy,
            block_tokens=e.kv_block_tokens,
            total_blocks=self.kv_blocks,
            max_tokens=e.max_num_batched_tokens * ranks,
            max_seqs=rows * (ranks if getattr(sm, "own_pools", False) else 1),
            chunked=e.chunked_prefill,
            max_partial=e.max_partial_prefills * ranks,
            max_chunk=e.max_num_batched_tokens,
            **common,
        )

    def run_config(self, sim: EngineSim, *, policy: Policy, wall_s: float, seed: int, workload: str) -> dict[str, Any]:
        """The ``config`` record of a finished run (what ran, how the pool was sized, token counts)."""
        m, hw, e, sc = self.model, self.hardware, self.engine, self.scenario
        tp = sc.tp
        par = f"tp={tp}" + (f" pp={sc.pp}" if sc.pp > 1 else "") + (f" ep={sc.ep}" if sc.ep > 1 else "")
        par += f" dp={sc.dp}" if sc.dp > 1 else ""
        return {
            "label": f"{m.name} on {hw.name} {par}, {e.label}",
            "model": m.name,
            "hardware": hw.name,
            "tp": tp,
            "engine": e.label,
            "policy": policy,
            "kv_blocks": self.kv_blocks,
            "kv_block_tokens": e.kv_block_tokens,
            "kv_budget_bytes": self.kv_budget_bytes,
            "max_num_seqs": sim.max_seqs,
            "max_num_batched_tokens": sim.max_tokens,
            "weight_dtype": sc.weight_label(self.model),
            "kv_dtype": sc.kv_dtype.value,
            "wall_s": wall_s,
            "seed": seed,
            "decode_tokens": sim.decode_tokens,
            "prefill_tokens": sim.prefill_tokens,
            "prefill_completions": sim.prefill_completions,
            "kv_blocks_used_at_end": sim.pool.used,
            "generated_tokens": sim.generated,
            "workload": workload,
            "evidence": self.evidence,
            "latency_basis": latency_basis(e),
        }

    @property
    def evidence(self) -> tuple[str, ...]:
        """Which measured evidence this replica's step times rest on (:func:`roofline.provenance.scenario_evidence`)."""
        return scenario_evidence(self.profile, self.hardware, self.model, self.scenario)


@dataclass(frozen=True)
class Deployment:
    """What a replica is built from (typed): model, hardware, engine with its overrides, tp/pp/ep, formats and
    calibration. :meth:`replica` builds it for a workload's mean lengths; :meth:`pool` the same deployment on a
    disaggregated pool's hardware, tp and ep with that pool's own engine overrides on top."""

    model: ModelArg
    hardware: HardwareArg | None
    engine: EngineArg = "vllm"
    tp: int = 1
    pp: int = 1
    ep: int = 1
    engine_overrides: Mapping[str, object] | None = None
    weight_dtype: str | Precision | None = None
    kv_dtype: str | Precision | None = None
    calibration: ProfileArg = None
    dp: int = 1
    redundant_experts: int = 0
    moe_overlap: str = "none"

    def replica(self, prompt_mean: float, output_mean: float) -> Replica:
        """The replica of this deployment for requests of these mean lengths (tokens)."""
        if self.hardware is None:
            raise ScenarioError("hardware is missing: name a GPU (e.g. 'h100-sxm'), or give disagg= pools")
        return replica(
            self.model,
            self.hardware,
            self.engine,
            self.tp,
            pp=self.pp,
            ep=self.ep,
            engine_overrides=self.engine_overrides,
            weight_dtype=self.weight_dtype,
            kv_dtype=self.kv_dtype,
            calibration=self.calibration,
            prompt_mean=prompt_mean,
            output_mean=output_mean,
            dp=self.dp,
            redundant_experts=self.redundant_experts,
            moe_overlap=self.moe_overlap,
        )

    def pool(self, p: Pool, overrides: Mapping[str, object] | None, field: str) -> Deployment:
        """This deployment on a disaggregated pool's hardware, tp, dp and ep, its engine overrides ∪ the pool's
        ``overrides`` (named ``field`` in errors)."""
        merged = overrides_map(self.engine_overrides) | overrides_map(overrides, field)
        return replace(self, hardware=p.hardware, tp=p.tp, pp=1, ep=p.ep, dp=p.dp, engine_overrides=merged)


def replica(
    model: ModelArg,
    hardware: HardwareArg,
    engine: EngineArg = "vllm",
    tp: int = 1,
    *,
    pp: int = 1,
    ep: int = 1,
    engine_overrides: Mapping[str, object] | None = None,
    weight_dtype: str | Precision | None = None,
    kv_dtype: str | Precision | None = None,
    calibration: ProfileArg = None,
    prompt_mean: float = 1024.0,
    output_mean: float = 256.0,
    dp: int = 1,
    redundant_experts: int = 0,
    moe_overlap: str = "none",
) -> Replica:
    """Resolve specs, engine and policy; size the KV pool with :func:`memory_budget`; compile the step model.

    ``engine_overrides`` set any EngineConfig option (the scheduler settings included); the policy is derived
    from the engine (:func:`roofline.serving.sim.policy.policy_for`).

    KV blocks = floor(KV budget / (KV bytes per token per GPU × block tokens)); KV bytes per token are
    taken at the workload's mean context (exact for full attention; sliding-window layers hold min(L, W)).
    """
    m, hw, prof = resolve(model, hardware, calibration, engine)
    overrides = overrides_map(engine_overrides)
    check_engine_options(overrides, "simulate")
    eng = resolve_engine(engine, hw, overrides)
    policy = policy_for(eng)
    kd = kv_dtype or (m.native_dtype if m.native_dtype in ("bf16", "fp16") else "bf16")
    sc = make_scenario(
        hw,
        1,
        max(1, round(prompt_mean)),
        max(1, round(output_mean)),
        tp=tp,
        pp=pp,
        ep=ep,
        weight_dtype=weight_dtype or "checkpoint",
        kv_dtype=kd,
        engine=eng,
        dp=dp,
        redundant_experts=redundant_experts,
        moe_overlap=moe_overlap,
    )
    sc.validate_for(m, hw)
    bs = eng.kv_block_tokens
    budget = float(memory_budget(m, hw, sc).kv_budget_bytes)
    ref_ctx = bs * math.ceil((sc.prompt_len + sc.output_len) / bs)
    per_block = float(kv_bytes_per_sequence_per_gpu(m, sc, ref_ctx)) / ref_ctx * bs
    total_blocks = (int(budget // per_block) if budget > 0 else 0) * sc.dp  # attention DP: each rank its own pool
    if total_blocks < 1:
        raise NoFitError(f"{m.name} on {hw.name} with {eng.label}: {no_fit_reason(m, hw, sc)}")
    max_seqs = min(eng.max_num_seqs, eng.max_num_batched_tokens)
    step = compiled_step(m, sc, hw, prof, eng, eng.max_num_batched_tokens, max_seqs, eng.async_scheduling)
    return Replica(m, hw, prof, eng, policy, sc, step, total_blocks, budget)


_CACHE: dict[str, StepModel] = {}


def compiled_step(
    m: ModelSpec,
    sc: Scenario,
    hw: HardwareSpec,
    prof: CalibrationProfile,
    eng: EngineConfig,
    max_tokens: int,
    max_seqs: int,
    async_cpu: bool,
) -> StepModel:
    """The step model of this configuration (at most ``max_tokens`` tokens and ``max_seqs`` rows a step),
    compiled once per process (a few recent ones are kept)."""
    key = "|".join(
        (
            m.model_dump_json(),
            hw.model_dump_json(),
            prof.model_dump_json(),
            repr(sc.with_shape(prompt_len=1, output_len=1)),
            str(max_tokens),
            str(max_seqs),
            str(eng.step_overhead_s),
            str(async_cpu),
        )
    )
    if key not in _CACHE:
        if len(_CACHE) >= 8:
            _CACHE.pop(next(iter(_CACHE)))
        args = (m, sc, hw, prof, max_tokens, max_seqs, eng.step_overhead_s, async_cpu)
        _CACHE[key] = ranked_step(*args, pipeline_lanes(sc))  # lanes / DP ranks: each step at its busiest batch
    return _CACHE[key]


def _check_requests(
    max_pos: int | None,
    prompt: np.ndarray,
    output: np.ndarray,
    bs: int,
    blocks: int,
    budget: int,
    chunked: bool,
    name: str,
) -> None:
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
