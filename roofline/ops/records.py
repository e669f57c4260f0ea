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
from typing import Any, Literal, cast

import numpy as np

from roofline.specs.hardware import ComputeDtype

OpKind = Literal["gemm", "attention", "elementwise", "comm"]
Phase = Literal["prefill", "decode"]
Launch = Literal["eager", "graph"]


def arr(x: object) -> np.ndarray:
    """float64 array view of a scalar or array."""
    return np.asarray(x, dtype=np.float64)


_ZERO = arr(0.0)
_ZERO.flags.writeable = False  # shared by every op's defaulted fields: no one may write into it


def ndim(x: object) -> int:
    """``np.ndim(x)``, answered without numpy's dispatch for the arrays, numpy scalars and Python numbers ops hold."""
    if isinstance(x, np.ndarray | np.generic):
        return x.ndim
    return 0 if isinstance(x, float | int) else int(np.ndim(cast(Any, x)))


def f64(x: float) -> np.ndarray:
    """A one-point field computed in Python floats, as the np.float64 the same numpy expression on 0-d arrays gives
    (IEEE binary64 either way, so the same float: + − × round alike and 0 × inf is NaN in both)."""
    return cast(np.ndarray, np.float64(x))


def _zero() -> np.ndarray:
    """The 0-d float64 zero of an op field left at its default (one read-only array for all ops)."""
    return _ZERO


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
    weight_bytes: np.ndarray = field(default_factory=_zero)
    act_bytes: np.ndarray = field(default_factory=_zero)
    kv_read_bytes: np.ndarray = field(default_factory=_zero)
    kv_write_bytes: np.ndarray = field(default_factory=_zero)
    comm_bytes: np.ndarray = field(default_factory=_zero)
    collectives: int = 0
    comm_hops: np.ndarray = field(default_factory=_zero)
    group_size: int = 1
    kernels: int = 1
    engine_kernels: int = -1  # kernels the scenario's engine launches for it (its kernel inventory); -1: none known
    flops_per_ctx: np.ndarray = field(default_factory=_zero)
    kv_read_bytes_per_ctx: np.ndarray = field(default_factory=_zero)
    ctx_ref: np.ndarray = field(default_factory=_zero)
    ctx_cap: float = float("inf")
    ctx_period: float = float("inf")
    q_per_kv: float = 1.0
    context_dependent: bool = False  # True when FLOPs or KV bytes grow with the attended context
    launch: Launch = "eager"
    grouped: bool = False  # one grouped GEMM over the touched MoE experts (profile.grouped_gemm applies)
    expert_shape: str = ""  # a grouped GEMM's layer shape (roofline.profile_moe.layer_shape); "" otherwise
    custom_collective: np.ndarray = field(default_factory=_zero)  # 1: engine custom all-reduce kernel
    collective: str = ""  # "all_reduce" for an all-reduce (its engine-measured efficiency curve applies); "" else
    weight_element_bytes: float = 0.0  # bytes per weight element of a GEMM (its format: 2 bf16, 1 fp8, ~0.5 4-bit)
    weight_format: str = ""  # the weight GEMM's storage format (Precision value, e.g. "fp8-block"); "" otherwise
    uncaptured: float | np.ndarray = 0.0  # 1 where a "graph" op's step is outside the engine's CUDA-graph capture
    exchange_kernel: str = ""  # an expert dispatch/combine: its kernel family ("normal", "low_latency"); "" otherwise
    exchange_direction: str = ""  # "dispatch" or "combine" (the kernel family's bandwidth differs by direction)
    overlap: str = ""  # "two_batch": its time hides behind its layer's compute (roofline.ops.expert_parallel)
    kv_format: str = ""  # an attention kernel's KV-cache format (Precision value, e.g. "fp8"); "" otherwise
    mla: bool = False  # a multi-head latent attention kernel (its own kernel family in every engine)

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
    m_, n_, k_, wf = arr(m), arr(n), arr(k), arr(weight_fraction)
    if m_.ndim == n_.ndim == k_.ndim == wf.ndim == ndim(w_bytes) == ndim(a_bytes) == ndim(bias_bytes) == 0:
        # one point: the same binary64 operations in the same order in Python floats (see f64)
        fm, fn, fk, w, a = float(m_), float(n_), float(k_), float(w_bytes), float(a_bytes)
        sizes = (f64(fn + 0 * fm), f64(fk + 0 * fm), f64(2.0 * fm * fn * fk))
        moved = (f64((fn * fk * w + float(bias_bytes)) * float(wf) + 0 * fm), f64((fm * fk + fm * fn) * a))
    else:
        sizes = (n_ + 0 * m_, k_ + 0 * m_, 2.0 * m_ * n_ * k_)
        moved = ((n_ * k_ * w_bytes + bias_bytes) * wf + 0 * m_, (m_ * k_ + m_ * n_) * a_bytes)
    return Op(
        name=name,
        group=group,
        kind="gemm",
        layer_kind=layer_kind,
        count=count,
        dtype=dtype,
        m=m_,
        n=sizes[0],
        k=sizes[1],
        flops=sizes[2],
        weight_bytes=moved[0],
        act_bytes=moved[1],
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
    if e.ndim == ndim(passes) == ndim(a_bytes) == ndim(flops_per_elem) == ndim(weight_bytes) == 0:
        fe = float(e)  # one point: the same operations in Python floats (see f64)
        ones, flops = (f64(1.0 + 0 * fe), f64(1.0 + 0 * fe)), f64(float(flops_per_elem) * fe)
        act, weights = f64(float(passes) * fe * float(a_bytes)), f64(float(arr(weight_bytes)) + 0 * fe)
    else:
        ones, flops = (arr(1.0) + 0 * e, arr(1.0) + 0 * e), flops_per_elem * e
        act, weights = passes * e * a_bytes, arr(weight_bytes) + 0 * e
    return Op(
        name=name,
        group=group,
        kind="elementwise",
        layer_kind=layer_kind,
        count=count,
        dtype=dtype,
        m=e,
        n=ones[0],
        k=ones[1],
        flops=flops,
        act_bytes=act,
        weight_bytes=weights,
    )
