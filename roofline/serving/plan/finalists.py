"""Size a plan's finalists on the serving simulator at the planned load, with percentile SLOs.

The planner (:mod:`roofline.serving.plan.planner`) prunes hardware × precision × tp with mean-value
formulas. For a finalist (one feasible candidate) this module:

1. builds one engine replica (:func:`roofline.serving.replica.replica`) and asks the closed-form
   screening tier for its sustainable rate λ_sus (requests/s) and its knee, the lowest rate at which the
   mean TTFT reaches twice its zero-load value (:func:`roofline.serving.plan.screening.knee_qps`);
2. starts from ``replicas = max(planner replicas, ⌈qps·(1 + min_headroom) / λ_sus⌉)`` so that
   headroom = replicas·λ_sus / qps − 1 is at least ``min_headroom``;
3. simulates one replica at the planned per-replica load qps / replicas (Poisson arrivals,
   ``num_requests`` requests, fixed seed) and reads TTFT and TPOT at the SLO percentiles
   (over requests, :mod:`roofline.serving.sim.metrics`);
4. checks the SLOs on the upper bound of the simulator's error at ``confidence`` ℓ:
   value·f_ℓ ≤ SLO, with f_ℓ the engine's upper factor measured on public serving rows held out by
   model family (:func:`roofline.published.serving_error.serving_upper_factor`; e.g. vLLM at 80 %:
   TTFT ×2.32, TPOT ×1.33); if a check fails or the run saturates, adds a replica and repeats (at most
   ``MAX_EXTRA``).

Capacity (the maximum sustainable rate of the deployment) is replicas·λ_sus, the knee replicas ×
the replica's knee. Energy per output token = Σ GPUs' mean board power / (qps·O), each serving GPU at
P_idle + (P_busy − P_idle)·u for the simulated busy fraction u, spares at idle
(:mod:`roofline.serving.plan.procurement`, which also prices spares, peak traffic and ownership).

Options of :func:`size_finalist`: ``mix`` checks every class at its percentiles on its own requests
(:mod:`roofline.serving.plan.mixplan`; lengths the mix's means, SLO arguments unused, no curve); ``speculative``
(e.g. ``"eagle:k=3,alpha=0.7"``) sizes on the speculative simulator, capacity and knee plain decoding's (a
conservative bound); ``max_gpus`` stops the search past that many GPUs (it then misses, saying so);
``procurement`` (the buyer's terms) checks the SLOs at qps × peak_factor, pays spares, prices tokens at qps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from roofline.profile import load_profile
from roofline.serving.plan.mixcurve import CURVE_LOADS as CURVE_LOADS  # re-exported: it lived here
from roofline.serving.plan.mixcurve import LoadPoint, load_points
from roofline.serving.plan.planner import Candidate
from roofline.serving.plan.procurement import EnergyInputs, Procurement, priced
from roofline.serving.plan.sampling import PercentileEstimate, fastest, sampled_check
from roofline.serving.sim.metrics import finite_percentile as pct
from roofline.serving.workload.stream import Workload

if TYPE_CHECKING:
    from roofline.engine.presets import EngineArg
    from roofline.prediction import ModelArg, ProfileArg
    from roofline.serving.plan.mixplan import ClassCheck
    from roofline.serving.sim.result import SimulationResult
    from roofline.serving.workload.mix import WorkloadMix

#: replicas the simulator may add to a planner candidate before it is declared failing.
MAX_EXTRA = 8


@dataclass(frozen=True)
class Finalist:
    """A planner candidate re-sized on the simulator at the planned load.

    ``ttft_s``/``tpot_s`` are at the SLO percentiles (``ttft_pct``/``tpot_pct``) and the planned load;
    ``*_upper_s`` are those times × e^(q) at ``confidence``. Rates in requests/s.
    """

    candidate: Candidate
    replicas: int
    gpus: int
    replica_rate: float
    ttft_pct: float
    tpot_pct: float
    ttft_s: float
    tpot_s: float
    ttft_p50_s: float
    tpot_p50_s: float
    ttft_upper_s: float
    tpot_upper_s: float
    confidence: float
    sustainable_replica_rps: float
    knee_replica_rps: float
    meets_slo: bool
    min_headroom: float
    usd_per_hour: float | None
    usd_per_million_output_tokens: float | None
    kwh_per_million_output_tokens: float | None
    energy_usd_per_hour: float | None
    reason: str = ""
    curve: tuple[LoadPoint, ...] = field(default_factory=tuple)
    sizing_runs: int = 1  # replicated runs (seeds seed … seed + runs − 1) of the deciding check
    ttft_threshold_s: float = math.nan  # the SLO ÷ the model-error factor: what the simulated percentile must meet
    tpot_threshold_s: float = math.nan
    ttft_sampled_hi_s: float = (
        math.nan
    )  # upper end of the deciding check's sampling interval (roofline.serving.plan.sampling)
    tpot_sampled_hi_s: float = math.nan
    rented_gpus: int = 0  # GPUs rented in whole instances of the price's source (what usd_per_hour pays for)
    spare_replicas: int = 0  # paid for beyond ``replicas`` (N + k), idle, not capacity
    peak_factor: float = 1.0  # the SLOs were checked at qps × peak_factor; costs per token at qps
    busy_fraction: float = math.nan  # fraction of time the simulated replica ran steps at the average load
    mean_board_power_w: float | None = None  # per serving GPU at the average load (procurement.board_power_w)
    classes: tuple[ClassCheck, ...] = ()  # a workload mix: every class's deciding check (plan.mixplan)
    binding_class: str = ""  # the class whose SLOs hold with the least margin ('' without a mix)
    ttft_class: str = ""  # the class the ttft_* fields are of (smallest TTFT margin)
    tpot_class: str = ""  # the class the tpot_* fields are of

    @property
    def ttft_margin(self) -> float:
        """threshold ÷ the sampling interval's upper end − 1: the room the deciding check left (negative: over)."""
        return self.ttft_threshold_s / self.ttft_sampled_hi_s - 1.0

    @property
    def tpot_margin(self) -> float:
        """As :attr:`ttft_margin`, for TPOT."""
        return self.tpot_threshold_s / self.tpot_sampled_hi_s - 1.0

    @property
    def capacity_rps(self) -> float:
        """Maximum sustainable rate of the deployment: replicas × the replica's sustainable rate."""
        return self.replicas * self.sustainable_replica_rps

    @property
    def knee_rps(self) -> float:
        """Deployment rate at which mean TTFT doubles its zero-load value (queueing dominates)."""
        return self.replicas * self.knee_replica_rps

    @property
    def headroom(self) -> float:
        """capacity / qps − 1 at the planned load."""
        return self.capacity_rps / (self.replica_rate * self.replicas) - 1.0

    @property
    def slo_capacity_rps(self) -> float:
        """Highest deployment rate at which the simulated SLO percentiles stay under their thresholds, read off the
        latency-vs-load curve (:func:`roofline.serving.plan.slo_capacity.slo_capacity`); NaN without a curve."""
        from roofline.serving.plan.slo_capacity import slo_capacity

        return self.replicas * slo_capacity(self)[0]

    @property
    def slo_headroom(self) -> float:
        """SLO capacity / qps − 1: how much more sustained traffic the SLOs take."""
        return self.slo_capacity_rps / (self.replica_rate * self.replicas) - 1.0

    @property
    def total_usd_per_hour(self) -> float | None:
        """GPU-hours plus electricity (when an electricity price was given)."""
        if self.usd_per_hour is None:
            return None
        return self.usd_per_hour + (self.energy_usd_per_hour or 0.0)


def checkpoint_format(model: ModelArg) -> str | None:
    """The format of a checkpoint's largest module group (routed experts of an MoE, else the dense FFN), the one
    a report names for a 'checkpoint' plan; None (native dtype) without a checkpoint. The simulator itself runs
    every module group in its own format."""
    from roofline.specs.library import model as load_model

    m = load_model(model)
    ck = m.checkpoint
    if ck is None:
        return None
    return str(ck.routed_experts if m.moe is not None else ck.dense_ffn)


def sim_kwargs(
    c: Candidate,
    engine: EngineArg,
    overrides: Mapping[str, object] | None,
    calibration: ProfileArg,
) -> dict[str, Any]:
    """simulate()/replica() options of a planner candidate; 'checkpoint' runs the checkpoint's own per-module
    formats (weight_dtype None), as predict and the planner price them (it ran every layer in the routed experts'
    format: gpt-oss-120b's attention in mxfp4, TPOT 11 % low)."""
    wd = None if c.precision == "checkpoint" else c.precision
    return {
        "engine": engine,
        "tp": c.tp,
        "pp": c.pp,
        "dp": c.dp,
        "ep": c.ep,
        "kv_dtype": c.kv_dtype,
        "calibration": calibration,
        "weight_dtype": wd,
        "engine_overrides": dict(overrides or {}),
    }


def size_finalist(
    model: ModelArg,
    c: Candidate,
    *,
    qps: float,
    prompt_len: int,
    output_len: int,
    ttft_slo_s: float,
    tpot_slo_s: float,
    ttft_pct: float = 99.0,
    tpot_pct: float = 90.0,
    confidence: float = 0.8,
    min_headroom: float | None = None,
    engine: EngineArg = "vllm",
    engine_overrides: Mapping[str, object] | None = None,
    calibration: ProfileArg = None,
    tdp_watts: float | None = None,
    usd_per_kwh: float | None = None,
    procurement: Procurement | None = None,
    num_requests: int = 1000,
    seed: int = 0,
    curve: bool = True,
    speculative: str | None = None,
    max_gpus: int | None = None,
    mix: WorkloadMix | None = None,
) -> Finalist:
    """Re-size planner candidate ``c`` on the simulator (module docstring, which states what ``mix``,
    ``speculative``, ``max_gpus`` and ``procurement`` change); ``min_headroom`` None: c.error_margin."""
    from roofline.serving.simulate import simulate

    kw = sim_kwargs(c, engine, engine_overrides, calibration)
    sus, knee = replica_capacity(model, c, kw, prompt_len, output_len)
    h_min = _headroom_floor(c.error_margin if min_headroom is None else min_headroom)
    prof = load_profile(calibration)  # a measured profile widens the interval by its run-to-run spread
    f_ttft, f_tpot = _upper_factors(confidence, engine, prof)
    terms, pcts = procurement or Procurement(), (ttft_pct, tpot_pct)
    peak = qps * terms.peak_factor
    first = max(c.replicas, math.ceil(peak * (1.0 + h_min) / sus)) if sus > 0 else c.replicas
    lengths: dict[str, Any] = {"prompt_len": prompt_len, "output_len": output_len} if mix is None else {"mix": mix}
    wl = Workload(qps=peak, num_requests=num_requests, seed=seed, **lengths)
    run = partial(simulate, model, c.hardware, speculative=speculative, **kw)
    last = _last_replicas(c, first, max_gpus)
    replicas, s, ttft, tpot, ok, why, est, extra = _fewest(
        run, wl, first, (ttft_slo_s, tpot_slo_s), pcts, (f_ttft, f_tpot), last
    )
    if not ok and replicas >= last and last < first + MAX_EXTRA:
        why += f"; stopped at {replicas * c.gpus_per_replica} GPUs: a deployment of {max_gpus} GPUs is already known"
    costs = priced(
        run, wl, s, c, replicas, qps * output_len, EnergyInputs(tdp_watts, 1.0, prof.power, usd_per_kwh), terms
    )
    plot = curve and ok and mix is None
    pts = load_points(model, c, kw, sus, prompt_len, output_len, num_requests, seed, pcts) if plot else ()
    f = Finalist(
        candidate=c,
        replicas=replicas,
        replica_rate=peak / replicas,
        ttft_pct=ttft_pct,
        tpot_pct=tpot_pct,
        ttft_s=ttft,
        tpot_s=tpot,
        ttft_p50_s=pct(s.requests["ttft_s"].to_numpy(), 50),
        tpot_p50_s=pct(s.requests["tpot_s"].to_numpy(), 50),
        ttft_upper_s=ttft * f_ttft,
        tpot_upper_s=tpot * f_tpot,
        confidence=confidence,
        sustainable_replica_rps=sus,
        knee_replica_rps=knee,
        meets_slo=ok,
        min_headroom=h_min,
        reason="" if ok else why,
        curve=pts,
        **costs,
        **_sampling_fields(est, (ttft_slo_s / f_ttft, tpot_slo_s / f_tpot)),
    )
    return replace(f, **extra) if extra else f


def _upper_factors(confidence: float, engine: EngineArg, prof: Any) -> tuple[float, float]:
    """The simulator's upper error factors of TTFT and TPOT at ``confidence`` for ``engine`` (and ``prof``'s
    spread): :func:`roofline.published.serving_error.serving_upper_factor`."""
    from roofline.published.serving_error import serving_upper_factor

    return serving_upper_factor("ttft_s", confidence, engine, prof), serving_upper_factor(
        "tpot_s", confidence, engine, prof
    )


def _sampling_fields(est: tuple[PercentileEstimate, PercentileEstimate], thresholds: tuple[float, float]) -> Any:
    """The Finalist fields of the deciding check: its runs, thresholds and sampling intervals' upper ends."""
    return {
        "sizing_runs": est[0].runs,
        "ttft_threshold_s": thresholds[0],
        "tpot_threshold_s": thresholds[1],
        "ttft_sampled_hi_s": est[0].hi,
        "tpot_sampled_hi_s": est[1].hi,
    }


def _headroom_floor(h: float) -> float:
    """The least headroom a finalist must keep: ``h`` (0 when not finite, never negative)."""
    return 0.0 if not math.isfinite(h) else max(h, 0.0)


def _last_replicas(c: Candidate, first: int, max_gpus: int | None) -> int:
    """The most replicas the search tries: first + MAX_EXTRA, or fewer where ``max_gpus`` caps the GPUs (never
    below ``first``)."""
    top = first + MAX_EXTRA if max_gpus is None else min(first + MAX_EXTRA, max_gpus // c.gpus_per_replica)
    return max(first, top)


def replica_capacity(
    model: ModelArg, c: Candidate, kw: Mapping[str, Any], prompt_len: int, output_len: int
) -> tuple[float, float]:
    """(sustainable rate, knee) of one replica of candidate ``c`` (requests/s), from the screening tier on the
    replica's own compiled step model (:func:`roofline.serving.plan.screening.knee_qps`)."""
    from roofline.serving.plan.screening import knee_qps
    from roofline.serving.replica import replica

    rep = replica(model, c.hardware, prompt_mean=float(prompt_len), output_mean=float(output_len), **kw)
    sm, budget = rep.step, rep.engine.max_num_batched_tokens
    return knee_qps(sm, float(prompt_len), float(output_len), budget, sm.max_rows, rep.kv_tokens)


def _fewest(
    run: Callable[..., SimulationResult],
    wl: Workload,
    first: int,
    slo_s: tuple[float, float],
    pcts: tuple[float, float],
    factors: tuple[float, float],
    last: int,
) -> tuple[int, SimulationResult, float, float, bool, str, tuple[PercentileEstimate, PercentileEstimate], Any]:
    """:func:`_fewest_replicas` and no extra Finalist fields; for a mix workload
    :func:`roofline.serving.plan.mixplan.fewest_replicas_mix` and the mix's Finalist fields."""
    if wl.the_mix is None:
        return (*_fewest_replicas(run, wl, first, slo_s, pcts, factors, last), {})
    from roofline.serving.plan.mixplan import fewest_replicas_mix

    return fewest_replicas_mix(run, wl, first, factors, last)


def _fewest_replicas(
    run: Callable[..., SimulationResult],
    wl: Workload,
    first: int,
    slo_s: tuple[float, float],
    pcts: tuple[float, float],
    factors: tuple[float, float],
    last: int | None = None,
) -> tuple[int, SimulationResult, float, float, bool, str, tuple[PercentileEstimate, PercentileEstimate]]:
    """(replicas, last run, TTFT and TPOT at the SLO percentiles, meets, why not, the deciding check's estimates):
    the fewest replicas from ``first`` (at most ``MAX_EXTRA`` more) whose one-replica run of ``wl`` at its qps /
    replicas holds TTFT·f_TTFT ≤ its SLO and TPOT·f_TPOT ≤ its SLO without saturating, each percentile's sampling
    interval counted (:func:`sampled_check`), found by :func:`roofline.serving.plan.replica_search.fewest_meeting`;
    ``last`` (default first + MAX_EXTRA) is the most tried; the last one tried when none does."""
    from roofline.serving.plan.replica_search import fewest_meeting

    qps = float(wl.qps or 0.0)
    thresholds = (slo_s[0] / factors[0], slo_s[1] / factors[1])

    def probe(replicas: int) -> tuple[bool, bool, _Tried]:
        s, est, verdict = sampled_check(run, replace(wl, qps=qps / replicas), pcts, thresholds)
        if verdict == "meets":
            return True, False, (s, est, "")
        why = _miss_why(s, est, verdict, qps / replicas, pcts, factors, thresholds)
        best = fastest(s)
        hopeless = s.saturated is None and (best[0] > thresholds[0] or best[1] > thresholds[1])
        if hopeless:
            why += (
                f"; more replicas cannot help: the fastest request took TTFT {best[0] * 1e3:.0f} ms and TPOT "
                f"{best[1] * 1e3:.1f} ms against {thresholds[0] * 1e3:.0f} / {thresholds[1] * 1e3:.1f} ms"
            )
        return False, hopeless, (s, est, why)

    replicas, ok, (s, est, why) = fewest_meeting(first, first + MAX_EXTRA if last is None else last, probe)
    return replicas, s, est[0].value, est[1].value, ok, why, est


#: (run, TTFT and TPOT estimates, why it misses or "") of one replica count the search tried.
_Tried = tuple["SimulationResult", tuple[PercentileEstimate, PercentileEstimate], str]


def _miss_why(
    s: SimulationResult,
    est: tuple[PercentileEstimate, PercentileEstimate],
    verdict: str,
    rate: float,
    pcts: tuple[float, float],
    factors: tuple[float, float],
    thresholds: tuple[float, float],
) -> str:
    """Why one replica count at ``rate`` per replica misses: saturation, or its percentiles against the SLOs (and,
    too close to call, the sampling interval over its runs)."""
    ttft, tpot = est[0].value, est[1].value
    upper = (ttft * factors[0], tpot * factors[1])
    return s.saturated or (
        f"at {rate:.3g} req/s per replica the simulated TTFT P{pcts[0]:g} is {ttft * 1e3:.0f} ms "
        f"(upper bound {upper[0] * 1e3:.0f} ms) and TPOT P{pcts[1]:g} {tpot * 1e3:.1f} ms "
        f"(upper bound {upper[1] * 1e3:.1f} ms)"
        + (
            f"; too close to call after {est[0].runs} runs of {est[0].requests // est[0].runs:,} requests "
            f"(90 % interval over the runs: TTFT "
            f"{est[0].lo * 1e3:.0f}–{est[0].hi * 1e3:.0f} ms against {thresholds[0] * 1e3:.0f} ms, TPOT "
            f"{est[1].lo * 1e3:.1f}–{est[1].hi * 1e3:.1f} ms against {thresholds[1] * 1e3:.1f} ms): sized up"
            if verdict == "too close"
            else ""
        )
    )
