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
from collections.abc import Sequence

import numpy as np

from roofline.engine.config import step_seconds
from roofline.ops.attention import causal_pairs
from roofline.profile import CalibrationProfile
from roofline.serving.sim.phase import compile_phase
from roofline.serving.sim.stretch import DecodeStretch
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
    ) -> None:
        self.max_tokens, self.max_rows = int(max_tokens), int(min(max_rows, max_tokens))
        self.cpu_overhead_s, self.async_cpu = float(cpu_overhead_s), bool(async_cpu)
        gpu_overhead = prof.overheads.per_step_s
        self.prefill = compile_phase(model, sc, hw, prof, "prefill", self.max_tokens, self.max_rows, gpu_overhead)
        self.decode = compile_phase(model, sc, hw, prof, "decode", self.max_tokens, self.max_rows, gpu_overhead)
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
        self._affine_const: dict[tuple[int, int, float], float] = {}  # decode_affine's constant per (M, rows, extra)

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
        Up to :data:`SCALAR_ROWS` chunks are priced in plain float arithmetic (:meth:`_prefill_scalar`),
        more with numpy (:meth:`_prefill_arrays`): the same formulas and the same value to the last bit.
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
            else:
                prefill = self._prefill_scalar if n_pre <= SCALAR_ROWS else self._prefill_arrays
                m, rows_past, total, pre_pairs, pre_span, pre_compute = prefill(
                    decode_rows, decode_span, prefill_new, prefill_past
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
        return gpu

    def _prefill_scalar(
        self,
        decode_rows: int,
        decode_span: tuple[float, ...],
        new_s: Sequence[float] | np.ndarray,
        past_s: Sequence[float] | np.ndarray,
    ) -> tuple[float, float, float, list[float], list[float], list[float | None]]:
        """(tokens, rows continuing from a cache, Σ(past + new), Σpairs_a, Σspan_a, FLOP seconds_a) of a step's
        prefill chunks (and its decode rows' tokens) in float arithmetic: :meth:`_prefill_arrays` to the last bit
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

    def _prefill_arrays(
        self,
        decode_rows: int,
        decode_span: tuple[float, ...],
        new_s: Sequence[float] | np.ndarray,
        past_s: Sequence[float] | np.ndarray,
    ) -> tuple[float, float, float, list[float], list[float], list[float | None]]:
        """:meth:`_prefill_scalar` with numpy over the chunks (many chunks in one step)."""
        new = np.asarray(new_s, dtype=np.float64)
        past = np.asarray(past_s, dtype=np.float64)
        m = float(decode_rows) + float(new.sum())
        rows_past = float(decode_rows) + float(np.count_nonzero(past))
        total = float(np.sum(past + new)) if self.prefill.span else 0.0
        nt = len(self.windows)
        pre_pairs, pre_span = [0.0] * nt, [0.0] * nt
        pre_compute: list[float | None] = [None] * nt
        for a, w in enumerate(self.windows):
            term = self.prefill.attn[a]
            pairs_r = causal_pairs(past, new, w)
            span_r = np.minimum(past + new, w + new - 1)
            pre_pairs[a] = float(pairs_r.sum())
            pre_span[a] = float(span_r.sum())
            if term.prefill_curve is not None:  # per-row ceiling; decode rows at their mean span
                flops = term.flops_per_pair * pairs_r / term.compute_ceiling(span_r)
                s = decode_span[a] if decode_rows else 0.0
                dec = term.flops_per_pair * s / float(term.compute_ceiling(s / decode_rows)) if s else 0.0
                pre_compute[a] = float(flops.sum()) + dec
        return m, rows_past, total, pre_pairs, pre_span, pre_compute

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
        if len(coef) == 1:  # one attention term (most models): the same line without the generator
            _, fc, fb, act, kv, fbkv = coef[0]
            lines: tuple[tuple[float, float, float, float], ...] = (
                (fc * span0[0], fc * slope[0], fb * (act * m + kv * kv0[0]), fbkv * kv1[0]),
            )
        else:
            lines = tuple(
                (fc * span0[a], fc * slope[a], fb * (act * m + kv * kv0[a]), fbkv * kv1[a])
                for a, (_, fc, fb, act, kv, fbkv) in enumerate(coef)
            )
        return DecodeStretch(const, lines, self.cpu_overhead_s, self.async_cpu)
