"""Step time of an arbitrary continuous-batching step, compiled from the static cost model.

A step runs R rows: decode rows (1 new token after L − 1 cached) and prefill chunks (n new
tokens after p cached). Its time is that of the op list the builders emit, split three ways:

* **per-token ops** (projections, FFN, MoE, norms, KV write, collectives): their FLOPs and
  bytes depend only on M = Σ new tokens, so their summed evaluator time is tabulated
  exactly for every integer M ≤ the engine's token budget (one vectorised evaluator call);
* **per-sequence ops** (final norm, lm_head, logits gather) depend only on the number of
  rows R (one sampled position per row), tabulated the same way;
* **recurrent-state kernels** (linear attention / SSM scans, whose work does not grow with the
  context): FLOPs and activation bytes ∝ M, state bytes ∝ rows (written by every row, read by rows
  that continue from a cached state), max(compute, memory) per step — exact likewise;
* **attention kernels** (one per layer kind): FLOPs = f·Σ pairs, HBM bytes = a·M + k·Σ span
  with pairs(p, n) = Σ_{i=p+1}^{p+n} min(i, W) (attention ∝ n·(p + n/2) without a window) and
  span = min(p + n, W + n − 1) (the K/V of the p cached tokens re-read), so the kernel time is
  max(f·Σpairs / C, (a·M + k·Σspan) / B) + fixed — exact, with the coefficients read off the
  builder's op records and the evaluator's ceilings.

A step with any prefill row uses the prefill-phase op list (eager launches); a decode-only
step uses the decode-phase list (CUDA-graph launches when the engine captures graphs). For
MLA models the decode rows of a mixed step are costed with the prefill-phase (expanded)
attention. Step time = Σ of the three parts + the profile's per-step overhead + the engine's
``step_overhead_s`` (or max(GPU time, CPU overhead) under asynchronous scheduling).

For a run of decode-only steps whose contexts all grow by one per step, each attention term is
max(p + q·j, u + v·j) in the step index j, so a whole stretch sums in closed form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np

from roofline.engine.config import step_seconds
from roofline.evaluate import ceilings, kv_read_factor, launch_overhead_s, op_time
from roofline.ops.attention import causal_pairs
from roofline.ops.builder import build_ops
from roofline.ops.records import Op, Phase
from roofline.profile import CalibrationProfile, Curve
from roofline.serving.sim.stretch import DecodeStretch
from roofline.specs.hardware import HardwareSpec
from roofline.specs.model import ModelSpec
from roofline.specs.scenario import Scenario

#: Seconds, token or row counts: a float in the simulator's step-by-step path, an array in the screening tier.
Sec = TypeVar("Sec", float, np.ndarray)


def _larger(a: Sec, b: Sec) -> Sec:
    """max(a, b), elementwise for arrays (a plain comparison for floats: the simulator's hot path)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.maximum(a, b)
    return a if a > b else b


@dataclass(frozen=True)
class AttnTerm:
    """One attention kernel kind: time = count·(max(fpp·pairs/C, (apt·M + kvb·span)/B) + fixed_s)."""

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
    """Compiled cost of one phase: tables over tokens M and rows R, attention, state and span terms."""

    token_s: np.ndarray
    seq_s: np.ndarray
    attn: tuple[AttnTerm, ...]
    overhead_s: float
    state: tuple[StateTerm, ...] = ()
    span: tuple[SpanTerm, ...] = ()

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
    curve = None if op.context_dependent else prof.attention.prefill_curve(float(np.max(op.k)))
    peak = hw.peak_flops_per_s(op.dtype) if curve is not None else None
    fixed = float(op.comm_bytes) / prof.link_bytes_per_s(hw) + op.collectives * prof.comm.latency_s
    extra_bytes = float(op.weight_bytes) + float(op.kv_write_bytes)
    if extra_bytes:
        raise AssertionError(f"attention op {op.name} carries weight/KV-write bytes; the step model assumes none")
    return AttnTerm(
        count=float(op.count), flops_per_pair=float(op.flops), act_bytes_per_token=float(op.act_bytes),
        kv_bytes_per_span=kv_read_factor(op, prof) * float(op.kv_read_bytes), window=float(op.ctx_cap),
        compute_flops_per_s=float(c), memory_bytes_per_s=float(bw), fixed_s=fixed + launch_overhead_s(op, prof),
        prefill_peak_flops_per_s=float(peak or 0.0), prefill_curve=curve if peak else None,
    )  # fmt: skip


def _state_term(op: Op, with_past: Op, hw: HardwareSpec, prof: CalibrationProfile) -> StateTerm:
    """Coefficients of a state kernel from ops built at B = 1, n = 1 after 0 and after 5 cached tokens."""
    c, bw = ceilings(op, hw, prof)
    if float(op.weight_bytes):
        raise AssertionError(f"state op {op.name} carries weight bytes; the step model assumes none")
    fixed = float(op.comm_bytes) / prof.link_bytes_per_s(hw) + op.collectives * prof.comm.latency_s
    return StateTerm(
        count=float(op.count), flops_per_token=float(op.flops), act_bytes_per_token=float(op.act_bytes),
        read_bytes_per_row=kv_read_factor(op, prof) * float(with_past.kv_read_bytes),
        write_bytes_per_row=float(op.kv_write_bytes), compute_flops_per_s=float(c), memory_bytes_per_s=float(bw),
        fixed_s=fixed + launch_overhead_s(op, prof),
    )  # fmt: skip


def compile_phase(
    model: ModelSpec,
    sc: Scenario,
    hw: HardwareSpec,
    prof: CalibrationProfile,
    phase: Phase,
    max_tokens: int,
    max_rows: int,
    overhead_s: float,
) -> PhaseModel:
    """Tabulate per-token and per-sequence op time for M = 0 … max_tokens, R = 0 … max_rows.

    Ops are classified by building the pass twice over the same M grid, as (1 row × M tokens)
    and (M rows × 1 token): an op whose time is identical in both depends on M only; any other
    non-attention op depends on the row count.
    """
    n = max(max_tokens, max_rows)
    grid = np.arange(1, n + 1, dtype=np.float64)
    zero = np.zeros_like(grid)
    one_row = build_ops(model, sc, hw, phase, 1.0, grid, zero)
    many_rows = build_ops(model, sc, hw, phase, grid, np.ones_like(grid), zero)
    probe = build_ops(model, sc, hw, phase, 1.0, 1.0, 0.0)
    past = build_ops(model, sc, hw, phase, 1.0, 1.0, 5.0)
    token_s, seq_s = np.zeros(n + 1), np.zeros(n + 1)
    spans: list[SpanTerm] = []
    for a, b, op, op5 in zip(one_row, many_rows, probe, past, strict=True):
        if a.kind == "attention":
            continue
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
    return PhaseModel(
        token_s[: max_tokens + 1].copy(),
        seq_s[: max_rows + 1].copy(),
        tuple(attn),
        overhead_s,
        tuple(state),
        tuple(spans),
    )


class StepModel:
    """Step time of any composition for one (model, hardware, tp, precision, engine).

    ``cpu_overhead_s`` is the engine's per-step CPU cost; ``async_cpu`` overlaps it with the
    GPU (step = max(GPU, CPU)) instead of adding it (step = GPU + CPU).
    """

    def __init__(
        self,
        model: ModelSpec,
        sc: Scenario,
        hw: HardwareSpec,
        prof: CalibrationProfile,
        max_tokens: int,
        max_rows: int,
        cpu_overhead_s: float = 0.0,
        async_cpu: bool = False,
    ) -> None:
        self.max_tokens, self.max_rows = int(max_tokens), int(min(max_rows, max_tokens))
        self.cpu_overhead_s, self.async_cpu = float(cpu_overhead_s), bool(async_cpu)
        gpu_overhead = prof.overheads.per_step_s
        self.prefill = compile_phase(model, sc, hw, prof, "prefill", self.max_tokens, self.max_rows, gpu_overhead)
        self.decode = compile_phase(model, sc, hw, prof, "decode", self.max_tokens, self.max_rows, gpu_overhead)
        self.windows = tuple(t.window for t in self.decode.attn)
        self.has_window = any(math.isfinite(w) for w in self.windows)

    def finish(self, gpu_s: float) -> float:
        """Step seconds from the GPU seconds: the engine's CPU part combined by :func:`step_seconds`."""
        return step_seconds(gpu_s, self.cpu_overhead_s, self.async_cpu)

    def step_time(
        self,
        decode_rows: int,
        decode_span: tuple[float, ...],
        prefill_new: np.ndarray | None = None,
        prefill_past: np.ndarray | None = None,
    ) -> float:
        """Seconds of one step: :meth:`gpu_time` with the engine's CPU part (:meth:`finish`)."""
        return self.finish(self.gpu_time(decode_rows, decode_span, prefill_new, prefill_past))

    def gpu_time(
        self,
        decode_rows: int,
        decode_span: tuple[float, ...],
        prefill_new: np.ndarray | None = None,
        prefill_past: np.ndarray | None = None,
    ) -> float:
        """GPU seconds of one step (the engine's CPU part apart).

        ``decode_span[a]`` = Σ over decode rows of min(L, W_a) (L = attended context incl. the new
        token) for attention term a; ``prefill_new``/``prefill_past``: one entry per prefill chunk.
        """
        m = float(decode_rows)
        rows = decode_rows
        rows_past = float(decode_rows)
        pm = self.decode
        pre_pairs: list[float] = [0.0] * len(self.windows)
        pre_span: list[float] = [0.0] * len(self.windows)
        pre_compute: list[float | None] = [None] * len(self.windows)
        if prefill_new is not None and len(prefill_new):
            pm = self.prefill
            new = np.asarray(prefill_new, dtype=np.float64)
            past = np.asarray(prefill_past, dtype=np.float64)
            m += float(new.sum())
            rows += len(new)
            rows_past += float(np.count_nonzero(past))
            for a, w in enumerate(self.windows):
                pairs_r = causal_pairs(past, new, w)
                span_r = np.minimum(past + new, w + new - 1)
                pre_pairs[a] = float(pairs_r.sum())
                pre_span[a] = float(span_r.sum())
                term = pm.attn[a]
                if term.prefill_curve is not None:  # per-row ceiling; decode rows at their mean span
                    flops = term.flops_per_pair * pairs_r / term.compute_ceiling(span_r)
                    s = decode_span[a] if decode_rows else 0.0
                    dec = term.flops_per_pair * s / float(term.compute_ceiling(s / decode_rows)) if s else 0.0
                    pre_compute[a] = float(flops.sum()) + dec
        mi = int(m)
        if mi > self.max_tokens or rows > self.max_rows:
            raise ValueError(
                f"step of {mi} tokens / {rows} rows exceeds the compiled {self.max_tokens}/{self.max_rows}"
            )
        gpu = pm.overhead_s + float(pm.token_s[mi]) + float(pm.seq_s[rows])
        if pm.span and prefill_new is not None and len(prefill_new):
            # Σ attended tokens: chunks attend past + new; decode rows their context (the widest term's span)
            full = max(range(len(self.windows)), key=lambda a: self.windows[a]) if self.windows else None
            dec = decode_span[full] if decode_rows and full is not None else 0.0
            total = float(np.sum(np.asarray(prefill_past) + np.asarray(prefill_new))) + dec
            gpu += sum(s.time_s(total) for s in pm.span)
        if pm.state:
            gpu += pm.state_s(m, rows, rows_past)
        for a, term in enumerate(pm.attn):
            s = decode_span[a] if decode_rows else 0.0
            gpu += term.time_s(m, s + pre_pairs[a], s + pre_span[a], pre_compute[a])
        return gpu

    def mean_step_s(
        self, rows: np.ndarray, ctx: float, chunk: np.ndarray | None = None, chunk_past: np.ndarray | None = None
    ) -> np.ndarray:
        """Seconds of a step of ``rows`` decode rows, each attending ``ctx`` tokens (its new one included), and,
        when ``chunk`` is given, one prefill chunk of ``chunk`` new tokens after ``chunk_past`` cached ones;
        vectorised over arrays of the same shape, with real-valued rows (a mean population: the screening tier).

        The same terms as :meth:`gpu_time` (tables, MLA span terms, recurrent state, attention with the prefill
        compute ceilings per row) and the engine's CPU part by :meth:`finish`'s rule, so at whole rows and
        tokens it is :meth:`step_time` itself (tests/test_serving_screening.py); between whole counts the
        token and row tables are interpolated linearly.
        """
        n = np.asarray(rows, dtype=np.float64)
        mixed = chunk is not None
        pm = self.prefill if mixed else self.decode
        new = np.broadcast_to(np.asarray(chunk if mixed else 0.0, dtype=np.float64), n.shape)
        past = np.broadcast_to(np.asarray(chunk_past if chunk_past is not None else 0.0, dtype=np.float64), n.shape)
        m = n + new
        all_rows = n + (1.0 if mixed else 0.0)
        gpu = pm.overhead_s + pm.table_s(m, all_rows)
        if pm.span and mixed:
            widest = max(self.windows) if self.windows else math.inf
            total = past + new + n * min(ctx, widest)
            gpu = gpu + sum(s.time_s(total) for s in pm.span)
        if pm.state:
            gpu = gpu + pm.state_s(m, all_rows, n + (past > 0) if mixed else n)
        for term in pm.attn:
            s = n * min(ctx, term.window)
            pairs, span, compute = s, s, None
            if mixed:
                pre_pairs = causal_pairs(past, new, term.window)
                pre_span = np.minimum(past + new, term.window + new - 1)
                pairs, span = s + pre_pairs, s + pre_span
                if term.prefill_curve is not None:
                    dec = np.where(n > 0, term.flops_per_pair * s / term.compute_ceiling(min(ctx, term.window)), 0.0)
                    compute = term.flops_per_pair * pre_pairs / term.compute_ceiling(pre_span) + dec
            gpu = gpu + term.time_s(m, pairs, span, compute)
        return step_seconds(np.asarray(gpu, dtype=np.float64), self.cpu_overhead_s, self.async_cpu)

    def decode_affine(
        self,
        rows: int,
        span0: tuple[float, ...],
        slope: tuple[float, ...],
        *,
        tokens_per_row: int = 1,
        kv_span0: tuple[float, ...] | None = None,
        kv_slope: tuple[float, ...] | None = None,
        extra_s: float = 0.0,
    ) -> DecodeStretch:
        """Coefficients of a run of decode-only steps: step j has Σpairs_a = span0[a] + slope[a]·j.

        With m = tokens_per_row · rows tokens (1 for plain decode; V verify tokens for speculative rows),
        attention term a costs max(F_a·Σpairs_a / C_a, (act_a·m + kv_a·Σspan_a) / B_a) with Σspan_a =
        kv_span0[a] + kv_slope[a]·j (= the pairs for one token per row); ``extra_s`` is added to every step.
        """
        pm = self.decode
        m = tokens_per_row * rows
        const = pm.overhead_s + float(pm.token_s[m]) + float(pm.seq_s[m]) + pm.state_s(m, rows, rows) + extra_s
        kv0 = span0 if kv_span0 is None else kv_span0
        kv1 = slope if kv_slope is None else kv_slope
        lines = []
        for a, t in enumerate(pm.attn):
            const += t.count * t.fixed_s
            fc, fb = t.count * t.flops_per_pair / t.compute_flops_per_s, t.count / t.memory_bytes_per_s
            p, q = fc * span0[a], fc * slope[a]
            u = fb * (t.act_bytes_per_token * m + t.kv_bytes_per_span * kv0[a])
            v = fb * t.kv_bytes_per_span * kv1[a]
            lines.append((p, q, u, v))
        return DecodeStretch(const, tuple(lines), self.cpu_overhead_s, self.async_cpu)
