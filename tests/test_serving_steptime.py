"""The compiled step-time model against the evaluator (GIVEN a composition, THEN the same seconds)."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.costs import step_cost
from roofline.evaluate import sum_max_affine_steps as sum_max_affine
from roofline.ops.builder import build_ops
from roofline.prediction import make_scenario, resolve
from roofline.serving.sim.steptime import StepModel

CASES = [
    ("llama-3.1-8b", "h100-sxm", 1),  # dense GQA
    ("gpt-oss-120b", "h100-sxm", 8),  # MoE, sliding-window layers, tp all-reduce
    ("deepseek-v3", "h200-sxm", 8),  # MLA (absorbed decode), MoE
    ("qwen3-30b-a3b", "h100-sxm", 1),  # MoE
    ("qwen3.5-397b-a17b", "h200-sxm", 8),  # hybrid: Gated DeltaNet state kernels + full attention, MoE
]


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def compiled(request: pytest.FixtureRequest):
    name, hw_name, tp = request.param
    m, hw, prof = resolve(name, hw_name, None)
    sc = make_scenario(hw, tp=tp)
    return m, hw, prof, sc, StepModel(m, sc, hw, prof, 8192, 512)


def _evaluator(m, hw, prof, sc, phase, b, t, p) -> float:
    return float(step_cost(build_ops(m, sc, hw, phase, b, t, p), hw, prof).time_s)


def test_homogeneous_steps_match_evaluator_on_a_grid(compiled) -> None:
    """GIVEN B rows × n new tokens after p cached WHEN costed by the compiled model THEN it equals
    step_cost(build_ops(...)) within 0.1 % (it is exact: tables at integer M, attention coefficients
    read off the op records; a decode row has pairs = span = min(p + 1, W))."""
    m, hw, prof, sc, sm = compiled
    worst = 0.0
    for b in (1, 3, 16, 64, 512):
        for n in (1, 7, 128, 2000):
            for p in (0, 5, 127, 1000, 7000):
                if b * n > 8192:
                    continue
                if n == 1:
                    ref = _evaluator(m, hw, prof, sc, "decode", b, 1, p)
                    got = sm.step_time(b, tuple(b * min(p + 1, w) for w in sm.windows))
                else:
                    ref = _evaluator(m, hw, prof, sc, "prefill", b, n, p)
                    got = sm.step_time(0, (0.0,) * len(sm.windows), np.full(b, n), np.full(b, p))
                worst = max(worst, abs(got / ref - 1))
    assert worst < 1e-3


@pytest.mark.parametrize("case", [c for c in CASES if c[0] != "deepseek-v3"], ids=lambda c: c[0])
def test_mixed_step_of_single_token_chunks_is_the_prefill_pass(case: tuple[str, str, int]) -> None:
    """GIVEN D decode rows at context L plus one 1-token prefill chunk after L − 1 cached THEN the step is
    the prefill-phase pass of D + 1 rows × 1 token after L − 1 (a mixed step is costed as one pass
    over all rows with eager launches; for non-MLA attention a decode row and a 1-token chunk are the
    same work; MLA is left out: its decode rows use the absorbed kernel, a 1-token chunk the expanded one)."""
    m, hw, prof = resolve(case[0], case[1], None)
    sc = make_scenario(hw, tp=case[2])
    sm = StepModel(m, sc, hw, prof, 8192, 512)
    for d, ctx in ((1, 10), (31, 1500), (200, 4000)):
        ref = _evaluator(m, hw, prof, sc, "prefill", d + 1, 1, ctx - 1)
        got = sm.step_time(d, tuple(d * min(ctx, w) for w in sm.windows), np.array([1.0]), np.array([ctx - 1.0]))
        assert got == pytest.approx(ref, rel=1e-9)


def test_decode_stretch_sums_the_steps_in_closed_form(compiled) -> None:
    """GIVEN rows with contexts c_i growing one per step WHEN k steps are summed in closed form THEN
    (a) for B equal rows the sum equals Σ_j of the evaluator's decode steps at context c + j, and
    (b) for unequal rows it equals Σ_j step_time(Σ_i min(c_i + j, W)) (no row crosses a window here)."""
    m, hw, prof, sc, sm = compiled
    k, nw = 40, len(sm.windows)

    def slope(ctx: np.ndarray) -> tuple[float, ...]:
        return tuple(float((ctx < w).sum()) for w in sm.windows)

    def span(ctx: np.ndarray) -> tuple[float, ...]:
        return tuple(float(np.minimum(ctx, w).sum()) for w in sm.windows)

    same = np.full(16, 1500.0)
    ref = sum(_evaluator(m, hw, prof, sc, "decode", 16, 1, 1500.0 + j - 1) for j in range(k))
    assert sm.decode_affine(16, span(same), slope(same)).total(k) == pytest.approx(ref, rel=1e-9)
    ctx = np.array([300.0, 1300.0, 2000.0])
    ref = sum(sm.step_time(3, span(ctx + j)) for j in range(k))
    st = sm.decode_affine(3, span(ctx), slope(ctx))
    assert st.total(k) == pytest.approx(ref, rel=1e-12)
    assert st.step(0) == pytest.approx(sm.step_time(3, span(ctx)), rel=1e-12)
    assert nw >= 1


def test_sum_max_affine_brute_force() -> None:
    """Σ_{j<k} max(p + qj, u + vj) equals the brute-force sum for crossing, parallel and disjoint lines."""
    for p, q, u, v in ((0.0, 1.0, 5.0, 0.5), (5.0, 0.5, 0.0, 1.0), (1.0, 0.1, 1.0, 0.1), (3.0, 0.0, 1.0, 0.0)):
        for k in (0, 1, 7, 30):
            brute = sum(max(p + q * j, u + v * j) for j in range(k))
            assert sum_max_affine(p, q, u, v, k) == pytest.approx(brute, rel=1e-12, abs=1e-12)


def test_steps_until_finds_the_first_step_starting_after_an_event(compiled) -> None:
    """steps_until(dt) is the smallest k with Σ_{j<k} step(j) ≥ dt: step k is the first to start at or after dt."""
    *_, sm = compiled
    st = sm.decode_affine(8, (8000.0,) * len(sm.windows), (8.0,) * len(sm.windows))
    for dt in (1e-9, st.step(0), 3.5 * st.step(0), 1000 * st.step(0)):
        k = st.steps_until(dt, 10_000)
        assert st.total(k) >= dt and st.total(k - 1) < dt
