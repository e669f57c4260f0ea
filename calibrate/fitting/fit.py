"""Fit ceilings, efficiency curves and overheads to measurement records (pure numpy, no torch).

Order of the fit, each step using the previous ones (symbols as in :mod:`calibrate.fitting.timemodel`):

1. **per-kernel overheads k** (s): eager ``per_kernel_s`` = per-kernel time of a host-timed
   chain of tiny kernels (dispatch + launch); ``per_kernel_graph_s`` = the same chain
   replayed as a CUDA graph (GPU-side gap; equal to the eager cost on a CPU). Without an
   overhead suite, both = the intercept of small memory transfers, median(t − B/BW).
   Below, t − k subtracts the graph cost from device-timed records and the eager cost
   from host-timed ones.
2. **memory ceiling BW** (bytes/s): per kind (copy, read, GEMV), the median rate
   B/(t − k) over the two largest transfers whose rotating buffers exceed twice the
   last-level cache; BW = median over kinds. **s(B)** = non-decreasing (isotonic in log)
   fit of min(1, B/((t − k)·BW)) against log2 B, normalised to 1 at the largest size.
3. **compute ceiling C_dtype** (FLOP/s): rate F/(t − k) of every GEMM, median over (N, K)
   at each M, isotonic non-decreasing in log2 M; C = the fitted rate at the largest M.
   A GEMM the memory term explains (t − k ≤ 1.15 · B/(BW·s(B))) does not constrain the
   compute rate; an M where most GEMMs are memory-bound is left free and takes the value
   of the next larger M (the largest monotonicity allows, so memory-bound GEMMs stay
   memory-bound). The profile has one **g(M)**: that of the primary dtype (bf16 on a GPU,
   fp32 on a CPU); every dtype's own curve is kept with the residuals. Other dtypes are
   not mixed in: their small-M kernels differ (e.g. AMX bf16 vs AVX-512 fp32 on a CPU).
4. **attention multipliers a_c, a_m and GQA K/V reuse r**: least absolute log error of the
   attention model over prefill and decode points together (a grid; they interact). r is
   identifiable only when decode was measured both with and without GQA; else r = 1.
5. **collectives**: wire bandwidth = median wire/(t − k) of the largest messages,
   latency = median residual of the smallest ones.

Points whose time is more than 75% fixed overhead are left out of rate fits (noted).
Records with non-finite or non-positive times are rejected with a note.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from calibrate.fitting.timemodel import CurveFit, Params, fixed_s, kv_factor, predict_transfer_core
from calibrate.measure.records import Record
from roofline.published.monotone import bucket_log2, isotonic_increasing, monotone_log_fit, thin_knots

OVERHEAD_DOMINATED = 0.25  # keep a point for a rate fit only if (t − k) ≥ this fraction of t
CURVE_FLOOR = 1e-4


@dataclass(frozen=True)
class CeilingFit:
    """A fitted ceiling: plateau ``value``, best observed median ``best``, ``spread`` of repeats."""

    value: float
    best: float
    spread: float | None
    n: int


@dataclass
class FitResult:
    """Everything the fit produced, in SI units, ready to become a CalibrationProfile."""

    params: Params
    compute: dict[str, CeilingFit] = field(default_factory=dict)
    memory: CeilingFit | None = None
    gemm_curve: CurveFit | None = None
    gemm_curve_dtype: str | None = None
    gemm_curves_by_dtype: dict[str, CurveFit] = field(default_factory=dict)
    per_kernel_method: str = "not measured"
    per_kernel_graph_method: str = "not measured"
    per_step_s: float = 0.0
    per_step_method: str = "not measured"
    overhead_detail: dict[str, float] = field(default_factory=dict)
    comm_detail: dict[str, Any] = field(default_factory=dict)
    prefill_rates: dict[tuple[str, int], list[tuple[float, float]]] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)  # the sanitised records the fit used
    rejected: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# ---- sanity ------------------------------------------------------------------------------
def timing_problem(rec: Record) -> str | None:
    """Why a record's timing is unusable (non-finite, non-positive), or None when it is fine."""
    t = rec.get("median_s")
    if not isinstance(t, int | float) or not math.isfinite(t) or t <= 0:
        return f"median time {t!r} is not a positive finite number of seconds"
    for s in rec.get("samples_s") or []:
        if not isinstance(s, int | float) or not math.isfinite(s) or s <= 0:
            return f"a repeat took {s!r} s (not positive and finite)"
    return None


def sanitize(records: list[Record]) -> tuple[list[Record], list[dict[str, str]]]:
    """(usable ok records, rejected [{key, note}]) — ok records with bad timings are rejected here too."""
    good: list[Record] = []
    rejected: list[dict[str, str]] = []
    for r in records:
        if r.get("status") == "rejected":
            rejected.append({"key": str(r.get("key")), "note": str(r.get("note", ""))})
        if r.get("status") != "ok":
            continue
        problem = timing_problem(r)
        if problem:
            rejected.append({"key": str(r.get("key")), "note": problem})
        else:
            good.append(r)
    return good, rejected


def _by_suite(records: list[Record], suite: str) -> list[Record]:
    return [r for r in records if r.get("suite") == suite]


def _t_eff(r: Record, k: Params) -> float:
    """Measured seconds minus the fixed per-kernel cost that applies to how it was timed."""
    return float(r["median_s"]) - fixed_s(k, r.get("method"), float(r["params"].get("kernels", 1)))


def _spread(recs: list[Record]) -> float | None:
    vals = [float(r["spread"]) for r in recs if isinstance(r.get("spread"), int | float)]
    return float(np.median(vals)) if vals else None


# ---- 1. overheads --------------------------------------------------------------------------
def fit_overheads(records: list[Record], res: FitResult) -> tuple[float, float] | None:
    """(eager, graph) per-kernel overheads (s) from the overhead suite; sets per-step and details."""
    per_kernel: dict[str, float] = {}
    for r in _by_suite(records, "overhead"):
        kind = str(r["params"]["kind"])
        per_kernel[kind] = float(r["median_s"]) / max(1.0, float(r["params"].get("kernels", 1)))
    res.overhead_detail = {f"{k}_per_kernel_s": v for k, v in per_kernel.items()}
    eager = per_kernel.get("chain", per_kernel.get("tiny"))
    graph = per_kernel.get("graph_chain")
    if eager is None and graph is None:
        return None
    res.per_kernel_method = (
        "eager chain of 8 tiny kernels, host-timed (dispatch + launch per kernel)"
        if "chain" in per_kernel
        else "one tiny kernel repeated eagerly"
        if eager is not None
        else "not measured (graph cost used)"
    )
    res.per_kernel_graph_method = (
        "CUDA-graph replay of a chain of 8 tiny kernels (GPU-side gap per kernel)"
        if graph is not None
        else "no CUDA graphs here: same as eager"
    )
    eager = eager if eager is not None else graph
    graph = graph if graph is not None else eager
    assert eager is not None and graph is not None
    if "sync" in per_kernel:
        res.per_step_s = max(0.0, per_kernel["sync"] - eager)
        res.per_step_method = "one launch + host synchronisation, minus one eager kernel (a lower bound)"
    return eager, graph


def overhead_from_intercept(records: list[Record]) -> float | None:
    """k = median(t − B/BW₀) over transfers where B/BW₀ < 0.2·t, BW₀ = best large-transfer rate."""
    mem = _by_suite(records, "memory")
    if not mem:
        return None
    rates = np.array([float(r["params"]["bytes"]) / float(r["median_s"]) for r in mem])
    bw0 = float(np.max(rates))
    small = [float(r["median_s"]) - float(r["params"]["bytes"]) / bw0 for r in mem]
    small = [s for s, r in zip(small, mem, strict=True) if float(r["params"]["bytes"]) / bw0 < 0.2 * r["median_s"]]
    return max(0.0, float(np.median(small))) if small else None


# ---- 2. memory -------------------------------------------------------------------------------
def fit_memory(records: list[Record], k: Params, res: FitResult) -> tuple[CeilingFit | None, CurveFit | None]:
    """Memory ceiling and transfer-size curve (see module docstring, step 2)."""
    mem = [r for r in _by_suite(records, "memory") if _t_eff(r, k) >= OVERHEAD_DOMINATED * r["median_s"]]
    dropped = len(_by_suite(records, "memory")) - len(mem)
    if dropped:
        res.notes.append(f"memory: {dropped} transfer(s) more than 75% fixed overhead left out of the rate fit")
    dram = [r for r in mem if r["params"].get("dram")]
    if not dram:
        if mem:
            res.notes.append("memory: no transfer exceeded twice the last-level cache; no bandwidth ceiling fitted")
        return None, None
    kind_rates: list[float] = []
    plateau: list[Record] = []
    for kind in sorted({str(r["params"]["kind"]) for r in dram}):
        rs = [r for r in dram if r["params"]["kind"] == kind]
        sizes = sorted({float(r["params"]["bytes"]) for r in rs})[-2:]
        top = [r for r in rs if float(r["params"]["bytes"]) in sizes]
        plateau += top
        kind_rates.append(float(np.median([r["params"]["bytes"] / _t_eff(r, k) for r in top])))
    bw = float(np.median(kind_rates))
    best = max(float(r["params"]["bytes"]) / float(r["median_s"]) for r in dram)
    x = np.array([float(r["params"]["bytes"]) for r in mem])
    e = np.array([min(1.0, float(r["params"]["bytes"]) / (_t_eff(r, k) * bw)) for r in mem])
    ux, fitted = monotone_log_fit(bucket_log2(x), e)
    curve = _curve(ux, fitted / fitted[-1])
    return CeilingFit(bw, best, _spread(plateau), len(dram)), curve


def _curve(x: np.ndarray, y: np.ndarray) -> CurveFit:
    y = np.clip(y, CURVE_FLOOR, 1.0)
    tx, ty = thin_knots(x, y)
    return CurveFit(tuple(float(v) for v in tx), tuple(round(float(v), 6) for v in ty))


# ---- 3. GEMM -----------------------------------------------------------------------------------
PRIMARY_ORDER = ("bf16", "fp16", "fp32", "tf32", "fp8", "int8")
MEMORY_EXPLAINED = 1.15  # a GEMM constrains g(M) only if t − k exceeds the memory model's time by 15%


def _required_rate(r: Record, p: Params) -> float:
    """Compute rate F/(t − k) the point needs, or +inf when the memory term already explains it."""
    t = _t_eff(r, p)
    q = r["params"]
    if p.memory_bps is not None and t <= MEMORY_EXPLAINED * predict_transfer_core(p, float(q["bytes"])):
        return math.inf
    return float(q["flops"]) / t


def _rate_curve(m: np.ndarray, need: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Non-decreasing rate vs M; NaN where memory-bound.

    Per M the median need counts memory-bound points as +inf (they accept any rate above a
    small bound); an M whose median is +inf is *masked* (NaN): the data do not constrain it.
    """
    ux = np.unique(m)
    med = np.array([np.median(need[m == v]) for v in ux])
    fin = np.isfinite(med)
    cnt = np.array([np.sum(np.isfinite(need[m == v])) for v in ux], dtype=np.float64)
    fitted = np.full(ux.shape, math.nan)
    if fin.any():
        fitted[fin] = np.exp(isotonic_increasing(np.log(med[fin]), cnt[fin]))
    return ux, fitted


def _fill_from_above(y: np.ndarray) -> np.ndarray:
    """Masked (NaN) entries take the next larger-M value: the largest g monotonicity allows."""
    out = y.copy()
    nxt = out[np.isfinite(out)][-1]
    for i in range(len(out) - 1, -1, -1):
        nxt = out[i] if np.isfinite(out[i]) else nxt
        out[i] = nxt
    return out


def fit_gemm(records: list[Record], p: Params, res: FitResult, primary: str | None = None) -> None:
    """Per-dtype compute ceilings and GEMM-M curves (module docstring, step 3)."""
    gemm = _by_suite(records, "gemm")
    if p.memory_bps is None and gemm:
        res.notes.append("gemm: no memory ceiling, so memory-bound GEMMs shape g(M) as well")
    for dtype in sorted({str(r["params"]["dtype"]) for r in gemm}):
        rs = [r for r in gemm if r["params"]["dtype"] == dtype]
        use = [r for r in rs if _t_eff(r, p) >= OVERHEAD_DOMINATED * r["median_s"]]
        if len(use) < len(rs):
            res.notes.append(f"gemm {dtype}: {len(rs) - len(use)} GEMM(s) dominated by fixed overhead left out")
        m = np.array([float(r["params"]["m"]) for r in use])
        need = np.array([_required_rate(r, p) for r in use])
        if not np.isfinite(need).any():
            res.notes.append(f"gemm {dtype}: every GEMM is memory-bound; no compute ceiling")
            continue
        ux, fitted = _rate_curve(m, need)
        if not np.isfinite(fitted).any():  # every size has a memory-bound repeat (few records, e.g. after Ctrl-C)
            res.notes.append(f"gemm {dtype}: no GEMM size is compute-bound in every repeat; no compute ceiling")
            continue
        c = float(fitted[np.isfinite(fitted)][-1])
        top = [r for r in use if float(r["params"]["m"]) in set(ux[-2:].tolist())]
        best = max(float(r["params"]["flops"]) / float(r["median_s"]) for r in rs)
        res.compute[dtype] = CeilingFit(c, best, _spread(top), len(use))
        res.gemm_curves_by_dtype[dtype] = _curve(ux, _fill_from_above(fitted / c))
    fallback = [d for d in PRIMARY_ORDER if d in res.gemm_curves_by_dtype]
    if fallback:
        res.gemm_curve_dtype = primary if primary in res.gemm_curves_by_dtype else fallback[0]
        res.gemm_curve = res.gemm_curves_by_dtype[res.gemm_curve_dtype]


# ---- 4. attention --------------------------------------------------------------------------
def fit_attention(records: list[Record], p: Params, res: FitResult) -> tuple[float, float, float]:
    """(a_c, a_m, r) minimising Σ |log(model / measured)| over attention points; 1.0 where unmeasured."""
    att = [r for r in _by_suite(records, "attention") if str(r["params"]["dtype"]) in p.compute]
    if not att or p.memory_bps is None:
        return 1.0, 1.0, 1.0
    q = [r["params"] for r in att]
    f = np.array([float(x["flops"]) / p.compute[str(x["dtype"])] for x in q])
    b = np.array([float(x["bytes"]) / p.memory_bps for x in q])
    kv = np.array([float(x.get("kv_bytes", 0.0)) / p.memory_bps for x in q])
    g = np.array([float(x.get("q_per_kv", 1.0)) for x in q])
    t = np.array([float(r["median_s"]) for r in att])
    fixed = np.array([fixed_s(p, r.get("method"), float(r["params"].get("kernels", 1))) for r in att])
    decode_g = {gi for gi, x in zip(g, q, strict=True) if x["kind"] == "decode"}
    reuses = np.linspace(0.0, 1.0, 21) if len(decode_g) > 1 and 1.0 in decode_g else np.array([1.0])
    grid = np.geomspace(1e-3, 1.5, 200)
    best = (math.inf, 1.0, 1.0, 1.0)
    for reuse in reuses:
        moved = b + (kv_factor(float(reuse), g) - 1.0) * kv
        pred = np.maximum(f[None, None, :] / grid[:, None, None], moved[None, None, :] / grid[None, :, None]) + fixed
        loss = np.abs(np.log(pred / t)).sum(axis=2)
        i, j = np.unravel_index(int(np.argmin(loss)), loss.shape)
        if loss[i, j] < best[0] - 1e-12:
            best = (float(loss[i, j]), float(grid[i]), float(grid[j]), float(reuse))
    kinds = {str(x["kind"]) for x in q}
    ac = best[1] if "prefill" in kinds else 1.0
    am = best[2] if "decode" in kinds else 1.0
    if "prefill" not in kinds or "decode" not in kinds:
        res.notes.append(f"attention: only {sorted(kinds)} measured; the other multiplier left at 1.0")
    if len(reuses) == 1:
        res.notes.append("attention: decode not measured both with and without GQA; gqa_kv_reuse left at 1")
    return ac, am, best[3]


def fit_prefill_rates(records: list[Record], p: Params, res: FitResult) -> None:
    """Achieved causal-prefill attention rate per (dtype, head_dim) against the sequence length.

    rate(S) = FLOPs / (median time − fixed launch cost), the median over repeats of one S; it becomes
    ``attention.prefill_compute_efficiency[head_dim]`` = rate / peak (:func:`calibrate.fitting.build`).
    """
    pts: dict[tuple[str, int], dict[float, list[float]]] = {}
    for r in _by_suite(records, "attention"):
        q = r["params"]
        if q.get("kind") != "prefill" or "head_dim" not in q or "seq" not in q:
            continue
        t = float(r["median_s"]) - fixed_s(p, r.get("method"), float(q.get("kernels", 1)))
        if t <= 0:
            continue
        key = (str(q["dtype"]), int(q["head_dim"]))
        pts.setdefault(key, {}).setdefault(float(q["seq"]), []).append(float(q["flops"]) / t)
    res.prefill_rates = {k: sorted((s, float(np.median(v))) for s, v in by_s.items()) for k, by_s in pts.items()}


# ---- 5. collectives ------------------------------------------------------------------------
def fit_comm(records: list[Record], k: Params, res: FitResult) -> tuple[float | None, float]:
    """(wire bytes/s, latency s) of collectives (module docstring, step 5)."""
    col = _by_suite(records, "collective")
    if not col:
        return None, 0.0
    bws: list[float] = []
    lat: list[float] = []
    for kind in sorted({str(r["params"]["kind"]) for r in col}):
        rs = sorted((r for r in col if r["params"]["kind"] == kind), key=lambda r: r["params"]["wire_bytes"])
        big = rs[-2:] if len(rs) > 2 else rs[-1:]
        bw = float(np.median([r["params"]["wire_bytes"] / max(_t_eff(r, k), 1e-12) for r in big]))
        bws.append(bw)
        lat += [max(0.0, _t_eff(r, k) - r["params"]["wire_bytes"] / bw) for r in rs[:2]]
        res.comm_detail[f"{kind}_wire_bytes_per_s"] = bw
    res.comm_detail["world"] = int(col[0]["params"].get("world", 0))
    return float(np.median(bws)), float(np.median(lat)) if lat else 0.0


# ---- all ---------------------------------------------------------------------------------------
def fit(records: list[Record], primary_dtype: str | None = "bf16") -> FitResult:
    """Fit every parameter the records allow; see the module docstring for the method.

    ``primary_dtype`` is the dtype whose g(M) becomes the profile's single GEMM curve (fp32
    on a CPU, bf16 on a GPU); when it was not measured, the first of bf16, fp16, fp32, … that was.
    """
    good, rejected = sanitize(records)
    res = FitResult(params=Params(), rejected=rejected)
    ks = fit_overheads(good, res)
    if ks is None:
        k0 = overhead_from_intercept(good)
        if k0 is not None:
            res.per_kernel_method = res.per_kernel_graph_method = "intercept of small memory transfers"
        ks = (k0 or 0.0, k0 or 0.0)
    p = Params(per_kernel_s=ks[0], per_kernel_graph_s=ks[1])
    mem, mem_curve = fit_memory(good, p, res)
    res.memory = mem
    p = replace(p, memory_bps=mem.value if mem else None, memory_curve=mem_curve)
    fit_gemm(good, p, res, primary_dtype)
    p = replace(p, compute={d: c.value for d, c in res.compute.items()}, gemm_curve=res.gemm_curve)
    ac, am, reuse = fit_attention(good, p, res)
    fit_prefill_rates(good, p, res)
    comm_bps, latency = fit_comm(good, p, res)
    res.params = replace(
        p, attention_compute=ac, attention_memory=am, gqa_kv_reuse=reuse, comm_bps=comm_bps, comm_latency_s=latency
    )
    res.records = good  # residuals are computed on the built profile (calibrate.fitting.build)
    return res
