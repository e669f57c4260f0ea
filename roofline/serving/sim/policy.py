"""Scheduler semantics per engine (``EngineConfig.scheduler``), each setting cited.

A :class:`Policy` is derived data: :func:`policy_for` reads it off one :class:`EngineConfig`. What follows
from the scheduler's name (prefill-first batching, full reservation) is in :data:`SCHEDULERS`; the settings
users may change (``prefix_caching``, ``async_scheduling``, ``mixed_chunk``) are EngineConfig fields, set by
each preset with its source (:mod:`roofline.engine.presets`) and overridden in the engine's one namespace
(``engine_overrides`` / ``--engine-set``, :meth:`EngineConfig.with_overrides`).

* ``vllm_v1`` — vLLM V1 ``Scheduler.schedule`` (v0.11 ``vllm/v1/core/sched/scheduler.py``): one token
  budget per step; running requests first in admission order (decodes take one token each, a partial
  prefill the rest of the budget); when KV blocks run out the newest running request is preempted
  and later recomputed; then waiting requests FCFS until ``max_num_seqs``, the budget or the KV
  blocks run out. Prefix caching on by default (``--enable-prefix-caching``, V1 default), hash per
  full block. Asynchronous scheduling off by default in 0.11 (``--async-scheduling``); on by default from
  v0.14 (release notes: "Async scheduling is now enabled by default", #27614): pass
  ``engine_overrides={"async_scheduling": True}`` for those versions.
* ``sglang`` — SGLang v0.5 ``Scheduler.get_next_batch_to_run``: prefill-first: when a new prefill
  batch can be formed it runs alone (decodes wait), else one decode step of all running requests;
  ``--enable-mixed-chunk`` (default off) adds the decodes to the prefill batch. Radix prefix cache
  on by default; decode OOM retracts the newest request (recomputed later). The overlap scheduler is
  on (``--disable-overlap-schedule`` default False, ``ServerArgs.disable_overlap_schedule``).
* ``trtllm_inflight`` — TensorRT-LLM 1.0 in-flight batching with the ``GUARANTEED_NO_EVICT`` capacity
  scheduler (default ``CapacitySchedulerPolicy``): a request is admitted only if blocks for its
  prompt + max output fit, so nothing is ever evicted; KV block reuse on (``enable_block_reuse``
  default True); the PyTorch backend's overlap scheduler on (``TorchLlmArgs.disable_overlap_scheduler``
  default False).
* ``ideal`` — the vLLM V1 policy with the ideal engine's limits.
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline.engine.config import EngineConfig
from roofline.errors import ScenarioError


@dataclass(frozen=True)
class Policy:
    """How one engine forms batches (see the module docstring)."""

    name: str
    prefill_first: bool = False
    mixed_chunk: bool = True
    reserve_full: bool = False
    prefix_caching: bool = True
    async_scheduling: bool = False
    source: str = ""


@dataclass(frozen=True)
class SchedulerRules:
    """What follows from a scheduler's name: prefill-first batching, full KV reservation, and the source."""

    prefill_first: bool = False
    reserve_full: bool = False
    source: str = ""


SCHEDULERS = {
    "vllm_v1": SchedulerRules(source="vLLM v0.11 vllm/v1/core/sched/scheduler.py; engine args docs v0.11"),
    "ideal": SchedulerRules(source="ideal engine: the vLLM V1 policy"),
    "sglang": SchedulerRules(
        prefill_first=True,
        source="SGLang v0.5 python/sglang/srt/managers/scheduler.py get_next_batch_to_run; --enable-mixed-chunk "
        "default False, --disable-overlap-schedule default False (server arguments docs)",
    ),
    "trtllm_inflight": SchedulerRules(
        reserve_full=True,
        source="TensorRT-LLM 1.0 LLM API: SchedulerConfig.capacity_scheduler_policy default GUARANTEED_NO_EVICT; "
        "KvCacheConfig.enable_block_reuse default True; TorchLlmArgs.disable_overlap_scheduler default False",
    ),
}


def policy_for(engine: EngineConfig) -> Policy:
    """The scheduler policy of ``engine``: prefill_first / reserve_full from its scheduler's name
    (:data:`SCHEDULERS`), mixed_chunk / prefix_caching / async_scheduling from its fields. mixed_chunk=False
    is refused where the scheduler always mixes (every one but the prefill-first ``sglang``)."""
    rules = SCHEDULERS[engine.scheduler]
    if not (rules.prefill_first or engine.mixed_chunk):
        raise ScenarioError(
            f"engine option mixed_chunk=false applies to prefill-first schedulers (sglang, --enable-mixed-chunk); "
            f"{engine.label} ({engine.scheduler}) always runs the decodes in the step of a prefill chunk: drop it or "
            f"use engine sglang"
        )
    return Policy(
        engine.scheduler,
        prefill_first=rules.prefill_first,
        mixed_chunk=engine.mixed_chunk,
        reserve_full=rules.reserve_full,
        prefix_caching=engine.prefix_caching,
        async_scheduling=engine.async_scheduling,
        source=rules.source,
    )
