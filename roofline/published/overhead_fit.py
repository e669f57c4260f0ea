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
so it is deterministic. Leave-one-group-out cross-validation refits without each group
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


def fit_overheads(terms: list[LinearTerms]) -> np.ndarray:
    """Non-negative least squares of relative time residuals; returns (per_kernel_s, per_step_s)."""
    if not terms:
        return np.zeros(len(PARAMS))
    tm = np.array([t.measured_s for t in terms])
    a = np.array([[t.a_kernel, t.a_step] for t in terms]) / tm[:, None]
    b = (tm - np.array([t.t0_s for t in terms])) / tm
    best_x, best_r = np.zeros(len(PARAMS)), float(np.sum(b**2))
    for active in itertools.product((False, True), repeat=len(PARAMS)):
        idx = [i for i, on in enumerate(active) if on]
        if not idx:
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


def metric_errors(terms: list[LinearTerms], x: np.ndarray) -> list[MetricError]:
    """Per-row predicted metric and errors (%) for overheads ``x``."""
    rows: list[MetricError] = []
    for t in terms:
        pred = metric_from_time(t.case, t.time_s(x))
        err = (pred - t.case.measured) / t.case.measured * 100.0
        rows.append({"id": t.case.id, "group": t.group(), "kind": t.case.kind, "error_pct": err, "ape_pct": abs(err)})
    return rows


def cross_validate(terms: list[LinearTerms], by: str = "table") -> list[HeldOutError]:
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
