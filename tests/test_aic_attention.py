"""Prefill attention curves fitted from an engine's context-attention rows (calibrate/aic/attention.py).

Rows measured at exactly a(n) of the bf16 peak (time = FLOPs / (a(n) · peak), no overhead in the datasheet profile)
give a knot per octave of context at a(n); rows too small to fill the GPU (batch × heads < 32), with a cached past,
or in another format are not fitted; the fitted profile then prices the fitted rows exactly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibrate.aic.attention import MIN_BIN_ROWS, fit_prefill, with_prefill
from calibrate.aic.compare import placeholder_model
from roofline.ops.attention import attention_kernel
from roofline.ops.context import BuildContext
from roofline.profile import datasheet_profile
from roofline.specs.library import hardware
from roofline.specs.precision import Precision
from roofline.specs.scenario import Scenario

HW = hardware("h100-sxm")
ACHIEVED = {1024: 0.3, 2048: 0.45, 4096: 0.55, 8192: 0.6}


def _flops(batch: float, tokens: float, hq: float, hkv: float, d: float) -> float:
    ctx = BuildContext.create(placeholder_model(), Scenario(kv_dtype=Precision.BF16), HW, "prefill", batch, tokens, 0.0)
    return float(attention_kernel(ctx, "aic", 1, float("inf"), hq, hkv, d, d, 2 * hkv * d).flops)


def _table() -> pd.DataFrame:
    rows = []
    for n0, a in ACHIEVED.items():
        for i in range(MIN_BIN_ROWS):
            batch, n = (1 + i % 4) * 8.0, float(n0 + 64 * i)  # 8-32 sequences × 32 heads, inside the octave
            t = _flops(batch, n, 32.0, 8.0, 128.0) / (a * HW.peak_flops_per_s("bf16"))
            rows.append(
                {
                    "phase": "prefill",
                    "batch": batch,
                    "new_tokens": n,
                    "past": 0.0,
                    "q_heads": 32.0,
                    "kv_heads": 8.0,
                    "head_dim": 128.0,
                    "window": np.inf,
                    "beam_width": 1,
                    "dtype": "bfloat16",
                    "kv_dtype": "bfloat16",
                    "time_s": t,
                }
            )
    noise = [
        {**rows[0], "batch": 1.0, "q_heads": 8.0, "time_s": 1.0},  # 8 tiles: cannot fill the GPU
        {**rows[0], "past": 512.0, "time_s": 1.0},  # a chunk after a cached past
        {**rows[0], "kv_dtype": "fp8", "time_s": 1.0},
    ]
    return pd.DataFrame(rows + noise)


def test_knots_are_each_octaves_achieved_fraction_and_price_the_rows_exactly() -> None:
    base = datasheet_profile()
    (fit,) = fit_prefill(_table(), HW, base, "synthetic")
    assert fit.head_dim == 128 and fit.rows_used == MIN_BIN_ROWS * len(ACHIEVED)
    assert fit.curve.x == tuple(float(x) for x in ACHIEVED)
    np.testing.assert_allclose(fit.curve.y, list(ACHIEVED.values()), rtol=1e-9)
    assert fit.residual_median == pytest.approx(1.0, abs=0.03)  # interpolation inside an octave only
    prof = with_prefill(base, {128: fit.curve}, ())
    assert prof.attention.prefill_compute_efficiency[128] == fit.curve
    others = {k: v for k, v in prof.attention.prefill_compute_efficiency.items() if k != 128}
    assert others == {k: v for k, v in base.attention.prefill_compute_efficiency.items() if k != 128}
