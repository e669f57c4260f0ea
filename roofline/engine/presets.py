"""Named engine presets, each default cited to the engine's documentation or source.

``vllm`` is the default: vLLM is the engine most users of open models run (it is the engine
behind most public serving benchmarks and the default backend of the common deployment
stacks), and its memory semantics (a fraction of *total* memory) are the most common.
Some defaults depend on the device, as they do in the engines themselves (vLLM raises its
token budget and sequence cap on GPUs with ≥ 70 GiB; SGLang picks its static fraction and
chunk size by GPU memory), so a preset is resolved against a hardware spec.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from roofline.engine.config import EngineConfig
from roofline.errors import ScenarioError, UnknownNameError, suggest
from roofline.specs.hardware import HardwareSpec

GIB = 2**30

#: Runtime reserve outside the KV pool and the activation peak: CUDA context, cuBLAS/NCCL
#: workspaces, CUDA-graph pools. Assumed (no engine documents one figure); it moves every
#: max batch by 2 GiB / (KV per sequence), e.g. ~14 sequences of Llama-3.1-8B at 4k context.
RUNTIME_RESERVE_BYTES = 2.0 * GIB
RUNTIME_RESERVE_SOURCE = (
    "assumed: 2 GiB for CUDA context, cuBLAS/NCCL workspaces and CUDA-graph pools (vLLM logs 'non-torch memory' "
    "of 0.5-2 GiB and graph pools of 0.1-1 GiB on H100); moves max batch by 2 GiB / KV per sequence"
)

VLLM_ARGS = "vLLM v0.11 engine arguments (docs.vllm.ai/en/v0.11.0/configuration/engine_args)"
VLLM_DEFAULTS = (
    "vLLM v0.11 vllm/engine/arg_utils.py EngineArgs._set_default_args: for `vllm serve` on GPUs with >= 70 GiB "
    "(H100/H200/MI300X class, A100 excluded) max_num_batched_tokens 8192 and max_num_seqs 1024, otherwise 2048 / 256"
)
SGLANG_ARGS = "SGLang v0.5 server arguments (docs.sglang.ai/advanced_features/server_arguments)"
SGLANG_DEFAULTS = (
    "SGLang v0.5 python/sglang/srt/server_args.py: mem_fraction_static and chunked_prefill_size chosen by GPU "
    "memory (< 35 GiB: 0.80 / 2048; < 60 GiB: 0.85 / 4096; < 100 GiB: 0.88 / 8192; larger: 0.90 / 16384)"
)
TRTLLM_ARGS = "TensorRT-LLM 1.0 LLM API reference (nvidia.github.io/TensorRT-LLM/llm-api/reference)"
VLLM_SCHEDULER = "vLLM v0.11 vllm/v1/core/sched/scheduler.py Scheduler.schedule"
IDEAL_POLICY = "ideal engine: the vLLM V1 policy"


def _vllm(hw: HardwareSpec) -> EngineConfig:
    big = hw.memory.usable_capacity_bytes >= 70 * GIB and "a100" not in hw.name
    return EngineConfig(
        name="vllm",
        version="0.11",
        scheduler="vllm_v1",
        memory_fraction=0.9,
        memory_fraction_of="total",
        kv_block_tokens=16,
        max_num_seqs=1024 if big else 256,
        max_num_batched_tokens=8192 if big else 2048,
        chunked_prefill=True,
        max_partial_prefills=1,
        cuda_graphs=True,
        prefix_caching=True,
        async_scheduling=False,
        mixed_chunk=True,
        runtime_reserve_bytes=RUNTIME_RESERVE_BYTES,
        sources={
            "memory_fraction": f"{VLLM_ARGS}: --gpu-memory-utilization default 0.9, a fraction of total memory",
            "kv_block_tokens": "vLLM v0.11 CacheConfig.DEFAULT_BLOCK_SIZE = 16 on CUDA",
            "max_num_seqs": VLLM_DEFAULTS,
            "max_num_batched_tokens": VLLM_DEFAULTS,
            "chunked_prefill": "vLLM V1 engine: chunked prefill always enabled (docs: 'Optimization and Tuning')",
            "max_partial_prefills": f"{VLLM_ARGS}: --max-num-partial-prefills default 1",
            "cuda_graphs": f"{VLLM_ARGS}: --enforce-eager default False (CUDA graphs captured)",
            "prefix_caching": f"{VLLM_ARGS}: --enable-prefix-caching, on by default in the V1 engine (hash per full "
            "block)",
            "async_scheduling": f"{VLLM_ARGS}: --async-scheduling default off in 0.11; on by default from v0.14 "
            "(release notes: 'Async scheduling is now enabled by default', #27614)",
            "mixed_chunk": f"{VLLM_SCHEDULER}: one token budget per step shared by the running decodes and a partial "
            "prefill",
            "runtime_reserve_bytes": RUNTIME_RESERVE_SOURCE,
        },
    )


def _sglang(hw: HardwareSpec) -> EngineConfig:
    gib = hw.memory.usable_capacity_bytes / GIB
    frac, chunk = (
        (0.80, 2048) if gib < 35 else (0.85, 4096) if gib < 60 else (0.88, 8192) if gib < 100 else (0.9, 16384)
    )
    return EngineConfig(
        name="sglang",
        version="0.5",
        scheduler="sglang",
        memory_fraction=frac,
        memory_fraction_of="static_pool",
        kv_block_tokens=1,
        max_num_seqs=4096,
        max_num_batched_tokens=chunk,
        chunked_prefill=True,
        cuda_graphs=True,
        prefix_caching=True,
        async_scheduling=True,
        mixed_chunk=False,
        runtime_reserve_bytes=RUNTIME_RESERVE_BYTES,
        sources={
            "memory_fraction": f"{SGLANG_DEFAULTS}; the static pool holds weights + KV",
            "kv_block_tokens": f"{SGLANG_ARGS}: --page-size default 1",
            "max_num_seqs": f"{SGLANG_ARGS}: --max-running-requests default derived from the KV pool; 4096 is "
            "the cap of its request-to-token pool (assumed; binds only for very short sequences)",
            "max_num_batched_tokens": SGLANG_DEFAULTS,
            "chunked_prefill": SGLANG_DEFAULTS,
            "cuda_graphs": f"{SGLANG_ARGS}: --disable-cuda-graph default False",
            "prefix_caching": f"{SGLANG_ARGS}: --disable-radix-cache default False (radix prefix cache on)",
            "async_scheduling": f"{SGLANG_ARGS}: --disable-overlap-schedule default False (the overlap scheduler is "
            "on; ServerArgs.disable_overlap_schedule)",
            "mixed_chunk": f"{SGLANG_ARGS}: --enable-mixed-chunk default False (python/sglang/srt/managers/"
            "scheduler.py get_next_batch_to_run: a prefill batch runs alone)",
            "runtime_reserve_bytes": RUNTIME_RESERVE_SOURCE,
        },
    )


def _trtllm(hw: HardwareSpec) -> EngineConfig:
    return EngineConfig(
        name="trtllm",
        version="1.0",
        scheduler="trtllm_inflight",
        memory_fraction=0.9,
        memory_fraction_of="free_after_load",
        kv_block_tokens=32,
        max_num_seqs=2048,
        max_num_batched_tokens=8192,
        chunked_prefill=False,
        cuda_graphs=True,
        prefix_caching=True,
        async_scheduling=True,
        mixed_chunk=True,
        runtime_reserve_bytes=RUNTIME_RESERVE_BYTES,
        sources={
            "memory_fraction": f"{TRTLLM_ARGS}: KvCacheConfig.free_gpu_memory_fraction default 0.9 of the memory "
            "free after weights and activations are allocated",
            "kv_block_tokens": f"{TRTLLM_ARGS}: KvCacheConfig.tokens_per_block default 32",
            "max_num_seqs": f"{TRTLLM_ARGS}: max_batch_size default 2048",
            "max_num_batched_tokens": f"{TRTLLM_ARGS}: max_num_tokens default 8192",
            "chunked_prefill": f"{TRTLLM_ARGS}: enable_chunked_prefill default False",
            "cuda_graphs": "TensorRT-LLM 1.0 PyTorch backend: CUDA graphs for generation steps (cuda_graph_config)",
            "prefix_caching": f"{TRTLLM_ARGS}: KvCacheConfig.enable_block_reuse default True",
            "async_scheduling": f"{TRTLLM_ARGS}: TorchLlmArgs.disable_overlap_scheduler default False (the PyTorch "
            "backend's overlap scheduler is on)",
            "mixed_chunk": "TensorRT-LLM 1.0 in-flight batching: context and generation requests share a step "
            "(docs: 'In-flight Batching')",
            "runtime_reserve_bytes": RUNTIME_RESERVE_SOURCE,
        },
    )


def _ideal(hw: HardwareSpec) -> EngineConfig:
    return EngineConfig(
        name="ideal",
        version="-",
        scheduler="ideal",
        memory_fraction=1.0,
        memory_fraction_of="total",
        kv_block_tokens=1,
        max_num_seqs=1_000_000,
        max_num_batched_tokens=8192,
        chunked_prefill=True,
        cuda_graphs=True,
        prefix_caching=True,
        async_scheduling=False,
        mixed_chunk=True,
        runtime_reserve_bytes=0.0,
        sources={
            "memory_fraction": "ideal engine: all of the memory software sees",
            "prefix_caching": IDEAL_POLICY,
            "async_scheduling": IDEAL_POLICY,
            "mixed_chunk": IDEAL_POLICY,
            "max_num_batched_tokens": "ideal engine: activations sized for one 8,192-token step",
            "runtime_reserve_bytes": "ideal engine: no runtime reserve",
        },
    )


PRESETS: dict[str, Callable[[HardwareSpec], EngineConfig]] = {
    "vllm": _vllm,
    "sglang": _sglang,
    "trtllm": _trtllm,
    "ideal": _ideal,
}
DEFAULT_ENGINE = "vllm"

EngineArg = EngineConfig | str | None


def preset_key(name: str) -> str:
    """A preset name as :data:`PRESETS` spells it (case and the TensorRT-LLM spellings folded)."""
    return name.strip().lower().replace("tensorrt-llm", "trtllm").replace("tensorrt_llm", "trtllm")


def engine_preset(name: str, hw: HardwareSpec) -> EngineConfig:
    """The preset ``name`` resolved for ``hw`` (raises UnknownNameError with a suggestion)."""
    key = preset_key(name)
    if key not in PRESETS:
        raise UnknownNameError(
            f"unknown engine {name!r}{suggest(name, list(PRESETS))}; known engines: {', '.join(PRESETS)}"
        )
    return PRESETS[key](hw)


def resolve_engine(engine: EngineArg, hw: HardwareSpec, overrides: Mapping[str, object] | None = None) -> EngineConfig:
    """An EngineConfig from a preset name (default ``vllm``) or a config, with overrides applied."""
    cfg = engine if isinstance(engine, EngineConfig) else engine_preset(engine or DEFAULT_ENGINE, hw)
    return cfg.with_overrides(overrides)


def overrides_map(value: object, field: str = "engine_overrides") -> dict[str, object]:
    """A copy of user engine overrides (None = none); anything but a mapping is a ScenarioError naming ``field``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ScenarioError(
            f"{field} must map engine option names to values, e.g. {{'max_num_seqs': 256}}; got {value!r}"
        )
    return dict(value)
