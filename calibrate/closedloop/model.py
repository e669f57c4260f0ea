"""A real torch decoder built from a :class:`~roofline.specs.model.ModelSpec`, for closed-loop validation.

The model runs the kernels the cost model counts (``roofline/ops``), so its measured time
can be set against the prediction op for op:

* embedding lookup; per layer: a norm (one fused kernel, :class:`Norm`), **one fused QKV
  Linear**, RoPE (one complex multiply over Q and K), an in-place KV write into a
  preallocated cache (``narrow().copy_``), attention through ``scaled_dot_product_attention``
  (``is_causal`` over the new tokens in prefill, one query over the cache in decode, GQA
  through ``enable_gqa`` exactly as calibration's attention suite calls it, so the fitted
  ``attention.gqa_kv_reuse`` describes this kernel), O projection with the residual add
  accumulated by the GEMM (``addmm``, β = 1), norm, **one fused gate_up Linear**, the
  activation, down projection (again with the residual);
* MoE layers: a router Linear, top-k routing with softmax over the chosen logits, and
  one gate_up / act / down per *touched* expert on its rows (a grouped GEMM done as a
  loop), plus fused shared experts;
* the final norm and the lm_head on the **last position only** of each sequence.

Eager torch cannot fuse, so it also runs RoPE, a separate ``mul`` after the activation and
a second copy for V; :mod:`calibrate.closedloop.extras` prices those with the same profile.
The forward pass runs on tensors gathered once (:mod:`calibrate.closedloop.model_ops`), not through
``nn.Module`` calls. Weights are random (normal, std 0.02): timing does not depend on their
values, and a random router spreads tokens uniformly over the experts as the cost model
assumes.

:func:`scale_spec` shrinks a spec to fit a small device while keeping its shape ratios;
the scaled spec is what the prediction uses, so the built model is the predicted model
(``param_count`` equality is tested).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from calibrate.closedloop.model_ops import (
    AttnPlan,
    BlockPlan,
    FFNPlan,
    KVCache,
    Rope,
    activation,
    apply_rope,
    attention,
    block,
    ffn,
    norm,
)
from roofline.errors import SpecError
from roofline.specs.model import ModelSpec

__all__ = ["Decoder", "KVCache", "MoE", "Rope", "apply_rope", "build_model", "count_parameters", "scale_spec"]

Scale = Literal["tiny", "small", "full"]
# (layers, hidden, vocab cap, expert cap) per scale; heads and FFN widths follow hidden's ratio
SCALES: dict[str, tuple[int, int, int, int]] = {"tiny": (2, 256, 4096, 8), "small": (4, 1024, 16384, 16)}


def _round_to(x: float, multiple: int) -> int:
    return max(multiple, round(x / multiple) * multiple)


def scale_spec(spec: ModelSpec, scale: Scale) -> ModelSpec:
    """A smaller spec with ``spec``'s shape ratios: fewer layers, narrower width, capped vocab and experts.

    ``tiny`` = 2 layers, hidden 256, vocab ≤ 4096, ≤ 8 experts; ``small`` = 4 layers, hidden
    1024, vocab ≤ 16384, ≤ 16 experts. Attention keeps ``head_dim`` and scales the head
    counts by hidden's ratio (at least one KV head, dividing the query heads); FFN and
    expert widths scale by the same ratio (multiples of 16). ``full`` returns ``spec``.
    """
    if scale == "full":
        return spec
    if scale not in SCALES:
        raise SpecError(f"unknown scale '{scale}'; choose tiny, small or full")
    layers, hidden, vocab_cap, expert_cap = SCALES[scale]
    hidden = min(hidden, spec.hidden_size)
    r = hidden / spec.hidden_size
    a = spec.attention
    heads = max(1, round(a.num_heads * r))
    kv = max(1, min(heads, round(a.num_kv_heads * r)))
    while heads % kv:
        kv -= 1
    kind = "mha" if kv == heads else "mqa" if kv == 1 else "gqa"
    attn = a.model_copy(update={"num_heads": heads, "num_kv_heads": kv, "kind": kind})
    update: dict[str, object] = {
        "name": f"{spec.name}-{scale}",
        "display_name": f"{spec.display_name} ({scale}: {layers} layers, hidden {hidden})",
        "aliases": (),
        "num_layers": min(layers, spec.num_layers),
        "hidden_size": hidden,
        "vocab_size": min(vocab_cap, spec.vocab_size),
        "attention": attn,
        "ffn": spec.ffn.model_copy(update={"intermediate_size": _round_to(spec.ffn.intermediate_size * r, 16)}),
        "notes": f"scaled from {spec.name} by calibrate.closedloop.model.scale_spec('{scale}'), ratio {r:g}",
    }
    if spec.moe is not None:
        m = spec.moe
        experts = min(m.num_experts, expert_cap)
        moe_up: dict[str, object] = {
            "num_experts": experts,
            "top_k": max(1, min(m.top_k, experts // 2)),
            "expert_intermediate_size": _round_to(m.expert_intermediate_size * r, 16),
            "first_dense_layers": min(m.first_dense_layers, layers - 1),
        }
        if m.shared_intermediate_size is not None:
            moe_up["shared_intermediate_size"] = _round_to(m.shared_intermediate_size * r, 16)
        update["moe"] = m.model_copy(update=moe_up)
    scaled = spec.model_copy(update=update)
    return ModelSpec.model_validate(scaled.model_dump())  # re-run the validators on the copy


def check_supported(spec: ModelSpec) -> None:
    """Raise SpecError for architecture features this validation model does not build."""
    a = spec.attention
    problems = []
    if a.mla is not None:
        problems.append("multi-head latent attention")
    if a.sinks:
        problems.append("attention sinks")
    if a.sliding_window is not None or a.layer_pattern is not None:
        problems.append("sliding-window attention")
    if spec.norms_per_layer != 2:
        problems.append(f"{spec.norms_per_layer} norms per layer (only 2: pre-attention and pre-FFN)")
    if problems:
        raise SpecError(
            f"{spec.name}: the validation model builds Llama-family dense and MoE decoders only; "
            f"unsupported here: {', '.join(problems)}. Validate a Llama/Mistral/Qwen/Mixtral-style model."
        )


class Norm(nn.Module):
    """One normalisation kernel with a scale vector (no bias), as the cost model's ``norm`` op.

    RMSNorm runs torch's fused ``rms_norm`` kernel on CUDA. torch 2.13 has no fused RMSNorm
    on CPU (``rms_norm`` there dispatches six ops and costs ~15% of a tiny decode step), so on
    CPU, and for ``norm: layernorm`` specs, the fused ``layer_norm`` kernel runs instead: the
    same traffic (read x, one row reduction, write y) and the same parameters.
    """

    def __init__(self, width: int, rms: bool, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.rms, self.eps = rms, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise over the last dimension and scale."""
        return norm(x, self.weight, self.rms, self.eps)


def _norm(spec: ModelSpec, width: int) -> Norm:
    return Norm(width, rms=spec.norm == "rmsnorm")


class Attention(nn.Module):
    """GQA/MQA/MHA with one fused QKV projection, RoPE, in-place cache write and SDPA."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        a, h = spec.attention, spec.hidden_size
        self.hq, self.hkv, self.d = a.num_heads, a.num_kv_heads, a.head_dim
        self.qkv = nn.Linear(h, (self.hq + 2 * self.hkv) * self.d, bias=a.qkv_bias)
        self.o = nn.Linear(self.hq * self.d, h, bias=a.o_bias)
        self.q_norm = Norm(self.d, rms=True, eps=1e-6) if a.qk_norm else None
        self.k_norm = Norm(self.d, rms=True, eps=1e-6) if a.qk_norm else None

    def forward(
        self, x: torch.Tensor, freqs: torch.Tensor, ck: torch.Tensor, cv: torch.Tensor, start: int
    ) -> torch.Tensor:
        """x [B, T, h] → [B, T, h]; writes K/V at positions start … start + T − 1 of the cache."""
        return attention(self.plan(), x, freqs, ck, cv, start)

    def plan(self) -> AttnPlan:
        """The tensors and sizes :func:`attention` needs, gathered once (no module look-ups per call)."""
        qn, kn = self.q_norm, self.k_norm
        return AttnPlan(
            self.qkv.weight,
            self.qkv.bias,
            self.o.weight,
            self.o.bias,
            None if qn is None else qn.weight,
            None if kn is None else kn.weight,
            self.hq,
            self.hkv,
            self.d,
        )


class GatedFFN(nn.Module):
    """gate_up fused in one Linear, act(gate)·up, down; or a plain up/act/down MLP."""

    def __init__(self, spec: ModelSpec, width: int, kind: str, bias: bool) -> None:
        super().__init__()
        h = spec.hidden_size
        self.gated = kind == "gated"
        self.act = spec.ffn.activation
        self.up = nn.Linear(h, 2 * width if self.gated else width, bias=bias)
        self.down = nn.Linear(width, h, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., h] → [..., h]."""
        return ffn(self.plan(), x)

    def plan(self) -> FFNPlan:
        """The tensors :func:`ffn` needs."""
        return FFNPlan(self.up.weight, self.up.bias, self.down.weight, self.down.bias, self.gated, self.act)


class MoE(nn.Module):
    """Router + top-k routed gated experts (stacked weights, one GEMM pair per touched expert) + shared experts."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        m, h = spec.moe, spec.hidden_size
        assert m is not None
        i, e = m.expert_intermediate_size, m.num_experts
        self.top_k, self.act = m.top_k, spec.ffn.activation
        self.router = nn.Linear(h, e, bias=m.router_bias)
        self.w_up = nn.Parameter(torch.empty(e, 2 * i, h))
        self.w_down = nn.Parameter(torch.empty(e, h, i))
        self.b_up = nn.Parameter(torch.empty(e, 2 * i)) if m.expert_bias else None
        self.b_down = nn.Parameter(torch.empty(e, h)) if m.expert_bias else None
        shared = m.num_shared_experts * (m.shared_intermediate_size or 0)
        self.shared = GatedFFN(spec, shared, "gated", False) if shared else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, T, h] → [B, T, h]: Σ over the top-k experts of softmax weight × expert(x)."""
        shape = x.shape
        xf = x.reshape(-1, shape[-1])
        weights, experts = self.router(xf).topk(self.top_k, dim=-1)
        weights = weights.softmax(dim=-1).to(x.dtype)
        flat = experts.flatten()
        order = flat.argsort()
        counts = torch.bincount(flat, minlength=self.w_up.shape[0]).tolist()
        rows = order // self.top_k  # token of each sorted assignment
        out = torch.zeros_like(xf)
        begin = 0
        for e, n in enumerate(counts):
            if n == 0:
                continue
            idx = rows[begin : begin + n]
            u = F.linear(xf[idx], self.w_up[e], None if self.b_up is None else self.b_up[e])
            gate, up = u.chunk(2, dim=-1)
            y = F.linear(
                activation(self.act, gate) * up, self.w_down[e], None if self.b_down is None else self.b_down[e]
            )
            w = weights.flatten()[order[begin : begin + n]]
            out.index_add_(0, idx, y * w[:, None])
            begin += n
        if self.shared is not None:
            out = out + self.shared(xf)
        return out.reshape(shape)


class Block(nn.Module):
    """Pre-norm decoder layer: x + attn(norm(x)), then + ffn(norm(·))."""

    def __init__(self, spec: ModelSpec, moe: bool) -> None:
        super().__init__()
        self.attn_norm = _norm(spec, spec.hidden_size)
        self.attn = Attention(spec)
        self.ffn_norm = _norm(spec, spec.hidden_size)
        f = spec.ffn
        self.ffn: nn.Module = MoE(spec) if moe else GatedFFN(spec, f.intermediate_size, f.kind, f.bias)

    def forward(
        self, x: torch.Tensor, freqs: torch.Tensor, ck: torch.Tensor, cv: torch.Tensor, start: int
    ) -> torch.Tensor:
        """One layer over x [B, T, h]."""
        return block(self.plan(), x, freqs, ck, cv, start)

    def plan(self) -> BlockPlan:
        """The tensors :func:`block` needs (an MoE FFN stays a module: its routing is Python anyway)."""
        f = self.ffn
        return BlockPlan(
            self.attn_norm.weight,
            self.attn.plan(),
            self.ffn_norm.weight,
            f.plan() if isinstance(f, GatedFFN) else f,
            self.attn_norm.rms,
        )


class Decoder(nn.Module):
    """Embedding, layers, final norm and lm_head (last position only) of a ModelSpec."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        check_supported(spec)
        self.spec = spec
        h = spec.hidden_size
        dense = spec.moe.first_dense_layers if spec.moe is not None else spec.num_layers
        self.embed = nn.Embedding(spec.vocab_size, h)
        self.layers = nn.ModuleList(Block(spec, moe=i >= dense) for i in range(spec.num_layers))
        self.norm = _norm(spec, h)
        self.lm_head = nn.Linear(h, spec.vocab_size, bias=False)
        if spec.tie_word_embeddings:
            self.lm_head.weight = self.embed.weight
        self._plan: tuple[torch.Tensor, list[BlockPlan], torch.Tensor, torch.Tensor, bool] | None = None

    def forward(self, tokens: torch.Tensor, cache: KVCache, rope: Rope, start: int) -> torch.Tensor:
        """Logits [B, vocab] of the last position of ``tokens`` [B, T] placed at ``start`` … in the cache.

        Runs on plain tensors gathered once (:meth:`plan`): no ``nn.Module`` call or attribute
        look-up per op, which on a CPU is ~40% of a small model's eager overhead.
        """
        if self._plan is None:
            self._plan = self.plan()
        embed, layers, final, lm_head, rms = self._plan
        x = F.embedding(tokens, embed)
        freqs = rope.tables(start, tokens.shape[1])
        for lp, ck, cv in zip(layers, cache.k, cache.v, strict=True):
            x = block(lp, x, freqs, ck, cv, start)
        return F.linear(norm(x[:, -1], final, rms), lm_head)

    def plan(self) -> tuple[torch.Tensor, list[BlockPlan], torch.Tensor, torch.Tensor, bool]:
        """(embedding, layer plans, final norm, lm_head, rms) for :meth:`forward`.

        Cached in ``_plan``; ``copy.deepcopy`` maps it onto the copy's own parameters.
        """
        layers = [b.plan() for b in self.layers if isinstance(b, Block)]
        return self.embed.weight, layers, self.norm.weight, self.lm_head.weight, self.norm.rms

    @torch.no_grad()
    def init_weights(self, std: float = 0.02) -> None:
        """Random weights: matrices ~ N(0, std²), norm scales 1, biases 0."""
        for name, p in self.named_parameters():
            if p.ndim == 1:
                p.fill_(1.0 if "norm" in name else 0.0)
            elif name.endswith(("b_up", "b_down")):
                p.zero_()
            else:
                p.normal_(0.0, std)


def build_model(spec: ModelSpec, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> Decoder:
    """Allocate a :class:`Decoder` for ``spec`` directly on ``device`` in ``dtype`` with random weights.

    Built on the meta device first so a full-size model never exists twice in memory.
    """
    with torch.device("meta"):
        model = Decoder(spec).to(dtype)
    model = model.to_empty(device=device)
    if spec.tie_word_embeddings:
        model.lm_head.weight = model.embed.weight
    model.init_weights()
    model._plan = None  # gathered from the real parameters on the first forward
    return model.eval()


def count_parameters(model: nn.Module) -> int:
    """Distinct parameter elements (tied weights once), to compare with ``ModelSpec.param_count``."""
    return sum(p.numel() for p in model.parameters())


def weight_bytes(model: nn.Module) -> int:
    """Bytes of the distinct parameters."""
    return sum(p.numel() * p.element_size() for p in model.parameters())
