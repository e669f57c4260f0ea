"""Derivation of the shipped model-error residuals, and the coverage of their intervals on held-out sources.

``derive_model_error`` computes, for every expressible public end-to-end row, the
leave-one-source-out log residual r = ln(T_measured / T_predicted) (overheads refitted without
the row's source, ``roofline.published.overhead_fit``) and its regimes (see
``roofline.published.uncertainty``); ``write_model_error`` writes it to
``roofline/data/model_error.yaml``, which a test derives again.

``coverage`` measures what the intervals promise. For each source S in turn, S is held out
entirely: the intervals are built from residuals of the other sources computed *without S*
(nested leave-one-source-out: the residual of a row of source T comes from overheads fitted on
the sources other than S and T), and S's rows are predicted with overheads fitted without S. A
row is covered when its |r| ≤ q of its figure's interval. The fraction covered is reported per
regime; reproduce it with ``roofline accuracy --coverage``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from roofline.profile import CalibrationProfile, default_profile
from roofline.published.accuracy import case_result, expressed_cases
from roofline.published.overhead_fit import OverheadTerm, fit_overheads, overhead_terms
from roofline.published.rows import RowCase
from roofline.published.uncertainty import (
    DECODE_SHARE_MIN,
    DEFAULT_LEVEL,
    MIN_SOURCES,
    MODEL_ERROR_PATH,
    ModelErrorDoc,
    Residual,
    WidthRecord,
    chain,
    check_level,
    half_width,
)

SCHEMA_VERSION = 1
R_DIGITS = 6


def regimes_of(case: RowCase, profile: CalibrationProfile) -> tuple[str, ...]:
    """Regimes a row measures (``roofline.published.uncertainty``), from its prediction under ``profile``."""
    r = case_result(case, profile)
    if case.definition == "ttft_context_phase":
        return (f"prefill_{r.bound_prefill}", "prefill")
    decode_share = (r.e2e_s - r.ttft_s) / r.e2e_s
    out: tuple[str, ...] = ("throughput",)
    if decode_share >= DECODE_SHARE_MIN:
        out += (f"decode_{r.bound_decode}", "decode")
    return out


def loso_residuals(terms: list[OverheadTerm], regimes: dict[str, tuple[str, ...]]) -> list[Residual]:
    """Leave-one-source-out residuals: overheads refitted without each source, r = ln(T_meas/T_pred)."""
    out: list[Residual] = []
    for src in sorted({t.case.source for t in terms}):
        x = fit_overheads([t for t in terms if t.case.source != src])
        for t in (t for t in terms if t.case.source == src):
            r = round(math.log(t.measured_s / t.time_s(x)), R_DIGITS)
            out.append(Residual(t.case.id, src, regimes[t.case.id], r))
    return out


def _terms_and_regimes(
    profile: CalibrationProfile | None = None,
) -> tuple[list[OverheadTerm], dict[str, tuple[str, ...]]]:
    prof = profile or default_profile()
    terms = overhead_terms(expressed_cases()[0], prof)
    return terms, {t.case.id: regimes_of(t.case, prof) for t in terms}


def derive_model_error(profile: CalibrationProfile | None = None) -> ModelErrorDoc:
    """The model-error document shipped as ``roofline/data/model_error.yaml`` (see module docstring)."""
    terms, regimes = _terms_and_regimes(profile)
    res = loso_residuals(terms, regimes)
    labels = [*sorted({g for x in res for g in x.regimes}), "all"]
    widths: dict[str, WidthRecord] = {}
    for g in labels:
        w = half_width(res, (g,), DEFAULT_LEVEL)
        if w.regime == g and w.supported:
            widths[g] = {"q_log": round(w.q, R_DIGITS), "n_rows": w.n_rows, "n_sources": w.n_sources}
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_by": "roofline.published.coverage.write_model_error",
        "data": "validation/published.csv (expressible end-to-end rows, roofline.published.rows)",
        "profile": (profile or default_profile()).name,
        "residual": (
            "r = ln(T_measured / T_predicted); T = the time behind the row's metric; overheads refitted "
            "leave-one-source-out (roofline.published.overhead_fit.fit_overheads)"
        ),
        "pooling": (
            f"a regime is used when its rows come from >= {MIN_SOURCES} sources and ceil((n+1)*level) <= n; "
            "else the next regime of the figure's chain (roofline.published.uncertainty.chain)"
        ),
        "decode_share_min": DECODE_SHARE_MIN,
        "widths_at_0.8": widths,
        "rows": [{"id": x.id, "source": x.source, "regimes": list(x.regimes), "r": x.r} for x in res],
    }


def write_model_error(path: str | Path | None = None) -> Path:
    """Maintenance: derive the model-error document and write it (default: the shipped YAML)."""
    out = Path(path or MODEL_ERROR_PATH)
    text = yaml.safe_dump(derive_model_error(), sort_keys=False, allow_unicode=True)
    out.write_text("# derived by roofline.published.coverage.write_model_error; do not edit\n" + text, "utf-8")
    return out


def _views(x: Residual) -> list[tuple[str, tuple[str, ...]]]:
    """(coverage row label, regime chain) pairs a held-out row is scored under; 'all' uses its own metric."""
    if "prefill" in x.regimes:
        bound = x.regimes[0].removeprefix("prefill_")
        ch = chain("ttft_s", bound_prefill=bound)
        return [("all", ch), ("prefill", ch), (x.regimes[0], ch)]
    out = [("all", chain("e2e_s")), ("throughput", chain("e2e_s"))]
    if "decode" in x.regimes:
        bound = next(g for g in x.regimes if g.startswith("decode_")).removeprefix("decode_")
        ch = chain("tpot_s", bound_decode=bound)
        out += [("decode", ch), (f"decode_{bound}", ch)]
    return out


# -> Any: roofline/cli/validation.py iterates these rows and serving_summary()'s under one loop variable, so a
# TypedDict for either needs that loop renamed first.
def coverage(level: float = DEFAULT_LEVEL, profile: CalibrationProfile | None = None) -> list[dict[str, Any]]:
    """Held-out coverage per regime (module docstring): n, covered, coverage, median interval width.

    ``width_pct`` is the median of (e^q − e^−q) × 100 %, the interval's full width relative to the point.
    """
    lv = check_level(level)
    terms, regimes = _terms_and_regimes(profile)
    held_all = loso_residuals(terms, regimes)
    hits: dict[str, list[tuple[bool, float, str]]] = {}
    for src in sorted({t.case.source for t in terms}):
        train = loso_residuals([t for t in terms if t.case.source != src], regimes)
        for x in (x for x in held_all if x.source == src):
            for label, ch in _views(x):
                w = half_width(train, ch, lv)
                hits.setdefault(label, []).append((abs(x.r) <= w.q, w.q, w.regime))
    rows = []
    for label in sorted(hits, key=lambda g: (g != "all", g)):
        h = hits[label]
        cov = sum(ok for ok, _, _ in h) / len(h)
        width = float(np.median([math.exp(q) - math.exp(-q) for _, q, _ in h])) * 100.0
        rows.append(
            {
                "regime": label,
                "n": len(h),
                "covered": sum(ok for ok, _, _ in h),
                "coverage": cov,
                "width_pct": width,
                "pooled_from": ",".join(sorted({g for _, _, g in h})),
            }
        )
    return rows
