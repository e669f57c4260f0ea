"""Capacity planning: how many GPUs of which kind serve ``qps`` requests within the SLOs.

Model of one replica (tp × pp GPUs) serving requests of P prompt and O output tokens with
continuous batching, at most B sequences in flight, prefill not chunked:

* ``t_pre`` — prefill time of one request: ``predict(batch=1, prompt=P).ttft_s``.
* ``t_dec(B)`` — mean decode step time at batch B over the output:
  ``predict(batch=B).tpot_s`` (the step time averaged over contexts P+1 … P+O−1).

**Token balance.** Every request needs one prefill pass and O−1 decode steps; a decode
step advances B sequences at once. In steady state at arrival rate λ the replica spends
the fraction ρ = λ·t_pre of its time on prefills and the rest on decode steps, which
produce (1−ρ)/t_dec(B) steps/s, each worth B tokens. Output balance λ·(O−1) =
B·(1−ρ)/t_dec(B) solves to the largest rate one replica sustains with a full batch::

    λ_max(B) = B / ((O−1)·t_dec(B) + B·t_pre)          [requests/s]

**Latency seen by users.** A sequence's decode steps are stretched by the prefills that
interleave with them, and a new request waits for the step in flight::

    TPOT_eff = t_dec(B) / (1 − ρ)        TTFT_eff ≈ t_pre + t_dec(B)

At full load (λ = λ_max) this is TPOT_eff = t_dec(B) + B·t_pre/(O−1): each sequence also
waits for the B prefills of the requests that replace the others during its lifetime.
The SLOs are checked at full load, so they hold at any load up to λ_max.

**Engine overheads.** t_pre and t_dec(B) are priced with the engine's CPU part per step
(``step_overhead_s``, overlapped under ``async_scheduling``), as in :func:`roofline.predict`. The
request overhead y (``request_overhead_s``) and output lag k (``output_lag_steps``) delay what the
client sees, not the replica: TTFT_eff = t_pre + t_dec(B) + y + k·TPOT_eff, while capacity and
Little's law count only the time a request holds an engine slot. Options the closed form cannot
represent (prefix caching, mixed chunks, …) are refused; ``plan --simulate`` passes them to its
finalists (:data:`roofline.engine.config.ENGINE_OPTION_SCOPE`).

**Little's law.** A replica at load λ holds N = λ·(t_pre + t_dec(B) + (O−1)·TPOT_eff)
requests; N must not exceed B. At λ = λ_max, N = B + λ_max·TTFT_eff, so a replica run
exactly at λ_max has no slot for requests still waiting for their first token: when the
check fails at the operating load λ = qps/replicas a replica is added.

**Choice of B.** λ_max grows with B and so do TPOT_eff and TTFT_eff, so the best batch
is the largest B that fits in memory at context P+O (``memory_budget`` via ``sweep``'s
``fits``, under the engine's memory semantics, see :mod:`roofline.engine`), is at most the
engine's ``max_num_seqs``, and meets both SLOs. Batches 1 … 16,384 are searched exhaustively (vectorised with
``sweep``), larger ones on a geometric grid. Then::

    replicas = ceil(qps / λ_max(B))   (+1 while Little's law fails)
    GPUs     = replicas × tp × pp
    headroom = replicas · λ_max / qps − 1
    $/hour   = GPUs × price per GPU-hour
    $/M output tokens = ($/hour) / (qps · O · 3600) × 1e6

**Confidence** (``confidence`` = ℓ, e.g. 0.9). The model's error is an interval per figure
(:mod:`roofline.published.uncertainty`): t·e^(±q). With ℓ given, t_pre and t_dec(B) are
replaced by their upper bounds t·e^(q) before everything above, so the SLOs hold at the upper
bound and capacity is sized at the pessimistic step times. Without it, the point plan is
kept and each candidate's headroom is set against the model's error on capacity, the
throughput interval at 80 %: ``error_margin = e^(q) − 1``; a candidate with
headroom < error_margin is marked ``within_error`` (its capacity may fall short of qps).
**Saturation.** utilisation = qps / (replicas·λ_max) = 1/(1 + headroom). Above
SATURATION = 85 % a small bias in step time explodes queueing delay, so latencies are
reported as one-sided (lower) bounds (``latency_bound = "lower"``) with
``saturation_rps`` = 0.85·replicas·λ_max, the load at which utilisation reaches 85 %. (The knee, where the
mean TTFT doubles, is the simulator-sized finalists' figure: :func:`roofline.serving.plan.screening.knee_qps`.)

Candidates (hardware × precision × tp) are ranked by $/hour (by GPUs when no price is
known); the recommendation is the first feasible one. A candidate whose tp collectives leave
the fast fabric (a PCIe hop past an NVLink-bridged pair, PCIe-only cards, a group larger than
the scale-up domain) is priced on that path and says so in ``link_flag`` / ``link_note``. Rejected candidates say why:
does not fit (missing bytes), misses an SLO at batch 1 (by how much), exceeds max GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from roofline.advice import no_fit_reason
from roofline.boundary.limits import MAX_PLAN_CANDIDATES, MAX_PLAN_GPUS
from roofline.engine.config import check_engine_options
from roofline.engine.presets import EngineArg, overrides_map
from roofline.errors import ScenarioError
from roofline.serving.plan.layouts import layouts
from roofline.serving.plan.loadcurve import load_curve
from roofline.serving.plan.mixplan import reject_unservable
from roofline.serving.plan.procurement import Procurement, owned_prices
from roofline.serving.plan.request import (
    PlanRequest,
    check_options,
    check_request,
    check_tp_options,
    hardware_list,
    price_map,
)
from roofline.serving.plan.result import MARGIN_LEVEL, SATURATION, Candidate, PlanResult
from roofline.serving.workload.mixparse import mean_request
from roofline.specs.moe_layout import wide_ep
from roofline.units import fmt_seconds, usd_per_million_tokens

if TYPE_CHECKING:
    from roofline.profile import CalibrationProfile
    from roofline.serving.workload.mix import WorkloadMix
    from roofline.specs.hardware import HardwareSpec
    from roofline.specs.model import ModelSpec

DEFAULT_TP = (1, 2, 4, 8)
#: utilisation above which queueing latency is reported one-sided (assumed: M/D/1-like growth
#: 1/(1−u) makes a 5 % step-time bias move waiting time by > 30 % beyond it).
EXACT_BATCH_LIMIT = 16384


def plan(
    model: ModelSpec | str | Path,
    *,
    qps: float,
    prompt_len: int | None = None,
    output_len: int | None = None,
    ttft_slo_s: float | None = None,
    tpot_slo_s: float | None = None,
    hardware: Sequence[HardwareSpec | str | Path] | HardwareSpec | str | None = None,
    precisions: Sequence[str] = ("checkpoint",),
    tp_options: Sequence[int] | None = None,
    max_gpus: int | None = None,
    prices: Mapping[str, float] | None = None,
    calibration: CalibrationProfile | str | Path | Mapping[str, CalibrationProfile] | None = None,
    kv_dtype: str | None = None,
    engine: EngineArg = None,
    engine_overrides: Mapping[str, object] | None = None,
    confidence: float | None = None,
    min_headroom: float | str | None = None,
    procurement: Procurement | None = None,
    mix: WorkloadMix | str | Path | None = None,
    dp_options: Sequence[int] | None = None,
) -> PlanResult:
    """Cheapest deployment serving ``qps`` requests/s within the TTFT and TPOT SLOs (see module doc).

    ``mix`` (a WorkloadMix, ``"chat:0.7,rag:0.3"`` or a YAML path): its mean request (P̄ = Σ w_i·E[P_i], Ō =
    Σ w_i·E[O_i]) against the strictest class SLOs (``result.mix`` keeps it). ``hardware`` None means every
    known device. ``tp_options`` None means 1, 2, 4, 8 where they divide the attention heads. ``prices`` (slug →
    USD per GPU-hour) override spec prices. ``kv_dtype`` None keeps the engine default (bf16). ``engine`` is a
    preset name (default ``vllm``) or an EngineConfig, resolved per hardware, with ``engine_overrides`` (those the
    closed form cannot represent raise ScenarioError naming them; see the module docstring).
    ``confidence`` (e.g. 0.9) sizes so that the SLOs hold at that level's upper bound (module doc).
    ``min_headroom``: spare capacity every candidate must keep, a fraction (0.2 = 20 %) or ``"error"``
    for the model's 80 % throughput error bound (``error_margin``); replicas are added until it holds.
    None (default) sizes to the load alone and marks candidates whose headroom is inside the error.
    ``procurement``: the buyer's terms (:mod:`roofline.serving.plan.procurement`): sized for qps × peak_factor,
    spare replicas paid for, bought devices priced per owned GPU-hour in place of their rental price.
    ``dp_options``: attention-DP sizes a MoE model's replica is also tried with (wide EP over dp × tp GPUs; None:
    :func:`roofline.serving.plan.layouts.layouts`' default).
    """
    from roofline.engine.profiles import select_profile
    from roofline.profile import load_profile
    from roofline.specs.library import model as load_model

    the_mix, prompt_len, output_len, ttft_slo_s, tpot_slo_s = mean_request(
        mix, prompt_len, output_len, ttft_slo_s, tpot_slo_s
    )
    engine_overrides = overrides_map(engine_overrides)
    check_engine_options(engine_overrides, "plan")
    check_request(qps, prompt_len, output_len, ttft_slo_s, tpot_slo_s, max_gpus)
    confidence = check_options(kv_dtype, confidence, min_headroom)
    per_hw = dict(calibration) if isinstance(calibration, Mapping) else {}
    given = None if calibration is None or isinstance(calibration, Mapping) else load_profile(calibration)
    m = load_model(model)
    hws = hardware_list(hardware)
    terms = procurement or Procurement()
    prices_usd = price_map(owned_prices(terms, hws, price_map(prices)))
    check_tp_options(tp_options)
    precisions = [precisions] if isinstance(precisions, str) else precisions
    lays = _layouts(m, len(hws) * len(precisions), tp_options, dp_options)
    head = (qps * terms.peak_factor, int(prompt_len), int(output_len), ttft_slo_s, tpot_slo_s, max_gpus, kv_dtype)
    req = PlanRequest(
        *head, engine, engine_overrides, confidence, min_headroom, terms.spare_replicas, terms.peak_factor
    )
    cands = []
    for hw in hws:
        prof = per_hw.get(hw.name) or given or select_profile(None, hw.name, engine)  # engine kernels where measured
        price = prices_usd.get(hw.name, hw.price.usd_per_gpu_hour if hw.price else None)
        # a given price is per GPU as given; the spec's is for its source's instance
        inst = 1 if hw.name in prices_usd or hw.price is None else hw.price.gpus_per_instance
        cands += [_candidate(m, hw, prof, str(p), tp, price, req, inst, dp) for p in precisions for tp, dp in lays]
    if the_mix is not None:  # every class's mean request must fit one replica's KV cache
        cands = [reject_unservable(c, the_mix, req.p + req.o) for c in cands]
    res = PlanResult(m.name, qps, req.p, req.o, ttft_slo_s, tpot_slo_s, max_gpus, _rank(cands), confidence)
    return res if the_mix is None else replace(res, mix=the_mix)


def _layouts(
    m: ModelSpec, per_layout: int, tp_options: Sequence[int] | None, dp_options: Sequence[int] | None
) -> list[tuple[int, int]]:
    """The (tp, dp) layouts to try (:func:`roofline.serving.plan.layouts.layouts`; tp 1, 2, 4, 8 dividing the heads
    by default), refused when ``per_layout`` (hardware × precisions) times them passes MAX_PLAN_CANDIDATES."""
    tps = list(tp_options) if tp_options is not None else [t for t in DEFAULT_TP if m.attention.num_heads % t == 0]
    lays = layouts(m, tps, dp_options)
    n_cands = per_layout * len(lays)
    if n_cands > MAX_PLAN_CANDIDATES:
        raise ScenarioError(
            f"the plan would evaluate {n_cands:,} candidates (hardware × precision × tp × dp), more than "
            f"{MAX_PLAN_CANDIDATES:,} (roofline.boundary.limits); list fewer hardware, precisions, tp or dp values"
        )
    return lays


def _rank(cands: list[Candidate]) -> list[Candidate]:
    """Feasible first by $/hour (unpriced after priced, by GPUs), then the rejected in input order."""
    ok = [c for c in cands if c.feasible]
    ok.sort(key=lambda c: (c.usd_per_hour is None, c.usd_per_hour or 0.0, c.gpus, c.tpot_s))
    return ok + [c for c in cands if not c.feasible]


def _candidate(
    m: ModelSpec,
    hw: HardwareSpec,
    prof: CalibrationProfile,
    prec: str,
    tp: int,
    price: float | None,
    req: PlanRequest,
    gpus_per_instance: int = 1,
    dp: int = 1,
) -> Candidate:
    """Plan one (hardware, precision, tp, dp): memory limit, SLO-limited batch, replicas, cost (dp > 1: attention DP
    with the experts wide-EP over dp × tp GPUs)."""
    from roofline.grid import sweep
    from roofline.published.uncertainty import upper_factor, upper_factors
    from roofline.specs.scenario import make_scenario

    kv = req.kv_dtype or "bf16"
    base = _blank(hw, prec, tp, dp, kv, price, gpus_per_instance)
    opts: dict[str, Any] = {
        "weight_dtype": prec,
        "kv_dtype": kv,
        "engine": req.engine,
        "engine_overrides": req.engine_overrides,
        "dp": dp,
        "ep": base.ep,
    }
    try:
        sc = make_scenario(hw, 1, req.p, req.o, tp=tp, **opts)
        sc.validate_for(m, hw)
    except ScenarioError as exc:
        return replace(base, reason=str(exc))
    eng = sc.engine
    y, k = (eng.request_overhead_s, eng.output_lag_steps) if eng is not None else (0.0, 0.0)
    if y or k:  # the replica's own times: the client's delays are added to TTFT below
        opts["engine_overrides"] = {**req.engine_overrides, "request_overhead_s": 0.0, "output_lag_steps": 0.0}
    first = sweep(m, hw, 1, req.p, req.o, tp=tp, calibration=prof, **opts).iloc[0]
    if not first["fits"]:
        return replace(base, reason=no_fit_reason(m, hw, sc), missing_bytes=float(first["missing_bytes"]))
    b_mem = int(first["max_batch"])
    seq_cap = sc.engine.max_num_seqs if sc.engine is not None else b_mem
    b_top = min(b_mem, seq_cap)
    df = sweep(m, hw, _batch_grid(b_top).tolist(), req.p, req.o, tp=tp, calibration=prof, **opts)
    b = df["batch"].to_numpy(dtype=np.float64)
    t_dec = df["tpot_s"].to_numpy(dtype=np.float64)
    t_pre = float(first["ttft_s"])
    if req.confidence is not None:  # upper bounds of the step times (module docstring)
        t_pre *= upper_factor("ttft_s", req.confidence, prof, str(first["bound_prefill"]))
        t_dec = t_dec * upper_factors("tpot_s", df["bound_decode"].to_numpy(), req.confidence, prof)
    curve = load_curve(b, t_pre, t_dec, req.o)
    tpot_full = curve.tpot_s
    ttft = curve.ttft_s + y + k * tpot_full
    fits = df["fits"].to_numpy(dtype=bool)
    ok = fits & (tpot_full <= req.tpot_slo) & (ttft <= req.ttft_slo)
    base = replace(base, max_batch_memory=b_mem, t_prefill_s=t_pre)
    if not ok.any():
        return _slo_reject(base, float(ttft[0]), float(tpot_full[0]), req)
    i = int(np.flatnonzero(ok)[-1])
    at_cap = i + 1 == len(b) and seq_cap < b_mem
    limited = (
        "max_num_seqs"
        if at_cap
        else "memory"
        if i + 1 == len(b) or not fits[i + 1]
        else ("tpot_slo" if tpot_full[i + 1] > req.tpot_slo else "ttft_slo")
    )
    margin = upper_factor("e2e_s", req.confidence or MARGIN_LEVEL, prof) - 1.0
    c = replace(base, batch=int(b[i]), limited_by=limited, t_decode_s=float(t_dec[i]), error_margin=float(margin))
    return _size(c, req, y, k)


def _blank(hw: HardwareSpec, prec: str, tp: int, dp: int, kv: str, price: float | None, inst: int) -> Candidate:
    """The candidate before it is planned: its layout (ep = dp × tp under attention DP), price and slow links."""
    from roofline.specs.topology import slow_link_notes

    ep = wide_ep(tp, dp)
    links = slow_link_notes(hw, {"tp": tp, "ep": ep} if dp > 1 else {"tp": tp})
    return Candidate(
        hardware=hw.name,
        precision=prec,
        tp=tp,
        dp=dp,
        ep=ep,
        kv_dtype=kv,
        usd_per_gpu_hour=price,
        gpus_per_instance=inst,
        link_flag="; ".join(f for f, _ in links),
        link_note="; ".join(n for _, n in links),
    )


def _batch_grid(b_mem: int) -> np.ndarray:
    """Every batch 1 … min(b_mem, EXACT_BATCH_LIMIT), then a geometric grid up to b_mem."""
    exact = np.arange(1, min(b_mem, EXACT_BATCH_LIMIT) + 1, dtype=np.int64)
    if b_mem <= EXACT_BATCH_LIMIT:
        return exact
    tail = np.unique(np.geomspace(EXACT_BATCH_LIMIT, b_mem, 64).astype(np.int64))
    return np.unique(np.concatenate([exact, tail, [b_mem]]))


def _slo_reject(base: Candidate, ttft: float, tpot: float, req: PlanRequest) -> Candidate:
    """Reason for a candidate that misses an SLO even at batch 1 (by how much)."""
    misses = []
    if ttft > req.ttft_slo:
        misses.append(
            f"TTFT {fmt_seconds(ttft)} > SLO {fmt_seconds(req.ttft_slo)} (over by {fmt_seconds(ttft - req.ttft_slo)})"
        )
    if tpot > req.tpot_slo:
        misses.append(
            f"TPOT {fmt_seconds(tpot)} > SLO {fmt_seconds(req.tpot_slo)} (over by {fmt_seconds(tpot - req.tpot_slo)})"
        )
    excess = max(ttft / req.ttft_slo, tpot / req.tpot_slo)
    return replace(base, reason="misses the SLO at batch 1: " + "; ".join(misses), slo_excess=excess)


def _size(c: Candidate, req: PlanRequest, y: float = 0.0, k: float = 0.0) -> Candidate:
    """Replicas, GPUs, latencies at the operating load, headroom and cost for batch ``c.batch``
    (``y`` request overhead in seconds and ``k`` output lag in steps: TTFT += y + k·TPOT_eff)."""
    b, t_pre, t_dec, n_dec = c.batch, c.t_prefill_s, c.t_decode_s, req.o - 1
    at_b = load_curve(np.asarray(b), t_pre, np.asarray(t_dec), req.o)
    lam_max = float(at_b.replica_rps)
    per_replica = c.gpus_per_replica
    cap = max(1, MAX_PLAN_GPUS // per_replica)

    def load(replicas: int) -> tuple[float, float, float, float]:
        lam = req.qps / replicas
        rho = lam * t_pre
        held, tpot = t_pre + t_dec, t_dec / (1 - rho)  # held: until the first token, in an engine slot
        return held + y + k * tpot, tpot, rho, lam * (held + n_dec * tpot)

    # Little's law: requests in the system must fit the B slots. conc falls as replicas grow (rho < 1
    # from replicas >= qps/λ_max on), so the fewest replicas is found by doubling then bisection:
    # O(log) passes however large qps is, never more than the GPU cap allows.
    replicas = max(1, math.ceil(req.qps / lam_max))
    if req.min_headroom is not None:  # spare capacity: replicas·λ_max ≥ qps·(1 + h)
        h = c.error_margin if req.min_headroom == "error" else float(req.min_headroom)
        replicas = max(replicas, math.ceil(req.qps * (1.0 + h) / lam_max * (1 - 1e-12)))
    if replicas <= cap and load(replicas)[3] > b:
        lo, step = replicas, 1
        while replicas < cap + 1 and load(replicas)[3] > b:
            lo, replicas, step = replicas, min(replicas + step, cap + 1), step * 2
        while replicas - lo > 1:
            mid = (lo + replicas) // 2
            lo, replicas = (lo, mid) if load(mid)[3] <= b else (mid, replicas)
    if replicas > cap:
        why = f"needs more than {cap:,} replicas × {c.parallelism} at {req.qps:g} req/s"
        why += f" (> {MAX_PLAN_GPUS:,} GPUs, roofline.boundary.limits)"
        return replace(c, feasible=False, reason=why, replica_rps=lam_max)
    ttft, tpot, rho, conc = load(replicas)
    gpus = (replicas + req.spare_replicas) * per_replica
    paid = c.rented_gpus(replicas + req.spare_replicas)
    cost = paid * c.usd_per_gpu_hour if c.usd_per_gpu_hour is not None else None
    per_m = usd_per_million_tokens(cost, req.qps / req.peak_factor * req.o) if cost is not None else None
    c = replace(
        c,
        feasible=True,
        replica_rps=lam_max,
        replicas=replicas,
        gpus=gpus,
        ttft_s=ttft,
        tpot_s=tpot,
        tpot_full_load_s=float(at_b.tpot_s),
        prefill_share=rho,
        concurrency=conc,
        headroom=replicas * lam_max / req.qps - 1,
        usd_per_hour=cost,
        usd_per_million_output_tokens=per_m,
        confidence=req.confidence,
        spare_replicas=req.spare_replicas,
    )
    util = req.qps / (replicas * lam_max)
    c = replace(
        c,
        utilisation=float(util),
        saturation_rps=SATURATION * replicas * lam_max,
        within_error=bool(req.confidence is None and c.headroom < c.error_margin),
        latency_bound="lower" if util > SATURATION else "upper" if req.confidence is not None else "point",
    )
    if req.max_gpus is not None and gpus > req.max_gpus:
        why = f"needs {gpus} GPUs ({replicas} replicas × {c.parallelism}) > max_gpus {req.max_gpus}"
        return replace(c, feasible=False, reason=why)
    return c
