"""EngineConfig: the memory and batching semantics of one serving engine, as data.

Every entry point (``predict``, ``sweep``, ``max_batch``, ``plan``, the report, the CLI and the
serving simulator) takes an engine and computes memory through
:func:`roofline.memory.memory_budget`, so a given engine is modelled the same way everywhere.

KV budget per GPU, by ``memory_fraction_of`` (C capacity seen by software, f the fraction,
W weights, A activation peak of one step of ``max_num_batched_tokens`` tokens, R runtime reserve):

* ``"total"`` (vLLM ``gpu_memory_utilization``):          KV = f·C − W − A − R
* ``"static_pool"`` (SGLang ``mem_fraction_static``):     KV = f·C − W, and A + R must fit in (1 − f)·C
* ``"free_after_load"`` (TensorRT-LLM ``free_gpu_memory_fraction``): KV = f·(C − W − A − R)

The activation peak depends on the engine's per-step token budget, never on the batch a user
asks for: engines size it once at start-up (vLLM's profile run, TensorRT-LLM's ``max_num_tokens``).
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from roofline.errors import ScenarioError

MemoryFractionOf = Literal["total", "static_pool", "free_after_load"]
SchedulerPolicy = Literal["vllm_v1", "sglang", "trtllm_inflight", "ideal"]

#: Fields a user may override (``engine_overrides={...}`` / ``--engine-set name=value``).
OVERRIDABLE = (
    "memory_fraction",
    "kv_block_tokens",
    "max_num_seqs",
    "max_num_batched_tokens",
    "chunked_prefill",
    "cuda_graphs",
    "runtime_reserve_bytes",
    "reserve_bytes",
    "capacity_bytes",
    "max_partial_prefills",
    "step_overhead_s",
    "request_overhead_s",
    "request_overhead_cv",
    "output_lag_steps",
)

#: Names users of the engines know, accepted as aliases of the fields above.
ALIASES = {
    "gpu_memory_utilization": "memory_fraction",
    "mem_fraction_static": "memory_fraction",
    "free_gpu_memory_fraction": "memory_fraction",
    "block_size": "kv_block_tokens",
    "page_size": "kv_block_tokens",
    "tokens_per_block": "kv_block_tokens",
    "max_running_requests": "max_num_seqs",
    "max_batch_size": "max_num_seqs",
    "max_num_tokens": "max_num_batched_tokens",
    "chunked_prefill_size": "max_num_batched_tokens",
    "enable_chunked_prefill": "chunked_prefill",
    "max_num_partial_prefills": "max_partial_prefills",
}


class EngineConfig(BaseModel):
    """One serving engine (name and version) with its memory and scheduler semantics.

    Units: bytes, seconds, tokens. ``sources`` maps each field to where its value comes from
    (documentation or source at a named version, or ``assumed: …`` with what it moves).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    version: str
    scheduler: SchedulerPolicy
    memory_fraction: float = Field(gt=0, le=1)
    memory_fraction_of: MemoryFractionOf
    kv_block_tokens: int = Field(ge=1, le=4096)
    max_num_seqs: int = Field(ge=1, le=1_000_000)
    max_num_batched_tokens: int = Field(ge=1, le=10_000_000)
    chunked_prefill: bool
    max_partial_prefills: int = Field(default=1, ge=1, le=1024)
    cuda_graphs: bool = True
    runtime_reserve_bytes: float = Field(ge=0)
    reserve_bytes: float | None = Field(default=None, ge=0)
    capacity_bytes: float | None = Field(default=None, gt=0)
    step_overhead_s: float = Field(default=0.0, ge=0)
    request_overhead_s: float = Field(default=0.0, ge=0)
    request_overhead_cv: float = Field(default=0.0, ge=0, le=10)
    output_lag_steps: float = Field(default=0.0, ge=0, le=1000)
    sources: dict[str, str] = Field(default_factory=dict)

    @field_validator(
        "memory_fraction",
        "runtime_reserve_bytes",
        "step_overhead_s",
        "request_overhead_s",
        "request_overhead_cv",
        "output_lag_steps",
    )
    @classmethod
    def _finite(cls, v: float) -> float:
        if v != v or v in (float("inf"), float("-inf")):
            raise ValueError("must be a finite number")
        return v

    @property
    def label(self) -> str:
        """``vllm 0.11`` style label for tables and reports."""
        return f"{self.name} {self.version}"

    def with_overrides(self, overrides: dict[str, Any] | None) -> EngineConfig:
        """Copy with user overrides (engine option names accepted as aliases), validated."""
        if not overrides:
            return self
        update: dict[str, Any] = {}
        for key, value in overrides.items():
            field = ALIASES.get(key, key)
            if field not in OVERRIDABLE:
                known = ", ".join(sorted({*OVERRIDABLE, *ALIASES}))
                raise ScenarioError(f"engine option {key!r} is not known; settable options: {known}")
            update[field] = value
        sources = dict(self.sources)
        for field in update:
            sources[field] = "user override"
        data = {**self.model_dump(), **update, "sources": sources}
        try:
            return EngineConfig.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(x) for x in err["loc"])
            raise ScenarioError(f"engine option {loc}: {err['msg']} (got {err.get('input')!r})") from None


Seconds = TypeVar("Seconds", float, np.ndarray)


def step_seconds(gpu_s: Seconds, cpu_s: float, overlapped: bool) -> Seconds:
    """Seconds of one engine step from its GPU part and the engine's per-step CPU part (``step_overhead_s``).

    Overlapped (asynchronous / overlap scheduling: the CPU forms step k + 1's batch while step k runs on the
    GPU): max(GPU, CPU); otherwise GPU + CPU. The one home of this rule: the static model, the compiled step
    model, its decode stretches and the screening tier all call it. Scalars or numpy arrays of seconds.
    """
    if not overlapped:
        return gpu_s + cpu_s
    if isinstance(gpu_s, np.ndarray):
        return np.maximum(gpu_s, cpu_s)
    return gpu_s if gpu_s > cpu_s else cpu_s


def output_lag_s(lag_steps: float, interval_s: Seconds) -> Seconds:
    """Seconds by which every token of a request reaches the client late (the engine's ``output_lag_steps``):
    k = ``lag_steps`` of the request's own inter-token intervals, ``interval_s`` = its TPOT (E2E − TTFT)/(O − 1),
    or for a one-token request the step that produced it. TTFT and E2E grow by it; TPOT and every gap do not.
    The one home of this rule: the engine simulation, the disaggregated decode pool and the screening tier
    (k·τ̄) call it."""
    return lag_steps * interval_s
