"""``roofline.sweep``: the full grid batch × prompt_len × output_len (× tp) evaluated vectorised, one row per point.

The same physics as :func:`roofline.predict` (the op list on numpy arrays, :mod:`roofline.costs`,
:func:`roofline.memory.memory_budget`); infeasible points keep their row with ``fits`` False.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from roofline.boundary.limits import MAX_API_SWEEP_POINTS
from roofline.costs import PhaseCost, latencies, scenario_costs
from roofline.engine.config import check_engine_options
from roofline.engine.presets import EngineArg, overrides_map
from roofline.errors import ScenarioError
from roofline.evaluate import BOUNDS, bound_codes
from roofline.memory import memory_budget
from roofline.prediction import HardwareArg, ModelArg, ProfileArg, check_batch_cap, resolve
from roofline.profile import CalibrationProfile
from roofline.specs.hardware import HardwareSpec
from roofline.specs.model import ModelSpec
from roofline.specs.precision import Precision
from roofline.specs.scenario import Scenario, make_scenario

if TYPE_CHECKING:
    import pandas as pd


def sweep(
    model: ModelArg,
    hardware: HardwareArg,
    batch: Sequence[int] | int = 1,
    prompt_len: Sequence[int] | int = 1024,
    output_len: Sequence[int] | int = 128,
    *,
    tp: Sequence[int] | int = 1,
    pp: int = 1,
    ep: int = 1,
    replicas: int = 1,
    weight_dtype: str | Precision | dict[str, str] = "checkpoint",
    act_dtype: str | Precision | None = None,
    kv_dtype: str | Precision = "bf16",
    quantize_embeddings: bool = False,
    engine: EngineArg = None,
    engine_overrides: Mapping[str, object] | None = None,
    cuda_graphs: bool | None = None,
    calibration: ProfileArg = None,
) -> pd.DataFrame:
    """Evaluate the full grid batch × prompt_len × output_len (× tp) vectorised; one row per point.

    The same physics as :func:`predict` (options, engine timing and refusals as there; a batch above the
    engine's ``max_num_seqs`` is refused). Infeasible points keep their row with ``fits`` False,
    ``missing_bytes`` > 0 and NaN latencies.
    """
    import pandas as pd

    check_engine_options(overrides_map(engine_overrides), "sweep")
    tps = _axis(tp, "tp")
    if np.any(tps != np.floor(tps)) or np.any(tps < 1) or np.any(tps > 2**31):
        raise ScenarioError(f"tp must be whole numbers >= 1 (got {tp!r})")
    b, pl, ol = (_axis(x, n) for x, n in ((batch, "batch"), (prompt_len, "prompt_len"), (output_len, "output_len")))
    points = math.prod(a.size for a in (b, pl, ol, tps))
    if points > MAX_API_SWEEP_POINTS:
        raise ScenarioError(
            f"the sweep grid has {points:,} points (batch × prompt_len × output_len × tp), more than "
            f"{MAX_API_SWEEP_POINTS:,} (roofline.boundary.limits MAX_API_SWEEP_POINTS); split it into several sweeps"
        )
    m, hw, prof = resolve(model, hardware, calibration, engine)
    frames = []
    for t in tps:
        bg, pg, og = b[:, None, None], pl[None, :, None], ol[None, None, :]
        sc = make_scenario(
            hw,
            bg,
            pg,
            og,
            tp=int(t),
            pp=pp,
            ep=ep,
            replicas=replicas,
            weight_dtype=weight_dtype,
            act_dtype=act_dtype,
            kv_dtype=kv_dtype,
            quantize_embeddings=quantize_embeddings,
            engine=engine,
            engine_overrides=engine_overrides,
            cuda_graphs=cuda_graphs,
        )
        sc.validate_for(m, hw)
        check_batch_cap(sc, hw, "sweep")
        frames.append(_grid_frame(m, hw, sc, prof, bg, pg, og))
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def _axis(x: Any, name: str) -> np.ndarray:
    """One sweep axis as a 1-d float64 array of finite numbers (booleans and text are not counts)."""
    try:
        arr = np.atleast_1d(np.asarray(x))
        ok = arr.ndim == 1 and arr.size > 0 and arr.dtype.kind in "iuf"
        out = arr.astype(np.float64) if ok else arr
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok or not np.all(np.isfinite(out)):
        raise ScenarioError(f"{name} must be a whole number or a flat list of whole numbers >= 1 (got {x!r})")
    return out


def _grid_frame(
    m: ModelSpec, hw: HardwareSpec, sc: Scenario, prof: CalibrationProfile, b: np.ndarray, p: np.ndarray, o: np.ndarray
) -> pd.DataFrame:
    """One frame of the grid: numeric columns as numpy arrays, text columns as Categoricals (issue #28).

    ``model`` and ``hardware`` hold one category each and the bound columns index the fixed
    :data:`~roofline.evaluate.BOUNDS` labels, so no column holds a Python object per point and
    frames of one sweep concatenate without losing the category dtype.
    """
    import pandas as pd

    costs = scenario_costs(m, sc, hw, prof)
    lat = latencies(costs, sc)
    mem = memory_budget(m, hw, sc)
    shape = np.broadcast_shapes(b.shape, p.shape, o.shape)
    n = math.prod(shape)

    def flat(x: Any, dtype: Any = None) -> np.ndarray:
        """``x`` broadcast to the grid, one point per element: a fresh, writable array (the frame keeps it)."""
        out = np.empty(shape, dtype=np.asarray(x).dtype if dtype is None else dtype)
        out[...] = x
        return out.reshape(n)

    fits = flat(mem.fits)

    def col(x: np.ndarray) -> np.ndarray:
        return np.where(fits, np.broadcast_to(x, shape).reshape(n), np.nan)

    def label(text: str) -> pd.Categorical[str]:
        return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=pd.Index([text]))

    def bound(cost: PhaseCost) -> pd.Categorical[str]:
        codes = bound_codes(*(cost.bound_time_s[k] for k in BOUNDS))
        return pd.Categorical.from_codes(flat(codes, np.int8), categories=pd.Index(BOUNDS.tolist()))

    columns: dict[str, Any] = {
        "model": label(m.name),
        "hardware": label(hw.name),
        "tp": sc.tp,
        "batch": flat(b, np.int64),
        "prompt_len": flat(p, np.int64),
        "output_len": flat(o, np.int64),
        "fits": fits,
        "missing_bytes": flat(mem.missing_bytes),
        "ttft_s": col(lat.ttft_s),
        "tpot_s": col(lat.tpot_s),
        "e2e_s": col(lat.e2e_s),
        "throughput_tok_s": col(lat.throughput_tok_s),
        "throughput_tok_s_per_gpu": col(lat.throughput_tok_s_per_gpu),
        "kv_bytes_per_gpu": flat(mem.kv_bytes),
        "weight_bytes_per_gpu": mem.weight_bytes,
        "max_batch": flat(mem.max_batch),
        "bound_prefill": bound(costs.prefill),
        "bound_decode": bound(costs.decode),
    }
    # every array above is fresh and owned by this frame: no copy into consolidated blocks
    return pd.DataFrame(columns, copy=False)
