"""Scenario inputs: workload shape, precision, parallelism and the serving engine.

Shape fields (batch, prompt_len, output_len) may be numpy arrays that broadcast
together: ``sweep`` is ``predict`` evaluated on arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from roofline.errors import ScenarioError
from roofline.specs.hardware import ComputeDtype, HardwareSpec
from roofline.specs.model import ModelSpec
from roofline.specs.precision import Precision

if TYPE_CHECKING:
    from roofline.engine.config import EngineConfig

IntArray = Any  # int or numpy integer array (broadcastable)


@dataclass(frozen=True)
class Scenario:
    """One (or an array of) inference workloads on one model replica.

    ``act_dtype`` defaults to the weight format when that is a compute format (fp8 W8A8,
    bf16, fp16), else bf16. ``kv_dtype`` defaults to bf16. Embeddings and lm_head stay
    in the activation format unless ``quantize_embeddings``.

    ``engine``: the serving engine (:class:`roofline.engine.EngineConfig`); ``None`` means the
    default preset resolved for the hardware by :func:`roofline.memory.engine_for`.
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
        w = self.weight_dtype
        return w if w in (Precision.BF16, Precision.FP16, Precision.FP8, Precision.FP32) else Precision.BF16

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
        """GPUs one model replica spans: tp × pp (ep reuses the tp GPUs when ep <= tp)."""
        return self.tp * self.pp * max(1, self.ep // self.tp)

    @property
    def num_gpus(self) -> int:
        """GPUs across all replicas."""
        return self.gpus_per_replica * self.replicas

    def with_shape(self, **kw: Any) -> Scenario:
        """Copy with other batch / prompt_len / output_len."""
        return replace(self, **kw)

    def gemm_compute_dtype(self, hw: HardwareSpec) -> ComputeDtype:
        """Peak used by weight GEMMs: the activation format's (weight-only formats dequantise)."""
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
        for name in ("batch", "prompt_len", "output_len"):
            arr = np.asarray(getattr(self, name))
            if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr < 1):
                raise ScenarioError(f"{name} must be a whole number >= 1 (got {getattr(self, name)!r})")
        for name in ("tp", "pp", "ep", "replicas"):
            v = getattr(self, name)
            if not isinstance(v, int | np.integer) or v < 1:
                raise ScenarioError(f"{name} must be an integer >= 1 (got {v!r})")
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
        for layer in set(model.resolved_layers()):  # per-layer heads (DeciLM, Gemma-4, MiMo-V2)
            if layer.has_attention and (
                layer.num_heads % self.tp
                or (a.mla is None and layer.num_kv_heads % self.tp and self.tp % layer.num_kv_heads)
            ):
                raise ScenarioError(
                    f"tp={self.tp} does not shard the {layer.num_heads} heads / {layer.num_kv_heads} KV heads of "
                    f"{model.name}'s {layer.label} layers; pick a tp dividing both (or a multiple of the KV heads)"
                )  # fmt: skip
        la = model.linear_attention
        if la is not None and (la.num_heads % self.tp or (la.num_k_heads % self.tp and self.tp % la.num_k_heads)):
            raise ScenarioError(
                f"tp={self.tp} does not shard the {la.num_heads} {la.kind} heads ({la.num_k_heads} key heads/groups) "
                f"of {model.name}; pick a tp dividing them"
            )
        if self.pp > model.num_layers:
            raise ScenarioError(f"pp={self.pp} exceeds the {model.num_layers} layers of {model.name}")
        if self.ep > 1:
            if model.moe is None:
                raise ScenarioError(f"ep={self.ep} needs a mixture-of-experts model; {model.name} is dense. Use ep=1.")
            if model.moe.num_experts % self.ep:
                raise ScenarioError(f"ep={self.ep} does not divide the {model.moe.num_experts} experts of {model.name}")
        self.gemm_compute_dtype(hw)
        self.attention_compute_dtype(hw)

    # ---- sharding helpers used by the op builders and the memory function ----------------
    def kv_heads_per_gpu(self, model: ModelSpec) -> int:
        """KV heads each GPU holds: H_kv/tp, or 1 (replicated) when tp > H_kv."""
        return max(1, model.attention.num_kv_heads // self.tp)

    def layers_per_stage(self, model: ModelSpec) -> int:
        """Layers on the largest pipeline stage: ceil(L / pp)."""
        return math.ceil(model.num_layers / self.pp)
