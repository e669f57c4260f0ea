"""Least-squares fit of the profile's fixed overheads to published end-to-end rows, and its cross-validation.

Every row's predicted time is linear in the two fixed overheads of the profile:

    T(k, s) = T₀ + a·k + b·s,

with k = ``overheads.per_kernel_s`` (a = kernels launched eagerly over the row's run), s =
``overheads.per_step_s`` (b = forward passes), and T₀ the time with both at zero (T₀ keeps
``overheads.per_kernel_graph_s`` of decode steps replayed as CUDA graphs, which is not fitted
here: every grade-A row ran without CUDA graphs, see ``roofline.published.rows``). The
coefficients are exact finite differences (T is affine in k and s). The fit minimises the
sum of squared *relative* time residuals

    Σ_rows ((T₀ + a·k + b·s − T_meas) / T_meas)²   subject to k, s ≥ 0,

solved exactly by enumerating the active sets (2 parameters: 4 least-squares problems),
so it is deterministic. Under a run-ahead eager launch (``overheads.eager_launch`` = "run_ahead",
the default profile's) each eager step takes max(Σ GPU time, Σ kernels·k), so T is piecewise linear in k instead:
:func:`kernel_curves` tabulates it on a grid of k (:data:`K_GRID_S`), and for each k the per-step cost s ≥ 0
is its exact 1-D least squares; the best knot is refined by golden section (:func:`fit_overheads`),
deterministic likewise. The shipped fit holds per_step_s at 0 (:data:`FIT_PER_STEP`): a per-forward-pass cost is
the engine's (each engine preset's ``step_overhead_s``), and one fitted on these TensorRT-LLM 0.5/0.6.1 rows would be
added to every engine's steps on top of its own (fitted jointly under the run-ahead launch it comes out at 1.36 ms,
and the BLIS vLLM 0.15.1 ITL error goes from 15 to 23 %). Leave-one-group-out cross-validation refits without each
group
and predicts the held-out rows; groups are whole sources (``by="source"``) or published
tables (``by="table"``: source × hardware, e.g. the TTFT table of one GPU).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from roofline.profile import CalibrationProfile, Overheads
from roofline.published.accuracy import case_time_s, metric_from_time, time_from_metric
from roofline.published.rows import RowCase

PARAMS = ("per_kernel_s", "per_step_s")
#: Whether the end-to-end fit frees ``per_step_s`` too (module docstring: held at 0, the engines carry their own).
FIT_PER_STEP = False
_PROBE = {"per_kernel_s": 1e-6, "per_step_s": 1e-3}


class MetricError(TypedDict):
    """One row's predicted-metric error (%) for a set of overheads, and its cross-validation group."""

    id: str
    group: str
    kind: str
    error_pct: float
    ape_pct: float


class HeldOutError(MetricError):
    """A :class:`MetricError` of a held-out row, with the overheads fitted without its group."""

    fit_per_kernel_s: float
    fit_per_step_s: float


@dataclass(frozen=True)
class LinearTerms:
    """T(k, s) = t0 + a_kernel·k + a_step·s for one row, and the time its measurement implies."""

    case: RowCase
    t0_s: float
    a_kernel: float
    a_step: float
    measured_s: float

    def group(self, by: str = "table") -> str:
        """Cross-validation group: the source, or one published table (source × hardware)."""
        return self.case.source if by == "source" else f"{self.case.source}/{self.case.hardware}"

    def time_s(self, x: np.ndarray) -> float:
        """Predicted time for overheads x = (per_kernel_s, per_step_s)."""
        return float(self.t0_s + self.a_kernel * x[0] + self.a_step * x[1])


def _with_overheads(profile: CalibrationProfile, k: float, s: float) -> CalibrationProfile:
    """``profile`` with (per_kernel_s, per_step_s) = (k, s); the graph-replay cost is kept."""
    ov: Overheads = profile.overheads.model_copy(update={"per_kernel_s": k, "per_step_s": s})
    return profile.model_copy(update={"overheads": ov})


def linear_terms(cases: list[RowCase], profile: CalibrationProfile) -> list[LinearTerms]:
    """Exact linear coefficients of every case's time in (per_kernel_s, per_step_s)."""
    zero = _with_overheads(profile, 0.0, 0.0)
    probe_k = _with_overheads(profile, _PROBE["per_kernel_s"], 0.0)
    probe_s = _with_overheads(profile, 0.0, _PROBE["per_step_s"])
    out = []
    for c in cases:
        base = case_time_s(c, zero)
        if not base.fits:
            continue
        t0, tk, ts = base.time_s, case_time_s(c, probe_k).time_s, case_time_s(c, probe_s).time_s
        out.append(
            LinearTerms(
                c,
                t0,
                (tk - t0) / _PROBE["per_kernel_s"],
                (ts - t0) / _PROBE["per_step_s"],
                time_from_metric(c, c.measured),
            )
        )
    return out


@dataclass(frozen=True)
class KernelCurve:
    """T(k, s) = t_k(k) + a_step·s for one row under a run-ahead eager launch (``overheads.eager_launch``):
    piecewise linear in k (each eager step takes max(Σ GPU time, Σ kernels·k)), so t_k is tabulated on ``k_grid`` and
    interpolated linearly between its knots; affine in s (one per-step cost per forward pass)."""

    case: RowCase
    k_grid: np.ndarray
    t_k: np.ndarray
    a_step: float
    measured_s: float

    def group(self, by: str = "table") -> str:
        """Cross-validation group: the source, or one published table (source × hardware)."""
        return self.case.source if by == "source" else f"{self.case.source}/{self.case.hardware}"

    def time_s(self, x: np.ndarray) -> float:
        """Predicted time for overheads x = (per_kernel_s, per_step_s)."""
        return float(np.interp(x[0], self.k_grid, self.t_k) + self.a_step * x[1])


OverheadTerm = LinearTerms | KernelCurve
"""One row's terms of the overhead fit, additive or run ahead."""

#: The per-kernel host costs (s) a run-ahead fit tabulates: 0 … 80 µs in 0.5 µs steps.
K_GRID_S = np.linspace(0.0, 80e-6, 161)


#: kernel_curves' per-row curves by (row, profile with both overheads at 0, grid): the fit, its cross-validation and
#: the coverage residuals all tabulate the same rows under the same profile.
_CURVES: dict[tuple[RowCase, str, bytes], KernelCurve | None] = {}
_CURVES_MAX = 4096


def kernel_curves(
    cases: list[RowCase], profile: CalibrationProfile, k_grid: np.ndarray = K_GRID_S
) -> list[KernelCurve]:
    """Every case's time at each per-kernel cost of ``k_grid`` (per_step_s 0) and its exact per-step slope (rows that
    do not fit left out); each row's curve is computed once per profile and grid (:data:`_CURVES`)."""
    zero = _with_overheads(profile, 0.0, 0.0)
    key_prof, key_grid = zero.model_dump_json(), np.asarray(k_grid, dtype=np.float64).tobytes()
    probes: list[CalibrationProfile] = []
    out = []
    for c in cases:
        key = (c, key_prof, key_grid)
        if key not in _CURVES:
            if not probes:  # one profile per grid value, then the per-step probe, built once per call
                probes = [_with_overheads(profile, float(k), 0.0) for k in k_grid]
                probes.append(_with_overheads(profile, 0.0, _PROBE["per_step_s"]))
            if len(_CURVES) >= _CURVES_MAX:
                _CURVES.clear()
            _CURVES[key] = _curve(c, zero, probes, k_grid)
        curve = _CURVES[key]
        if curve is not None:
            out.append(curve)
    return out


def _curve(
    c: RowCase, zero: CalibrationProfile, probes: list[CalibrationProfile], k_grid: np.ndarray
) -> KernelCurve | None:
    """One row's :class:`KernelCurve` (``probes``: the profiles at each grid value, then the per-step probe)."""
    base = case_time_s(c, zero)
    if not base.fits:
        return None
    t_k = np.array([case_time_s(c, p).time_s for p in probes[:-1]])
    slope = (case_time_s(c, probes[-1]).time_s - base.time_s) / _PROBE["per_step_s"]
    return KernelCurve(c, k_grid, t_k, slope, time_from_metric(c, c.measured))


def overhead_terms(cases: list[RowCase], profile: CalibrationProfile) -> list[OverheadTerm]:
    """The fit's per-row terms under ``profile``'s eager launch: :func:`kernel_curves` when run ahead, else the
    exact :func:`linear_terms`."""
    if profile.overheads.eager_launch == "run_ahead":
        return list(kernel_curves(cases, profile))
    return list(linear_terms(cases, profile))


def _fit_curves(terms: Sequence[KernelCurve], fit_step: bool = FIT_PER_STEP) -> np.ndarray:
    """(per_kernel_s, per_step_s) minimising Σ relative squared residuals over :class:`KernelCurve` rows: for each
    knot k the per-step cost is its exact non-negative 1-D least squares; the best knot is then refined by golden
    section over its two neighbouring intervals (deterministic; the curves are linear between knots). ``fit_step``
    False holds the per-step cost at 0."""
    tm = np.array([t.measured_s for t in terms])
    w = np.array([t.a_step for t in terms]) / tm
    grid = terms[0].k_grid

    def best_s(k: float) -> tuple[float, float]:
        r = (np.array([float(np.interp(k, t.k_grid, t.t_k)) for t in terms]) - tm) / tm
        s = max(0.0, -float(r @ w) / float(w @ w)) if fit_step and float(w @ w) > 0 else 0.0
        return float(np.sum((r + w * s) ** 2)), s

    ss = [best_s(float(k))[0] for k in grid]
    i = int(np.argmin(ss))
    lo, hi = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, grid.size - 1)])
    g = (np.sqrt(5.0) - 1.0) / 2.0
    for _ in range(40):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        if best_s(a)[0] <= best_s(b)[0]:
            hi = b
        else:
            lo = a
    k = (lo + hi) / 2 if best_s((lo + hi) / 2)[0] <= ss[i] else float(grid[i])
    return np.array([k, best_s(k)[1]])


def fit_overheads(terms: Sequence[OverheadTerm], fit_step: bool = FIT_PER_STEP) -> np.ndarray:
    """Non-negative least squares of relative time residuals; returns (per_kernel_s, per_step_s), the latter 0
    unless ``fit_step``.

    :class:`LinearTerms` (an additive eager launch): exact, by enumerating the active sets;
    :class:`KernelCurve` (a run-ahead one): :func:`_fit_curves`."""
    if not terms:
        return np.zeros(len(PARAMS))
    if isinstance(terms[0], KernelCurve):
        return _fit_curves([t for t in terms if isinstance(t, KernelCurve)], fit_step)
    lin = [t for t in terms if isinstance(t, LinearTerms)]
    tm = np.array([t.measured_s for t in lin])
    a = np.array([[t.a_kernel, t.a_step] for t in lin]) / tm[:, None]
    b = (tm - np.array([t.t0_s for t in lin])) / tm
    best_x, best_r = np.zeros(len(PARAMS)), float(np.sum(b**2))
    for active in itertools.product((False, True), repeat=len(PARAMS)):
        idx = [i for i, on in enumerate(active) if on]
        if not idx or (active[1] and not fit_step):
            continue
        sol, *_ = np.linalg.lstsq(a[:, idx], b, rcond=None)
        if np.any(sol < 0):
            continue
        x = np.zeros(len(PARAMS))
        x[idx] = sol
        r = float(np.sum((a @ x - b) ** 2))
        if r < best_r - 1e-15:
            best_x, best_r = x, r
    return best_x


def metric_errors(terms: Sequence[OverheadTerm], x: np.ndarray) -> list[MetricError]:
    """Per-row predicted metric and errors (%) for overheads ``x``."""
    rows: list[MetricError] = []
    for t in terms:
        pred = metric_from_time(t.case, t.time_s(x))
        err = (pred - t.case.measured) / t.case.measured * 100.0
        rows.append({"id": t.case.id, "group": t.group(), "kind": t.case.kind, "error_pct": err, "ape_pct": abs(err)})
    return rows


def direct_errors(cases: Sequence[RowCase], profile: CalibrationProfile) -> list[MetricError]:
    """Per-row predicted metric and errors (%) under ``profile`` itself (each row timed by the predictor)."""
    rows: list[MetricError] = []
    for c in cases:
        pred = metric_from_time(c, case_time_s(c, profile).time_s)
        err = (pred - c.measured) / c.measured * 100.0
        group = f"{c.source}/{c.hardware}"
        rows.append({"id": c.id, "group": group, "kind": c.kind, "error_pct": err, "ape_pct": abs(err)})
    return rows


def cross_validate(terms: Sequence[OverheadTerm], by: str = "table") -> list[HeldOutError]:
    """Leave-one-group-out (groups: ``by`` = "table" or "source"): refit without a group, predict it."""
    rows: list[HeldOutError] = []
    for g in sorted({t.group(by) for t in terms}):
        train = [t for t in terms if t.group(by) != g]
        held = [t for t in terms if t.group(by) == g]
        x = fit_overheads(train)
        rows += [{**r, "fit_per_kernel_s": float(x[0]), "fit_per_step_s": float(x[1])} for r in metric_errors(held, x)]
    return rows


def error_summary(rows: Sequence[MetricError]) -> dict[str, dict[str, float]]:
    """Median / p90 APE (%) and n per metric kind."""
    out: dict[str, dict[str, float]] = {}
    for kind in sorted({r["kind"] for r in rows}):
        ape = np.array([r["ape_pct"] for r in rows if r["kind"] == kind])
        out[kind] = {
            "n": int(ape.size),
            "median_ape_pct": round(float(np.median(ape)), 2),
            "p90_ape_pct": round(float(np.percentile(ape, 90)), 2),
        }
    return out
