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
attention. GPU time = Σ of the parts + the profile's per-step overhead, at least the per-step overhead + the
host's run-ahead launch seconds of the step (eager steps under ``eager_launch`` = "run_ahead":
:func:`roofline.costs.with_launch_floor`); step time = GPU time + the engine's ``step_overhead_s`` (or max(GPU
time, CPU overhead) under asynchronous scheduling).

For a run of decode-only steps whose contexts all grow by one per step, each attention term is
max(p + q·j, u + v·j) in the step index j, so a whole stretch sums in closed form.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from roofline.engine.config import step_seconds
from roofline.ops.builder import build_ops
from roofline.profile import CalibrationProfile
from roofline.serving.sim.meanstep import mean_step_s, prefill_arrays
from roofline.serving.sim.phase import OpBuilder, compile_phase
from roofline.serving.sim.stretch import DecodeStretch, FlooredStretch, LineStretch, Stretch
from roofline.specs.hardware import HardwareSpec
from roofline.specs.model import ModelSpec
from roofline.specs.scenario import Scenario

#: Prefill chunks a step prices in plain float arithmetic (numpy's pairwise summation adds fewer than 8 values in
#: order, so the float loops give its sums to the last bit); more go through numpy.
SCALAR_ROWS = 7


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
        builder: OpBuilder = build_ops,
    ) -> None:
        self.max_tokens, self.max_rows = int(max_tokens), int(min(max_rows, max_tokens))
        self.cpu_overhead_s, self.async_cpu = float(cpu_overhead_s), bool(async_cpu)
        over, n, rows = prof.overheads.per_step_s, self.max_tokens, self.max_rows
        self.prefill = compile_phase(model, sc, hw, prof, "prefill", n, rows, over, builder)
        self.decode = compile_phase(model, sc, hw, prof, "decode", n, rows, over, builder)
        self.windows = tuple(t.window for t in self.decode.attn)
        self.has_window = any(math.isfinite(w) for w in self.windows)
        # hot-path copies: the tables as float lists ([decode, prefill]), the widest term, per-term zeros
        self._tables = tuple((pm.token_s.tolist(), pm.seq_s.tolist()) for pm in (self.decode, self.prefill))
        self._full = max(range(len(self.windows)), key=lambda a: self.windows[a]) if self.windows else None
        self._zeros: list[float] = [0.0] * len(self.windows)
        self._nones: list[float | None] = [None] * len(self.windows)
        # per prefill attention term: its window (the decode term's), the term, FLOPs per pair, a ceiling curve?
        self._prefill_terms = [
            (w, t, t.flops_per_pair, t.prefill_curve is not None)
            for w, t in zip(self.windows, self.prefill.attn, strict=False)
        ]
        # per decode attention term for decode_affine: count·fixed, count·F/C, count/B, act, kv, (count/B)·kv
        self._stretch_coef = [
            (t.count * t.fixed_s, fc, fb, t.act_bytes_per_token, t.kv_bytes_per_span, fb * t.kv_bytes_per_span)
            for t in self.decode.attn
            for fc, fb in [(t.count * t.flops_per_pair / t.compute_flops_per_s, t.count / t.memory_bytes_per_s)]
        ]
        # per phase ([decode, prefill]) and attention term, AttnTerm.time_s's coefficients
        self._attn_coef = tuple(
            tuple(
                (
                    t.count,
                    t.flops_per_pair,
                    t.compute_flops_per_s,
                    t.act_bytes_per_token,
                    t.kv_bytes_per_span,
                    t.memory_bytes_per_s,
                    t.fixed_s,
                )
                for t in pm.attn
            )
            for pm in (self.decode, self.prefill)
        )
        # per phase ([decode, prefill]): the host's launch tables as float lists, None where no step launches eagerly
        self._host = tuple(
            (pm.host_token_s.tolist(), pm.host_seq_s.tolist()) if pm.has_host else None
            for pm in (self.decode, self.prefill)
        )
        #: the most plain decode rows whose steps the host's launches leave alone (replayed graphs): one-line
        #: stretches (:meth:`decode_line`) run up to it, floored ones (:class:`FlooredStretch`) beyond
        self.line_rows = self.decode.unhosted_rows
        self._affine_const: dict[tuple[int, int, float], float] = {}  # decode_affine's constant per (M, rows, extra)
        # chunk_step_s's operands: one attention term, no MLA span or recurrent-state terms in a prefill step
        one = len(self.prefill.attn) == 1 == len(self.windows) and not (self.prefill.span or self.prefill.state)
        self._chunk = (*self._prefill_terms[0], *self._attn_coef[1][0], *self._tables[1]) if one else None
        #: decode stretches are one line (:meth:`decode_line`): one attention term, no window, no CPU overlap
        self.line_ok = len(self._stretch_coef) == 1 and not self.has_window and not self.async_cpu
        self._line_const: dict[int, float] = {}

    def finish(self, gpu_s: float) -> float:
        """Step seconds from the GPU seconds: the engine's CPU part combined by :func:`step_seconds`."""
        return step_seconds(gpu_s, self.cpu_overhead_s, self.async_cpu)

    def step_time(
        self,
        decode_rows: int,
        decode_span: tuple[float, ...],
        prefill_new: Sequence[float] | np.ndarray | None = None,
        prefill_past: Sequence[float] | np.ndarray | None = None,
    ) -> float:
        """Seconds of one step: :meth:`gpu_time` with the engine's CPU part (:meth:`finish`, inlined)."""
        gpu, cpu = self.gpu_time(decode_rows, decode_span, prefill_new, prefill_past), self.cpu_overhead_s
        if not self.async_cpu:
            return gpu + cpu
        return gpu if gpu > cpu else cpu

    def chunk_step_s(
        self, decode_rows: int, decode_span: tuple[float, ...], chunks: Sequence[tuple[float, float]]
    ) -> float:
        """:meth:`step_time` of ``decode_rows`` decode rows and prefill ``chunks`` ((cached, new) tokens each) (s);
        for a model of one attention term and up to :data:`SCALAR_ROWS` chunks, :meth:`gpu_time`'s and
        :meth:`_prefill_scalar`'s operations in their order (the same seconds to the last bit; one chunk:
        :meth:`_prefill_one`'s) without their per-term lists and loops."""
        one = self._chunk
        if one is None or len(chunks) > SCALAR_ROWS:
            return self.step_time(decode_rows, decode_span, [n for _, n in chunks], [p for p, _ in chunks])
        w, term, fpp, curve, count, _, cap, act, kvb, bw, fixed, tok, seq = one
        tokens = pairs_sum = span_sum = flops_sum = 0.0
        for past, new in chunks:
            p, n = float(past), float(new)
            tokens += n
            q, r = p + n, w + n - 1
            span = q if q < r else r
            if w == math.inf:
                pairs = q * (q + 1) / 2 - p * (p + 1) / 2
            else:  # causal_pairs: f(past + new) − f(past), f(n) = Σ_{i=1}^{n} min(i, W)
                fw = w * (w + 1) / 2
                pairs = (q * (q + 1) / 2 if q <= w else fw + (q - w) * w) - (
                    p * (p + 1) / 2 if p <= w else fw + (p - w) * w
                )
            pairs_sum += pairs
            span_sum += span
            if curve:  # per-row ceiling (AttnTerm.ceiling_at; its memo read here)
                flops_sum += fpp * pairs / (term.memo.get(span) or term.ceiling_at(span))
        m = float(decode_rows) + tokens
        s = decode_span[0] if decode_rows else 0.0
        if curve:  # decode rows at their mean span
            c = flops_sum + (fpp * s / term.ceiling_at(s / decode_rows) if s else 0.0)
        else:
            c = fpp * (s + pairs_sum) / cap
        mi, rows = int(m), decode_rows + len(chunks)
        if mi > self.max_tokens or rows > self.max_rows:
            raise ValueError(
                f"step of {mi} tokens / {rows} rows exceeds the compiled {self.max_tokens}/{self.max_rows}"
            )
        mem = (act * m + kvb * (s + span_sum)) / bw
        gpu = self.prefill.overhead_s + tok[mi] + seq[rows] + count * ((c if c > mem else mem) + fixed)
        host = self._host[1]
        if host is not None:  # the host's run-ahead launches (with_launch_floor)
            floor = self.prefill.overhead_s + (host[0][mi] + host[1][rows])
            gpu = gpu if gpu > floor else floor
        cpu = self.cpu_overhead_s
        if not self.async_cpu:
            return gpu + cpu
        return gpu if gpu > cpu else cpu

    def gpu_time(
        self,
        decode_rows: int,
        decode_span: tuple[float, ...],
        prefill_new: Sequence[float] | np.ndarray | None = None,
        prefill_past: Sequence[float] | np.ndarray | None = None,
    ) -> float:
        """GPU seconds of one step (the engine's CPU part apart).

        ``decode_span[a]`` = Σ over decode rows of min(L, W_a) (L = attended context incl. the new
        token) for attention term a; ``prefill_new``/``prefill_past``: one entry per prefill chunk.
        Up to :data:`SCALAR_ROWS` chunks are priced in plain float arithmetic (:meth:`_prefill_scalar`), more
        with numpy (:func:`~roofline.serving.sim.meanstep.prefill_arrays`): the same formulas and value to the last bit.
        """
        n_pre = 0 if prefill_new is None else len(prefill_new)
        if not n_pre:
            pm = self.decode
            m, rows, rows_past = float(decode_rows), decode_rows, float(decode_rows)
            zeros = self._zeros
            pre_pairs, pre_span, pre_compute, total = zeros, zeros, self._nones, 0.0
        else:
            assert prefill_new is not None and prefill_past is not None
            pm = self.prefill
            if n_pre == 1:
                p, n = float(prefill_past[0]), float(prefill_new[0])
                m, rows_past, total, pre_pairs, pre_span, pre_compute = self._prefill_one(
                    decode_rows, decode_span, p, n
                )
            elif n_pre <= SCALAR_ROWS:
                m, rows_past, total, pre_pairs, pre_span, pre_compute = self._prefill_scalar(
                    decode_rows, decode_span, prefill_new, prefill_past
                )
            else:
                m, rows_past, total, pre_pairs, pre_span, pre_compute = prefill_arrays(
                    self, decode_rows, decode_span, prefill_new, prefill_past
                )
            rows = decode_rows + n_pre
        mi = int(m)
        if mi > self.max_tokens or rows > self.max_rows:
            raise ValueError(
                f"step of {mi} tokens / {rows} rows exceeds the compiled {self.max_tokens}/{self.max_rows}"
            )
        tok, seq = self._tables[pm is self.prefill]
        gpu = pm.overhead_s + tok[mi] + seq[rows]
        if pm.span and n_pre:
            # Σ attended tokens: chunks attend past + new; decode rows their context (the widest term's span)
            dec = decode_span[self._full] if decode_rows and self._full is not None else 0.0
            gpu += sum(s.time_s(total + dec) for s in pm.span)
        if pm.state:
            gpu += pm.state_s(m, rows, rows_past)
        # AttnTerm.time_s of every term, inlined: count·(max(FLOP s, memory s) + fixed)
        for a, (count, fpp, cap, act, kvb, bw, fixed) in enumerate(self._attn_coef[pm is self.prefill]):
            s = decode_span[a] if decode_rows else 0.0
            pairs, span, compute = s + pre_pairs[a], s + pre_span[a], pre_compute[a]
            c = fpp * pairs / cap if compute is None else compute
            mem = (act * m + kvb * span) / bw
            gpu += count * ((c if c > mem else mem) + fixed)
        host = self._host[pm is self.prefill]
        if host is not None:  # the host's run-ahead launches (with_launch_floor)
            floor = pm.overhead_s + (host[0][mi] + host[1][rows])
            return gpu if gpu > floor else floor
        return gpu

    def _prefill_scalar(
        self,
        decode_rows: int,
        decode_span: tuple[float, ...],
        new_s: Sequence[float] | np.ndarray,
        past_s: Sequence[float] | np.ndarray,
    ) -> tuple[float, float, float, list[float], list[float], list[float | None]]:
        """(tokens, rows continuing from a cache, Σ(past + new), Σpairs_a, Σspan_a, FLOP seconds_a) of a step's
        prefill chunks (and its decode rows' tokens) in float arithmetic: :func:`prefill_arrays` to the last bit
        (numpy sums fewer than 8 values in order, as these loops do)."""
        chunks = [(float(p), float(n)) for p, n in zip(past_s, new_s, strict=True)]
        tokens = continuing = total = 0.0
        for p, n in chunks:
            tokens += n
            if p != 0.0:
                continuing += 1.0
        m, rows_past = float(decode_rows) + tokens, float(decode_rows) + continuing
        if self.prefill.span:
            for p, n in chunks:
                total += p + n
        nt = len(self.windows)
        pre_pairs, pre_span = [0.0] * nt, [0.0] * nt
        pre_compute: list[float | None] = [None] * nt
        for a, (w, term, fpp, curve) in enumerate(self._prefill_terms):
            pairs_sum = span_sum = flops_sum = 0.0
            for p, n in chunks:
                q, r = p + n, w + n - 1
                span = q if q < r else r
                if w == math.inf:
                    pairs = q * (q + 1) / 2 - p * (p + 1) / 2
                else:  # causal_pairs: f(past + new) − f(past), f(n) = Σ_{i=1}^{n} min(i, W)
                    fw = w * (w + 1) / 2
                    pairs = (q * (q + 1) / 2 if q <= w else fw + (q - w) * w) - (
                        p * (p + 1) / 2 if p <= w else fw + (p - w) * w
                    )
                pairs_sum += pairs
                span_sum += span
                if curve:
                    flops_sum += fpp * pairs / term.ceiling_at(span)
            pre_pairs[a], pre_span[a] = pairs_sum, span_sum
            if curve:  # per-row ceiling; decode rows at their mean span
                s = decode_span[a] if decode_rows else 0.0
                dec = fpp * s / term.ceiling_at(s / decode_rows) if s else 0.0
                pre_compute[a] = flops_sum + dec
        return m, rows_past, total, pre_pairs, pre_span, pre_compute

    def _prefill_one(
        self, decode_rows: int, decode_span: tuple[float, ...], p: float, n: float
    ) -> tuple[float, float, float, list[float], list[float], list[float | None]]:
        """:meth:`_prefill_scalar` of one chunk of n new tokens after p cached: its loops run once, so the same
        operations (each sum starting from 0.0) without the loops."""
        rows = float(decode_rows)
        m, rows_past = rows + (0.0 + n), rows + (0.0 + 1.0 if p != 0.0 else 0.0)
        q = p + n
        total = 0.0 + q if self.prefill.span else 0.0
        nt = len(self.windows)
        pre_pairs, pre_span = [0.0] * nt, [0.0] * nt
        pre_compute: list[float | None] = [None] * nt
        for a, (w, term, fpp, curve) in enumerate(self._prefill_terms):
            r = w + n - 1
            span = q if q < r else r
            if w == math.inf:
                pairs = q * (q + 1) / 2 - p * (p + 1) / 2
            else:  # causal_pairs: f(past + new) − f(past), f(n) = Σ_{i=1}^{n} min(i, W)
                fw = w * (w + 1) / 2
                pairs = (q * (q + 1) / 2 if q <= w else fw + (q - w) * w) - (
                    p * (p + 1) / 2 if p <= w else fw + (p - w) * w
                )
            pre_pairs[a], pre_span[a] = 0.0 + pairs, 0.0 + span
            if curve:  # per-row ceiling; decode rows at their mean span
                s = decode_span[a] if decode_rows else 0.0
                dec = fpp * s / term.ceiling_at(s / decode_rows) if s else 0.0
                pre_compute[a] = (0.0 + fpp * pairs / term.ceiling_at(span)) + dec
        return m, rows_past, total, pre_pairs, pre_span, pre_compute

    def mean_step_s(
        self, rows: np.ndarray, ctx: float, chunk: np.ndarray | None = None, chunk_past: np.ndarray | None = None
    ) -> np.ndarray:
        """Seconds of a step of ``rows`` decode rows, each attending ``ctx`` tokens, and optionally one prefill chunk
        of ``chunk`` new tokens after ``chunk_past`` cached ones, over arrays of real-valued rows (the screening tier):
        :func:`roofline.serving.sim.meanstep.mean_step_s`."""
        return mean_step_s(self, rows, ctx, chunk, chunk_past)

    def decode_line(self, rows: int, span0: float, slope: float) -> tuple[float, float, float, float, float, float]:
        """(const, p, q, u, v, cpu) of :meth:`decode_affine`'s stretch for ``rows`` one-token rows, Σ context
        ``span0`` at step 0 growing by ``slope`` a step, where :attr:`line_ok` (one attention term, no window, no
        asynchronous CPU): its one line (:class:`LineStretch`), built without the per-term tuples (s, s/step)."""
        const = self._line_const.get(rows)
        if const is None:
            const = self._line_const[rows] = self.decode_affine(rows, (span0,), (slope,)).const_s
        _, fc, fb, act, kv, fbkv = self._stretch_coef[0]
        return const, fc * span0, fc * slope, fb * (act * rows + kv * span0), fbkv * slope, self.cpu_overhead_s

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
    ) -> Stretch:
        """Coefficients of a run of decode-only steps: step j has Σpairs_a = span0[a] + slope[a]·j.

        With m = tokens_per_row · rows tokens (1 for plain decode; V verify tokens for speculative rows),
        attention term a costs max(F_a·Σpairs_a / C_a, (act_a·m + kv_a·Σspan_a) / B_a) with Σspan_a =
        kv_span0[a] + kv_slope[a]·j (= the pairs for one token per row); ``extra_s`` is added to every step.
        """
        m = tokens_per_row * rows
        key = (m, rows, extra_s)
        const = self._affine_const.get(key)
        if const is None:  # the same for every stretch of this many rows: computed once
            pm = self.decode
            tok, seq = self._tables[0]
            const = pm.overhead_s + tok[m] + seq[m] + (pm.state_s(m, rows, rows) if pm.state else 0.0) + extra_s
            for fixed, *_ in self._stretch_coef:
                const += fixed
            self._affine_const[key] = const
        kv0 = span0 if kv_span0 is None else kv_span0
        kv1 = slope if kv_slope is None else kv_slope
        coef = self._stretch_coef
        host = self._host[0]
        floor = self.decode.overhead_s + (host[0][m] + host[1][rows]) if host is not None else 0.0
        hosted = floor > self.decode.overhead_s
        if len(coef) == 1:  # one attention term (most models): the same line without the generator
            _, fc, fb, act, kv, fbkv = coef[0]
            p, q, u, v = fc * span0[0], fc * slope[0], fb * (act * m + kv * kv0[0]), fbkv * kv1[0]
            if not self.async_cpu and not hosted:
                return LineStretch(const, p, q, u, v, self.cpu_overhead_s)
            lines: tuple[tuple[float, float, float, float], ...] = ((p, q, u, v),)
        else:
            lines = tuple(
                (fc * span0[a], fc * slope[a], fb * (act * m + kv * kv0[a]), fbkv * kv1[a])
                for a, (_, fc, fb, act, kv, fbkv) in enumerate(coef)
            )
        if hosted:  # eager decode steps: the host's run-ahead launches floor each step's GPU time
            return FlooredStretch(const, lines, floor, self.cpu_overhead_s, self.async_cpu)
        return DecodeStretch(const, lines, self.cpu_overhead_s, self.async_cpu)
