"""Prediction intervals: the model's cross-validated error on public rows, by regime and profile provenance.

**Residuals.** For every expressible public end-to-end row (``roofline.published.rows``), the
time T behind its metric (TTFT, or the static-batch run time behind a throughput) is predicted
leave-one-source-out: the profile's fitted overheads are refitted without the row's whole source
(``roofline.published.overhead_fit``), so the residual

    r = ln(T_measured / T_predicted)

is what the model gets wrong on a source it has never seen. The residuals are derived by
:func:`roofline.published.coverage.derive_model_error` and shipped as data in
``roofline/data/model_error.yaml`` (a test derives them again), so nothing here fits at run time.

**Regimes.** Each row is tagged with the regimes it measures: a TTFT row ``prefill_<bound>`` and
``prefill``; a static-batch throughput row ``throughput``, plus ``decode_<bound>`` and ``decode``
when decode steps are ≥ 80 % of its predicted time (its error is then a TPOT error). ``<bound>``
is the phase's bound label (compute, memory, communication, overhead). A headline figure uses the
chain of its regime, most specific first::

    ttft_s                                  prefill_<bound_prefill> → prefill → all
    tpot_s, tpot_first_s, tpot_last_s, decode_s   decode_<bound_decode> → decode → throughput → all
    e2e_s, throughput figures               throughput → all

**Pooling rule.** The first regime of the chain is used whose residuals (n of them) come from at
least ``MIN_SOURCES`` = 2 sources (one source measures one engine/bias only) and are enough for
the level ℓ: the split-conformal rank k = ⌈(n+1)·ℓ⌉ must be ≤ n. Otherwise the next regime is
tried; ``all`` pools every row. Its half-width in log space is the k-th smallest |r|

    q = |r|_(k),        interval = (x·e^(−q), x·e^(+q))

for a time or a rate x alike (a rate is a count over a time). When even ``all`` has too few rows
for ℓ, q = max |r| and the interval is flagged ``supported = False``.

**Measured profiles.** A profile written by ``roofline calibrate`` (``device`` set) records the
run-to-run ``spread`` (IQR/median) of every ceiling. Assuming normal repeats, its log-sd is
σ = spread / 1.349 (IQR = 1.349 σ), and the half-width becomes

    q_total = √(q² + (z_ℓ·σ)²),     z_ℓ = Φ⁻¹((1+ℓ)/2),

with σ from the compute ceilings (largest spread) for a compute-bound figure, the memory ceiling
for a memory-bound one and the larger of the two for throughput/e2e. No public row was predicted
with a measured profile, so q is the public residual: assumed an upper bound on the structural
error, because it also contains the default profile's transfer of efficiencies across devices.

**Workload randomness** (for a simulator's percentiles): replicas of the same run over seeds give
values v₁ … v_m of a figure; their log-sd σ_w = sd(ln v) (ddof 1, :func:`replica_sigma_log`) is
passed as ``extra_sigma_log`` and folded in the same way: q_total = √(q² + z_ℓ²·(σ² + σ_w²)).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, cast

import yaml

from roofline.errors import ScenarioError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd

    from roofline.profile import CalibrationProfile
    from roofline.result import PredictionResult

MODEL_ERROR_PATH = Path(__file__).resolve().parents[1] / "data" / "model_error.yaml"
DEFAULT_LEVEL = 0.8
MIN_SOURCES = 2
#: IQR of a normal distribution in standard deviations (2·Φ⁻¹(0.75)).
IQR_PER_SIGMA = 1.349
DECODE_SHARE_MIN = 0.8

PREFILL_FIGURES = ("ttft_s",)
DECODE_FIGURES = ("tpot_s", "tpot_first_s", "tpot_last_s", "decode_s")
THROUGHPUT_FIGURES = ("e2e_s", "throughput_tok_s", "throughput_tok_s_per_gpu", "total_throughput_tok_s")
FIGURES = PREFILL_FIGURES + DECODE_FIGURES + THROUGHPUT_FIGURES


@dataclass(frozen=True)
class Interval:
    """A prediction interval (low, high) around ``value`` at ``level``, and where its width comes from.

    ``half_width_log`` is q (interval = value·e^(∓q)); ``regime`` the pooled regime whose
    ``n_rows`` residuals from ``n_sources`` sources gave it; ``spread_sigma_log`` the log-sd folded
    in: a measured profile's ceiling spread and any workload spread (0 for a default-profile prediction).
    """

    name: str
    value: float
    low: float
    high: float
    level: float
    regime: str
    n_rows: int
    n_sources: int
    half_width_log: float
    spread_sigma_log: float = 0.0
    supported: bool = True

    @property
    def relative(self) -> tuple[float, float]:
        """(low/value − 1, high/value − 1): e.g. (−0.26, +0.35)."""
        return (math.exp(-self.half_width_log) - 1.0, math.exp(self.half_width_log) - 1.0)


@dataclass(frozen=True)
class Residual:
    """One public row's cross-validated log residual r = ln(T_measured/T_predicted) and its regimes."""

    id: str
    source: str
    regimes: tuple[str, ...]
    r: float


class ResidualRecord(TypedDict):
    """One row of the model-error document: a :class:`Residual` as YAML holds it."""

    id: str
    source: str
    regimes: list[str]
    r: float


class WidthRecord(TypedDict):
    """The half-width of one regime in the model-error document."""

    q_log: float
    n_rows: int
    n_sources: int


#: The model-error document ``roofline/data/model_error.yaml``
#: (:func:`roofline.published.coverage.derive_model_error`).
ModelErrorDoc = TypedDict(
    "ModelErrorDoc",
    {
        "schema_version": int, "generated_by": str, "data": str, "profile": str, "residual": str, "pooling": str,
        "decode_share_min": float, "widths_at_0.8": dict[str, WidthRecord], "rows": list[ResidualRecord],
    },
)  # fmt: skip


@dataclass(frozen=True)
class Width:
    """Half-width q (log) of one regime chain at one level, and which regime supplied it."""

    q: float
    regime: str
    n_rows: int
    n_sources: int
    supported: bool


def check_level(level: float) -> float:
    """``level`` as a float in (0, 1), or a ScenarioError naming the field."""
    lv = float(level)
    if not (0.0 < lv < 1.0) or not math.isfinite(lv):
        raise ScenarioError(f"interval level must be a fraction in (0, 1), e.g. 0.8 for 80 %; got {level!r}")
    return lv


def chain(figure: str, bound_prefill: str = "", bound_decode: str = "") -> tuple[str, ...]:
    """Regimes of a headline figure, most specific first (module docstring)."""
    if figure in PREFILL_FIGURES:
        return (f"prefill_{bound_prefill}", "prefill", "all")
    if figure in DECODE_FIGURES:
        return (f"decode_{bound_decode}", "decode", "throughput", "all")
    if figure in THROUGHPUT_FIGURES:
        return ("throughput", "all")
    raise ScenarioError(f"no interval for '{figure}'; intervals exist for the headline figures {', '.join(FIGURES)}")


def conformal_rank(n: int, level: float) -> int:
    """k = ⌈(n+1)·ℓ⌉: the k-th smallest |r| of n exchangeable residuals covers a new one with prob ≥ ℓ."""
    return math.ceil((n + 1) * level - 1e-12)


def half_width(residuals: Sequence[Residual], regimes: Sequence[str], level: float) -> Width:
    """q for the first regime of ``regimes`` that passes the pooling rule (module docstring)."""
    for reg in regimes:
        rows = [x for x in residuals if reg == "all" or reg in x.regimes]
        n, k = len(rows), conformal_rank(len(rows), level)
        srcs = len({x.source for x in rows})
        if n and k <= n and (srcs >= MIN_SOURCES or reg == "all"):
            return Width(sorted(abs(x.r) for x in rows)[k - 1], reg, n, srcs, True)
    if not residuals:
        raise ScenarioError("no public residuals to build an interval from (roofline/data/model_error.yaml is empty)")
    return Width(max(abs(x.r) for x in residuals), "all", len(residuals), len({x.source for x in residuals}), False)


def spread_sigma_log(profile: CalibrationProfile | None, bound: str) -> float:
    """Log-sd of the ceiling behind ``bound`` from a measured profile's recorded spread (0 otherwise)."""
    if profile is None or profile.device is None:
        return 0.0
    comp = max((c.spread or 0.0 for c in profile.compute.values()), default=0.0)
    mem = profile.memory.spread or 0.0
    spread = {"compute": comp, "memory": mem, "throughput": max(comp, mem)}.get(bound, 0.0)
    return math.log1p(spread / IQR_PER_SIGMA)


def replica_sigma_log(values: Sequence[float]) -> float:
    """Sample standard deviation (ddof 1) of ln(values): the spread of a figure over seeded replicas."""
    logs = [math.log(v) for v in values]
    if len(logs) < 2:
        raise ScenarioError(f"the spread over replicas needs at least 2 values, got {len(logs)}")
    mean = sum(logs) / len(logs)
    return math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))


def combine(q: float, sigma_log: float, level: float) -> float:
    """√(q² + (z_ℓ·σ)²) with z_ℓ = Φ⁻¹((1+ℓ)/2)."""
    if sigma_log <= 0.0:
        return q
    from statistics import NormalDist  # only when a spread is folded in (keeps the default path light)

    z = NormalDist().inv_cdf((1.0 + level) / 2.0)
    return math.hypot(q, z * sigma_log)


@functools.lru_cache(maxsize=4)
def load_residuals(path: str | None = None) -> tuple[Residual, ...]:
    """The shipped cross-validated residuals (``roofline/data/model_error.yaml``)."""
    doc = yaml.safe_load(Path(path or MODEL_ERROR_PATH).read_text(encoding="utf-8"))
    return residuals_from_doc(doc)


def residuals_from_doc(doc: ModelErrorDoc) -> tuple[Residual, ...]:
    """Residual records from a model-error document."""
    return tuple(
        Residual(str(x["id"]), str(x["source"]), tuple(x["regimes"]), float(x["r"])) for x in doc.get("rows", [])
    )


def figure_interval(
    name: str,
    value: float,
    *,
    bound_prefill: str = "",
    bound_decode: str = "",
    level: float = DEFAULT_LEVEL,
    profile: CalibrationProfile | None = None,
    residuals: Sequence[Residual] | None = None,
    extra_sigma_log: float = 0.0,
) -> Interval:
    """The ``level`` interval of headline figure ``name`` whose point value is ``value``.

    ``extra_sigma_log``: a further independent log-sd to fold in (workload randomness, module docstring).
    """
    lv = check_level(level)
    res = load_residuals() if residuals is None else residuals
    w = half_width(res, chain(name, bound_prefill, bound_decode), lv)
    bound = bound_prefill if name in PREFILL_FIGURES else bound_decode if name in DECODE_FIGURES else "throughput"
    sigma = math.hypot(spread_sigma_log(profile, bound), extra_sigma_log)
    q = combine(w.q, sigma, lv)
    lo, hi = (value * math.exp(-q), value * math.exp(q)) if math.isfinite(value) else (math.nan, math.nan)
    return Interval(name, value, lo, hi, lv, w.regime, w.n_rows, w.n_sources, q, sigma, w.supported)


def result_interval(result: PredictionResult, name: str, level: float = DEFAULT_LEVEL) -> Interval:
    """Interval of a headline figure of a ``PredictionResult`` (what ``PredictionResult.interval`` returns)."""
    if name not in FIGURES:
        chain(name)  # raises with the list of figures
    return figure_interval(
        name,
        float(getattr(result, name)),
        bound_prefill=result.bound_prefill,
        bound_decode=result.bound_decode,
        level=level,
        profile=result.profile,
    )


def upper_factor(figure: str, level: float, profile: CalibrationProfile | None = None, bound: str = "") -> float:
    """e^(q): the factor from a point value of ``figure`` to its upper bound at ``level`` (one bound label)."""
    return figure_interval(figure, 1.0, bound_prefill=bound, bound_decode=bound, level=level, profile=profile).high


def upper_factors(
    figure: str, bounds: npt.ArrayLike, level: float, profile: CalibrationProfile | None = None
) -> np.ndarray:
    """e^(q) of ``figure``'s interval at ``level`` for each bound label in the array ``bounds``."""
    import numpy as np

    labels = np.asarray(bounds).astype(str)
    out = np.empty(labels.shape)
    for bound in set(labels.tolist()):
        iv = figure_interval(figure, 1.0, bound_prefill=bound, bound_decode=bound, level=level, profile=profile)
        out[labels == bound] = iv.high
    return out


def interval_columns(
    df: pd.DataFrame, level: float = DEFAULT_LEVEL, profile: CalibrationProfile | None = None
) -> pd.DataFrame:
    """``df`` (a sweep frame) with ``<figure>_low`` / ``<figure>_high`` columns for every headline figure present.

    Rows are grouped by (bound_prefill, bound_decode) so each group's half-width is computed once.
    """
    import numpy as np

    out = df.copy()
    lv = check_level(level)
    names = [n for n in FIGURES if n in out.columns]
    for n in names:
        out[f"{n}_low"] = np.nan
        out[f"{n}_high"] = np.nan
    if not len(out):
        return out
    # grouped by two columns, the keys are (bound_prefill, bound_decode) pairs (the stubs say Hashable)
    groups = cast("dict[tuple[str, str], pd.Index]", out.groupby(["bound_prefill", "bound_decode"], sort=False).groups)
    for (bp, bd), idx in groups.items():
        for n in names:
            q = figure_interval(n, 1.0, bound_prefill=str(bp), bound_decode=str(bd), level=lv, profile=profile)
            vals = out.loc[idx, n].to_numpy(dtype=np.float64)
            out.loc[idx, f"{n}_low"] = vals * q.low
            out.loc[idx, f"{n}_high"] = vals * q.high
    return out
