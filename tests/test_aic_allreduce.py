"""The engine's all-reduce efficiency against message size (calibrate.aic.allreduce): hand-derived knots, a synthetic
table recovered, and the shipped curves' times never falling with the message size within one algorithm."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from calibrate.aic.allreduce import efficiency_knots, fit_allreduce_efficiency, with_allreduce_efficiency
from calibrate.aic.engine_profile import shippable
from calibrate.aic.tables import AIC_HARDWARE
from roofline.engine.profiles import shipped_engine_profile
from roofline.evaluate import comm_time_s, op_time
from roofline.ops.comm import all_reduce, all_reduce_plan
from roofline.profile import default_profile
from roofline.specs.library import hardware
from roofline.specs.topology import comm_path

KIB = 1024.0


def test_knots_step_at_an_algorithm_change_and_cap_rises() -> None:
    """Sizes 1, 2, 4, 8 KiB with efficiencies 0.5, 0.9, 0.2, 0.3, the algorithm changing at 4 KiB: the 2 KiB rise is
    capped at 0.5·(1 + ln 2) (one octave), the 4 KiB change gets a knot one byte below repeating the capped value,
    and 8 KiB's 0.3 is within its cap 0.2·(1 + ln 2)."""
    sizes = np.array([1, 2, 4, 8]) * KIB
    xs, ys = efficiency_knots(sizes, np.array([0.5, 0.9, 0.2, 0.3]), np.array([1.0, 1.0, 2.0, 2.0]), {2.0: 4 * KIB})
    cap = 0.5 * (1.0 + math.log(2.0))
    assert xs == [1 * KIB, 2 * KIB, 4 * KIB - 1.0, 4 * KIB, 8 * KIB]
    assert ys == pytest.approx([0.5, cap, cap, 0.2, 0.3], rel=1e-15)


def test_knots_start_a_new_algorithm_at_its_first_size_not_its_first_fitted_one() -> None:
    """The new algorithm runs from 4 KiB but its first bandwidth-bound size is 16 KiB: its first efficiency holds
    from 4 KiB (knots at 4 KiB − 1 byte, 4 KiB and 16 KiB)."""
    sizes = np.array([2, 16]) * KIB
    xs, ys = efficiency_knots(sizes, np.array([0.7, 0.3]), np.array([1.0, 2.0]), {2.0: 4 * KIB})
    assert xs == [2 * KIB, 4 * KIB - 1.0, 4 * KIB, 16 * KIB]
    assert ys == pytest.approx([0.7, 0.7, 0.3, 0.3], rel=1e-15)


def _synthetic(hw_name: str, p: int, eff: float) -> pd.DataFrame:
    """A normalised custom all-reduce table whose rows are priced by the default profile with the link efficiency
    replaced by ``eff``: what the fit must recover."""
    hw, base = hardware(hw_name), default_profile()
    sizes = 2.0 ** np.arange(10, 31)
    op = all_reduce("ar", "comm", "x", 1, "bf16", sizes, p, hw)
    prof = base.model_copy(update={"comm": base.comm.model_copy(update={"link_efficiency": eff})})
    return pd.DataFrame(
        {
            "collective": "all_reduce",
            "dtype": "bfloat16",
            "gpus": p,
            "message_elems": sizes / 2,
            "message_bytes": sizes,
            "launch": "graph",
            "time_s": op_time(with_launch(op), hw, prof).time_s,
        }
    )


def with_launch(op):  # type: ignore[no-untyped-def]
    from roofline.ops.records import with_fields

    return with_fields(op, launch="graph")


def test_fit_recovers_a_constant_efficiency_and_prices_its_rows_exactly() -> None:
    """Rows made at efficiency 0.55 of the H100 path over 8 GPUs: every knot is 0.55 and the rows are re-priced to
    1 (the latency terms are the default profile's, as the fit subtracts them)."""
    df = _synthetic("h100-sxm", 8, 0.55)
    fits = fit_allreduce_efficiency(df, hardware("h100-sxm"), default_profile(), "synthetic")
    assert [(f.launch, f.gpus) for f in fits] == [("graph", 8)]
    assert fits[0].curve.y == pytest.approx([0.55] * len(fits[0].curve.y), rel=1e-9)
    assert fits[0].residual == pytest.approx((1.0, 1.0, 1.0), rel=1e-9)


def test_a_fitted_curve_sets_the_bandwidth_of_all_reduces_only() -> None:
    """wire / (path × e(size)) + the latency terms, for a 1 MiB all-reduce over 4 GPUs with e = 0.4 at every size."""
    hw, base = hardware("h100-sxm"), default_profile()
    curve = fit_allreduce_efficiency(_synthetic("h100-sxm", 4, 0.4), hw, base, "synthetic")[0].curve
    prof = with_allreduce_efficiency(base, {"graph": {4: curve}}, "synthetic")
    op = with_launch(all_reduce("ar", "comm", "x", 1, "bf16", 2.0**20, 4, hw))
    plain = float(comm_time_s(op, hw, base))
    wire = float(op.comm_bytes)
    expect = plain - wire / base.link_bytes_per_s(hw, 4) + wire / (comm_path(hw, 4).bandwidth_bytes_per_s * 0.4)
    assert float(comm_time_s(op, hw, prof)) == pytest.approx(expect, rel=1e-12)


def _algorithm_regions(hw_name: str, p: int) -> list[np.ndarray]:
    hw = hardware(hw_name)
    sizes = np.unique(np.round(2.0 ** np.linspace(8, 30, 400)))
    wire, _, custom = all_reduce_plan(hw, sizes, p)
    code = np.round(wire / sizes, 9) + 10.0 * (1.0 - custom)
    return [sizes[code == c] for c in np.unique(code)]


@pytest.mark.parametrize("gpu,engine", shippable())
def test_shipped_all_reduce_time_never_falls_with_the_message_within_one_algorithm(gpu: str, engine: str) -> None:
    name = AIC_HARDWARE[gpu]
    prof = shipped_engine_profile(name, engine)
    assert prof is not None
    hw = hardware(name)
    for launch, curves in prof.comm.allreduce_efficiency.items():
        for p in curves:
            for sizes in _algorithm_regions(name, p):
                op = all_reduce("ar", "comm", "x", 1, "bf16", sizes, p, hw)
                op = with_launch(op) if launch == "graph" else op
                t = comm_time_s(op, hw, prof)
                assert np.all(np.diff(t) >= -1e-18), (launch, p, sizes[np.argmin(np.diff(t))])
