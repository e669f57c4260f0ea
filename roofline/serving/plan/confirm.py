"""Confirm a capacity plan's finalists with the simulator and percentile SLOs; find each one's knee.

The planner (:mod:`roofline.serving.plan.planner`) sizes replicas with mean-value formulas. For the ``top``
feasible candidates this hook:

1. simulates one replica at its operating load qps / replicas (Poisson arrivals, the plan's prompt and
   output lengths, the engine's scheduler) and checks percentile SLOs, e.g. TTFT p99 ≤ 2 s and
   TPOT p90 ≤ 50 ms (percentiles over requests, as :func:`roofline.simulate` defines them);
2. screens the replica in closed form (:mod:`roofline.serving.plan.screening`) for its sustainable rate and
   the knee: the lowest rate at which the mean TTFT reaches twice its zero-load value (queueing then
   dominates); ``load`` = operating rate / sustainable rate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from roofline.engine.presets import EngineArg
from roofline.errors import ScenarioError
from roofline.serving.plan.planner import Candidate, PlanResult
from roofline.serving.plan.screening import screen
from roofline.serving.sim.metrics import finite_percentile as pct
from roofline.serving.simulate import replica, simulate


@dataclass(frozen=True)
class Confirmation:
    """Simulated check of one plan candidate (times in s, rates in requests/s per replica)."""

    label: str
    replicas: int
    replica_qps: float
    ttft_s: float
    tpot_s: float
    ttft_pct: float
    tpot_pct: float
    meets_slo: bool
    sustainable_qps: float
    knee_qps: float
    load: float
    saturated: str | None


def confirm(
    result: PlanResult,
    *,
    top: int = 3,
    ttft_pct: float = 99.0,
    tpot_pct: float = 90.0,
    engine: EngineArg = "vllm",
    engine_overrides: Mapping[str, Any] | None = None,
    num_requests: int = 2000,
    seed: int = 0,
) -> list[Confirmation]:
    """Simulate the ``top`` feasible candidates of ``result`` against its SLOs at the given percentiles."""
    for name, q in (("ttft_pct", ttft_pct), ("tpot_pct", tpot_pct)):
        if not 0 < q <= 100:
            raise ScenarioError(f"{name} must be a percentile in (0, 100], got {q}")
    out = []
    for c in [c for c in result.candidates if c.feasible][:top]:
        out.append(_one(result, c, ttft_pct, tpot_pct, engine, engine_overrides, num_requests, seed))
    return out


def _one(
    result: PlanResult, c: Candidate, ttft_pct: float, tpot_pct: float, engine: EngineArg,
    overrides: Mapping[str, Any] | None, n: int, seed: int,
) -> Confirmation:  # fmt: skip
    rate = result.qps / c.replicas
    kw: dict[str, Any] = dict(engine=engine, tp=c.tp, pp=c.pp, prompt_len=result.prompt_len,
                              output_len=result.output_len, weight_dtype=c.precision, kv_dtype=c.kv_dtype,
                              engine_overrides=dict(overrides or {}))  # fmt: skip
    s = simulate(result.model, c.hardware, qps=rate, num_requests=n, seed=seed, **kw)
    ttft, tpot = (
        pct(s.requests["ttft_s"].to_numpy(), ttft_pct),
        pct(s.requests["tpot_s"].to_numpy(), tpot_pct),
    )
    sus, knee = _knee(result, c, kw)
    ok = s.saturated is None and ttft <= result.ttft_slo_s and tpot <= result.tpot_slo_s
    return Confirmation(c.label, c.replicas, rate, ttft, tpot, ttft_pct, tpot_pct, ok, sus, knee, rate / sus,
                        s.saturated)  # fmt: skip


def _knee(result: PlanResult, c: Candidate, kw: dict[str, Any]) -> tuple[float, float]:
    """(sustainable rate, knee rate) of one replica from the screening tier."""
    p, o = float(result.prompt_len), float(result.output_len)
    opts = {k: v for k, v in kw.items() if k not in ("prompt_len", "output_len")}
    rep = replica(result.model, c.hardware, prompt_mean=p, output_mean=o, **opts)
    sm, budget = rep.step, rep.engine.max_num_batched_tokens
    sus = screen(sm, np.array([1e-9]), p, o, budget, sm.max_rows, rep.kv_tokens).sustainable_qps
    grid = np.linspace(0.0, 1.0, 101)[1:] * sus
    r = screen(sm, np.concatenate(([1e-9 * sus], grid)), p, o, budget, sm.max_rows, rep.kv_tokens)
    over = np.nonzero(~(r.ttft_mean_s[1:] < 2 * r.ttft_mean_s[0]))[0]
    return sus, float(grid[over[0]]) if over.size else sus
