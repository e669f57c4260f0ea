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


def test_prefill_floor_is_the_median_excess_of_latency_bound_calls_and_the_curve_is_fitted_after_it() -> None:
    """Latency-bound calls (one 32–120-token sequence of 8 heads: work ≪ measured) measured at work + 9 µs give
    ``attention.prefill_fixed_s`` = 9 µs (datasheet profile: no per-kernel cost); the large rows, measured at
    a(n) plus that floor, then give the same knots as without it, and the floor reaches only prefill attention."""
    from calibrate.aic.latency import fit_attention_floor, with_attention_floor
    from roofline.evaluate import op_time

    base, floor = datasheet_profile(), 9e-6
    tiny = []
    for i in range(12):
        n = 32.0 + 8 * i
        ctx = BuildContext.create(placeholder_model(), Scenario(kv_dtype=Precision.BF16), HW, "prefill", 1.0, n, 0.0)
        op = attention_kernel(ctx, "aic", 1, float("inf"), 8.0, 8.0, 128.0, 128.0, 2 * 8 * 128)
        t = op_time(op, HW, base)
        work = float(np.maximum(t.compute_s, t.memory_s))
        tiny.append({**_table().iloc[0].to_dict(), "batch": 1.0, "q_heads": 8.0, "kv_heads": 8.0, "new_tokens": n})
        tiny[-1]["time_s"] = work + floor
    big = _table().iloc[: MIN_BIN_ROWS * len(ACHIEVED)].assign(time_s=lambda d: d["time_s"] + floor)
    # few tiles (1 × 8 heads × 3 = 24) but 300 tokens: a tile's whole pass, not the floor, so not used
    long = pd.DataFrame([{**tiny[0], "new_tokens": 300.0, "time_s": 1e-3}] * 20)
    table = pd.concat([big, pd.DataFrame(tiny), long], ignore_index=True)
    fit = fit_attention_floor(table, HW, base, "synthetic", "prefill")
    assert fit is not None and fit.field == "attention.prefill_fixed_s" and fit.rows_used == len(tiny)
    assert fit.value_s == pytest.approx(floor, rel=1e-9)
    prof = with_attention_floor(base, fit.value_s, "synthetic", "prefill")
    assert (prof.attention.prefill_fixed_s, prof.attention.decode_fixed_s) == (fit.value_s, 0.0)
    (curve_fit,) = fit_prefill(table, HW, prof, "synthetic")
    np.testing.assert_allclose(curve_fit.curve.y, list(ACHIEVED.values()), rtol=1e-6)


def test_a_kv_formats_prefill_rate_is_its_rows_rate_over_the_16_bit_curve_and_prices_only_its_kernels() -> None:
    """fp8-KV rows measured at 0.6 × a(n) of the bf16 peak give ``attention.prefill_kv_rate["fp8"]`` = 0.6 over the
    curve fitted from the bf16 rows; with it an fp8-KV prefill kernel on the curve takes 1 / 0.6 of its bf16-KV
    time in compute, a bf16-KV one and a decode kernel are unchanged."""
    from calibrate.aic.attention import fit_prefill_kv_rates, with_kv_rates
    from roofline.evaluate import op_time

    base = datasheet_profile()
    bf16 = _table().iloc[: MIN_BIN_ROWS * len(ACHIEVED)]
    at_knots = bf16.assign(new_tokens=bf16["new_tokens"].map(lambda n: max(k for k in ACHIEVED if k <= n)))
    flops = [_flops(r.batch, r.new_tokens, 32.0, 8.0, 128.0) for r in at_knots.itertuples()]
    a = at_knots["new_tokens"].map(ACHIEVED).to_numpy()  # fp8 rows at the knots' contexts, 0.6 of each knot's rate
    fp8 = at_knots.assign(kv_dtype="fp8", time_s=np.asarray(flops) / (0.6 * a * HW.peak_flops_per_s("bf16")))
    table = pd.concat([bf16, fp8], ignore_index=True)
    (curve_fit,) = fit_prefill(table, HW, base, "synthetic")
    prof = with_prefill(base, {128: curve_fit.curve}, ())
    (rate,) = fit_prefill_kv_rates(table, HW, prof)
    assert (rate.kv_format, rate.rows_used) == ("fp8", MIN_BIN_ROWS * len(ACHIEVED))
    assert rate.rate == pytest.approx(0.6, rel=1e-9) and rate.residual_median == pytest.approx(1.0, abs=0.03)
    rated = with_kv_rates(prof, {"fp8": rate.rate}, ())

    def kernel(kv: Precision, phase: str) -> object:
        t = 4096.0 if phase == "prefill" else 1.0
        ctx = BuildContext.create(
            placeholder_model(), Scenario(kv_dtype=kv), HW, phase, 8.0, t, 0.0 if t > 1 else 4095.0
        )  # type: ignore[arg-type]
        return attention_kernel(ctx, "aic", 1, float("inf"), 32.0, 8.0, 128.0, 128.0, 2048.0, kv_format=kv.value)

    q, b = kernel(Precision.FP8, "prefill"), kernel(Precision.BF16, "prefill")
    assert float(op_time(q, HW, rated).compute_s) == pytest.approx(float(op_time(q, HW, prof).compute_s) / 0.6)
    assert float(op_time(b, HW, rated).time_s) == float(op_time(b, HW, prof).time_s)
    d = kernel(Precision.FP8, "decode")
    assert float(op_time(d, HW, rated).time_s) == float(op_time(d, HW, prof).time_s)
