"""Scheduler semantics per engine (``EngineConfig.scheduler``), each setting cited.

The memory fields (block size, token budget, sequence cap) live in the EngineConfig; this module
holds how an engine forms its batches. Settings a user may change are passed through
``engine_overrides`` under the names in :data:`SETTABLE`.

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

from dataclasses import dataclass, replace
from typing import Any

from roofline.errors import ScenarioError

#: Scheduler settings users may set through ``engine_overrides`` (engine option names accepted).
SETTABLE = {
    "prefix_caching": "prefix_caching",
    "enable_prefix_caching": "prefix_caching",
    "enable_block_reuse": "prefix_caching",
    "async_scheduling": "async_scheduling",
    "mixed_chunk": "mixed_chunk",
    "enable_mixed_chunk": "mixed_chunk",
}


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


POLICIES = {
    "vllm_v1": Policy("vllm_v1", source="vLLM v0.11 vllm/v1/core/sched/scheduler.py; engine args docs v0.11"),
    "ideal": Policy("ideal", source="ideal engine: the vLLM V1 policy"),
    "sglang": Policy(
        "sglang", prefill_first=True, mixed_chunk=False, async_scheduling=True,
        source="SGLang v0.5 python/sglang/srt/managers/scheduler.py get_next_batch_to_run; --enable-mixed-chunk "
        "default False, --disable-overlap-schedule default False (server arguments docs)",
    ),
    "trtllm_inflight": Policy(
        "trtllm_inflight", reserve_full=True, async_scheduling=True,
        source="TensorRT-LLM 1.0 LLM API: SchedulerConfig.capacity_scheduler_policy default GUARANTEED_NO_EVICT; "
        "KvCacheConfig.enable_block_reuse default True; TorchLlmArgs.disable_overlap_scheduler default False",
    ),
}  # fmt: skip


def split_overrides(overrides: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(engine-config overrides, scheduler-policy overrides) from one user dict."""
    eng, pol = {}, {}
    for k, v in (overrides or {}).items():
        if k in SETTABLE:
            if not isinstance(v, bool):
                if isinstance(v, str) and v.lower() in ("true", "false", "1", "0", "on", "off"):
                    v = v.lower() in ("true", "1", "on")
                else:
                    raise ScenarioError(f"engine option {k} must be true or false (got {v!r})")
            pol[SETTABLE[k]] = v
        else:
            eng[k] = v
    return eng, pol


def policy_for(scheduler: str, overrides: dict[str, Any] | None = None) -> Policy:
    """The policy of ``scheduler`` with user settings applied."""
    return replace(POLICIES[scheduler], **(overrides or {}))
