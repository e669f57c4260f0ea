"""The evaluator: one pure function from (op, hardware, profile) to time and bound.

    time(op) = max(FLOPs / compute ceiling, bytes / bandwidth ceiling)
               + wire bytes / link bandwidth + collectives × latency + kernels × per-kernel overhead

The per-kernel overhead depends on how the op is launched (``Op.launch``): eager kernels pay
``overheads.per_kernel_s``, kernels replayed inside a CUDA graph ``overheads.per_kernel_graph_s``. With the
profile's ``overheads.eager_launch`` = "run_ahead" the host's eager launches run ahead of the GPU through a whole
step instead: an op's time is its GPU time with kernels × per_kernel_graph_s, and its host launch time
(:func:`host_launch_s`) joins the step's, which costs max(Σ GPU time, Σ host launch time)
(:func:`roofline.costs.with_launch_floor`).

Ceilings come from the CalibrationProfile: GEMMs use the dtype's large-GEMM ceiling × the efficiency curve at
their M (× the K curve ``profile.gemm_k`` where measured); attention kernels use the attention multipliers
(:func:`prefill_attention_rate`); memory traffic uses the HBM ceiling × the transfer-size curve; the grouped expert
GEMMs of a MoE layer (``Op.grouped``) take ``profile.grouped_gemm``'s factors on both sides, or, on a layer shape
its tables measured, ceilings that make the op's time its share of the measured layer time. Communication ops use
the bandwidth of the path their group takes (:func:`roofline.specs.topology.comm_path`) × link
efficiency, plus the latency of that path's link kind. The bound is whichever term is largest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from roofline.ops.expert_parallel import exchange_bandwidth_bytes_per_s
from roofline.ops.records import Op, f64, ndim
from roofline.profile import CalibrationProfile, Curve
from roofline.profile_moe import format_key, layer_share
from roofline.specs.hardware import HardwareSpec
from roofline.specs.topology import CommPath, comm_path

BOUNDS = np.array(["compute", "memory", "communication", "overhead"])


@dataclass(frozen=True)
class OpTiming:
    """Seconds of one instance of an op, split by term, and the bound label."""

    time_s: np.ndarray
    compute_s: np.ndarray
    memory_s: np.ndarray
    comm_s: np.ndarray
    overhead_s: np.ndarray
    bound_code: np.ndarray

    @property
    def bound(self) -> np.ndarray:
        """Bound label(s): index ``bound_code`` into BOUNDS."""
        return BOUNDS[self.bound_code]


def prefill_attention_rate(op: Op, hw: HardwareSpec, profile: CalibrationProfile) -> tuple[Curve | None, float]:
    """(curve, FLOP/s it scales) of a prefill attention kernel: the flash-attention curve of its head dim and the
    datasheet peak × ``attention.prefill_kv_rate`` of its KV format (the kernel that format dispatches); (None, 0)
    for a decode kernel or where the profile has no curve."""
    curve = profile.attention.kernel_curve(op)
    peak = hw.peak_flops_per_s(op.dtype) if curve is not None else None
    return (curve, peak * profile.attention.prefill_rate(op)) if peak else (None, 0.0)


def ceilings(op: Op, hw: HardwareSpec, profile: CalibrationProfile) -> tuple[np.ndarray, np.ndarray]:
    """(compute FLOP/s, memory bytes/s) that apply to ``op`` on ``hw``."""
    compute = profile.compute_ceiling(hw, op.dtype)
    memory = profile.memory_ceiling(hw)
    if op.kind == "attention":
        c_att = np.asarray(compute * profile.attention.compute_efficiency) + 0 * op.m
        curve, peak = prefill_attention_rate(op, hw, profile)
        if curve is not None and peak:  # prefill: flash-attention efficiency at its context
            c_att = np.minimum(c_att, peak * curve(op.n))
        return c_att, np.asarray(memory * profile.attention.memory_rate(op)) + 0 * op.m
    if op.kind == "gemm":  # efficiency at its M and, where measured, at its inner dimension K
        fmt = "" if op.grouped else op.weight_format  # the kernel the engine dispatches for the weights' format
        if fmt:
            compute = profile.gemm_compute_ceiling(hw, op.dtype, fmt)
            memory = memory * profile.gemm_memory_rate.get(fmt, 1.0)  # that kernel's weight streaming
        c = compute * profile.gemm_curve(op.dtype, fmt)(op.m) * profile.gemm_k.factor(hw.name, op.dtype, op.k)
    else:
        c = compute + 0 * op.m
    size_curve = profile.memory_size_efficiency
    bw = memory * size_curve(op.memory_bytes) if size_curve is not None else memory + 0 * op.m
    if op.grouped:  # grouped expert GEMM (m rows per expert): below a dense GEMM on both sides
        fmt, gg = format_key(op.dtype, op.weight_element_bytes, op.weight_format), profile.grouped_gemm
        layer_s = gg.layer_seconds(hw.name, fmt, op.expert_shape, op.flops / (2.0 * op.n * op.k)) if gg.layers else None
        if layer_s is not None:  # this exact layer shape was measured: the op takes its share of the layer's time
            own_s = layer_share(op.name, op.expert_shape) * layer_s
            roof_s = np.maximum(op.flops / c, op.memory_bytes / bw)  # its roofline time at the dense ceilings
            f = np.where(roof_s > 0, roof_s / np.maximum(own_s, 1e-30), 1.0)  # 1 where there is no work (M = 0)
            return np.asarray(c * f), np.asarray(bw * f)
        c = c * gg.compute_factor(hw.name, op.m, fmt)
        bw = bw * gg.memory_factor(hw.name, op.m, op.n * op.k, fmt)
    return np.asarray(c), np.asarray(bw)


def kv_read_factor(op: Op, profile: CalibrationProfile) -> float:
    """HBM reads per cached K/V byte: 1 + (1 − gqa_kv_reuse)·(q_per_kv − 1); 1 for non-attention ops."""
    return 1.0 + (1.0 - profile.attention.gqa_kv_reuse) * (op.q_per_kv - 1.0) if op.kind == "attention" else 1.0


def hbm_bytes(op: Op, profile: CalibrationProfile) -> np.ndarray:
    """HBM traffic the kernel really moves: the op's bytes plus any per-query-head K/V re-reads."""
    extra = kv_read_factor(op, profile) - 1.0
    return op.memory_bytes + extra * op.kv_read_bytes if extra else op.memory_bytes


def launch_overhead_s(op: Op, profile: CalibrationProfile) -> float | np.ndarray:
    """GPU-side fixed launch cost of one instance of ``op``: kernels × the per-kernel cost of its launch mode; in a
    graph on the engine's own kernel count where the profile measured its cost per engine kernel
    (``overheads.graph_kernels`` = "engine" and the op knows its ``engine_kernels``); a graph op whose step is
    outside the engine's capture (``op.uncaptured`` = 1) is launched eagerly. Eager kernels cost
    ``per_kernel_s`` each here (one per op, as it was fitted) when the profile's ``eager_launch`` is "additive";
    when it is "run_ahead" they cost the graph gap ``per_kernel_graph_s`` each here, on the same count as in a graph,
    and the host's ``per_kernel_s`` each is :func:`host_launch_s`, which the step's GPU work hides."""
    o = profile.overheads
    n = op.engine_kernels if o.graph_kernels == "engine" and op.engine_kernels >= 0 else op.kernels
    graph = n * o.per_kernel_graph_s
    eager = graph if o.eager_launch == "run_ahead" else op.kernels * o.per_kernel_s
    if op.launch != "graph":
        return eager
    u = op.uncaptured
    if isinstance(u, float) and u == 0.0:  # every grid point replays a captured graph (the common case)
        return graph
    return graph + u * (eager - graph)  # eager where the step's batch has no captured graph


def host_launch_s(op: Op, profile: CalibrationProfile) -> float | np.ndarray:
    """Host seconds to launch one instance of ``op`` eagerly (``eager_launch`` = "run_ahead"; 0 otherwise): kernels ×
    ``per_kernel_s`` for an eager op, × ``op.uncaptured`` for a graph op (the share of its grid outside the engine's
    capture). The host runs ahead through the step: the step takes max(Σ GPU time, Σ this)
    (:func:`roofline.costs.with_launch_floor`), not each op on its own."""
    o = profile.overheads
    if o.eager_launch != "run_ahead" or not o.per_kernel_s:
        return 0.0
    host = op.kernels * o.per_kernel_s
    if op.launch != "graph":
        return host
    u = op.uncaptured
    return 0.0 if isinstance(u, float) and u == 0.0 else u * host


def step_host_launch_s(ops: list[Op], profile: CalibrationProfile) -> float | np.ndarray:
    """Host seconds H = Σ_ops count × :func:`host_launch_s` of one step's ops (0 without a run-ahead launch)."""
    if profile.overheads.eager_launch != "run_ahead" or not profile.overheads.per_kernel_s:
        return 0.0
    total: float | np.ndarray = 0.0
    for op in ops:
        h = host_launch_s(op, profile)
        if isinstance(h, float):  # the common case (an eager op, or a graph op captured everywhere): no numpy call
            if h > 0.0:
                total = total + op.count * h
        elif np.any(h > 0):
            total = total + op.count * h
    return total


def fixed_overhead_s(op: Op, profile: CalibrationProfile, hardware: str = "") -> float | np.ndarray:
    """Fixed GPU seconds of one instance beyond its bytes, FLOPs and wire: the launch cost, plus the kernel's per-call
    floor (:meth:`roofline.profile.CalibrationProfile.floor_s`: an attention kernel's ``decode_fixed_s`` for decode,
    one whose K/V reads grow with the context, ``prefill_fixed_s`` for prefill; a quantised dense GEMM's
    ``gemm_fixed_s``; a quantised MoE call's on ``hardware``)."""
    return launch_overhead_s(op, profile) + profile.floor_s(op, hardware)


def comm_bandwidth_bytes_per_s(
    op: Op, hw: HardwareSpec, profile: CalibrationProfile, path: CommPath | None = None
) -> float | np.ndarray:
    """Achieved per-direction bandwidth (bytes/s) of a comm op's wire bytes: the path's bandwidth × the profile's
    ``comm.link_efficiency``; for an all-reduce inside one node where the profile measured the engine's all-reduce
    (``comm.allreduce_efficiency`` for the op's launch, nearest GPU count), × that curve at the message size
    (``op.m``, bytes) instead; an expert dispatch or combine at its kernel family's measured bandwidth
    (:func:`roofline.ops.expert_parallel.exchange_bandwidth_bytes_per_s`, already achieved). ``path``: the op's
    :func:`~roofline.specs.topology.comm_path`, if the caller has it."""
    if path is None:
        path = comm_path(hw, op.group_size)
    if op.exchange_kernel:
        return exchange_bandwidth_bytes_per_s(hw, op.exchange_kernel, op.exchange_direction, op.group_size)  # type: ignore[arg-type]
    if op.collective == "all_reduce" and path.nodes <= 1 and profile.comm.allreduce_efficiency:
        curve = profile.comm.allreduce_curve(op.launch, op.group_size)
        if curve is not None:
            return path.bandwidth_bytes_per_s * curve(op.m)
    return path.bandwidth_bytes_per_s * profile.comm.link_efficiency


def comm_time_s(op: Op, hw: HardwareSpec, profile: CalibrationProfile) -> np.ndarray:
    """Communication time of one instance: wire bytes / path bandwidth + latency.

    latency = collectives × ``comm.latency_s`` (per-collective base) + hops × the per-hop latency
    of the link each hop crosses (``comm.hop_latency_s[link]``): all on the path's link inside one
    domain; across domains (nodes − 1)/(p − 1) of them on the network (:meth:`CommPath.hop_links`).
    Where the engine runs its custom all-reduce kernel (``op.custom_collective``) and the profile
    measured that kernel (``comm.custom_allreduce_latency_s`` at the nearest GPU count), that
    measured latency replaces the base and hop terms. The bandwidth is :func:`comm_bandwidth_bytes_per_s` (an
    expert dispatch or combine at its kernel family's; an all-reduce at the engine's measured curve, if any).
    """
    if op.kind != "comm":
        return 0.0 * op.comm_bytes
    path = comm_path(hw, op.group_size)
    bw = comm_bandwidth_bytes_per_s(op, hw, profile, path)
    lat = op.collectives * profile.comm.latency_s + 0 * op.comm_hops
    for link, hops in path.hop_links(op.comm_hops):
        lat = lat + hops * profile.comm.hop_latency(link)
    custom = profile.comm.custom_latency(op.group_size)
    if custom is not None and np.any(op.custom_collective):
        lat = np.where(op.custom_collective > 0, op.collectives * custom, lat)
    return op.comm_bytes / bw + lat


def op_time(op: Op, hw: HardwareSpec, profile: CalibrationProfile) -> OpTiming:
    """GPU time of one instance of ``op``: the roofline max plus communication and fixed overheads,

        time = max(compute, memory) + comm + fixed

    (a run-ahead host's launch time is the step's, not the op's: :func:`host_launch_s`)."""
    c, bw = ceilings(op, hw, profile)
    hbm = hbm_bytes(op, profile)
    comm_s = comm_time_s(op, hw, profile)
    fixed = fixed_overhead_s(op, profile, hw.name)
    if c.ndim == bw.ndim == ndim(hbm) == ndim(op.flops) == ndim(comm_s) == ndim(fixed) == 0 and c and bw:
        return _scalar_op_time(float(op.flops) / float(c), float(hbm) / float(bw), float(comm_s), float(fixed))
    compute_s = op.flops / c
    memory_s = hbm / bw
    roof_s = np.maximum(compute_s, memory_s)
    overhead_s = np.asarray(fixed) + 0 * compute_s
    time_s = roof_s + comm_s + overhead_s
    return OpTiming(
        time_s, compute_s, memory_s, comm_s, overhead_s, bound_codes(compute_s, memory_s, comm_s, overhead_s)
    )


def _scalar_op_time(compute_s: float, memory_s: float, comm_s: float, fixed_s: float) -> OpTiming:
    """:func:`op_time` of a one-point op from its terms (seconds) in Python floats: the same binary64 operations
    in the same order as the numpy ones (a NaN propagates through the max as ``np.maximum``'s does), typed as
    those give them (np.float64 times, a 0-d int64 bound code)."""
    overhead_s = fixed_s + 0 * compute_s
    time_s = _nan_max(compute_s, memory_s) + comm_s + overhead_s
    code = np.asarray(_scalar_code(compute_s, memory_s, comm_s, overhead_s), dtype=np.int64)
    return OpTiming(f64(time_s), f64(compute_s), f64(memory_s), f64(comm_s), f64(overhead_s), code)


def bound_codes(compute_s: np.ndarray, memory_s: np.ndarray, comm_s: np.ndarray, overhead_s: np.ndarray) -> np.ndarray:
    """Index into BOUNDS of the largest term (ties go to the earlier label)."""
    if ndim(compute_s) == ndim(memory_s) == ndim(comm_s) == ndim(overhead_s) == 0:
        terms = (float(compute_s), float(memory_s), float(comm_s), float(overhead_s))
        return np.asarray(_scalar_code(*terms), dtype=np.int64)
    code = np.where(memory_s > compute_s, 1, 0)
    best = np.maximum(compute_s, memory_s)
    code = np.where(comm_s > best, 2, code)
    best = np.maximum(best, comm_s)
    return np.where(overhead_s > best, 3, code)


def _scalar_code(compute_s: float, memory_s: float, comm_s: float, overhead_s: float) -> int:
    """:func:`bound_codes` of one point in Python floats (a NaN term compares as numpy's does)."""
    code = 1 if memory_s > compute_s else 0
    best = _nan_max(compute_s, memory_s)
    code = 2 if comm_s > best else code
    best = _nan_max(best, comm_s)
    return 3 if overhead_s > best else code


def _nan_max(x: float, y: float) -> float:
    """np.maximum of two floats: NaN when either is NaN."""
    return x if x >= y else (y if y > x else math.nan)


def _lin_sum(p: np.ndarray, q: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Σ_{s=a}^{b} (p + q·s) over integers; 0 when b < a."""
    n = np.maximum(b - a + 1, 0)
    return n * p + q * (a + b) * n / 2


def sum_max_affine(
    p: np.ndarray, q: np.ndarray, u: np.ndarray, v: np.ndarray, a: np.ndarray, b: np.ndarray
) -> np.ndarray:
    """Σ_{s=a}^{b} max(p + q·s, u + v·s) over integers, in closed form.

    The two lines cross at s0 = (u − p)/(q − v); each side of the crossing is an
    arithmetic series.
    """
    # The crossing and the side each line wins depend on p, q, u, v alone: worked out in their own (often far
    # smaller) broadcast shape, they broadcast against a and b in the sums, the same float at every point.
    p, q, u, v, a, b = (np.asarray(x, dtype=np.float64) for x in (p, q, u, v, a, b))
    dq = q - v
    with np.errstate(divide="ignore", invalid="ignore"):
        s0 = np.where(dq != 0, (u - p) / np.where(dq != 0, dq, 1.0), 0.0)
    rising, falling = dq > 0, dq < 0
    # first line wins for s >= c (dq > 0) or s < c (dq < 0); a case no point is in is not computed
    if rising.all():
        return _sum_rising(p, q, u, v, a, b, s0)
    if falling.all():
        return _sum_falling(p, q, u, v, a, b, s0)
    flat = np.where(p >= u, _lin_sum(p, q, a, b), _lin_sum(u, v, a, b))
    if not rising.any() and not falling.any():
        return flat
    dn = _sum_falling(p, q, u, v, a, b, s0) if falling.any() else flat
    return np.where(rising, _sum_rising(p, q, u, v, a, b, s0) if rising.any() else flat, np.where(falling, dn, flat))


def _sum_rising(
    p: np.ndarray, q: np.ndarray, u: np.ndarray, v: np.ndarray, a: np.ndarray, b: np.ndarray, s0: np.ndarray
) -> np.ndarray:
    """:func:`sum_max_affine` where q > v: the second line up to the crossing s0, the first from it."""
    c_up = np.clip(np.ceil(s0), a, b + 1)
    return _lin_sum(u, v, a, c_up - 1) + _lin_sum(p, q, c_up, b)


def _sum_falling(
    p: np.ndarray, q: np.ndarray, u: np.ndarray, v: np.ndarray, a: np.ndarray, b: np.ndarray, s0: np.ndarray
) -> np.ndarray:
    """:func:`sum_max_affine` where q < v: the first line up to the crossing s0, the second after it."""
    c_dn = np.clip(np.floor(s0) + 1, a, b + 1)
    return _lin_sum(p, q, a, c_dn - 1) + _lin_sum(u, v, c_dn, b)


def op_time_summed_over_context(
    op: Op, hw: HardwareSpec, profile: CalibrationProfile, ctx_lo: np.ndarray, ctx_hi: np.ndarray
) -> np.ndarray:
    """Σ over integer contexts L in [ctx_lo, ctx_hi] of op_time(op.at_context(L)), in closed form.

    FLOPs and bytes are affine in the span s = min(L, cap), so each instance's time is
    max(p + q·s, u + v·s) + fixed (:func:`op_time`): below the cap s = L, above it s = cap (:func:`sum_max_affine`).
    """
    lo, hi = np.asarray(ctx_lo, dtype=np.float64), np.asarray(ctx_hi, dtype=np.float64)
    n_steps = np.maximum(hi - lo + 1, 0)
    if not op.context_dependent:
        return op_time(op, hw, profile).time_s * n_steps
    c, bw = ceilings(op, hw, profile)
    s_ref = op.span(op.ctx_ref)
    p = (op.flops - op.flops_per_ctx * s_ref) / c
    q = op.flops_per_ctx / c
    kv_f = kv_read_factor(op, profile)
    u = (hbm_bytes(op, profile) - kv_f * op.kv_read_bytes_per_ctx * s_ref) / bw
    v = kv_f * op.kv_read_bytes_per_ctx / bw
    cap = op.ctx_cap
    fixed = comm_time_s(op, hw, profile)
    fixed = fixed + fixed_overhead_s(op, profile, hw.name)
    if np.isfinite(op.ctx_period):
        return _periodic_sum(p, q, u, v, lo, hi, op.ctx_period) + fixed * n_steps
    below = sum_max_affine(p, q, u, v, lo, np.minimum(hi, cap))
    if np.isinf(cap):
        above = 0.0 * below
    else:
        n_above = np.maximum(hi - np.maximum(lo, cap + 1) + 1, 0)
        above = n_above * np.maximum(p + q * cap, u + v * cap)
    return below + above + fixed * n_steps


def _periodic_sum(
    p: np.ndarray,
    q: np.ndarray,
    u: np.ndarray,
    v: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    period: float,
) -> np.ndarray:
    """Σ_{L=lo}^{hi} max(p + q·s, u + v·s) with the chunked span s(L) = ((L − 1) mod C) + 1.

    The contexts split into the rest of lo's chunk (s from s(lo) up to C or the end), whole
    chunks (s = 1 … C each) and a last partial chunk (s = 1 … r); each piece is an affine
    sum in closed form.
    """
    n = np.maximum(hi - lo + 1, 0)
    s_lo = np.mod(lo - 1.0, period) + 1.0
    first = np.minimum(n, period - s_lo + 1)
    rest = n - first
    full = np.floor(rest / period)
    last = rest - full * period
    head = sum_max_affine(p, q, u, v, s_lo, s_lo + first - 1)
    one = np.ones_like(n)
    body = full * sum_max_affine(p, q, u, v, one, period * one)
    tail = sum_max_affine(p, q, u, v, one, last)
    return head + body + tail


def _lin_sum_scalar(p: float, q: float, a: int, b: int) -> float:
    """Σ_{j=a}^{b} (p + q·j); 0 when b < a."""
    n = b - a + 1
    return n * p + q * (a + b) * n / 2 if n > 0 else 0.0


def sum_max_affine_steps(p: float, q: float, u: float, v: float, k: int) -> float:
    """Σ_{j=0}^{k−1} max(p + q·j, u + v·j) in closed form (the lines cross at j0 = (u − p)/(q − v)).

    The scalar twin of :func:`sum_max_affine` for the serving simulator's decode stretches, where one
    call per event must cost microseconds, not a numpy dispatch."""
    dq = q - v
    if dq == 0.0:
        return _lin_sum_scalar(p, q, 0, k - 1) if p >= u else _lin_sum_scalar(u, v, 0, k - 1)
    j0 = (u - p) / dq
    if dq > 0:  # first line wins for j ≥ j0
        c = min(max(math.ceil(j0), 0), k)
        return _lin_sum_scalar(u, v, 0, c - 1) + _lin_sum_scalar(p, q, c, k - 1)
    c = min(max(math.floor(j0) + 1, 0), k)  # first line wins for j ≤ j0
    return _lin_sum_scalar(p, q, 0, c - 1) + _lin_sum_scalar(u, v, c, k - 1)
