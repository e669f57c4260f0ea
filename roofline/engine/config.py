"""EngineConfig: one serving engine as data — memory, batching, scheduler policy and CPU/front-end overheads.

Every entry point (``predict``, ``sweep``, ``max_batch``, ``plan``, the report, the CLI and the
serving simulator) takes an engine and computes memory through
:func:`roofline.memory.memory_budget`, so a given engine is modelled the same way everywhere.
The scheduler policy the simulator runs (:class:`roofline.serving.sim.policy.Policy`) is derived
from it (:func:`roofline.serving.sim.policy.policy_for`); users set every option in one namespace
(``engine_overrides={...}`` / ``--engine-set name=value``, :meth:`EngineConfig.with_overrides`).

KV budget per GPU, by ``memory_fraction_of`` (C capacity seen by software, f the fraction,
W weights, A activation peak of one step of ``max_num_batched_tokens`` tokens, R runtime reserve):

* ``"total"`` (vLLM ``gpu_memory_utilization``):          KV = f·C − W − A − R
* ``"static_pool"`` (SGLang ``mem_fraction_static``):     KV = f·C − W, and A + R must fit in (1 − f)·C
* ``"free_after_load"`` (TensorRT-LLM ``free_gpu_memory_fraction``): KV = f·(C − W − A − R)

The activation peak depends on the engine's per-step token budget, never on the batch a user
asks for: engines size it once at start-up (vLLM's profile run, TensorRT-LLM's ``max_num_tokens``).

Where each option applies (:data:`ENGINE_OPTION_SCOPE`, checked by :func:`check_engine_options`):
an entry point honours an option or refuses it with a ScenarioError naming it; none is ignored.
The static model (predict, sweep, plan) prices every engine step as
:func:`step_seconds` (GPU, ``step_overhead_s``, ``async_scheduling``), as the simulator does, and
adds the request overhead y and the output lag k to TTFT and E2E: TTFT = y + prefill + k·TPOT.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from roofline.boundary.limits import MAX_OVERHEAD_S
from roofline.errors import ScenarioError

MemoryFractionOf = Literal["total", "static_pool", "free_after_load"]
SchedulerPolicy = Literal["vllm_v1", "sglang", "trtllm_inflight", "ideal"]

EntryPoint = Literal["predict", "sweep", "max_batch", "plan", "simulate"]
#: The entry points that take engine options (``plan --simulate`` = ``plan`` for the static ranking, then
#: ``simulate`` for its finalists; the report passes none).
ENTRY_POINTS: tuple[EntryPoint, ...] = ("predict", "sweep", "max_batch", "plan", "simulate")
_ALL: frozenset[EntryPoint] = frozenset(ENTRY_POINTS)
_TIMED: frozenset[EntryPoint] = frozenset({"predict", "sweep", "plan", "simulate"})
_SIM: frozenset[EntryPoint] = frozenset({"simulate"})
_PIPELINED: frozenset[EntryPoint] = frozenset({"predict", "sweep", "simulate"})
_MEMORY_ONLY = "counts the sequences whose KV fits in memory, which {field} does not change"

#: The one honour/refuse table: engine option -> (entry points that honour it, why the others cannot).
#: Memory options act through :func:`roofline.memory.memory_budget` everywhere; ``max_num_seqs`` also caps the
#: batch (predict/sweep refuse a batch above it, plan searches up to it); the timing options price every
#: step as ``step_seconds(GPU, step_overhead_s, async_scheduling)`` and add y + k·TPOT to TTFT and E2E;
#: the scheduling options act only where requests arrive and share steps (the serving simulator).
ENGINE_OPTION_SCOPE: dict[str, tuple[frozenset[EntryPoint], str]] = {
    "memory_fraction": (_ALL, ""),
    "kv_block_tokens": (_ALL, ""),
    "max_num_seqs": (_ALL, ""),
    "max_num_batched_tokens": (_ALL, ""),
    "chunked_prefill": (_SIM, "prices a static batch's prefill as one pass, chunked or not"),
    "cuda_graphs": (_TIMED, _MEMORY_ONLY),
    "cuda_graph_max_batch": (_TIMED, _MEMORY_ONLY),
    "cuda_graph_padding": (_TIMED, _MEMORY_ONLY),
    "mixed_graphs": (_TIMED, _MEMORY_ONLY),
    "runtime_reserve_bytes": (_ALL, ""),
    "reserve_bytes": (_ALL, ""),
    "capacity_bytes": (_ALL, ""),
    "max_partial_prefills": (_SIM, "prefills a static batch in one pass, with no concurrent partial prefills"),
    "step_overhead_s": (_TIMED, _MEMORY_ONLY),
    "request_overhead_s": (_TIMED, _MEMORY_ONLY),
    "request_overhead_cv": (
        _SIM,
        "gives means, which the spread of per-request overheads does not move (request_overhead_s sets the mean)",
    ),
    "output_lag_steps": (_TIMED, _MEMORY_ONLY),
    "prefix_caching": (_SIM, "prices a static batch with no shared prefix"),
    "async_scheduling": (_TIMED, _MEMORY_ONLY),
    "mixed_chunk": (_SIM, "prices a static batch whose prefill and decode never share a step"),
    "dp_load_balance": (
        _SIM,
        "prices attention-DP ranks evenly loaded (the busiest holds ⌈batch / dp⌉ rows), as any balancer leaves a "
        "static batch",
    ),
    "pipeline_micro_batches": (
        _PIPELINED,
        "has no pipeline-parallel replica to run it on (plan sizes tp-only replicas; max_batch counts the "
        "sequences whose KV fits, which {field} does not change)",
    ),
}

#: Fields a user may override (``engine_overrides={...}`` / ``--engine-set name=value``): the table's rows.
OVERRIDABLE = tuple(ENGINE_OPTION_SCOPE)

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
    "enable_prefix_caching": "prefix_caching",
    "enable_block_reuse": "prefix_caching",
    "enable_mixed_chunk": "mixed_chunk",
    "cuda_graph_max_bs": "cuda_graph_max_batch",
    "max_cudagraph_capture_size": "cuda_graph_max_batch",
    "enable_padding": "cuda_graph_padding",
    "max_concurrent_batches": "pipeline_micro_batches",
    "pp_micro_batches": "pipeline_micro_batches",
    "load_balance_method": "dp_load_balance",
}

#: How an attention-DP replica hands new requests to its ranks (:mod:`roofline.serving.sim.dpranks`).
DPLoadBalance = Literal["round_robin", "shortest_queue", "waiting_weighted", "fewest_tokens", "pooled"]
#: Overridable fields whose value is a name, with the names each accepts (``--engine-set`` reads them as text).
TEXT_OPTIONS: dict[str, tuple[str, ...]] = {"dp_load_balance": get_args(DPLoadBalance)}

_TRUE, _FALSE = ("true", "on", "1"), ("false", "off", "0")


class EngineConfig(BaseModel):
    """One serving engine (name and version): memory, batching, scheduler policy, CPU and front-end overheads.

    Units: bytes, seconds, tokens. ``sources`` maps each field to where its value comes from
    (documentation or source at a named version, or ``assumed: …`` with what it moves).
    Scheduler settings: ``prefix_caching`` (reuse of cached KV blocks of a shared prefix),
    ``async_scheduling`` (the CPU forms step k + 1 while step k runs: step = max(GPU, CPU) and arrivals
    join a step later), ``mixed_chunk`` (decodes share a step with a prefill chunk). Overheads:
    ``step_overhead_s`` CPU seconds per step, ``request_overhead_s`` mean front-end seconds per request
    (``request_overhead_cv`` its coefficient of variation), ``output_lag_steps`` the output pipeline's lag
    in the request's own inter-token intervals. CUDA graphs: ``cuda_graphs`` (decode steps replay captured graphs),
    ``cuda_graph_max_batch`` (the largest captured decode batch; larger ones run eagerly; None: every size) and
    ``cuda_graph_padding`` (a batch is padded up to the next captured size; off: only the exact sizes replay),
    ``mixed_graphs`` (a prefill or mixed prefill+decode step of at most ``cuda_graph_max_batch`` tokens replays
    piecewise graphs: every op but attention captured, attention launched eagerly between the pieces; off: such
    steps launch every kernel eagerly).
    Pipeline parallelism: ``pipeline_micro_batches`` micro-batches in flight (None: one per stage, every engine's
    default; :mod:`roofline.pipeline`). Attention data parallelism: ``dp_load_balance``, how new requests are handed
    to the ranks (each its own scheduler and KV pool; ``pooled``: one running set of dp budgets, every rank evenly
    loaded; :mod:`roofline.serving.sim.dpranks`). Kernels: ``shared_expert_fusion`` lists (architecture, routed
    experts) whose one shared expert the engine runs as one more expert of the routed grouped GEMM, fed every token,
    where the experts are not expert-parallel and the shared expert has the routed experts' width and format
    (:func:`roofline.ops.ffn.fused_shared_experts`).
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
    cuda_graph_max_batch: int | None = Field(default=None, ge=1, le=1_000_000)
    cuda_graph_from_max_num_seqs: tuple[int, int] | None = Field(
        default=None,
        description="(k, cap): the engine derives its largest captured batch as min(k × max_num_seqs, cap), so a "
        "max_num_seqs override without a cuda_graph_max_batch one re-derives it (vLLM: (2, 512)); None: fixed",
    )
    cuda_graph_padding: bool = True
    mixed_graphs: bool = False
    prefix_caching: bool = True
    async_scheduling: bool = False
    mixed_chunk: bool = True
    runtime_reserve_bytes: float = Field(ge=0)
    reserve_bytes: float | None = Field(default=None, ge=0)
    capacity_bytes: float | None = Field(default=None, gt=0)
    step_overhead_s: float = Field(default=0.0, ge=0)
    request_overhead_s: float = Field(default=0.0, ge=0)
    request_overhead_cv: float = Field(default=0.0, ge=0, le=10)
    output_lag_steps: float = Field(default=0.0, ge=0, le=1000)
    pipeline_micro_batches: int | None = Field(default=None, ge=1, le=1024)
    dp_load_balance: DPLoadBalance = "round_robin"
    shared_expert_fusion: tuple[tuple[str, int], ...] = ()
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

    @field_validator("step_overhead_s", "request_overhead_s")
    @classmethod
    def _overhead(cls, v: float) -> float:
        if v > MAX_OVERHEAD_S:
            raise ValueError(
                f"must be at most {MAX_OVERHEAD_S:g} s (roofline.boundary.limits MAX_OVERHEAD_S; measured overheads "
                "are milliseconds): give seconds, e.g. 0.002"
            )
        return v

    @field_validator(
        "chunked_prefill",
        "cuda_graphs",
        "cuda_graph_padding",
        "mixed_graphs",
        "prefix_caching",
        "async_scheduling",
        "mixed_chunk",
        mode="before",
    )
    @classmethod
    def _switch(cls, v: object) -> object:
        """A switch: a bool, or true/false, on/off, 1/0 (text in any case, or the numbers 1 and 0)."""
        if isinstance(v, bool):
            return v
        if isinstance(v, str) and v.strip().lower() in (*_TRUE, *_FALSE):
            return v.strip().lower() in _TRUE
        if isinstance(v, int | float) and v in (0, 1):
            return bool(v)
        raise ValueError(f"must be true or false (true/false, on/off, 1/0), got {v!r}")

    def graph_replays(self, rows: object) -> np.ndarray:
        """Where a decode step of ``rows`` sequences replays a captured CUDA graph (bool array; the others launch
        every kernel eagerly): never without ``cuda_graphs``; every size when ``cuda_graph_max_batch`` is None;
        else sizes up to it, padded up to the next captured size, or with ``cuda_graph_padding`` off only the
        sizes captured exactly: 1 … 32 and the powers of two (TensorRT-LLM's non-padded list)."""
        r = np.asarray(rows, dtype=np.float64)
        if not self.cuda_graphs:
            return np.zeros(r.shape, dtype=bool)
        if self.cuda_graph_max_batch is None:
            return np.ones(r.shape, dtype=bool)
        ok = r <= self.cuda_graph_max_batch
        if not self.cuda_graph_padding:
            whole = np.maximum(np.rint(r), 1.0)
            ok &= (r <= 32) | (np.exp2(np.rint(np.log2(whole))) == r)
        return ok

    def piecewise_replays(self, tokens: object) -> np.ndarray:
        """Where a prefill or mixed step of ``tokens`` tokens replays piecewise graphs (bool array): only with
        ``cuda_graphs`` and ``mixed_graphs``, up to ``cuda_graph_max_batch`` tokens (every size when None), padded up
        to the next captured size (the capture sizes are in tokens, shared with the decode graphs)."""
        t = np.asarray(tokens, dtype=np.float64)
        if not (self.cuda_graphs and self.mixed_graphs):
            return np.zeros(t.shape, dtype=bool)
        return np.ones(t.shape, dtype=bool) if self.cuda_graph_max_batch is None else t <= self.cuda_graph_max_batch

    @property
    def label(self) -> str:
        """``vllm 0.11`` style label for tables and reports."""
        return f"{self.name} {self.version}"

    def with_overrides(self, overrides: Mapping[str, object] | None) -> EngineConfig:
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
        self._derive_capture(update, sources)
        data = {**self.model_dump(), **update, "sources": sources}
        try:
            return EngineConfig.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(x) for x in err["loc"])
            raise ScenarioError(f"engine option {loc}: {err['msg']} (got {err.get('input')!r})") from None

    def _derive_capture(self, update: dict[str, Any], sources: dict[str, str]) -> None:
        """With a ``max_num_seqs`` override and none of ``cuda_graph_max_batch``, the capture the engine derives from
        it: min(k × max_num_seqs, cap) (``cuda_graph_from_max_num_seqs``); a value that is not a whole number is left
        for validation to refuse."""
        rule = self.cuda_graph_from_max_num_seqs
        if rule is None or "max_num_seqs" not in update or "cuda_graph_max_batch" in update:
            return
        try:
            n = int(update["max_num_seqs"])
        except (TypeError, ValueError):
            return
        k, cap = rule
        update["cuda_graph_max_batch"] = min(k * n, cap)
        sources["cuda_graph_max_batch"] = (
            f"derived from the max_num_seqs override: min({k} x max_num_seqs, {cap}) "
            f"({self.sources.get('cuda_graph_max_batch', 'the preset')})"
        )


_WHERE = {
    _ALL: "every entry point",
    _TIMED: "predict, sweep, plan and the serving simulator (roofline simulate / plan --simulate)",
    _SIM: "the serving simulator (roofline simulate / plan --simulate)",
    _PIPELINED: "predict, sweep and the serving simulator (roofline simulate) of a pipeline-parallel replica",
}
_INSTEAD: dict[EntryPoint, str] = {
    "predict": "roofline simulate", "sweep": "roofline simulate", "max_batch": "roofline simulate",
    "plan": "plan --simulate", "simulate": "simulate",
}  # fmt: skip


def engine_option_refusal(key: str, entry: EntryPoint) -> str | None:
    """Why ``entry`` refuses engine option ``key`` (an alias or a field), one paragraph with the fix; None when
    it honours the option (or ``key`` is no option: :meth:`EngineConfig.with_overrides` names those)."""
    field = ALIASES.get(key, key)
    if field not in ENGINE_OPTION_SCOPE:
        return None
    honoured, why = ENGINE_OPTION_SCOPE[field]
    if entry in honoured:
        return None
    instead = "predict" if "predict" in honoured else _INSTEAD[entry]
    name = key if key == field else f"{key} ({field})"
    return (
        f"engine option {name} applies to {_WHERE[honoured]}; {entry} {why.format(field=field)}: "
        f"drop it or use {instead}"
    )


def check_engine_options(overrides: Mapping[str, object] | None, entry: EntryPoint) -> None:
    """Raise ScenarioError for the first option in ``overrides`` that ``entry`` does not honour
    (:data:`ENGINE_OPTION_SCOPE`); every entry point that takes engine options calls this."""
    for key in overrides or {}:
        why = engine_option_refusal(str(key), entry)
        if why is not None:
            raise ScenarioError(why)


def honoured_options(overrides: Mapping[str, object] | None, entry: EntryPoint) -> dict[str, object]:
    """The options of ``overrides`` that ``entry`` honours: ``plan --simulate`` ranks its candidates with the
    static planner's share of the options, then simulates the finalists with all of them."""
    return {k: v for k, v in (overrides or {}).items() if engine_option_refusal(str(k), entry) is None}


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


def latency_basis(engine: EngineConfig) -> str:
    """Whether latencies priced with ``engine`` are what a client measures or physics only: one sentence that
    ``predict``, ``simulate`` and their JSON show next to every latency."""
    y, k = engine.request_overhead_s, engine.output_lag_steps
    if not y and not k:
        return (
            "physics only: engine time from the request's arrival, no front-end latency (set --engine-set "
            "request_overhead_s=… / output_lag_steps=… for what a client measures)"
        )
    parts = [f"request overhead {y * 1e3:.3g} ms"] if y else []
    parts += [f"output lag {k:g} of the request's inter-token intervals"] if k else []
    return "client-seen: engine time plus " + " and ".join(parts)
