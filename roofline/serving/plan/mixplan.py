"""Sizing a finalist for a workload mix: every class's SLOs at its own percentile, on its own requests.

:func:`roofline.serving.plan.finalists.size_finalist` with ``mix=`` simulates one replica on the mixed stream
(:mod:`roofline.serving.workload.mix`) and, per class i, checks TTFT_i at ttft_pct_i and TPOT_i at tpot_pct_i over
class i's requests against thresholds SLO_i ÷ f (f the same model-error factors as a single workload's), each
with the replicated sampling rule of :mod:`roofline.serving.plan.sampling` (2k checks, one verdict: it meets when
every check's interval is under its threshold). The fewest replicas that meet all of them is the answer.

The **binding class** is the one with the smallest margin m_i = min(TTFT threshold_i / TTFT upper end_i,
TPOT threshold_i / TPOT upper end_i) − 1 (upper ends of the sampling intervals): the class whose SLO holds with
the least room, the one that would break first. The Finalist's ``ttft_*`` fields are those of the class with the
smallest TTFT margin, its ``tpot_*`` fields those of the class with the smallest TPOT margin, so every figure a
report prints for a single workload stays the worst case over the classes; ``classes`` holds every class's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from roofline.errors import ScenarioError
from roofline.serving.plan.sampling import Check, PercentileEstimate, sampled_checks
from roofline.units import fmt_seconds

if TYPE_CHECKING:
    from roofline.serving.plan.planner import Candidate
    from roofline.serving.sim.result import SimulationResult
    from roofline.serving.workload.mix import WorkloadMix
    from roofline.serving.workload.stream import Workload

#: Fewest simulated requests a class is expected to get (share × num_requests) before its percentiles are checked.
MIN_CLASS_REQUESTS = 5


@dataclass(frozen=True)
class ClassCheck:
    """One class's deciding check: its share, requests counted (over the replicated runs), TTFT and TPOT (s) at its
    percentiles (mean over the runs), thresholds (SLO ÷ model-error factor) and sampling intervals' upper ends."""

    name: str
    share: float
    requests: int
    ttft_pct: float
    tpot_pct: float
    ttft_slo_s: float
    tpot_slo_s: float
    ttft_s: float
    tpot_s: float
    ttft_threshold_s: float
    tpot_threshold_s: float
    ttft_hi_s: float
    tpot_hi_s: float

    @property
    def ttft_margin(self) -> float:
        """TTFT threshold ÷ its interval's upper end − 1 (negative: over)."""
        return self.ttft_threshold_s / self.ttft_hi_s - 1.0 if self.ttft_hi_s > 0 else -math.inf

    @property
    def tpot_margin(self) -> float:
        """As :attr:`ttft_margin`, for TPOT."""
        return self.tpot_threshold_s / self.tpot_hi_s - 1.0 if self.tpot_hi_s > 0 else -math.inf

    @property
    def margin(self) -> float:
        """The smaller of the two margins (NaN counts as none: −inf)."""
        m = min(self.ttft_margin, self.tpot_margin)
        return -math.inf if math.isnan(m) else m


def check_class_requests(mix: WorkloadMix, num_requests: int) -> None:
    """Every class expects at least MIN_CLASS_REQUESTS of the ``num_requests`` simulated requests."""
    for c in mix.classes:
        if c.share * num_requests < MIN_CLASS_REQUESTS:
            need = math.ceil(MIN_CLASS_REQUESTS / c.share)
            raise ScenarioError(
                f"mix class {c.name!r} (share {c.share:.3g}) gets {c.share * num_requests:.1f} of {num_requests:,} "
                f"simulated requests, too few for its P{c.ttft_pct:g}: simulate at least {need:,} requests or "
                "raise its share"
            )


def reject_unservable(c: Candidate, mix: WorkloadMix, context_tokens: int) -> Candidate:
    """``c`` infeasible when a class's mean request (E[P_i] + E[O_i] tokens) exceeds what one replica's KV cache
    holds, ≈ max_batch_memory × the mean request's context ``context_tokens`` (the planner sized the batch at P̄ + Ō):
    the mean request fits where a long-context class does not, and the simulator would refuse that class."""
    if not c.feasible or c.max_batch_memory <= 0:
        return c
    pool = c.max_batch_memory * context_tokens
    for k in mix.classes:
        need = k.prompt.mean + k.output.mean
        if need > pool:
            why = (
                f"cannot hold one request of class {k.name!r} ({k.prompt.mean:,.0f} + {k.output.mean:,.0f} tokens): "
                f"the KV cache of one replica holds about {pool:,} tokens; try a larger tp or a GPU with more memory"
            )
            return replace(c, feasible=False, reason=why)
    return c


def mix_checks(mix: WorkloadMix, factors: tuple[float, float]) -> tuple[Check, ...]:
    """TTFT and TPOT of every class, at its percentiles, against SLO ÷ factor, over its own requests."""
    out: list[Check] = []
    for c in mix.classes:
        out.append(Check("ttft_s", c.ttft_pct, c.ttft_slo_s / factors[0], c.name))
        out.append(Check("tpot_s", c.tpot_pct, c.tpot_slo_s / factors[1], c.name))
    return tuple(out)


def class_checks(
    mix: WorkloadMix, checks: tuple[Check, ...], est: tuple[PercentileEstimate, ...]
) -> tuple[ClassCheck, ...]:
    """The per-class view of one sampled check (pairs of TTFT, TPOT estimates in class order)."""
    out = []
    for i, c in enumerate(mix.classes):
        t, u = est[2 * i], est[2 * i + 1]
        out.append(
            ClassCheck(
                c.name,
                c.share,
                t.requests,
                c.ttft_pct,
                c.tpot_pct,
                c.ttft_slo_s,
                c.tpot_slo_s,
                t.value,
                u.value,
                checks[2 * i].threshold,
                checks[2 * i + 1].threshold,
                t.hi,
                u.hi,
            )
        )
    return tuple(out)


def _worst(cls: tuple[ClassCheck, ...]) -> tuple[ClassCheck, ClassCheck, ClassCheck]:
    """(binding class, class of the smallest TTFT margin, class of the smallest TPOT margin)."""

    def key(m: float) -> float:
        return -math.inf if math.isnan(m) else m

    return (
        min(cls, key=lambda c: c.margin),
        min(cls, key=lambda c: key(c.ttft_margin)),
        min(cls, key=lambda c: key(c.tpot_margin)),
    )


def fewest_replicas_mix(
    run: Callable[..., SimulationResult],
    wl: Workload,
    first: int,
    factors: tuple[float, float],
    last: int,
) -> tuple[
    int, SimulationResult, float, float, bool, str, tuple[PercentileEstimate, PercentileEstimate], dict[str, Any]
]:
    """As ``finalists`` sizes one workload, for ``wl``'s mix (module docstring): (replicas,
    last run, TTFT and TPOT of the TTFT- and TPOT-binding classes, meets, why not, their estimates, the Finalist
    fields of the mix: ``classes``, ``binding_class``, percentiles and thresholds of the binding figures)."""
    mix = wl.the_mix
    assert mix is not None
    check_class_requests(mix, int(wl.num_requests))
    checks = mix_checks(mix, factors)
    from roofline.serving.plan.replica_search import fewest_meeting

    qps = float(wl.qps or 0.0)

    def probe(replicas: int) -> tuple[bool, bool, tuple[Any, ...]]:
        rate = qps / replicas
        s, est, verdict = sampled_checks(run, replace(wl, qps=rate), checks)
        cls = class_checks(mix, checks, est)
        bind, bt, bp = _worst(cls)
        ti, pi = 2 * mix.names.index(bt.name), 2 * mix.names.index(bp.name) + 1
        extra = {
            "classes": cls,
            "binding_class": bind.name,
            "ttft_class": bt.name,
            "tpot_class": bp.name,
            "ttft_pct": bt.ttft_pct,
            "tpot_pct": bp.tpot_pct,
            "ttft_threshold_s": bt.ttft_threshold_s,
            "tpot_threshold_s": bp.tpot_threshold_s,
        }
        out = (s, bt.ttft_s, bp.tpot_s, (est[ti], est[pi]), extra)
        if verdict == "meets":
            return True, False, (*out, "")
        why = s.saturated or _miss_text(rate, bind, factors, verdict == "too close", est[0].runs)
        hopeless = _hopeless(s, cls) if s.saturated is None else ""
        return False, bool(hopeless), (*out, why + hopeless)

    replicas, ok, (s, ttft, tpot, est, extra, why) = fewest_meeting(first, last, probe)
    return replicas, s, ttft, tpot, ok, why, est, extra


def _miss_text(rate: float, c: ClassCheck, factors: tuple[float, float], close: bool, runs: int) -> str:
    """Why a replica count misses, naming the binding class."""
    text = (
        f"at {rate:.3g} req/s per replica class {c.name!r} binds: its simulated TTFT P{c.ttft_pct:g} is "
        f"{fmt_seconds(c.ttft_s)} (upper bound {fmt_seconds(c.ttft_s * factors[0])}, SLO "
        f"{fmt_seconds(c.ttft_slo_s)}) and TPOT P{c.tpot_pct:g} {fmt_seconds(c.tpot_s)} (upper bound "
        f"{fmt_seconds(c.tpot_s * factors[1])}, SLO {fmt_seconds(c.tpot_slo_s)})"
    )
    if close:
        text += f"; too close to call after {runs} runs: sized up"
    return text


def _hopeless(s: SimulationResult, cls: tuple[ClassCheck, ...]) -> str:
    """'' or why more replicas cannot help: some class's fastest request already misses its threshold."""
    import numpy as np

    r = s.requests
    names = r["class"].to_numpy()
    for c in cls:
        sel = names == c.name
        t, u = r["ttft_s"].to_numpy()[sel], r["tpot_s"].to_numpy()[sel]
        t, u = t[np.isfinite(t)], u[np.isfinite(u)]
        best = (float(t.min()) if t.size else math.inf, float(u.min()) if u.size else math.inf)
        if best[0] > c.ttft_threshold_s or best[1] > c.tpot_threshold_s:
            return (
                f"; more replicas cannot help: class {c.name!r}'s fastest request took TTFT {fmt_seconds(best[0])} "
                f"and TPOT {fmt_seconds(best[1])} against {fmt_seconds(c.ttft_threshold_s)} / "
                f"{fmt_seconds(c.tpot_threshold_s)}"
            )
    return ""
