"""The blocks of a model spec: attention (with MLA), dense FFN and mixture of experts, as their configs define them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from roofline.specs._base import Frozen

LayerKind = Literal["global", "local"]


class MLA(Frozen):
    """Multi-head latent attention (DeepSeek-V2/V3): low-rank Q and a compressed latent KV.

    The KV cache per token per layer holds ``kv_lora_rank + qk_rope_head_dim`` elements.
    """

    q_lora_rank: int | None = Field(default=None, gt=0)
    kv_lora_rank: int = Field(gt=0)
    qk_rope_head_dim: int = Field(gt=0)
    qk_nope_head_dim: int = Field(gt=0)
    v_head_dim: int = Field(gt=0)
    nope: bool = Field(default=False, description="no rotary on the rope dims (Kimi mla_use_nope): no rope op")


class Attention(Frozen):
    """Self-attention shape. ``kind`` must agree with the head counts.

    ``layer_pattern`` repeats cyclically over layers (e.g. ``[local, global]``); local
    layers attend to the last ``sliding_window`` tokens only.
    """

    kind: Literal["mha", "gqa", "mqa", "mla"]
    num_heads: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    qkv_bias: bool = False
    o_bias: bool = False
    sinks: bool = Field(default=False, description="learned per-head attention sink logits (gpt-oss)")
    qk_norm: bool = Field(default=False, description="RMSNorm of width head_dim on queries and keys (Qwen3)")
    sliding_window: int | None = Field(default=None, gt=0)
    layer_pattern: tuple[LayerKind, ...] | None = None
    mla: MLA | None = None
    # ---- issue 17: per-layer kinds and shapes (used with ModelSpec.layers) ----
    chunk_size: int | None = Field(default=None, gt=0, description="chunk of 'chunked' layers (Llama-4)")
    v_head_dim: int | None = Field(default=None, gt=0, description="value head dim when != head_dim (MiMo-V2)")
    output_gate: bool = Field(
        default=False,
        description="sigmoid output gate: from q_proj (GQA, Qwen3.5 attn_output_gate); MLA: g_proj h·H·v (Kimi-K3)",
    )
    qk_norm_scope: Literal["head", "layer"] = Field(
        default="head", description="QK-norm width: head_dim (Qwen3) or all heads (MiniMax-M2 'per_layer')"
    )
    k_eq_v: bool = Field(
        default=False, description="global layers reuse keys as values: no v_proj, K cached only (Gemma-4)"
    )

    @model_validator(mode="after")
    def _consistent(self) -> Attention:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})")
        expected = (
            "mla"
            if self.mla is not None
            else "mha"
            if self.num_kv_heads == self.num_heads
            else "mqa"
            if self.num_kv_heads == 1
            else "gqa"
        )
        if self.kind != expected:
            raise ValueError(
                f"kind is '{self.kind}' but the heads say '{expected}' "
                f"(num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, mla={'set' if self.mla else 'unset'})"
            )
        if self.layer_pattern is not None:
            if not self.layer_pattern:
                raise ValueError("layer_pattern must not be empty; omit it for all-global attention")
            if "local" in self.layer_pattern and self.sliding_window is None:
                raise ValueError("layer_pattern has local layers but sliding_window is not set")
        return self


class FFN(Frozen):
    """Dense feed-forward block: ``gated`` (SwiGLU/GeGLU, 3 matrices) or ``mlp`` (2 matrices)."""

    kind: Literal["gated", "mlp"]
    intermediate_size: int = Field(gt=0)
    activation: str = "silu"
    bias: bool = False


class MoE(Frozen):
    """Mixture of experts replacing the FFN on all but the first ``first_dense_layers`` layers.

    Experts are gated (3 matrices) of width ``expert_intermediate_size``; each token is
    routed to ``top_k`` of ``num_experts`` and also passes through ``num_shared_experts``
    shared experts of width ``shared_intermediate_size``.
    """

    num_experts: int = Field(gt=1)
    top_k: int = Field(gt=0)
    expert_intermediate_size: int = Field(gt=0)
    num_shared_experts: int = Field(default=0, ge=0)
    shared_intermediate_size: int | None = Field(default=None, gt=0)
    first_dense_layers: int = Field(default=0, ge=0)
    router_bias: bool = False
    expert_bias: bool = False
    # ---- issue 17 ----
    expert_kind: Literal["gated", "mlp"] = Field(default="gated", description="mlp: 2 matrices (Nemotron-H relu2)")
    latent_size: int | None = Field(
        default=None, gt=0, description="routed experts run in this latent width (Nemotron-3 latent MoE)"
    )
    latent_norm: bool = Field(default=False, description="RMSNorm of the latent expert output (Kimi-K3)")

    @model_validator(mode="after")
    def _consistent(self) -> MoE:
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k ({self.top_k}) exceeds num_experts ({self.num_experts})")
        if self.num_shared_experts and self.shared_intermediate_size is None:
            raise ValueError("num_shared_experts > 0 needs shared_intermediate_size")
        return self
