"""The compiled cost of one phase (prefill or decode op list) for the step model: tables and terms.

:func:`compile_phase` splits the op list the builders emit into per-token and per-sequence tables, recurrent
state terms, attention terms and span terms, each exact (formulas in :mod:`roofline.serving.sim.steptime`).
Every term prices a scalar step (the simulator's step-by-step path) or an array of them (the screening tier).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TypeVar

import numpy as np

from roofline.evaluate import ceilings, fixed_overhead_s, host_launch_s, kv_read_factor, op_time, prefill_attention_rate
from roofline.ops.builder import build_ops
from roofline.ops.records import Op, Phase
from roofline.profile import CalibrationProfile, Curve
from roofline.specs.hardware import HardwareSpec
from roofline.specs.model import ModelSpec
from roofline.specs.scenario import Scenario

#: What builds a pass's ops (:func:`roofline.ops.builder.build_ops`'s signature): (model, scenario, hardware, phase,
#: batch, new tokens, past) → ops; the attention-DP step model compiles a rank's ops and the experts' apart.
OpBuilder = Callable[[ModelSpec, Scenario, HardwareSpec, Phase, object, object, object], list[Op]]

#: Seconds, token or row counts: a float in the simulator's step-by-step path, an array in the screening tier.
Sec = TypeVar("Sec", float, np.ndarray)


def _larger(a: Sec, b: Sec) -> Sec:
    """max(a, b), elementwise for arrays (a plain comparison for floats: the simulator's hot path)."""
    if type(a) is np.ndarray or type(b) is np.ndarray:
        return np.maximum(a, b)
    return a if a > b else b


_LOG2: dict[float, float] = {}  # numpy's log2 of whole spans (bounded by the contexts a run meets)


def _log2(x: float) -> float:
    """``float(np.log2(max(x, 1e-30)))`` for a float: numpy's own log2 (which can differ from ``math.log2`` in
    the last bit), memoised for whole numbers below 2**24, the spans of prefill chunks."""
    x = x if x > 1e-30 else 1e-30
    v = _LOG2.get(x)
    if v is None:
        v = float(np.log2(x))
        if x < 16777216.0 and x == int(x):
            _LOG2[x] = v
    return v


@dataclass(frozen=True)
class AttnTerm:
    """One attention kernel kind: time = count·(max(fpp·pairs/C, (apt·M + kvb·span)/B) + fixed_s) (GPU seconds; its
    host launch is in the phase's host tables, :attr:`PhaseModel.host_token_s`)."""

    count: float
    flops_per_pair: float
    act_bytes_per_token: float
    kv_bytes_per_span: float  # HBM bytes per token of span, including GQA re-reads
    window: float
    compute_flops_per_s: float
    memory_bytes_per_s: float
    fixed_s: float
    prefill_peak_flops_per_s: float = 0.0
    prefill_curve: Curve | None = None
    #: the prefill curve's knots (log2 of its sizes, its values) as floats, for :meth:`ceiling_at`; () without one
    knots: tuple[tuple[float, ...], tuple[float, ...]] = field(init=False, repr=False, compare=False)
    #: :meth:`ceiling_at` of the whole spans met so far (FLOP/s by span in tokens), below 2**24
    memo: dict[float, float] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        knots: tuple[tuple[float, ...], tuple[float, ...]] = ((), ())
        if self.prefill_curve is not None and self.prefill_peak_flops_per_s:
            lx = np.log2(np.asarray(self.prefill_curve.x, dtype=np.float64))  # as interp_log2 reads the knots
            knots = (tuple(lx.tolist()), tuple(np.asarray(self.prefill_curve.y, dtype=np.float64).tolist()))
        object.__setattr__(self, "knots", knots)

    def ceiling_at(self, span: float) -> float:
        """:meth:`compute_ceiling` at one finite span, as a float and without a numpy call per step (the same
        value to the last bit: numpy's log2 and numpy's interpolation formula); memoised for whole spans."""
        v = self.memo.get(span)
        if v is not None:
            return v
        xp, fp = self.knots
        cap = self.compute_flops_per_s
        if not xp:
            return cap
        # np.interp(x, xp, fp) by numpy's formula (arr_interp): clamped at both ends, a knot's own value on a
        # knot, else slope·(x − xp[j]) + fp[j] with slope = (fp[j+1] − fp[j]) / (xp[j+1] − xp[j])
        x = _LOG2.get(span)
        if x is None:  # _log2(span), written out
            x = float(np.log2(span if span > 1e-30 else 1e-30))
            if 1e-30 < span < 16777216.0 and span == int(span):
                _LOG2[span] = x
        n = len(xp) - 1
        if x <= xp[0]:
            y = fp[0]
        elif x >= xp[n]:
            y = fp[n]
        else:
            j = bisect_right(xp, x) - 1
            y = fp[j] if xp[j] == x else (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j]) * (x - xp[j]) + fp[j]
        v = self.prefill_peak_flops_per_s * y
        v = v if v < cap else cap
        if span < 16777216.0 and span == int(span):
            self.memo[span] = v
        return v

    def compute_ceiling(self, span: np.ndarray | float) -> np.ndarray:
        """FLOP/s at an attended span: the cap, or the prefill flash-attention curve of the profile
        (min(cap, peak × curve(span)), as :func:`roofline.evaluate.ceilings` prices prefill attention)."""
        cap = np.asarray(self.compute_flops_per_s, dtype=np.float64)
        if self.prefill_curve is None or not self.prefill_peak_flops_per_s:
            return cap + 0 * np.asarray(span, dtype=np.float64)
        return np.minimum(cap, self.prefill_peak_flops_per_s * self.prefill_curve(span))

    def time_s(self, tokens: Sec, pairs: Sec, span: Sec, compute_s: Sec | None = None) -> Sec:
        """Seconds of all ``count`` instances for a step with these totals (``compute_s``: the FLOP
        term already divided by per-row ceilings, when they vary with the span); scalars or arrays."""
        c = self.flops_per_pair * pairs / self.compute_flops_per_s if compute_s is None else compute_s
        m = (self.act_bytes_per_token * tokens + self.kv_bytes_per_span * span) / self.memory_bytes_per_s
        return self.count * (_larger(c, m) + self.fixed_s)


@dataclass(frozen=True)
class StateTerm:
    """A recurrent-state mixer kernel (linear attention / SSM scan): work ∝ tokens, state traffic ∝ rows.

    time = count·(max(fpt·M / C, (apt·M + read·R_past + write·R) / B) + fixed_s), R = rows in the step,
    R_past = rows continuing from a cached state (decode rows; prefill chunks after past > 0 tokens).
    """

    count: float
    flops_per_token: float
    act_bytes_per_token: float
    read_bytes_per_row: float
    write_bytes_per_row: float
    compute_flops_per_s: float
    memory_bytes_per_s: float
    fixed_s: float

    def time_s(self, tokens: Sec, rows: Sec, rows_past: Sec) -> Sec:
        """Seconds of all ``count`` instances for a step with these totals (scalars or arrays)."""
        c = self.flops_per_token * tokens / self.compute_flops_per_s
        b = self.act_bytes_per_token * tokens + self.read_bytes_per_row * rows_past + self.write_bytes_per_row * rows
        m = b / self.memory_bytes_per_s
        return self.count * (_larger(c, m) + self.fixed_s)


@dataclass(frozen=True)
class SpanTerm:
    """A non-attention op whose traffic grows with the attended span Σ(past + new) of the rows, e.g.
    MLA prefill reading the expanded per-head K/V of every attended token (``attn.mla_prefill_kv``).

    ``probe`` is the op built for one row, one new token, no past (span 1); a step with Σspan S is
    that op with S times its bytes and FLOPs, timed by the evaluator itself (exact, including the
    transfer-size curve).
    """

    probe: Op
    hw: HardwareSpec
    prof: CalibrationProfile

    def time_s(self, span: Sec) -> Sec:
        """Seconds of all instances for a step whose rows attend ``span`` tokens in total (scalar or array)."""
        o = self.probe
        if isinstance(span, np.ndarray):
            s = np.maximum(span, 0.0)
            scaled = replace(o, flops=o.flops * s, act_bytes=o.act_bytes * s, kv_read_bytes=o.kv_read_bytes * s)
            return np.where(s > 0, o.count * np.broadcast_to(op_time(scaled, self.hw, self.prof).time_s, s.shape), 0.0)
        if span <= 0:
            return 0.0
        scaled = replace(o, flops=o.flops * span, act_bytes=o.act_bytes * span, kv_read_bytes=o.kv_read_bytes * span)
        return float(o.count * op_time(scaled, self.hw, self.prof).time_s)


@dataclass(frozen=True)
class PhaseModel:
    """Compiled cost of one phase: tables over tokens M and rows R, attention, state and span terms (GPU seconds),
    and the host's run-ahead launch seconds of a step at M tokens and R rows, ``host_token_s[M] + host_seq_s[R]``
    (a step costs overhead + max(GPU, host): :func:`roofline.costs.with_launch_floor`; empty tables: none)."""

    token_s: np.ndarray
    seq_s: np.ndarray
    attn: tuple[AttnTerm, ...]
    overhead_s: float
    state: tuple[StateTerm, ...] = ()
    span: tuple[SpanTerm, ...] = ()
    host_token_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    host_seq_s: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def has_host(self) -> bool:
        """Whether any step of this phase launches eagerly under a run-ahead host (host tables not empty)."""
        return bool(self.host_token_s.size)

    @property
    def unhosted_rows(self) -> int:
        """The most rows R such that no step of 1 … R rows and as many tokens launches anything eagerly on the host
        (the largest row count without host tables)."""
        n = self.seq_s.size  # max_rows + 1 ≤ max_tokens + 1
        if not self.has_host:
            return n - 1
        hosted = np.flatnonzero(self.host_token_s[1:n] + self.host_seq_s[1:] > 0)
        return int(hosted[0]) if hosted.size else n - 1

    def host_s(self, tokens: Sec, rows: Sec) -> Sec:
        """Host launch seconds of a step of ``tokens`` tokens and ``rows`` rows (0 without host tables; linear
        between whole counts, as :meth:`table_s`)."""
        if not self.has_host:
            return 0.0 * tokens
        if isinstance(tokens, np.ndarray) or isinstance(rows, np.ndarray):
            t, r = self.host_token_s, self.host_seq_s
            return np.interp(tokens, self._grid(t), t) + np.interp(rows, self._grid(r), r)
        return float(self.host_token_s[int(tokens)] + self.host_seq_s[int(rows)])

    def state_s(self, tokens: Sec, rows: Sec, rows_past: Sec) -> Sec:
        """Seconds of the recurrent-state kernels of a step."""
        total = 0.0 * tokens
        for term in self.state:
            total = total + term.time_s(tokens, rows, rows_past)
        return total

    def table_s(self, tokens: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Per-token and per-sequence table seconds at real-valued token and row counts (linear between the
        whole counts the tables hold; exact at whole counts)."""
        return np.interp(tokens, self._grid(self.token_s), self.token_s) + np.interp(
            rows, self._grid(self.seq_s), self.seq_s
        )

    @staticmethod
    def _grid(table: np.ndarray) -> np.ndarray:
        return np.arange(table.size, dtype=np.float64)


def _attn_term(op: Op, hw: HardwareSpec, prof: CalibrationProfile) -> AttnTerm:
    """Read the affine coefficients off an attention op built at B = 1, n = 1, p = 0 (pairs = span = 1).

    A prefill-phase kernel's compute ceiling depends on its span (the profile's flash-attention
    curve); the term keeps the cap and the curve and :meth:`StepModel.step_time` applies it per row.
    """
    _, bw = ceilings(op, hw, prof)
    c = prof.compute_ceiling(hw, op.dtype) * prof.attention.compute_efficiency
    curve, peak = prefill_attention_rate(op, hw, prof)
    fixed = float(op.comm_bytes) / prof.link_bytes_per_s(hw) + op.collectives * prof.comm.latency_s
    extra_bytes = float(op.weight_bytes) + float(op.kv_write_bytes)
    if extra_bytes:
        raise AssertionError(f"attention op {op.name} carries weight/KV-write bytes; the step model assumes none")
    return AttnTerm(
        count=float(op.count),
        flops_per_pair=float(op.flops),
        act_bytes_per_token=float(op.act_bytes),
        kv_bytes_per_span=kv_read_factor(op, prof) * float(op.kv_read_bytes),
        window=float(op.ctx_cap),
        compute_flops_per_s=float(c),
        memory_bytes_per_s=float(bw),
        fixed_s=fixed + float(fixed_overhead_s(op, prof)),  # at B = 1: a captured size
        prefill_peak_flops_per_s=peak,
        prefill_curve=curve,
    )


def _state_term(op: Op, with_past: Op, hw: HardwareSpec, prof: CalibrationProfile) -> StateTerm:
    """Coefficients of a state kernel from ops built at B = 1, n = 1 after 0 and after 5 cached tokens."""
    c, bw = ceilings(op, hw, prof)
    if float(op.weight_bytes):
        raise AssertionError(f"state op {op.name} carries weight bytes; the step model assumes none")
    fixed = float(op.comm_bytes) / prof.link_bytes_per_s(hw) + op.collectives * prof.comm.latency_s
    return StateTerm(
        count=float(op.count),
        flops_per_token=float(op.flops),
        act_bytes_per_token=float(op.act_bytes),
        read_bytes_per_row=kv_read_factor(op, prof) * float(with_past.kv_read_bytes),
        write_bytes_per_row=float(op.kv_write_bytes),
        compute_flops_per_s=float(c),
        memory_bytes_per_s=float(bw),
        fixed_s=fixed + float(fixed_overhead_s(op, prof)),
    )


def compile_phase(
    model: ModelSpec,
    sc: Scenario,
    hw: HardwareSpec,
    prof: CalibrationProfile,
    phase: Phase,
    max_tokens: int,
    max_rows: int,
    overhead_s: float,
    builder: OpBuilder = build_ops,
) -> PhaseModel:
    """Tabulate per-token and per-sequence op time for M = 0 … max_tokens, R = 0 … max_rows.

    Ops are classified by building the pass twice over the same M grid, as (1 row × M tokens)
    and (M rows × 1 token): an op whose time is identical in both depends on M only; any other
    non-attention op depends on the row count. A decode batch beyond the engine's CUDA-graph capture launches
    eagerly (``Op.uncaptured``): the other ops' times carry it in the row table, and the attention and state
    kernels' extra GPU launch cost at R rows (over their one-row cost in the terms) is added to it too. Host launch
    seconds (a run-ahead eager launch, :func:`roofline.evaluate.host_launch_s`) are tabulated the same way: an op
    whose host time is the same as (1 row × M tokens) and (M rows × 1 token) in the token table, the others (a
    graph op beyond the capture; every attention and state kernel) in the row table.
    """
    n = max(max_tokens, max_rows)
    grid = np.arange(1, n + 1, dtype=np.float64)
    zero = np.zeros_like(grid)
    one_row = builder(model, sc, hw, phase, 1.0, grid, zero)
    many_rows = builder(model, sc, hw, phase, grid, np.ones_like(grid), zero)
    probe = builder(model, sc, hw, phase, 1.0, 1.0, 0.0)
    past = builder(model, sc, hw, phase, 1.0, 1.0, 5.0)
    token_s, seq_s = np.zeros(n + 1), np.zeros(n + 1)
    host_tok, host_seq = np.zeros(n + 1), np.zeros(n + 1)
    spans: list[SpanTerm] = []
    for a, b, op, op5 in zip(one_row, many_rows, probe, past, strict=True):
        ha = a.count * np.broadcast_to(host_launch_s(a, prof), grid.shape)
        hb = b.count * np.broadcast_to(host_launch_s(b, prof), grid.shape)
        if a.kind == "attention":  # priced per term below, at one row's launch; the batch's launch mode apart
            seq_s[1:] += b.count * (np.broadcast_to(fixed_overhead_s(b, prof), grid.shape) - fixed_overhead_s(a, prof))
            host_seq[1:] += hb
            continue
        if np.array_equal(ha, hb):
            host_tok[1:] += ha
        else:
            host_seq[1:] += hb
        if float(op.memory_bytes) != float(op5.memory_bytes) or float(op.flops) != float(op5.flops):
            if phase == "decode":
                raise NotImplementedError(f"decode op {op.name} grows with the context outside attention")
            spans.append(SpanTerm(op, hw, prof))
            continue
        ta = a.count * np.broadcast_to(op_time(a, hw, prof).time_s, grid.shape)
        tb = b.count * np.broadcast_to(op_time(b, hw, prof).time_s, grid.shape)
        if np.array_equal(ta, tb):
            token_s[1:] += ta
        else:
            seq_s[1:] += tb
    attn, state = [], []
    for op, op5 in zip(probe, past, strict=True):
        if op.kind != "attention":
            continue
        if float(op.flops) == float(op5.flops):  # work independent of the context: a recurrent-state kernel
            state.append(_state_term(op, op5, hw, prof))
        else:
            attn.append(_attn_term(op, hw, prof))
    hosted = bool(np.any(host_tok) or np.any(host_seq))
    return PhaseModel(
        token_s[: max_tokens + 1].copy(),
        seq_s[: max_rows + 1].copy(),
        tuple(attn),
        overhead_s,
        tuple(state),
        tuple(spans),
        host_tok[: max_tokens + 1].copy() if hosted else np.zeros(0),
        host_seq[: max_rows + 1].copy() if hosted else np.zeros(0),
    )
