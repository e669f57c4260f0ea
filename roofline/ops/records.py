"""Typed op records. An op describes work (shape, FLOPs, bytes by kind); never a time.

All numeric fields are float64 numpy arrays broadcast over the scenario grid (a scalar
scenario gives 0-d arrays). Quantities are *per instance on one GPU*; ``count`` is how
many instances one forward pass executes (e.g. the number of layers of that kind).

Context-dependent ops (decode attention) also carry ``flops_per_ctx`` and
``kv_read_bytes_per_ctx``: the increase per token of attended span, where the span is
``min(context, ctx_cap)`` (``ctx_cap`` = sliding window or DSA top-k, or inf), or, for
chunked attention with ``ctx_period`` C, ``((context − 1) mod C) + 1``. This lets the
evaluator sum decode steps over a growing context in closed form.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Literal

import numpy as np

from roofline.specs.hardware import ComputeDtype

OpKind = Literal["gemm", "attention", "elementwise", "comm"]
Phase = Literal["prefill", "decode"]
Launch = Literal["eager", "graph"]


def arr(x: object) -> np.ndarray:
    """float64 array view of a scalar or array."""
    return np.asarray(x, dtype=np.float64)


@dataclass(frozen=True)
class Op:
    """One kind of kernel in a forward pass.

    ``m, n, k``: GEMM shape (tokens, output features, input features); for attention
    m = query tokens, n = attended span per sequence, k = head dim. Bytes are split by
    what is moved: weights, activations, KV cache read/written, and bytes each GPU sends
    per direction over the collective's path (``comm_bytes``, already multiplied by the
    collective's algorithm factor); ``group_size`` is the number of GPUs in the collective
    (it picks the path, :func:`roofline.specs.topology.comm_path`) and ``comm_hops`` the
    latency hops of its algorithm. ``q_per_kv`` is the number of query heads sharing one
    K/V head in an attention kernel (the GQA group size); the evaluator uses it when the
    profile says the kernel re-reads K/V per query head (``attention.gqa_kv_reuse`` < 1).
    ``launch`` says how its ``kernels`` are launched: "eager" (one host launch each, paying
    ``overheads.per_kernel_s``) or "graph" (replayed inside a CUDA graph, paying
    ``overheads.per_kernel_graph_s``, on ``engine_kernels`` — the engine's own count — where the profile's
    per-kernel cost was measured per engine kernel); ``uncaptured`` (1 on the grid points whose decode batch the
    engine has no captured graph for, :meth:`roofline.engine.config.EngineConfig.graph_replays`) makes a "graph"
    op launch eagerly there.
    """

    name: str
    group: str
    kind: OpKind
    layer_kind: str
    count: int
    dtype: ComputeDtype
    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    flops: np.ndarray
    weight_bytes: np.ndarray = field(default_factory=lambda: arr(0.0))
    act_bytes: np.ndarray = field(default_factory=lambda: arr(0.0))
    kv_read_bytes: np.ndarray = field(default_factory=lambda: arr(0.0))
    kv_write_bytes: np.ndarray = field(default_factory=lambda: arr(0.0))
    comm_bytes: np.ndarray = field(default_factory=lambda: arr(0.0))
    collectives: int = 0
    comm_hops: np.ndarray = field(default_factory=lambda: arr(0.0))
    group_size: int = 1
    kernels: int = 1
    engine_kernels: int = -1  # kernels the scenario's engine launches for it (its kernel inventory); -1: none known
    flops_per_ctx: np.ndarray = field(default_factory=lambda: arr(0.0))
    kv_read_bytes_per_ctx: np.ndarray = field(default_factory=lambda: arr(0.0))
    ctx_ref: np.ndarray = field(default_factory=lambda: arr(0.0))
    ctx_cap: float = float("inf")
    ctx_period: float = float("inf")
    q_per_kv: float = 1.0
    context_dependent: bool = False  # True when FLOPs or KV bytes grow with the attended context
    launch: Launch = "eager"
    grouped: bool = False  # one grouped GEMM over the touched MoE experts (profile.grouped_gemm applies)
    custom_collective: np.ndarray = field(default_factory=lambda: arr(0.0))  # 1: engine custom all-reduce kernel
    weight_element_bytes: float = 0.0  # bytes per weight element of a GEMM (its format: 2 bf16, 1 fp8, ~0.5 4-bit)
    weight_format: str = ""  # the weight GEMM's storage format (Precision value, e.g. "fp8-block"); "" otherwise
    uncaptured: float | np.ndarray = 0.0  # 1 where a "graph" op's step is outside the engine's CUDA-graph capture

    @property
    def memory_bytes(self) -> np.ndarray:
        """HBM traffic of one instance: weights + activations + KV read + KV written."""
        return self.weight_bytes + self.act_bytes + self.kv_read_bytes + self.kv_write_bytes

    def span(self, context: object) -> np.ndarray:
        """Attended keys at ``context``: min(context, ctx_cap), or ((context − 1) mod C) + 1 with a period C."""
        ctx = arr(context)
        if np.isfinite(self.ctx_period):
            return np.mod(ctx - 1.0, self.ctx_period) + 1.0
        return np.minimum(ctx, self.ctx_cap)

    def at_context(self, context: np.ndarray) -> Op:
        """The same op evaluated at another context length (tokens attended incl. the new one)."""
        if not self.context_dependent:
            return self
        ds = self.span(context) - self.span(self.ctx_ref)
        return with_fields(
            self,
            flops=self.flops + self.flops_per_ctx * ds,
            kv_read_bytes=self.kv_read_bytes + self.kv_read_bytes_per_ctx * ds,
            n=self.span(context) + 0.0 * self.n,
            ctx_ref=arr(context) + 0.0 * self.ctx_ref,
        )


_OP_FIELDS = frozenset(f.name for f in fields(Op))


def with_fields(op: Op, **changes: object) -> Op:
    """``dataclasses.replace(op, **changes)``, a tenth of its cost: the other fields copied as they are.

    Op has no ``__post_init__`` and its __init__ only stores the fields, so the copy equals the
    one ``replace`` builds; an unknown field name is refused as there."""
    if not changes.keys() <= _OP_FIELDS:
        raise TypeError(f"Op has no field(s) {sorted(changes.keys() - _OP_FIELDS)}")
    new = object.__new__(type(op))
    new.__dict__.update(op.__dict__)
    new.__dict__.update(changes)
    return new


def gemm(
    name: str,
    group: str,
    layer_kind: str,
    count: int,
    dtype: ComputeDtype,
    m: object,
    n: object,
    k: object,
    w_bytes: float,
    a_bytes: float,
    weight_fraction: object = 1.0,
    bias_bytes: float = 0.0,
) -> Op:
    """A dense GEMM (m×k)·(k×n): FLOPs = 2·m·n·k; bytes = weights n·k·w + bias + activations (m·k + m·n)·a.

    ``weight_fraction`` scales the weight bytes read (e.g. MoE: only touched experts);
    ``bias_bytes`` is the bias vector read with the weights.
    """
    m_, n_, k_ = arr(m), arr(n), arr(k)
    return Op(
        name=name,
        group=group,
        kind="gemm",
        layer_kind=layer_kind,
        count=count,
        dtype=dtype,
        m=m_,
        n=n_ + 0 * m_,
        k=k_ + 0 * m_,
        flops=2.0 * m_ * n_ * k_,
        weight_bytes=(n_ * k_ * w_bytes + bias_bytes) * arr(weight_fraction) + 0 * m_,
        act_bytes=(m_ * k_ + m_ * n_) * a_bytes,
        weight_element_bytes=float(w_bytes),
    )


def elementwise(
    name: str,
    group: str,
    layer_kind: str,
    count: int,
    dtype: ComputeDtype,
    elems: object,
    passes: float,
    a_bytes: float,
    flops_per_elem: float = 1.0,
    weight_bytes: object = 0.0,
) -> Op:
    """A memory-bound kernel touching ``elems`` elements ``passes`` times (reads + writes)."""
    e = arr(elems)
    return Op(
        name=name,
        group=group,
        kind="elementwise",
        layer_kind=layer_kind,
        count=count,
        dtype=dtype,
        m=e,
        n=arr(1.0) + 0 * e,
        k=arr(1.0) + 0 * e,
        flops=flops_per_elem * e,
        act_bytes=passes * e * a_bytes,
        weight_bytes=arr(weight_bytes) + 0 * e,
    )
