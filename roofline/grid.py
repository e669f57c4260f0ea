"""``roofline.sweep``: the full grid batch × prompt_len × output_len (× tp) evaluated vectorised, one row per point.

The same physics as :func:`roofline.predict` (the op list on numpy arrays, :mod:`roofline.costs`,
:func:`roofline.memory.memory_budget`); infeasible points keep their row with ``fits`` False.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from roofline.boundary.limits import MAX_API_SWEEP_POINTS
from roofline.costs import PhaseCost, scenario_costs
from roofline.engine.config import check_engine_options
from roofline.engine.presets import EngineArg, overrides_map
from roofline.errors import ScenarioError
from roofline.evaluate import BOUNDS, bound_codes
from roofline.latency import Latencies, latencies
from roofline.memory import MemoryBudget, memory_budget
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
    dp: int = 1,
    redundant_experts: int = 0,
    moe_overlap: str = "none",
) -> pd.DataFrame:
    """Evaluate the full grid batch × prompt_len × output_len (× tp) vectorised; one row per point.

    The same physics as :func:`predict` (options, engine timing and refusals as there; a batch above the
    engine's ``max_num_seqs`` is refused). Infeasible points keep their row with ``fits`` False,
    ``missing_bytes`` > 0 and NaN latencies. ``dp`` / ``redundant_experts`` / ``moe_overlap``: a wide-EP MoE
    replica, as :func:`roofline.predict` takes them.
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
            dp=dp,
            redundant_experts=redundant_experts,
            moe_overlap=moe_overlap,
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


#: Grid points evaluated at once: the physics runs on arrays of under 1 MB, which the allocator hands back piece
#: after piece instead of fresh pages the OS must fault in (a 1M-point grid in one piece spends much of its time so).
CHUNK_POINTS = 100_000


def chunks(sc: Scenario, b: np.ndarray, shape: tuple[int, ...]) -> list[tuple[int, int, Scenario]]:
    """(first row, end row, scenario of those batch rows) of the grid ``shape`` in pieces of about
    :data:`CHUNK_POINTS` points, split along the batch axis (rows of the C-ordered frame); one piece when the
    batch does not vary along the first axis alone. Every figure is elementwise in the grid, so each point comes
    out the same float whichever piece computes it."""
    rows = shape[0] if len(shape) else 1
    per_row = math.prod(shape[1:]) if len(shape) else 1
    step = max(1, CHUNK_POINTS // max(per_row, 1))
    if step >= rows or b.ndim != len(shape) or b.shape[0] != rows or math.prod(b.shape[1:]) != 1:
        return [(0, rows, sc)]
    return [(i, min(i + step, rows), replace(sc, batch=b[i : i + step])) for i in range(0, rows, step)]


def physics(
    m: ModelSpec, hw: HardwareSpec, sc: Scenario, prof: CalibrationProfile
) -> tuple[Latencies, MemoryBudget, np.ndarray, np.ndarray]:
    """What a sweep computes for one piece of the grid: its latencies, memory budget, and the bound codes
    (index into :data:`~roofline.evaluate.BOUNDS`) of prefill and decode."""
    costs = scenario_costs(m, sc, hw, prof, decode_totals=False)  # the frame shows no decode FLOPs or bytes

    def codes(cost: PhaseCost) -> np.ndarray:
        return bound_codes(*(cost.bound_time_s[k] for k in BOUNDS))

    return latencies(costs, sc), memory_budget(m, hw, sc), codes(costs.prefill), codes(costs.decode)


_FIGURES = ("ttft_s", "tpot_s", "e2e_s", "throughput_tok_s", "throughput_tok_s_per_gpu")


def _grid_frame(
    m: ModelSpec, hw: HardwareSpec, sc: Scenario, prof: CalibrationProfile, b: np.ndarray, p: np.ndarray, o: np.ndarray
) -> pd.DataFrame:
    """One frame of the grid: numeric columns as numpy arrays, text columns as Categoricals (issue #28).

    The grid is evaluated in pieces (:func:`chunks`) written into the columns in place. ``model`` and
    ``hardware`` hold one category each and the bound columns index the fixed :data:`~roofline.evaluate.BOUNDS`
    labels, so no column holds a Python object per point and frames of one sweep concatenate without losing
    the category dtype.
    """
    import pandas as pd

    shape = np.broadcast_shapes(b.shape, p.shape, o.shape)
    n = math.prod(shape)
    out: dict[str, np.ndarray] = {}
    weight_bytes = 0.0
    for r0, r1, part in chunks(sc, b, shape):
        lat, mem, pre_code, dec_code = physics(m, hw, part, prof)
        sub = (r1 - r0, *shape[1:])
        k0, k = r0 * math.prod(shape[1:]), math.prod(sub)  # the piece's first row and its points in the frame
        fits = np.broadcast_to(mem.fits, sub)
        values: dict[str, Any] = {"fits": mem.fits, "missing_bytes": mem.missing_bytes}
        values |= {f: np.where(fits, np.broadcast_to(getattr(lat, f), sub), np.nan) for f in _FIGURES}
        values |= {"kv_bytes_per_gpu": mem.kv_bytes, "max_batch": mem.max_batch}
        values |= {"bound_prefill": pre_code, "bound_decode": dec_code}
        for name, x in values.items():
            if name not in out:
                dtype = np.int8 if name.startswith("bound_") else np.asarray(x).dtype
                out[name] = np.empty(n, dtype=dtype)
            out[name][k0 : k0 + k].reshape(sub)[...] = x
        weight_bytes = mem.weight_bytes
    return pd.DataFrame(_columns(m, hw, sc, shape, b, p, o, out, weight_bytes), copy=False)


def _columns(
    m: ModelSpec,
    hw: HardwareSpec,
    sc: Scenario,
    shape: tuple[int, ...],
    b: np.ndarray,
    p: np.ndarray,
    o: np.ndarray,
    out: dict[str, np.ndarray],
    weight_bytes: float,
) -> dict[str, Any]:
    """The frame's columns in order from the evaluated ``out`` (one fresh array per column, the frame keeps it)."""
    import pandas as pd

    n = math.prod(shape)

    def flat(x: Any, dtype: Any) -> np.ndarray:
        """``x`` broadcast to the grid, one point per element: a fresh, writable array."""
        arr = np.empty(shape, dtype=dtype)
        arr[...] = x
        return arr.reshape(n)

    def label(text: str) -> pd.Categorical[str]:
        return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=pd.Index([text]))

    def bound(codes: np.ndarray) -> pd.Categorical[str]:
        return pd.Categorical.from_codes(codes, categories=pd.Index(BOUNDS.tolist()))

    return {
        "model": label(m.name),
        "hardware": label(hw.name),
        "tp": sc.tp,
        "batch": flat(b, np.int64),
        "prompt_len": flat(p, np.int64),
        "output_len": flat(o, np.int64),
        "fits": out["fits"],
        "missing_bytes": out["missing_bytes"],
        **{f: out[f] for f in _FIGURES},
        "kv_bytes_per_gpu": out["kv_bytes_per_gpu"],
        "weight_bytes_per_gpu": weight_bytes,
        "max_batch": out["max_batch"],
        "bound_prefill": bound(out["bound_prefill"]),
        "bound_decode": bound(out["bound_decode"]),
    }
