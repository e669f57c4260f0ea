"""Per-batch load curves of one replica, for the latency and Pareto charts.

These are the quantities :mod:`roofline.serving.plan.planner` evaluates at every batch B (see its module
docstring): with t_pre = prefill of one request and t_dec(B) = mean decode step at batch B,

    TTFT(B) = t_pre + t_dec(B)
    TPOT(B) = t_dec(B) + B·t_pre/(O − 1)        (at full load, where the SLO is checked)
    λ_max(B) = B / ((O − 1)·t_dec(B) + B·t_pre)  requests/s per replica

The formulas live in :func:`roofline.serving.plan.loadcurve.load_curve`; the charts evaluate it on a batch
grid from the same ``sweep`` calls, and ``tests/test_report.py`` checks that the curve
passes exactly through every planned candidate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from roofline.specs.moe_layout import wide_ep

if TYPE_CHECKING:
    import pandas as pd

    from roofline.report.content import ReportInputs
    from roofline.specs.hardware import HardwareSpec


def batch_grid(b_max: int, extra: tuple[int, ...] = (), points: int = 36) -> np.ndarray:
    """Geometric batch grid 1 … b_max (whole numbers) plus ``extra`` batches."""
    top = max(int(b_max), 1)
    grid = np.unique(np.round(np.geomspace(1, top, points)).astype(np.int64))
    return np.unique(np.concatenate([grid, np.asarray([b for b in extra if 1 <= b <= top], dtype=np.int64)]))


def replica_curve(
    inp: ReportInputs,
    hw: HardwareSpec,
    *,
    tp: int,
    precision: str,
    kv_dtype: str = "bf16",
    pp: int = 1,
    extra: tuple[int, ...] = (),
    dp: int = 1,
) -> pd.DataFrame:
    """TTFT, full-load TPOT, λ_max and output tokens/s per GPU against batch, up to the memory limit (``dp`` > 1:
    attention DP with the experts wide-EP over dp × tp GPUs).

    Empty when even one sequence does not fit. Columns: batch, ttft_s, tpot_s,
    replica_rps, tok_s_per_gpu, user_tok_s (= 1 / tpot_s), max_batch.
    """
    import pandas as pd

    from roofline.grid import sweep
    from roofline.serving.plan.loadcurve import load_curve, tokens_per_s_per_gpu

    wl = inp.workload
    p, o = wl.prompt_len, wl.output_len
    opts: dict[str, Any] = {"weight_dtype": precision, "kv_dtype": kv_dtype, "engine": inp.engine}
    if pp != 1:
        opts["pp"] = pp
    if dp != 1:
        opts |= {"dp": dp, "ep": wide_ep(tp, dp)}
    first = sweep(inp.model, hw, 1, p, o, tp=tp, calibration=inp.calibration_for(hw), **opts).iloc[0]
    if not bool(first["fits"]):
        return pd.DataFrame(columns=["batch", "ttft_s", "tpot_s", "replica_rps", "tok_s_per_gpu", "user_tok_s"])
    from roofline.engine.presets import resolve_engine

    b_mem = int(first["max_batch"])
    top = min(b_mem, resolve_engine(opts["engine"], hw).max_num_seqs)  # the planner's ceiling: engine's max_num_seqs
    grid = [int(x) for x in batch_grid(top, extra)]
    df = sweep(inp.model, hw, grid, p, o, tp=tp, calibration=inp.calibration_for(hw), **opts)
    df = df[df["fits"]]
    curve = load_curve(
        df["batch"].to_numpy(dtype=np.float64), float(first["ttft_s"]), df["tpot_s"].to_numpy(dtype=np.float64), o
    )
    rps, tpot = curve.replica_rps, curve.tpot_s
    return pd.DataFrame(
        {
            "batch": curve.batch.astype(np.int64),
            "ttft_s": curve.ttft_s,
            "tpot_s": tpot,
            "replica_rps": rps,
            "tok_s_per_gpu": tokens_per_s_per_gpu(rps, o, tp * pp * dp),
            "user_tok_s": 1.0 / tpot,
            "max_batch": b_mem,
        }
    )
