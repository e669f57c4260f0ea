"""The report's speed-ups (issue #28) change no number: each is checked against the computation it replaces.

- the sensitivity search stops a candidate where it can no longer rank first (``sizing.gpus_that_can_win``) and
  sizes candidates of equal planner cost largest replica first: the same answer as sizing every candidate in
  full in the planner's order, with fewer simulations;
- the within-run bootstrap takes the draws of one length together: the same bits as one ``np.percentile`` a draw;
- ``knee_qps`` hands its sustainable rate to ``screen`` instead of computing it twice: the same Screen;
- one process pool for the whole report (``parallel.Jobs``): results in input order, as in turn.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
import pytest

import roofline.report.sizing as sizing
import roofline.serving.simulate as simulate_mod
from roofline.report.content import resolve_inputs, run_plan
from roofline.report.sensitivity import best_sized, scale_bandwidth
from roofline.serving.plan.parallel import Jobs, map_jobs
from roofline.serving.plan.procurement import EnergyInputs, Procurement, cost_fields
from roofline.serving.plan.result import Candidate
from roofline.serving.plan.sampling import BLOCKS, DRAWS, RNG_SEED, within_run_sd
from roofline.serving.workload.presets import resolve_workload


def _reference_sd(x: np.ndarray, q: float, blocks: int = BLOCKS, draws: int = DRAWS) -> float:
    """within_run_sd as it was: one np.percentile per bootstrap draw."""
    v = np.asarray(x, dtype=np.float64)
    v = v[np.isfinite(v)]
    n = int(v.size)
    if n < 2:
        return 0.0
    b = min(blocks, n)
    edges = np.linspace(0, n, b + 1).astype(np.int64)
    picks = np.random.default_rng(RNG_SEED).integers(0, b, size=(draws, b))
    parts = [v[edges[i] : edges[i + 1]] for i in range(b)]
    stats = [np.percentile(np.concatenate([parts[j] for j in row]), q) for row in picks]
    return float(np.std(stats, ddof=1))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 19, 20, 21, 57, 1000, 1001, 1999])
def test_within_run_sd_is_bit_identical_to_one_percentile_per_draw(n: int) -> None:
    rng = np.random.default_rng(n)
    for x in (rng.exponential(size=n), rng.lognormal(size=n), rng.integers(0, 4, size=n).astype(float)):
        if n > 4:
            x[::5] = np.inf  # requests still in flight are dropped
        for q in (0.0, 50.0, 90.0, 99.0, 99.9, 100.0):
            assert within_run_sd(x, q) == _reference_sd(x, q)
    x = rng.exponential(size=n)
    for blocks, draws in ((3, 7), (7, 2), (20, 50)):
        assert within_run_sd(x, 99.0, blocks, draws) == _reference_sd(x, 99.0, blocks, draws)


def test_knee_qps_screen_with_the_rate_given_is_the_screen_that_computes_it() -> None:
    from roofline.serving.plan.screening import knee_qps, screen, sustainable_qps
    from roofline.serving.replica import replica

    rep = replica("llama-3.1-8b", "h100-sxm", prompt_mean=1024.0, output_mean=256.0)
    sm, budget = rep.step, rep.engine.max_num_batched_tokens
    args = (sm, 1024.0, 256.0, budget, sm.max_rows, rep.kv_tokens)
    sus = sustainable_qps(*args)
    rates = np.linspace(0.01, 1.0, 50) * sus
    a = screen(sm, rates, 1024.0, 256.0, budget, sm.max_rows, rep.kv_tokens)
    b = screen(sm, rates, 1024.0, 256.0, budget, sm.max_rows, rep.kv_tokens, sustainable=sus)
    for name in a.__dataclass_fields__:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert knee_qps(*args)[0] == sus


def _cand(tp: int, price: float | None, inst: int, replicas: int = 1) -> Candidate:
    return Candidate(
        "h100-sxm", "bf16", tp, feasible=True, usd_per_gpu_hour=price, gpus_per_instance=inst, replicas=replicas
    )


def test_gpus_that_can_win_is_the_last_replica_count_whose_price_does_not_lose() -> None:
    """Brute force over replica counts, priced by the sizing's own cost_fields."""
    from roofline.serving.plan.finalists import Finalist

    nan = math.nan
    for spare in (0, 1, 2):
        terms = Procurement(spare_replicas=spare)
        for tp, price, inst in ((1, 3.99, 8), (2, 4.29, 8), (4, 2.79, 8), (8, 3.99, 8), (16, 3.99, 8), (2, None, 1)):
            c = _cand(tp, price, inst)
            for cost, gpus in ((63.84, 16), (34.32, 8), (100.0, 24), (math.inf, 32), (0.5, 1)):
                best = Finalist(
                    candidate=c,
                    replicas=1,
                    gpus=gpus,
                    replica_rate=1.0,
                    ttft_pct=99.0,
                    tpot_pct=90.0,
                    ttft_s=nan,
                    tpot_s=nan,
                    ttft_p50_s=nan,
                    tpot_p50_s=nan,
                    ttft_upper_s=nan,
                    tpot_upper_s=nan,
                    confidence=0.8,
                    sustainable_replica_rps=1.0,
                    knee_replica_rps=1.0,
                    meets_slo=True,
                    min_headroom=0.0,
                    usd_per_hour=None if math.isinf(cost) else cost,
                    usd_per_million_output_tokens=None,
                    kwh_per_million_output_tokens=None,
                    energy_usd_per_hour=None,
                )
                cap = sizing.gpus_that_can_win(c, best, spare)
                assert cap % tp == 0
                key = sizing.rank_key(best)[:2]
                for r in range(1, 200):
                    f = cost_fields(c, r, 1.0, EnergyInputs(None), terms)
                    usd = math.inf if f["usd_per_hour"] is None else f["usd_per_hour"]
                    can_win = (usd, f["gpus"]) <= key
                    assert can_win == (r * tp <= cap), (spare, tp, price, cost, gpus, r, cap)


@pytest.fixture(scope="module")
def chat_70b() -> Any:
    wl = resolve_workload("chat")
    return resolve_inputs("llama-3.1-70b", "h100-sxm,h200-sxm,a100-80gb-sxm", wl)


def _reference_best_sized(inp: Any, plan: Any) -> Any:
    """best_sized as it was: every candidate in the planner's order, each sized in full (no stop)."""
    from roofline.report.content import hw_name
    from roofline.report.sizing import planner_cost, rank_key, size_hardware, sized_cost

    specs = {h.name: h for h in inp.hardware}
    best = None
    for c in sorted((c for c in plan.candidates if c.feasible), key=lambda c: (planner_cost(c), c.gpus)):
        if best is not None and (planner_cost(c), c.gpus) > (sized_cost(best), best.gpus):
            break
        f, _ = size_hardware(inp, specs[hw_name(c.hardware)], [c], curve=False)
        if f is not None and (best is None or rank_key(f) < rank_key(best)):
            best = f
    return best


def test_sensitivity_search_stopped_early_gives_the_answer_of_the_full_search(
    chat_70b: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bandwidth -15 % on the README's report: the bounded search (stops, tied candidates largest replica first)
    and the full one in the planner's order give the same Finalist, every field; the bounded one simulates less."""
    inp = replace(chat_70b, variant=partial(scale_bandwidth, f=0.85))
    plan = run_plan(inp)
    calls: list[int] = []
    real = simulate_mod.simulate

    def counted(*a: Any, **k: Any) -> Any:
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(simulate_mod, "simulate", counted)
    bounded = best_sized(inp, plan)
    n_bounded = len(calls)
    full = _reference_best_sized(inp, plan)
    assert repr(bounded) == repr(full) and bounded is not None
    assert n_bounded < len(calls) - n_bounded  # the bounds did save simulations


def _square(x: int) -> int:
    return x * x


def test_one_shared_pool_keeps_input_order_and_matches_in_turn() -> None:
    items = list(range(9))
    for n in (1, 2):
        with Jobs(n) as pool:
            a, b = pool.start(_square, items), pool.start(_square, items[::-1])
            assert map_jobs(_square, items, pool) == [x * x for x in items]
            assert b.results() == [x * x for x in items[::-1]] and a.results() == [x * x for x in items]
            assert a.results() is a.results()  # computed once
            assert pool.start(_square, []).results() == []
            assert pool.start(_square, items, first=[8, 3]).results() == [x * x for x in items]
