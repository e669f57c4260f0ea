"""One home per formula: the screening tier's steps are the compiled step model's own steps.

GIVEN every bundled model spec (dense, MoE, MLA, sparse attention, sliding windows, hybrid linear/SSM
layers) WHEN the screening tier prices a decode-only step and a mixed step (decode rows + one prefill chunk
after cached tokens) at whole rows THEN it equals the simulator's :meth:`StepModel.step_time` to 0.1 % (it is
the same code: the same terms, the same CPU/GPU overlap rule), with and without asynchronous scheduling.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from roofline.prediction import make_scenario, resolve
from roofline.serving.sim.steptime import StepModel
from roofline.specs.library import list_models

MODELS = list_models()


def _spans(sm: StepModel, rows: int, ctx: float) -> tuple[float, ...]:
    return tuple(rows * min(ctx, w) for w in sm.windows)


@pytest.mark.parametrize("name", MODELS)
def test_screening_steps_equal_the_step_model_for_every_bundled_spec(name: str) -> None:
    m, hw, prof = resolve(name, "h200-sxm", None)
    tp = 8 if m.param_count() > 60e9 else 1
    for async_cpu in (False, True):
        sm = StepModel(m, make_scenario(hw, tp=tp, engine="vllm"), hw, prof, 1024, 64, 0.004, async_cpu)
        rows = np.array([1.0, 7.0, 32.0])
        for ctx in (300.0, 5000.0):
            dec = sm.mean_step_s(rows, ctx)
            chunk, past = np.array([512.0, 100.0, 256.0]), np.array([0.0, 900.0, 4096.0])
            mixed = sm.mean_step_s(rows, ctx, chunk, past)
            for i, r in enumerate(rows.astype(int)):
                want_dec = sm.step_time(int(r), _spans(sm, int(r), ctx))
                want_mix = sm.step_time(int(r), _spans(sm, int(r), ctx), chunk[i : i + 1], past[i : i + 1])
                assert dec[i] == pytest.approx(want_dec, rel=1e-3), (name, "decode", r, ctx)
                assert mixed[i] == pytest.approx(want_mix, rel=1e-3), (name, "mixed", r, ctx)


def test_real_valued_rows_lie_between_the_whole_counts() -> None:
    """A mean population of 7.5 rows costs between the 7- and 8-row steps (linear tables, affine attention)."""
    m, hw, prof = resolve("deepseek-v3", "h200-sxm", None)
    sm = StepModel(m, make_scenario(hw, tp=8, engine="vllm"), hw, prof, 1024, 64)
    lo, mid, hi = sm.mean_step_s(np.array([7.0, 7.5, 8.0]), 2048.0, np.array([256.0] * 3), np.zeros(3))
    assert lo < mid < hi and math.isclose(mid, (lo + hi) / 2, rel_tol=0.02)
