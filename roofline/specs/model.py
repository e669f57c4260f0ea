"""Typed model specs: the architecture numbers that decide FLOPs, bytes and KV size.

Every count is exact: ``param_count()`` sums the weight matrices, biases and norm
vectors the architecture defines, so it can be checked against a real module built
from the same spec and against the authors' stated totals.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from roofline.limits import MAX_LAYERS, MAX_MODEL_DIM
from roofline.specs._base import Frozen, Source

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

    @model_validator(mode="after")
    def _consistent(self) -> MoE:
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k ({self.top_k}) exceeds num_experts ({self.num_experts})")
        if self.num_shared_experts and self.shared_intermediate_size is None:
            raise ValueError("num_shared_experts > 0 needs shared_intermediate_size")
        return self


class ModelSpec(Frozen):
    """A decoder-only transformer as its config.json defines it."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$", description="stable lowercase slug, e.g. llama-3.1-70b")
    display_name: str
    aliases: tuple[str, ...] = ()
    hf_repo: str | None = None
    architecture: str
    num_layers: int = Field(gt=0, le=MAX_LAYERS, description=f"at most {MAX_LAYERS} (roofline.limits)")
    hidden_size: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    tie_word_embeddings: bool = False
    max_position_embeddings: int | None = Field(default=None, gt=0)
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    norms_per_layer: int = Field(default=2, ge=0)
    attention: Attention
    ffn: FFN
    moe: MoE | None = None
    native_dtype: str = "bf16"
    sources: tuple[Source, ...] = Field(min_length=1)
    notes: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        a = self.attention
        _check_dims(self.model_dump(include={"hidden_size", "vocab_size", "attention", "ffn", "moe"}), "")
        if a.layer_pattern is not None and len(a.layer_pattern) > MAX_LAYERS:
            raise ValueError(f"attention.layer_pattern has more than {MAX_LAYERS} entries (roofline.limits)")
        if a.mla is None and a.num_heads * a.head_dim < self.hidden_size // 8:
            raise ValueError(
                f"head_dim ({a.head_dim}) x num_heads ({a.num_heads}) = {a.head_dim * a.num_heads} is implausibly "
                f"small for hidden_size {self.hidden_size}; check head_dim"
            )
        if self.moe is not None and self.moe.first_dense_layers >= self.num_layers:
            raise ValueError("moe.first_dense_layers must be smaller than num_layers")
        return self

    # ---- layer structure -------------------------------------------------------------
    def layer_kinds(self) -> tuple[LayerKind, ...]:
        """'global' or 'local' for every layer, from the cyclic ``layer_pattern``."""
        a = self.attention
        if a.layer_pattern is None:
            kind: LayerKind = "local" if a.sliding_window is not None else "global"
            return (kind,) * self.num_layers
        p = a.layer_pattern
        return tuple(p[i % len(p)] for i in range(self.num_layers))

    @property
    def num_moe_layers(self) -> int:
        """Layers whose FFN is a mixture of experts."""
        return 0 if self.moe is None else self.num_layers - self.moe.first_dense_layers

    @property
    def num_dense_layers(self) -> int:
        """Layers with a dense FFN."""
        return self.num_layers - self.num_moe_layers

    # ---- KV cache ----------------------------------------------------------------------
    def kv_elements_per_token_per_layer(self) -> int:
        """Cached elements per token per layer: 2·kv_heads·head_dim, or kv_lora_rank + rope dim for MLA."""
        a = self.attention
        if a.mla is not None:
            return a.mla.kv_lora_rank + a.mla.qk_rope_head_dim
        return 2 * a.num_kv_heads * a.head_dim

    # ---- parameter counts --------------------------------------------------------------
    def attention_params_per_layer(self) -> int:
        """Weights + biases + sinks of one attention block (norm vectors of MLA and QK-norm included)."""
        a, h = self.attention, self.hidden_size
        if a.mla is not None:
            m = a.mla
            qk = m.qk_nope_head_dim + m.qk_rope_head_dim
            if m.q_lora_rank is None:
                q = h * a.num_heads * qk
            else:  # q_a_proj, q_a_layernorm, q_b_proj
                q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * a.num_heads * qk
            kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
            kv += m.kv_lora_rank * a.num_heads * (m.qk_nope_head_dim + m.v_head_dim)
            o = a.num_heads * m.v_head_dim * h
            return q + kv + o
        q_out, kv_out = a.num_heads * a.head_dim, a.num_kv_heads * a.head_dim
        n = h * (q_out + 2 * kv_out) + q_out * h
        if a.qkv_bias:
            n += q_out + 2 * kv_out
        if a.o_bias:
            n += h
        if a.sinks:
            n += a.num_heads
        if a.qk_norm:
            n += 2 * a.head_dim
        return n

    def ffn_params(self, intermediate: int, kind: Literal["gated", "mlp"], bias: bool) -> int:
        """One FFN: 3·h·i (gated) or 2·h·i (plain), plus biases when ``bias``."""
        h = self.hidden_size
        mats = 3 if kind == "gated" else 2
        n = mats * h * intermediate
        if bias:
            n += (mats - 1) * intermediate + h
        return n

    def expert_params(self) -> int:
        """One routed expert (gated)."""
        assert self.moe is not None
        return self.ffn_params(self.moe.expert_intermediate_size, "gated", self.moe.expert_bias)

    def _moe_layer_params(self, experts: int) -> int:
        m = self.moe
        assert m is not None
        n = experts * self.expert_params() + self.hidden_size * m.num_experts
        if m.router_bias:
            n += m.num_experts
        if m.num_shared_experts:
            assert m.shared_intermediate_size is not None
            n += m.num_shared_experts * self.ffn_params(m.shared_intermediate_size, "gated", False)
        return n

    def embedding_params(self) -> int:
        """Input embedding plus the lm_head unless tied: V·h·(1 or 2)."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)

    def _count(self, experts: int) -> int:
        h = self.hidden_size
        per_layer_common = self.attention_params_per_layer() + self.norms_per_layer * h
        dense_ffn = self.ffn_params(self.ffn.intermediate_size, self.ffn.kind, self.ffn.bias)
        n = self.num_layers * per_layer_common + self.num_dense_layers * dense_ffn
        if self.moe is not None:
            n += self.num_moe_layers * self._moe_layer_params(experts)
        return n + self.embedding_params() + h  # + final norm

    def param_count(self) -> int:
        """Total parameters (all experts), embeddings and lm_head included."""
        return self._count(self.moe.num_experts if self.moe else 0)

    def active_param_count(self) -> int:
        """Parameters one token touches: only ``top_k`` routed experts per MoE layer."""
        return self._count(self.moe.top_k if self.moe else 0)


def _check_dims(data: object, where: str) -> None:
    """Every integer width of the spec must be <= MAX_MODEL_DIM (roofline.limits), before any arithmetic."""
    if isinstance(data, dict):
        for k, v in data.items():
            _check_dims(v, f"{where}.{k}" if where else str(k))
    elif isinstance(data, int) and not isinstance(data, bool) and data > MAX_MODEL_DIM:
        raise ValueError(f"{where} = {data} exceeds the limit of {MAX_MODEL_DIM:,} (roofline.limits); check the value")
