"""Per-layer structure of a decoder: which token mixer and which FFN each layer has.

Most models repeat one layer; hybrids and pruned models do not. A :class:`LayerRun` says
"``repeat`` consecutive layers with this mixer and this FFN" (and, where a layer's shape
differs from the model's defaults, its own heads or FFN width). ``ModelSpec.layers`` is a
run-length list of them; without it the layers follow ``attention.layer_pattern`` and
``moe.first_dense_layers`` as before. Either way ``ModelSpec.resolved_layers()`` gives one
:class:`ResolvedLayer` per layer, which is what parameter counts, the KV/state memory and
the op builder read (one truth for the layer structure).

Mixer kinds:

* ``global``: causal softmax attention over every cached token.
* ``local``: sliding window of ``attention.sliding_window`` tokens (Mistral, Gemma).
* ``chunked``: attention within fixed chunks of ``attention.chunk_size`` tokens (Llama-4
  ``attention_chunk_size``; HF ``Llama4TextAttention`` with ``use_chunked_attention``).
* ``sparse``: attention over the ``top_k`` tokens a lightning indexer selects (DeepSeek-V3.2
  DSA, GLM-5); the indexer scores every cached token. See :class:`SparseAttention`.
* ``linear``: a recurrent-state mixer (Gated DeltaNet, Mamba-2, Kimi Delta Attention); each
  sequence holds a fixed-size state per layer instead of a growing KV cache. See
  :class:`LinearAttention`.
* ``compressed``: DeepSeek-V4 attention (sliding window + compressed entries at the layer's
  ``compress_ratio``); see :mod:`roofline.specs.compressed`.
* ``none``: no mixer (Nemotron-H MLP/MoE blocks, DeciLM ``no_op`` attention).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field, model_validator

from roofline.specs._base import Frozen

MixerKind = Literal["global", "local", "chunked", "sparse", "linear", "compressed", "none"]
FFNKind = Literal["dense", "moe", "none"]
ATTENTION_MIXERS = ("global", "local", "chunked", "sparse")


class LayerRun(Frozen):
    """``repeat`` consecutive layers with one mixer and one FFN; shape fields override the model's defaults."""

    mixer: MixerKind
    ffn: FFNKind
    repeat: int = Field(default=1, gt=0)
    num_heads: int | None = Field(default=None, gt=0, description="attention heads of these layers (DeciLM)")
    num_kv_heads: int | None = Field(default=None, gt=0, description="KV heads of these layers (DeciLM, Gemma-4)")
    head_dim: int | None = Field(default=None, gt=0, description="head dim of these layers (Gemma-4 global)")
    intermediate_size: int | None = Field(default=None, gt=0, description="dense FFN width of these layers")
    shared_indexer: bool = Field(
        default=False, description="sparse layer reusing the previous indexer's top-k (GLM-5.2): no indexer of its own"
    )
    compress_ratio: int = Field(default=0, ge=0, description="compressed layers: source tokens per entry (0: none)")

    @model_validator(mode="after")
    def _consistent(self) -> LayerRun:
        if self.compress_ratio and self.mixer != "compressed":
            raise ValueError("compress_ratio applies to compressed layers only")
        heads = (self.num_heads, self.num_kv_heads, self.head_dim)
        if self.mixer not in ATTENTION_MIXERS and any(x is not None for x in heads):
            raise ValueError(f"mixer '{self.mixer}' has no attention heads; drop num_heads/num_kv_heads/head_dim")
        if self.shared_indexer and self.mixer != "sparse":
            raise ValueError("shared_indexer applies to sparse layers only")
        if self.ffn != "dense" and self.intermediate_size is not None:
            raise ValueError(f"ffn '{self.ffn}' has no dense width; drop intermediate_size")
        return self


class LinearAttention(Frozen):
    """Recurrent-state token mixer shared by all ``linear`` layers.

    ``num_heads`` state heads of ``head_k_dim × head_v_dim`` (Gated DeltaNet: value heads,
    linear_key/value_head_dim; Mamba-2: mamba_num_heads, ssm_state_size × mamba_head_dim;
    KDA: num_heads, head_dim × head_dim). ``num_k_heads`` key heads (GDN
    linear_num_key_heads; Mamba-2 B/C groups ``n_groups``; KDA = num_heads). A depthwise
    causal conv of ``conv_kernel`` taps runs over ``conv_dim = 2·num_k_heads·head_k_dim +
    num_heads·head_v_dim`` channels (q, k, v; Mamba-2: x, B, C).

    Per sequence and layer the cache holds the state ``num_heads·head_k_dim·head_v_dim``
    elements in ``state_dtype`` plus the conv state ``conv_dim·(conv_kernel − 1)`` in 16-bit
    (vLLM ``MambaStateShapeCalculator``: ``mamba2_state_shape``/``gated_delta_net_state_shape``).
    """

    kind: Literal["gated_deltanet", "mamba2", "kda"]
    num_heads: int = Field(gt=0)
    num_k_heads: int = Field(gt=0)
    head_k_dim: int = Field(gt=0)
    head_v_dim: int = Field(gt=0)
    conv_kernel: int = Field(gt=0)
    chunk_size: int = Field(default=64, gt=0, description="chunk length of the prefill scan kernel")
    state_dtype: Literal["fp32", "bf16", "fp16"] = "bf16"
    conv_bias: bool = False
    proj_bias: bool = False
    full_rank_gate: bool = Field(
        default=False, description="kda: output gate g_proj h·(H·d_v) instead of g_a/g_b (Kimi-K3 use_full_rank_gate)"
    )

    @property
    def conv_dim(self) -> int:
        """Channels of the short causal conv: 2·num_k_heads·head_k_dim + num_heads·head_v_dim."""
        return 2 * self.num_k_heads * self.head_k_dim + self.num_heads * self.head_v_dim

    @property
    def state_elements(self) -> int:
        """Recurrent-state elements per sequence per layer: num_heads·head_k_dim·head_v_dim."""
        return self.num_heads * self.head_k_dim * self.head_v_dim

    @property
    def state_bytes_per_element(self) -> float:
        """Bytes per recurrent-state element."""
        return 4.0 if self.state_dtype == "fp32" else 2.0

    @property
    def conv_state_elements(self) -> int:
        """Conv-state elements per sequence per layer: conv_dim·(conv_kernel − 1)."""
        return self.conv_dim * (self.conv_kernel - 1)

    def params(self, hidden: int) -> int:
        """Weights of one mixer block (projections, conv, gates, decay and norm vectors).

        gated_deltanet (HF ``Qwen3NextGatedDeltaNet``): in_proj_qkvz h·(conv_dim + H·dv),
        in_proj_ba h·2H, conv1d conv_dim·K, dt_bias + A_log 2H, gated norm dv, out_proj H·dv·h.
        mamba2 (HF ``NemotronHMamba2Mixer``): in_proj h·(2·H·P + 2·G·N + H), conv1d conv_dim·K
        (+ conv_dim bias), dt_bias + A_log + D 3H, gated norm H·P, out_proj H·P·h.
        kda (fla ``KimiDeltaAttention``): q/k/v proj h·conv_dim, q/k/v conv conv_dim·K,
        f_a h·dk + f_b dk·H·dk, b_proj h·H, A_log H, dt_bias H·dk, g_a h·dv + g_b dv·H·dv,
        o_norm dv, o_proj H·dv·h; with ``full_rank_gate`` (Kimi-K3) the output gate is one g_proj h·H·dv.
        """
        h, hh, dk, dv, k = hidden, self.num_heads, self.head_k_dim, self.head_v_dim, self.conv_kernel
        cd, vd = self.conv_dim, self.num_heads * self.head_v_dim
        if self.kind == "gated_deltanet":
            n = h * (cd + vd) + h * 2 * hh + cd * k + 2 * hh + dv + vd * h
        elif self.kind == "mamba2":
            in_out = 2 * vd + 2 * self.num_k_heads * dk + hh
            n = h * in_out + cd * k + 3 * hh + vd + vd * h
            n += cd * self.conv_bias + (in_out + h) * self.proj_bias
        else:
            gate = h * vd if self.full_rank_gate else h * dv + dv * vd
            n = h * cd + cd * k + h * dk + dk * hh * dk + h * hh + hh + hh * dk + gate + dv + vd * h
        return n


class SparseAttention(Frozen):
    """A lightning indexer choosing the ``top_k`` cached tokens each query attends.

    ``dsa`` (DeepSeek Sparse Attention; DeepSeek-V3.2-Exp ``inference/model.py`` ``Indexer``): every
    query scores every cached token with ``index_heads`` heads of ``index_head_dim`` (FP8 keys, one
    FP32 scale per 128 elements) and attends the ``top_k`` best tokens of an MLA cache. Weights:
    wq_b q_lora_rank·(n·d) (from the MLA query latent), wk h·d, k_norm LayerNorm 2·d, weights_proj h·n.

    ``msa`` (MiniMax Sparse Attention, MiniMax-M3; TensorRT-LLM ``MiniMaxM3Attention``): GQA attention
    over the top-k blocks of ``block_size`` tokens (plus local/initial blocks), ``top_k`` = the tokens
    of those blocks; the index branch has index_q_proj h·(n·d), a single replicated key head
    index_k_proj h·d and per-head RMSNorms on both (2·d); its keys are cached in 16-bit (assumed: the
    K-only index pool in the KV dtype, bf16 by default).
    """

    kind: Literal["dsa", "msa"] = "dsa"
    index_heads: int = Field(gt=0)
    index_head_dim: int = Field(gt=0)
    top_k: int = Field(gt=0, description="tokens each query attends (msa: selected + local + initial blocks)")
    block_size: int | None = Field(default=None, gt=0, description="msa: tokens per selectable block")

    @property
    def cache_bytes_per_token(self) -> float:
        """Indexer key cache per token per layer. dsa: index_head_dim FP8 bytes + 4 bytes per 128 (vLLM
        ``DeepseekV32IndexerCache``: head_dim + head_dim // 128 · 4 = 132 B for 128); msa: 2·index_head_dim."""
        if self.kind == "msa":
            return 2.0 * self.index_head_dim
        return self.index_head_dim + self.index_head_dim / 128 * 4

    def params(self, hidden: int, q_lora_rank: int) -> int:
        """Indexer weights of one layer (see class docstring)."""
        n, d = self.index_heads, self.index_head_dim
        if self.kind == "msa":
            return hidden * n * d + hidden * d + 2 * d
        return q_lora_rank * n * d + hidden * d + 2 * d + hidden * n


@dataclass(frozen=True)
class ResolvedLayer:
    """One layer with every shape filled in; hashable, so equal layers group together.

    ``span_cap`` caps the keys one query attends: the sliding window (local), the chunk
    (chunked, a period rather than a cap), top-k (sparse); inf otherwise.
    """

    mixer: MixerKind
    ffn: FFNKind
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    span_cap: float
    shared_indexer: bool = False
    compress_ratio: int = 0

    @property
    def has_indexer(self) -> bool:
        """True for a sparse layer that runs (and caches keys for) its own lightning indexer."""
        return self.mixer == "sparse" and not self.shared_indexer

    @property
    def has_attention(self) -> bool:
        """True for softmax-attention mixers (global, local, chunked, sparse)."""
        return self.mixer in ATTENTION_MIXERS

    @property
    def label(self) -> str:
        """Short layer-kind label for op records: mixer_ffn (e.g. ``linear_moe``)."""
        return f"{self.mixer}_{self.ffn}"
