"""Typed model specs: the architecture numbers that decide FLOPs, bytes and KV size.

Every count is exact: ``param_count()`` sums the weight matrices, biases and norm
vectors the architecture defines, so it can be checked against a real module built
from the same spec and against the authors' stated totals.
"""

from __future__ import annotations

import weakref
from collections import Counter
from typing import Literal

from pydantic import Field, model_validator

from roofline.boundary.limits import MAX_LAYERS, MAX_MODEL_DIM
from roofline.specs._base import Frozen, Source
from roofline.specs.blocks import FFN, Attention, LayerKind, MoE
from roofline.specs.compressed import CompressedAttention
from roofline.specs.layers import ATTENTION_MIXERS, LayerRun, LinearAttention, ResolvedLayer, SparseAttention
from roofline.specs.quant import Checkpoint

#: resolved_layers per live model object (id → (weak reference, layers)).
_RESOLVED: dict[int, tuple[weakref.ref[ModelSpec], tuple[ResolvedLayer, ...]]] = {}
#: layer_counts per live model object (id → (weak reference, (layer, count) pairs)).
_COUNTS: dict[int, tuple[weakref.ref[ModelSpec], tuple[tuple[ResolvedLayer, int], ...]]] = {}


class ModelSpec(Frozen):
    """A decoder-only transformer as its config.json defines it."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$", description="stable lowercase slug, e.g. llama-3.1-70b")
    display_name: str
    aliases: tuple[str, ...] = ()
    hf_repo: str | None = None
    architecture: str
    num_layers: int = Field(gt=0, le=MAX_LAYERS, description=f"at most {MAX_LAYERS} (roofline.boundary.limits)")
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
    checkpoint: Checkpoint | None = Field(
        default=None, description="per-module storage of the shipped checkpoint; None = native_dtype everywhere"
    )
    sources: tuple[Source, ...] = Field(min_length=1)
    notes: str = ""
    # ---- issue 17: per-layer structure, recurrent and sparse mixers, MTP ------------------
    layers: tuple[LayerRun, ...] | None = Field(
        default=None, description="run-length list of per-layer mixer/FFN kinds; overrides layer_pattern"
    )
    linear_attention: LinearAttention | None = None
    sparse_attention: SparseAttention | None = None
    mtp_layers: int = Field(
        default=0, ge=0, description="multi-token-prediction layers shipped with the checkpoint (not in param_count)"
    )
    compressed_attention: CompressedAttention | None = None
    attn_res_block_size: int | None = Field(
        default=None, gt=0, description="attention residuals over blocks of this many layers (Kimi-K3)"
    )

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        a = self.attention
        dims = {"hidden_size", "vocab_size", "attention", "ffn", "moe", "linear_attention", "sparse_attention"}
        dims |= {"mtp_layers"}
        _check_dims(self.model_dump(include=dims), "")
        if a.layer_pattern is not None and len(a.layer_pattern) > MAX_LAYERS:
            raise ValueError(f"attention.layer_pattern has more than {MAX_LAYERS} entries (roofline.boundary.limits)")
        if a.mla is None and a.num_heads * a.head_dim < self.hidden_size // 8:
            raise ValueError(
                f"head_dim ({a.head_dim}) x num_heads ({a.num_heads}) = {a.head_dim * a.num_heads} is implausibly "
                f"small for hidden_size {self.hidden_size}; check head_dim"
            )
        if self.moe is not None and self.moe.first_dense_layers >= self.num_layers:
            raise ValueError("moe.first_dense_layers must be smaller than num_layers")
        if self.layers is not None:
            self._check_layers(self.layers)
        return self

    def _check_layers(self, runs: tuple[LayerRun, ...]) -> None:
        total = sum(r.repeat for r in runs)
        if total != self.num_layers:
            raise ValueError(f"layers repeat to {total} layers but num_layers is {self.num_layers}")
        if self.attention.layer_pattern is not None:
            raise ValueError("give either attention.layer_pattern or layers, not both")
        if self.moe is not None and self.moe.first_dense_layers:
            raise ValueError("with layers, say which layers are dense in layers; set moe.first_dense_layers to 0")
        mixers, ffns = {r.mixer for r in runs}, {r.ffn for r in runs}
        needs = {
            "local": (self.attention.sliding_window, "attention.sliding_window"),
            "chunked": (self.attention.chunk_size, "attention.chunk_size"),
            "sparse": (self.sparse_attention, "sparse_attention"),
            "linear": (self.linear_attention, "linear_attention"),
            "compressed": (self.compressed_attention, "compressed_attention"),
        }
        for kind, (value, field) in needs.items():
            if kind in mixers and value is None:
                raise ValueError(f"layers has '{kind}' mixers but {field} is not set")
        if "moe" in ffns and self.moe is None:
            raise ValueError("layers has 'moe' FFNs but moe is not set")
        sa, mla = self.sparse_attention, self.attention.mla
        if "sparse" in mixers and sa is not None and sa.kind == "dsa" and (mla is None or mla.q_lora_rank is None):
            raise ValueError("sparse (DSA) layers need MLA with q_lora_rank (the indexer reads the query latent)")
        for r in runs:
            heads, kv = r.num_heads or self.attention.num_heads, r.num_kv_heads or self.attention.num_kv_heads
            if r.mixer in ATTENTION_MIXERS and heads % kv:
                raise ValueError(f"a layer run has num_heads {heads} not a multiple of num_kv_heads {kv}")

    # ---- layer structure -------------------------------------------------------------
    def layer_kinds(self) -> tuple[LayerKind, ...]:
        """'global' or 'local' for every layer, from the cyclic ``layer_pattern``."""
        a = self.attention
        if a.layer_pattern is None:
            kind: LayerKind = "local" if a.sliding_window is not None else "global"
            return (kind,) * self.num_layers
        p = a.layer_pattern
        return tuple(p[i % len(p)] for i in range(self.num_layers))

    def resolved_layers(self) -> tuple[ResolvedLayer, ...]:
        """One :class:`ResolvedLayer` per layer: from ``layers``, else layer_pattern + first_dense_layers.

        Computed once per (frozen) model object and kept while the object lives: memory, ops and every predict
        on the model read it several times."""
        key = id(self)
        hit = _RESOLVED.get(key)
        if hit is not None and hit[0]() is self:
            return hit[1]
        out = self._resolve_layers()
        _RESOLVED[key] = (weakref.ref(self, lambda _ref: _RESOLVED.pop(key, None)), out)
        return out

    def layer_counts(self) -> tuple[tuple[ResolvedLayer, int], ...]:
        """Each distinct resolved layer with how many layers have it, in order of first appearance: the items of
        ``Counter(self.resolved_layers())``, computed once per (frozen) model object (memory sums read it per call)."""
        key = id(self)
        hit = _COUNTS.get(key)
        if hit is not None and hit[0]() is self:
            return hit[1]
        out = tuple(Counter(self.resolved_layers()).items())
        _COUNTS[key] = (weakref.ref(self, lambda _ref: _COUNTS.pop(key, None)), out)
        return out

    def _resolve_layers(self) -> tuple[ResolvedLayer, ...]:
        a = self.attention
        caps = {
            "local": float(a.sliding_window or 0),
            "chunked": float(a.chunk_size or 0),
            "sparse": float(self.sparse_attention.top_k if self.sparse_attention else 0),
        }
        if self.layers is None:
            first_dense = self.moe.first_dense_layers if self.moe else self.num_layers
            return tuple(
                ResolvedLayer(
                    kind,
                    "dense" if i < first_dense else "moe",
                    a.num_heads,
                    a.num_kv_heads,
                    a.head_dim,
                    self.ffn.intermediate_size,
                    caps.get(kind, float("inf")),
                )
                for i, kind in enumerate(self.layer_kinds())
            )
        out: list[ResolvedLayer] = []
        for r in self.layers:
            attn = r.mixer in ATTENTION_MIXERS
            layer = ResolvedLayer(
                r.mixer,
                r.ffn,
                (r.num_heads or a.num_heads) if attn else 0,
                (r.num_kv_heads or a.num_kv_heads) if attn else 0,
                (r.head_dim or a.head_dim) if attn else 0,
                (r.intermediate_size or self.ffn.intermediate_size) if r.ffn == "dense" else 0,
                caps.get(r.mixer, float("inf")),
                r.shared_indexer,
                r.compress_ratio,
            )
            out += [layer] * r.repeat
        return tuple(out)

    @property
    def num_moe_layers(self) -> int:
        """Layers whose FFN is a mixture of experts."""
        return sum(layer.ffn == "moe" for layer in self.resolved_layers())

    @property
    def num_dense_layers(self) -> int:
        """Layers with a dense FFN."""
        return sum(layer.ffn == "dense" for layer in self.resolved_layers())

    # ---- KV cache ----------------------------------------------------------------------
    def kv_elements_per_token_per_layer(self, layer: ResolvedLayer | None = None) -> int:
        """Cached elements per token of an attention layer: 2·kv_heads·head_dim (K and V; K only when
        ``k_eq_v``), or kv_lora_rank + rope dim for MLA. 0 for layers without attention."""
        a = self.attention
        if layer is not None and not layer.has_attention:
            return 0
        if a.mla is not None:
            return a.mla.kv_lora_rank + a.mla.qk_rope_head_dim
        kv, d = (a.num_kv_heads, a.head_dim) if layer is None else (layer.num_kv_heads, layer.head_dim)
        return kv * (d + (0 if self.k_is_v(layer) else self.v_dim(d)))

    def k_is_v(self, layer: ResolvedLayer | None) -> bool:
        """True when ``layer`` caches K only (``attention.k_eq_v`` applies to global layers, as in Gemma-4)."""
        return self.attention.k_eq_v and (layer is None or layer.mixer == "global")

    def v_dim(self, head_dim: int) -> int:
        """Value head dim of a GQA layer: ``attention.v_head_dim`` if set, else the layer's head_dim."""
        return self.attention.v_head_dim or head_dim

    # ---- parameter counts --------------------------------------------------------------
    def attention_params_per_layer(self, layer: ResolvedLayer | None = None) -> int:
        """Weights + biases + sinks of one attention block (norm vectors of MLA and QK-norm included).

        GQA: q (×2 with an output gate), k, v (absent when k_eq_v), o; the layer's own heads
        when ``layer`` is given. MLA: q_a/q_b (or q), kv_a, kv_a_layernorm, kv_b, o.
        """
        a, h = self.attention, self.hidden_size
        heads, kv_heads, d = (
            (a.num_heads, a.num_kv_heads, a.head_dim)
            if layer is None
            else (layer.num_heads, layer.num_kv_heads, layer.head_dim)
        )
        if a.mla is not None:
            m = a.mla
            qk = m.qk_nope_head_dim + m.qk_rope_head_dim
            if m.q_lora_rank is None:
                q = h * heads * qk
            else:  # q_a_proj, q_a_layernorm, q_b_proj
                q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * heads * qk
            kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
            kv += m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)
            o = heads * m.v_head_dim * h * (2 if a.output_gate else 1)  # o_proj (+ g_proj h -> H·v)
            return q + kv + o
        dv = self.v_dim(d)
        q_out, k_out, v_out = heads * d, kv_heads * d, 0 if self.k_is_v(layer) else kv_heads * dv
        n = h * (q_out * (2 if a.output_gate else 1) + k_out + v_out) + heads * dv * h
        if a.qkv_bias:
            n += q_out + k_out + v_out
        if a.o_bias:
            n += h
        if a.sinks:
            n += heads
        if a.qk_norm:
            n += 2 * d if a.qk_norm_scope == "head" else q_out + k_out
        return n

    def mixer_params(self, layer: ResolvedLayer) -> int:
        """Token-mixer weights of one layer: attention (+ the DSA indexer), a linear mixer, or 0."""
        if layer.mixer == "linear":
            assert self.linear_attention is not None
            return self.linear_attention.params(self.hidden_size)
        if layer.mixer == "compressed":
            assert self.compressed_attention is not None
            return self.compressed_attention.attention_params(
                self.hidden_size, self.attention.num_heads, layer.compress_ratio
            )
        if not layer.has_attention:
            return 0
        n = self.attention_params_per_layer(layer)
        if layer.has_indexer:
            assert self.sparse_attention is not None
            mla = self.attention.mla
            n += self.sparse_attention.params(self.hidden_size, (mla.q_lora_rank or 0) if mla else 0)
        return n

    def ffn_params(self, intermediate: int, kind: Literal["gated", "mlp"], bias: bool, width: int | None = None) -> int:
        """One FFN: 3·w·i (gated) or 2·w·i (plain), plus biases when ``bias``; w = hidden unless ``width``."""
        h = width or self.hidden_size
        mats = 3 if kind == "gated" else 2
        n = mats * h * intermediate
        if bias:
            n += (mats - 1) * intermediate + h
        return n

    def expert_params(self) -> int:
        """One routed expert (gated or plain), in the latent width for a latent MoE."""
        assert self.moe is not None
        m = self.moe
        return self.ffn_params(m.expert_intermediate_size, m.expert_kind, m.expert_bias, m.latent_size)

    def _moe_layer_params(self, experts: int) -> int:
        m = self.moe
        assert m is not None
        h = self.hidden_size
        n = experts * self.expert_params() + h * m.num_experts
        if m.router_bias:
            n += m.num_experts
        if m.num_shared_experts:
            assert m.shared_intermediate_size is not None
            n += m.num_shared_experts * self.ffn_params(m.shared_intermediate_size, m.expert_kind, False)
        if m.latent_size is not None:  # fc1_latent_proj h->latent, fc2_latent_proj latent->h (+ the latent norm)
            n += 2 * h * m.latent_size + m.latent_size * m.latent_norm
        return n

    def embedding_params(self) -> int:
        """Input embedding plus the lm_head unless tied: V·h·(1 or 2)."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)

    def layer_params(self, layer: ResolvedLayer, experts: int) -> int:
        """Weights of one layer with ``experts`` routed experts counted (norm vectors included).

        A layer without a mixer or without an FFN has half of ``norms_per_layer`` norms.
        """
        h = self.hidden_size
        parts = (layer.mixer != "none") + (layer.ffn != "none")
        n = self.mixer_params(layer) + self.norms_per_layer * h * parts // 2
        if layer.ffn == "dense":
            n += self.ffn_params(layer.intermediate_size, self.ffn.kind, self.ffn.bias)
        elif layer.ffn == "moe":
            n += self._moe_layer_params(experts)
        return n

    def _count(self, experts: int) -> int:
        n = sum(self.layer_params(layer, experts) for layer in self.resolved_layers())
        return n + self.embedding_params() + self.hidden_size + self.residual_params()  # + final norm

    def residual_params(self) -> int:
        """Residual-stream weights outside the layers' blocks: attention residuals (Kimi-K3 ``attn_res_block_size``:
        per layer two RMSNorms and two h→1 scorers, 4h, plus 2h at the output) and DeepSeek-V4 hyper-connections
        (:meth:`CompressedAttention.hc_params`); 0 for a plain residual."""
        h, n = self.hidden_size, 0 if self.attn_res_block_size is None else (4 * self.num_layers + 2) * self.hidden_size
        ca = self.compressed_attention
        return n + (ca.hc_params(h, self.num_layers) if ca is not None else 0)

    def param_count(self) -> int:
        """Total parameters (all experts), embeddings and lm_head included; MTP layers excluded."""
        return self._count(self.moe.num_experts if self.moe else 0)

    def active_param_count(self) -> int:
        """Parameters one token touches: only ``top_k`` routed experts per MoE layer."""
        return self._count(self.moe.top_k if self.moe else 0)

    def mtp_param_count(self) -> int:
        """Weights of the ``mtp_layers`` multi-token-prediction modules (not in param_count).

        Each module (DeepSeek-V3 report §2.2; HF/vLLM ``DeepSeekMultiTokenPredictorLayer``) is one
        decoder layer like the model's last one, plus enorm and hnorm (2h), the projection
        eh_proj (2h·h) and a final norm (h); embedding and output head are shared with the model.
        """
        if not self.mtp_layers:
            return 0
        last = self.resolved_layers()[-1]
        if last.mixer not in ("global", "sparse"):  # MTP layers use full attention (Qwen3.5, MiMo-V2)
            a = self.attention
            last = ResolvedLayer(
                "global", last.ffn, a.num_heads, a.num_kv_heads, a.head_dim, last.intermediate_size, float("inf")
            )
        h = self.hidden_size
        per = self.layer_params(last, self.moe.num_experts if self.moe else 0) + 2 * h * h + 3 * h
        return self.mtp_layers * per


def _check_dims(data: object, where: str) -> None:
    """Every integer width of the spec must be <= MAX_MODEL_DIM (roofline.boundary.limits), before any arithmetic."""
    if isinstance(data, dict):
        for k, v in data.items():
            _check_dims(v, f"{where}.{k}" if where else str(k))
    elif isinstance(data, int) and not isinstance(data, bool) and data > MAX_MODEL_DIM:
        raise ValueError(
            f"{where} = {data} exceeds the limit of {MAX_MODEL_DIM:,} (roofline.boundary.limits); check the value"
        )
