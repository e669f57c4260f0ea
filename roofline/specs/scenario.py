"""Scenario inputs: workload shape, precision, parallelism and the serving engine.

Shape fields (batch, prompt_len, output_len) may be numpy arrays that broadcast
together: ``sweep`` is ``predict`` evaluated on arrays.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import numpy as np

from roofline.boundary.limits import MAX_BATCH, MAX_PARALLEL, MAX_SEQUENCE_TOKENS
from roofline.errors import ScenarioError
from roofline.specs.hardware import ComputeDtype, HardwareSpec
from roofline.specs.model import ModelSpec
from roofline.specs.moe_layout import check_moe_layout, normalise_overlap
from roofline.specs.precision import Precision
from roofline.specs.quant import MODULE_GROUPS, ModuleFormats, override_formats

if TYPE_CHECKING:
    from roofline.engine.config import EngineConfig

IntArray = Any  # int or numpy integer array (broadcastable)


class Shape(TypedDict, total=False):
    """Shape fields of :meth:`Scenario.with_shape`: whole numbers or integer arrays that broadcast."""

    batch: int | np.ndarray
    prompt_len: int | np.ndarray
    output_len: int | np.ndarray


@dataclass(frozen=True)
class Scenario:
    """One (or an array of) inference workloads on one model replica.

    ``act_dtype`` defaults to the weight format when that is a compute format (fp8 W8A8,
    bf16, fp16), else bf16. ``kv_dtype`` defaults to bf16. Embeddings and lm_head stay
    in the activation format unless ``quantize_embeddings``.

    ``engine``: the serving engine (:class:`roofline.engine.EngineConfig`); ``None`` means the
    default preset resolved for the hardware by :func:`roofline.memory.engine_for`.

    ``dp`` attention-DP ranks of ``tp`` GPUs each, ``redundant_experts`` extra expert slots and ``moe_overlap``
    (``none`` | ``two_batch``) lay out a wide-EP MoE replica (:mod:`roofline.specs.moe_layout`).
    """

    batch: IntArray = 1
    prompt_len: IntArray = 1024
    output_len: IntArray = 128
    weight_dtype: Precision = Precision.BF16
    act_dtype: Precision | None = None
    kv_dtype: Precision = Precision.BF16
    tp: int = 1
    pp: int = 1
    ep: int = 1
    replicas: int = 1
    engine: EngineConfig | None = None
    quantize_embeddings: bool = False
    use_checkpoint: bool = False
    weight_overrides: tuple[tuple[str, Precision], ...] = ()
    allow_long_context: bool = False
    dp: int = 1
    redundant_experts: int = 0
    moe_overlap: str = "none"

    def weight_formats(self, model: ModelSpec) -> ModuleFormats:
        """Weight format of each module group for ``model``: the one truth ops and memory read.

        ``use_checkpoint`` (the default of :func:`roofline.predict`): the model's shipped checkpoint
        (``ModelSpec.checkpoint``), else ``native_dtype`` everywhere; otherwise ``weight_dtype`` on
        every linear group with embeddings per :attr:`embedding_bytes_per_element`. Then the
        per-group ``weight_overrides`` apply.
        """
        if self.use_checkpoint:
            if model.checkpoint is not None:
                base = model.checkpoint.formats()
            else:
                native = Precision.parse(model.native_dtype, "native_dtype")
                base = ModuleFormats.uniform(native, native)
        else:
            emb = self.weight_dtype if self.quantize_embeddings else self.activation
            emb = emb if emb.bytes_per_element >= 2 or self.quantize_embeddings else Precision.BF16
            base = ModuleFormats.uniform(self.weight_dtype, emb)
        return override_formats(base, dict(self.weight_overrides)) if self.weight_overrides else base

    def weight_label(self, model: ModelSpec) -> str:
        """What the weights are stored in: ``bf16``, or ``checkpoint: routed_experts mxfp4`` for per-module formats."""
        if not (self.use_checkpoint or self.weight_overrides):
            return self.weight_dtype.value
        head = "checkpoint: " if self.use_checkpoint else ""
        fmts = self.weight_formats(model)
        moe = model.moe
        present = {
            "attention": True,
            "dense_ffn": model.num_dense_layers > 0,
            "routed_experts": moe is not None,
            "shared_experts": moe is not None and moe.num_shared_experts > 0,
            "embeddings": True,
        }
        parts = [f"{g} {fmts.get(g).value}" for g in MODULE_GROUPS if present[g] and fmts.get(g) is not Precision.BF16]
        return head + (", ".join(parts) or "bf16")

    def group_compute_dtype(self, hw: HardwareSpec, fmt: Precision) -> ComputeDtype:
        """Peak a GEMM on weights in ``fmt`` runs at: an explicit ``act_dtype`` wins; else the format's
        default activation when ``hw`` has that peak (NVFP4 on Blackwell, FP8 on Hopper), else the
        16-bit peak (weight-only dequantisation, as Marlin-style kernels do on older devices)."""
        if self.act_dtype is not None:
            return self._peak(hw, self.act_dtype, "act_dtype")
        dt = fmt.default_activation.compute or "bf16"
        if hw.peak_flops_per_s(dt) is not None:
            return dt
        return "bf16" if hw.peak_flops_per_s("bf16") is not None else "fp16"

    @property
    def cuda_graphs(self) -> bool:
        """Decode steps replayed as CUDA graphs (each decode kernel then pays the profile's
        ``overheads.per_kernel_graph_s`` instead of the eager ``per_kernel_s``), as the engine
        sets it; vLLM, SGLang and TensorRT-LLM >= 0.9 do by default. Prefill (variable token
        counts) always launches its kernels eagerly."""
        return True if self.engine is None else self.engine.cuda_graphs

    @property
    def activation(self) -> Precision:
        """Activation format (resolved default)."""
        if self.act_dtype is not None:
            return self.act_dtype
        return self.weight_dtype.default_activation

    @property
    def activation_memory_bytes_per_element(self) -> float:
        """Bytes per activation element held in HBM: the activation format's, at least 2.

        FP8 (W8A8) engines quantise only the GEMM inputs, inside the kernel that produces them;
        the residual stream, GEMM outputs, attention Q/O and the TP all-reduce stay 16-bit.
        Weight-only int/fp4 formats keep bf16 activations. The one home of this rule: ops,
        memory and embeddings all read it.
        """
        return max(self.activation.bytes_per_element, 2.0)

    @property
    def embedding_bytes_per_element(self) -> float:
        """Bytes per embedding / lm_head element: the weight format when ``quantize_embeddings``,
        else the activation memory format (at least 16 bits)."""
        return (
            self.weight_dtype.bytes_per_element
            if self.quantize_embeddings
            else self.activation_memory_bytes_per_element
        )

    @property
    def gpus_per_replica(self) -> int:
        """GPUs one model replica spans: tp × pp × dp with attention data parallelism (ep = dp × tp), else
        tp × pp × max(1, ep // tp) (ep reuses the tp GPUs when ep <= tp)."""
        if self.dp > 1:
            return self.tp * self.pp * self.dp
        return self.tp * self.pp * max(1, self.ep // self.tp)

    @property
    def num_gpus(self) -> int:
        """GPUs across all replicas."""
        return self.gpus_per_replica * self.replicas

    def with_shape(self, **kw: Unpack[Shape]) -> Scenario:
        """Copy with other batch / prompt_len / output_len."""
        return replace(self, **kw)

    def gemm_compute_dtype(self, hw: HardwareSpec) -> ComputeDtype:
        """Peak used by weight GEMMs: the activation format's (weight-only formats dequantise).

        A default NVFP4 activation on a device without an fp4 peak computes W4A16 (bf16 peak)."""
        if self.act_dtype is None and self.activation is Precision.NVFP4 and hw.peak_flops_per_s("fp4") is None:
            return self._peak(hw, Precision.BF16, "weight_dtype")
        return self._peak(hw, self.activation, "weight_dtype/act_dtype")

    def attention_compute_dtype(self, hw: HardwareSpec) -> ComputeDtype:
        """Peak used by attention (QKᵀ, PV): 16-bit, fp16 or fp32 when the activations are, else bf16.

        FP8 activations (W8A8) do not make attention run at the FP8 peak: FP8 attention math is
        opt-in in every engine (TensorRT-LLM FP8 context FMHA, vLLM/FlashInfer/FA3 FP8 paths are
        flags, not defaults); with an FP8 KV cache the kernels dequantise K/V to 16-bit and run
        the matmuls at the bf16/fp16 peak. Int and fp4 weight-only formats keep bf16.
        """
        keep = (Precision.BF16, Precision.FP16, Precision.FP32)
        act = self.activation if self.activation in keep else Precision.BF16
        return self._peak(hw, act, "act_dtype")

    @staticmethod
    def _peak(hw: HardwareSpec, p: Precision, field_name: str) -> ComputeDtype:
        dt = p.compute or "bf16"
        if hw.peak_flops_per_s(dt) is None:
            alt = ", ".join(hw.peak_dense.supported())
            raise ScenarioError(
                f"{hw.name} has no published {dt} tensor peak, so {field_name}={p.value} cannot run there; "
                f"supported formats: {alt}. Try weight_dtype=bf16 (or weight_dtype=int4, weight-only)."
            )
        return dt

    def validate_for(self, model: ModelSpec, hw: HardwareSpec) -> None:
        """Raise ScenarioError (with a fix) for shapes and parallelism the model cannot take."""
        _check_shape(self.batch, self.prompt_len, self.output_len)
        for name in ("tp", "pp", "ep", "dp", "replicas"):
            v = getattr(self, name)
            if isinstance(v, bool | np.bool_) or not isinstance(v, int | np.integer) or v < 1:
                raise ScenarioError(f"{name} must be an integer >= 1 (got {v!r})")
            if v > MAX_PARALLEL:
                raise ScenarioError(f"{name}={v} exceeds the limit of {MAX_PARALLEL:,} GPUs (roofline.boundary.limits)")
        a = model.attention
        if a.num_heads % self.tp:
            ok = [t for t in (1, 2, 4, 8, 16, 32, 64) if a.num_heads % t == 0]
            raise ScenarioError(
                f"tp={self.tp} does not divide the {a.num_heads} attention heads of {model.name}; use tp in {ok}"
            )
        if a.mla is None and a.num_kv_heads % self.tp and self.tp % a.num_kv_heads:
            raise ScenarioError(
                f"tp={self.tp} neither divides nor is a multiple of the {a.num_kv_heads} KV heads of {model.name}"
            )
        self._check_context(model)
        for layer, _ in model.layer_counts():  # per-layer heads (DeciLM, Gemma-4, MiMo-V2)
            if layer.has_attention and (
                layer.num_heads % self.tp
                or (a.mla is None and layer.num_kv_heads % self.tp and self.tp % layer.num_kv_heads)
            ):
                raise ScenarioError(
                    f"tp={self.tp} does not shard the {layer.num_heads} heads / {layer.num_kv_heads} KV heads of "
                    f"{model.name}'s {layer.label} layers; pick a tp dividing both (or a multiple of the KV heads)"
                )
        la = model.linear_attention
        if la is not None and (la.num_heads % self.tp or (la.num_k_heads % self.tp and self.tp % la.num_k_heads)):
            raise ScenarioError(
                f"tp={self.tp} does not shard the {la.num_heads} {la.kind} heads ({la.num_k_heads} key heads/groups) "
                f"of {model.name}; pick a tp dividing them"
            )
        if self.pp > model.num_layers:
            raise ScenarioError(f"pp={self.pp} exceeds the {model.num_layers} layers of {model.name}")
        check_moe_layout(self, model)
        self.gemm_compute_dtype(hw)
        self.attention_compute_dtype(hw)
        for g, _ in self.weight_overrides:
            if g not in MODULE_GROUPS:
                raise ScenarioError(f"unknown module group '{g}' in weight_dtype; use {', '.join(MODULE_GROUPS)}")

    def _check_context(self, model: ModelSpec) -> None:
        """prompt + output beyond ``max_position_embeddings`` is an error unless ``allow_long_context``
        (then a warning): the model was not trained for it and engines refuse it by default."""
        limit = model.max_position_embeddings
        ctx = float(np.max(np.asarray(self.prompt_len) + np.asarray(self.output_len)))
        if limit is None or ctx <= limit:
            return
        msg = (
            f"prompt_len + output_len = {ctx:,.0f} tokens exceeds the {limit:,} context of {model.name} "
            f"(max_position_embeddings)"
        )
        if not self.allow_long_context:
            raise ScenarioError(
                f"{msg}, beyond what it was trained for (engines refuse it by default): shorten the prompt or output "
                "(--prompt/--output, prompt_len/output_len); to model it anyway from Python, predict with "
                "scenario=dataclasses.replace(roofline.specs.scenario.make_scenario(...), allow_long_context=True)"
            )
        import warnings

        warnings.warn(f"{msg}; modelled anyway (allow_long_context)", stacklevel=3)

    # ---- sharding helpers used by the op builders and the memory function ----------------
    def layers_per_stage(self, model: ModelSpec) -> int:
        """Layers on the largest pipeline stage: ceil(L / pp)."""
        return math.ceil(model.num_layers / self.pp)


class WeightDtypeFields(TypedDict):
    """The Scenario fields a ``weight_dtype`` argument sets (:func:`weight_dtype_fields`)."""

    weight_dtype: Precision
    use_checkpoint: bool
    weight_overrides: tuple[tuple[str, Precision], ...]


def weight_dtype_fields(weight_dtype: object) -> WeightDtypeFields:
    """Scenario fields for a ``weight_dtype`` argument: a format name (uniform), ``"checkpoint"``
    (the shipped checkpoint, the default) or a mapping {module group: format} applied over the
    checkpoint (e.g. ``{"routed_experts": "nvfp4"}``)."""
    if weight_dtype is None or (isinstance(weight_dtype, str) and weight_dtype.strip().lower() == "checkpoint"):
        return {"weight_dtype": Precision.BF16, "use_checkpoint": True, "weight_overrides": ()}
    if isinstance(weight_dtype, dict):
        over = tuple((str(g), Precision.parse(f, f"weight_dtype[{g}]")) for g, f in weight_dtype.items())
        bad = [g for g, _ in over if g not in MODULE_GROUPS]
        if bad:
            raise ScenarioError(
                f"unknown module group(s) {', '.join(bad)} in weight_dtype; use {', '.join(MODULE_GROUPS)}"
            )
        return {"weight_dtype": Precision.BF16, "use_checkpoint": True, "weight_overrides": over}
    return {
        "weight_dtype": Precision.parse(weight_dtype, "weight_dtype"),  # type: ignore[arg-type]
        "use_checkpoint": False,
        "weight_overrides": (),
    }


def _check_shape(batch: Any, prompt_len: Any, output_len: Any) -> None:
    """batch, prompt_len, output_len: whole numbers >= 1 (not booleans) within roofline.boundary.limits."""
    limits = {"batch": MAX_BATCH, "prompt_len": MAX_SEQUENCE_TOKENS, "output_len": MAX_SEQUENCE_TOKENS}
    for name, value in (("batch", batch), ("prompt_len", prompt_len), ("output_len", output_len)):
        try:
            arr = np.asarray(value)
            ok_type = arr.dtype.kind in "iuf" and arr.size > 0
        except (TypeError, ValueError, OverflowError):
            ok_type = False
        if not ok_type:
            raise ScenarioError(f"{name} must be a whole number >= 1 (got {value!r})")
        a = arr.astype(np.float64)
        if not np.all(np.isfinite(a)) or np.any(a < 1) or np.any(a != np.floor(a)):
            raise ScenarioError(f"{name} must be a whole number >= 1 (got {value!r}); fractions and NaN are not counts")
        if np.any(a > limits[name]):
            raise ScenarioError(
                f"{name} must be <= {limits[name]:,} (roofline.boundary.limits), got {float(a.max()):,.0f}"
            )
    ctx = np.asarray(prompt_len, dtype=np.float64) + np.asarray(output_len, dtype=np.float64)
    if np.any(ctx > MAX_SEQUENCE_TOKENS):
        raise ScenarioError(
            f"prompt_len + output_len must be <= {MAX_SEQUENCE_TOKENS:,} tokens (roofline.boundary.limits), "
            f"got {float(ctx.max()):,.0f}"
        )


def kv_heads_per_gpu(num_kv_heads: int, tp: int) -> int:
    """KV heads one GPU holds for a layer with ``num_kv_heads``: H_kv/tp, or 1 (replicated) when tp > H_kv."""
    return max(1, num_kv_heads // tp)


def make_scenario(
    hw: HardwareSpec,
    batch: int | np.ndarray = 1,
    prompt_len: int | np.ndarray = 1024,
    output_len: int | np.ndarray = 128,
    *,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    replicas: int = 1,
    dp: int = 1,
    redundant_experts: int = 0,
    moe_overlap: str = "none",
    weight_dtype: str | Precision | dict[str, str] = "checkpoint",
    act_dtype: str | Precision | None = None,
    kv_dtype: str | Precision = "bf16",
    quantize_embeddings: bool = False,
    engine: EngineConfig | str | None = None,
    engine_overrides: Mapping[str, object] | None = None,
    cuda_graphs: bool | None = None,
) -> Scenario:
    """Build a Scenario from plain values (format names, an engine preset name).

    ``weight_dtype``: ``"checkpoint"`` (default: the shipped checkpoint's per-module formats,
    ``ModelSpec.checkpoint``), one format for every linear layer (``"fp8"``, ``"nvfp4"``), or a
    mapping {module group: format} over the checkpoint (``{"routed_experts": "nvfp4"}``).

    ``engine``: a preset name (``vllm`` default, ``sglang``, ``trtllm``, ``ideal``) or an
    :class:`EngineConfig`; ``engine_overrides`` sets its fields (engine option names such as
    ``gpu_memory_utilization`` or ``max_num_batched_tokens`` are accepted). ``cuda_graphs``
    (None = the engine's setting) replays decode steps as CUDA graphs; False launches every
    decode kernel eagerly. ``dp`` (attention data parallelism), ``redundant_experts`` and ``moe_overlap``
    (``none`` or ``two-batch``) lay out a wide-EP MoE replica (:mod:`roofline.specs.moe_layout`).
    """
    from roofline.engine.config import EngineConfig
    from roofline.engine.presets import overrides_map, resolve_engine

    overrides = overrides_map(engine_overrides)
    if engine is not None and not isinstance(engine, str | EngineConfig):
        raise ScenarioError(f"engine must be a preset name (vllm, sglang, trtllm, ideal) or EngineConfig: {engine!r}")
    if cuda_graphs is not None:
        overrides["cuda_graphs"] = cuda_graphs
    return Scenario(
        batch=batch,
        prompt_len=prompt_len,
        output_len=output_len,
        **weight_dtype_fields(weight_dtype),
        act_dtype=None if act_dtype is None else Precision.parse(act_dtype, "act_dtype"),
        kv_dtype=Precision.parse(kv_dtype, "kv_dtype"),
        tp=tp,
        pp=pp,
        ep=ep,
        replicas=replicas,
        engine=resolve_engine(engine, hw, overrides),
        quantize_embeddings=quantize_embeddings,
        dp=dp,
        redundant_experts=redundant_experts,
        moe_overlap=normalise_overlap(moe_overlap),
    )
