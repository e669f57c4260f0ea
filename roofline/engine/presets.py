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
#: How each engine hands a new request to one of its attention data-parallel ranks.
VLLM_DP_BALANCE = (
    "vLLM vllm/v1/engine/core_client.py DPLBAsyncMPClient.get_core_engine_for_request: the engine with the lowest "
    "4 x waiting + running requests (its counts refreshed from the coordinator every 100 ms, the chosen one's "
    "waiting count raised at once)"
)
SGLANG_DP_BALANCE = (
    "SGLang python/sglang/srt/server_args.py --load-balance-method default round_robin "
    "(managers/data_parallel_controller.py LoadBalanceMethod.ROUND_ROBIN: request k to rank k mod dp; "
    "shortest_queue counts running + waiting requests per rank)"
)
TRTLLM_DP_BALANCE = (
    "TensorRT-LLM tensorrt_llm/_torch/pyexecutor/executor_request_queue.py _balance_requests_across_ranks: a heap "
    "of (active tokens, active requests, rank) over the ranks below ceil((active + new) / dp) requests; each new "
    "request (longest prompt first) to the rank with the fewest active tokens"
)
IDEAL_DP_BALANCE = "ideal engine: every attention-DP rank evenly loaded (one pooled running set)"

VLLM_DEFAULTS = (
    "vLLM v0.11 vllm/engine/arg_utils.py EngineArgs._set_default_args: for `vllm serve` on GPUs with >= 70 GiB "
    "(H100/H200/MI300X class, A100 excluded) max_num_batched_tokens 8192 and max_num_seqs 1024, otherwise 2048 / 256"
)
SGLANG_ARGS = "SGLang v0.5 server arguments (docs.sglang.ai/advanced_features/server_arguments)"
SGLANG_FRACTION = (
    "SGLang 0.5.0rc0 python/sglang/srt/server_args.py ServerArgs.__post_init__: mem_fraction_static = "
    "round((M - reserved) / M, 3), M the GPU memory, reserved = 2.8 + p/10 GiB below 35 GiB, 9.5 + p/2 below 90 GiB, "
    "12 + p/2 below 160 GiB, else 32 GiB, p = tp x pp; taken at p = 1 (a larger group reserves p/2 GiB more)"
)
SGLANG_CHUNK = (
    "SGLang 0.5.0rc0 python/sglang/srt/server_args.py ServerArgs.__post_init__: chunked_prefill_size 2048 below "
    "35 GiB of GPU memory, 8192 below 160 GiB, else 16384"
)
TRTLLM_ARGS = "TensorRT-LLM 1.0 LLM API reference (nvidia.github.io/TensorRT-LLM/llm-api/reference)"
VLLM_SCHEDULER = "vLLM v0.11 vllm/v1/core/sched/scheduler.py Scheduler.schedule"
VLLM_GRAPHS = (
    "vLLM 0.11.0 vllm/config/scheduler.py SchedulerConfig.__post_init__ (cuda_graph_sizes default "
    "[min(max_num_seqs*2, 512)]) and vllm/config/__init__.py VllmConfig._set_cudagraph_sizes (capture sizes 1, 2, 4, "
    "8 … 512 in steps of 8; a uniform decode batch is padded up to the next one, a larger one runs without a graph); "
    "with the batch at most max_num_seqs the largest replayed decode batch is 512 (roofline/data/kernel_inventory/"
    "vllm.yaml cuda_graph)"
)
SGLANG_GRAPHS = (
    "SGLang 0.5.0rc2 python/sglang/srt/model_executor/cuda_graph_runner.py get_batch_sizes_to_capture: [1, 2, 4, 8] + "
    "range(16, 161, 8), extended to 256 above 90 GiB of GPU memory and to 512 above 160 GB; server_args.py "
    "cuda_graph_max_bs 8 below 35 GiB (80 at tp >= 4, not taken); decode batches above the largest run eagerly "
    "(roofline/data/kernel_inventory/sglang.yaml cuda_graph)"
)
TRTLLM_GRAPHS = (
    "TensorRT-LLM 1.0 tensorrt_llm/llmapi/llm_args.py CudaGraphConfig (batch_sizes None, max_batch_size 0 -> 128, "
    "enable_padding False; _generate_cuda_graph_batch_sizes: 1 … 32, 64, 128) and _torch/pyexecutor/"
    "cuda_graph_runner.py (a batch not in the list runs eagerly); trtllm-serve sets no cuda_graph_config "
    "(roofline/data/kernel_inventory/trtllm.yaml cuda_graph)"
)
VLLM_MIXED_GRAPHS = (
    "vLLM docs/design/cuda_graphs.md (V1, PR #20059): CompilationConfig.cudagraph_mode defaults to FULL_AND_PIECEWISE "
    "with piecewise compilation, 'full CUDA Graph for uniform decode, piecewise CUDA Graphs for others' (prefill and "
    "mixed batches), attention left eager between the pieces; the dispatcher pads num_tokens to the next capture size "
    "and runs a larger batch without graphs (NONE); the capture sizes are in tokens, shared with the decode graphs"
)
SGLANG_MIXED_GRAPHS = (
    "SGLang docs/advanced_features (Piecewise CUDA Graph, 'an experimental feature'): only the decode step is captured "
    "unless --enable-piecewise-cuda-graph is set (ServerArgs default False); extend/prefill batches run eagerly"
)
SGLANG_SHARED_FUSION = (
    "SGLang python/sglang/srt/models/deepseek_v2.py DeepseekV2ForCausalLM.determine_num_fused_shared_experts "
    "(num_fused_shared_experts = n_shared_experts unless --disable-shared-experts-fusion, kept only for "
    "architectures[0] == the model class's architecture, n_routed_experts 256, n_shared_experts 1, CUDA, no EP/DeepEP "
    "MoE; DeepseekV2MoE builds the experts with num_experts = n_routed + fused, top_k = k + fused and no "
    "shared_experts MLP); GlmMoeDsaForCausalLM passes its own name since PR #18804 (2026-02-16, GLM-5)"
)
TRTLLM_MIXED_GRAPHS = (
    "TensorRT-LLM 1.0 PyTorch backend: cuda_graph_config captures generation-only batches (_torch/pyexecutor/"
    "cuda_graph_runner.py); piecewise capture of context/mixed batches is TorchCompileConfig."
    "enable_piecewise_cuda_graph, default False"
)
PIPELINE = "None = one micro-batch per pipeline stage (roofline.pipeline): {where}"
VLLM_PIPELINE = PIPELINE.format(
    where="vLLM vllm/config/vllm.py VllmConfig.max_concurrent_batches = pipeline_parallel_size ('PP requires "
    "PP-size concurrent batches to fill the pipeline'; V1 EngineCore.step_with_batch_queue)"
)
SGLANG_PIPELINE = PIPELINE.format(
    where="SGLang python/sglang/srt/managers/scheduler_pp_mixin.py init_pp_loop_state: pp_loop_size = pp_size + "
    "pp_async_batch_depth (default 0), one running batch per slot"
)
TRTLLM_PIPELINE = PIPELINE.format(
    where="TensorRT-LLM tensorrt_llm/_torch/pyexecutor/py_executor.py PyExecutor: num_micro_batches = dist.pp_size"
)
IDEAL_POLICY = "ideal engine: the vLLM V1 policy"
FRONTEND_FIT = (
    "fitted on the public closed-loop rows of this engine at concurrency <= 8, the grid value of least median "
    "|ln(simulated / measured TTFT)|, adopted because it lowers the error on each model family held out "
    "(roofline/published/frontend.py, python -m roofline.published.frontend: {rows}); each request's overhead "
    "exponential about the mean (request_overhead_cv 1, the form the grid was simulated in)"
)
SGLANG_FRONTEND = FRONTEND_FIT.format(
    rows="200 of 531 rows, SGLang 0.5.6-0.5.9 and nightlies, held-out median |ln error| 1.080 physics only -> "
    "0.427; 640 ms, simulated too (validation/serving/extend_passes.py), is not chosen"
)
TRTLLM_FRONTEND = FRONTEND_FIT.format(rows="174 of 560 rows, TensorRT-LLM 1.0rc3-1.3rc5, held out 0.534 -> 0.470")
VLLM_FRONTEND = (
    "0: the same fit on vLLM's 268 closed-loop rows at concurrency <= 8 (vLLM 0.11.2-0.19.0 and a nightly) gives "
    "20 ms, which lowers their held-out median |ln error| only from 0.378 to 0.343 and raises it on the independent "
    "vLLM 0.15.1 runs (BLIS, 36 stages) from 0.098 to 0.539, so the rule does not adopt it "
    "(roofline/published/frontend.py INDEPENDENT); --engine-set request_overhead_s=0.02 --engine-set "
    "request_overhead_cv=1 carries it"
)


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
        cuda_graph_max_batch=512,
        cuda_graph_from_max_num_seqs=(2, 512),
        mixed_graphs=True,
        prefix_caching=True,
        async_scheduling=False,
        mixed_chunk=True,
        runtime_reserve_bytes=RUNTIME_RESERVE_BYTES,
        dp_load_balance="waiting_weighted",
        sources={
            "pipeline_micro_batches": VLLM_PIPELINE,
            "dp_load_balance": VLLM_DP_BALANCE,
            "memory_fraction": f"{VLLM_ARGS}: --gpu-memory-utilization default 0.9, a fraction of total memory",
            "request_overhead_s": VLLM_FRONTEND,
            "cuda_graph_max_batch": VLLM_GRAPHS,
            "cuda_graph_from_max_num_seqs": VLLM_GRAPHS,
            "cuda_graph_padding": VLLM_GRAPHS,
            "mixed_graphs": VLLM_MIXED_GRAPHS,
            "kv_block_tokens": "vLLM 0.11.0 vllm/platforms/cuda.py CudaPlatformBase.check_and_update_config: "
            "block_size 16 when unset (FlashMLA / FlashInfer-MLA backends force 64, CUTLASS MLA 128)",
            "max_num_seqs": VLLM_DEFAULTS,
            "max_num_batched_tokens": VLLM_DEFAULTS,
            "chunked_prefill": "vLLM 0.11.0 vllm/engine/arg_utils.py EngineArgs._set_default_args: forced on for "
            "non-pooling models",
            "max_partial_prefills": f"{VLLM_ARGS}: --max-num-partial-prefills default 1 (vllm/config/scheduler.py; "
            "the V1 scheduler does not read it: one partial prefill per step)",
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


def sglang_static_fraction(gpu_gib: float, group_gpus: int = 1) -> float:
    """SGLang 0.5's default mem_fraction_static for a GPU of ``gpu_gib`` GiB (:data:`SGLANG_FRACTION`)."""
    p = group_gpus
    reserved = 2.8 + p / 10 if gpu_gib < 35 else 9.5 + p / 2 if gpu_gib < 90 else 12 + p / 2 if gpu_gib < 160 else 32
    return round((gpu_gib - reserved) / gpu_gib, 3)


def _sglang(hw: HardwareSpec) -> EngineConfig:
    gib = hw.memory.usable_capacity_bytes / GIB
    frac = sglang_static_fraction(gib)
    chunk = 2048 if gib < 35 else 8192 if gib < 160 else 16384
    graphs = 8 if gib < 35 else 160 if gib <= 90 else 256 if hw.memory.usable_capacity_bytes <= 160e9 else 512
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
        cuda_graph_max_batch=graphs,
        prefix_caching=True,
        async_scheduling=True,
        mixed_chunk=False,
        runtime_reserve_bytes=RUNTIME_RESERVE_BYTES,
        request_overhead_s=0.32,
        request_overhead_cv=1.0,
        dp_load_balance="round_robin",
        shared_expert_fusion=(("DeepseekV3ForCausalLM", 256), ("GlmMoeDsaForCausalLM", 256)),
        sources={
            "shared_expert_fusion": SGLANG_SHARED_FUSION,
            "pipeline_micro_batches": SGLANG_PIPELINE,
            "dp_load_balance": SGLANG_DP_BALANCE,
            "request_overhead_s": SGLANG_FRONTEND,
            "request_overhead_cv": SGLANG_FRONTEND,
            "memory_fraction": f"{SGLANG_FRACTION}; the static pool holds weights + KV",
            "kv_block_tokens": f"{SGLANG_ARGS}: --page-size default 1",
            "max_num_seqs": "SGLang 0.5.0rc0 python/sglang/srt/managers/tp_worker.py TpModelWorker.__init__: "
            "max_running_requests = min(KV tokens // 2, the request pool), the pool min(max(KV tokens / context "
            "length x 512, 2048), 4096) (model_executor/model_runner.py); 4096 is its cap, which binds only for "
            "very short sequences",
            "max_num_batched_tokens": SGLANG_CHUNK,
            "chunked_prefill": f"{SGLANG_CHUNK} (chunking on because the size is set)",
            "cuda_graphs": f"{SGLANG_ARGS}: --disable-cuda-graph default False",
            "cuda_graph_max_batch": SGLANG_GRAPHS,
            "cuda_graph_padding": SGLANG_GRAPHS,
            "mixed_graphs": SGLANG_MIXED_GRAPHS,
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
        cuda_graph_max_batch=128,
        cuda_graph_padding=False,
        prefix_caching=True,
        async_scheduling=True,
        mixed_chunk=True,
        runtime_reserve_bytes=RUNTIME_RESERVE_BYTES,
        request_overhead_s=0.16,
        request_overhead_cv=1.0,
        dp_load_balance="fewest_tokens",
        sources={
            "pipeline_micro_batches": TRTLLM_PIPELINE,
            "dp_load_balance": TRTLLM_DP_BALANCE,
            "request_overhead_s": TRTLLM_FRONTEND,
            "request_overhead_cv": TRTLLM_FRONTEND,
            "memory_fraction": f"{TRTLLM_ARGS}: KvCacheConfig.free_gpu_memory_fraction default 0.9 of the memory "
            "free after weights and activations are allocated",
            "kv_block_tokens": f"{TRTLLM_ARGS}: KvCacheConfig.tokens_per_block default 32",
            "max_num_seqs": f"{TRTLLM_ARGS}: max_batch_size default 2048",
            "max_num_batched_tokens": f"{TRTLLM_ARGS}: max_num_tokens default 8192",
            "chunked_prefill": f"{TRTLLM_ARGS}: enable_chunked_prefill default False",
            "cuda_graphs": "TensorRT-LLM 1.0 PyTorch backend: CUDA graphs for generation steps (cuda_graph_config)",
            "cuda_graph_max_batch": TRTLLM_GRAPHS,
            "cuda_graph_padding": TRTLLM_GRAPHS,
            "mixed_graphs": TRTLLM_MIXED_GRAPHS,
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
        dp_load_balance="pooled",
        sources={
            "pipeline_micro_batches": VLLM_PIPELINE,
            "dp_load_balance": IDEAL_DP_BALANCE,
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
    if not isinstance(name, str):
        raise ScenarioError(
            f"engine must be a preset name ({', '.join(PRESETS)}) or an EngineConfig (got {type(name).__name__} "
            f"{name!r:.40}); give e.g. engine='vllm'"
        )
    key = preset_key(name)
    if key not in PRESETS:
        raise UnknownNameError(
            f"unknown engine {name!r}{suggest(name, list(PRESETS))}; known engines: {', '.join(PRESETS)}"
        )
    return PRESETS[key](hw)


def resolve_engine(engine: EngineArg, hw: HardwareSpec, overrides: Mapping[str, object] | None = None) -> EngineConfig:
    """An EngineConfig from a preset name (default ``vllm``) or a config, with overrides applied."""
    cfg = (
        engine if isinstance(engine, EngineConfig) else engine_preset(DEFAULT_ENGINE if engine is None else engine, hw)
    )
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
