"""Prediction intervals for the serving simulator's latencies: its error on public serving measurements.

**Residuals.** Every closed-loop row of the public serving sample (``validation/serving/aic_silicon_agg.csv``:
TensorRT-LLM, vLLM and SGLang, 8 model families, H100/H200/B200) was simulated with the engine's own preset,
which is what :func:`roofline.simulate` runs by default, its front-end latency included where the preset carries
one (SGLang 320 ms, TensorRT-LLM 160 ms: :mod:`roofline.published.frontend`; the saved pass at that latency in
``PASSES_CSV``) (``validation/serving/validate_simulator.py --engine-options preset``, results in
``SOURCE_CSV``). For the mean TTFT, TPOT and E2E of each row the residual is

    r = ln(measured / simulated)

signed: the simulator's TTFT is mostly short (median measured/simulated 1.1–1.6 by engine), so the
intervals are asymmetric. The residuals are shipped by engine and model family in
``roofline/data/serving_error.json`` (:func:`write_serving_error`; a test derives them again).

**Interval** of a simulated figure v at level ℓ (α = 1 − ℓ), from the n residuals of its pool sorted
r_(1) ≤ … ≤ r_(n), split-conformal on each side with every model family weighing the same: row j weighs
w_j = 1 / (rows of its family in the pool), F(k) = Σ_{j ≤ k} w_j / Σ w, and::

    k_lo = the largest k with F(k) ≤ (n+1)/n · α/2,   k_hi = the smallest k with F(k) ≥ (n+1)/n · (1 − α/2),
    interval = (v·e^(r_(k_lo)), v·e^(r_(k_hi)))

(equal weights give the ranks ⌊(n+1)·α/2⌋ and ⌈(n+1)·(1 − α/2)⌉; a rank outside 1 … n takes the extreme residual
and flags the interval ``supported = False``). Why the weights: the families, not the rows, are what a new
deployment is exchangeable with (the coverage below holds families out), and the row counts differ 15-fold
(vLLM MiniMax 364 rows, Qwen3-MoE 32), so the pooled rows spoke for the largest families; with them the held-out
80 % coverage is 71–84 % on every engine and figure where the row-weighted ranks gave 67–80 % (TensorRT-LLM TTFT
67 %). The pool is
the engine's own rows for the presets measured (vllm, sglang, trtllm) and every row for any other engine
(``ideal``, a custom one). Figures: ``ttft_*`` use the TTFT residuals, ``tpot_*`` and ``itl_*`` the TPOT
ones (a request's TPOT is its mean inter-token gap), ``e2e_*`` the E2E ones. The rows measure means; the
same ratio is assumed for every percentile of a figure (no public row measures a serving percentile).
A further independent log-spread σ (seeded replicas, a measured profile's ceilings) widens each side
around the pool's (weighted) median residual m: r_hi → m + √((r_hi − m)² + (z_ℓ·σ)²), and r_lo likewise.

**Coverage**, what the intervals promise, measured with whole model families held out: for each family F
of a pool, the interval is built from the pool's other families and F's rows are counted inside or not
(:func:`serving_coverage`; the table is in the shipped file and the README). Rows of one family share
their deployment (kernels, engine options), so a family, not a row, is the unit that is held out.
"""

from __future__ import annotations

import csv
import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import numpy as np

from roofline.errors import ScenarioError
from roofline.published.frontend import PASSES_CSV as PASSES
from roofline.published.uncertainty import check_level, combine

if TYPE_CHECKING:
    from roofline.engine.presets import EngineArg
    from roofline.profile import CalibrationProfile

ROOT = Path(__file__).resolve().parents[2]
SERVING_ERROR_PATH = Path(__file__).resolve().parents[1] / "data" / "serving_error.json"
SOURCE_CSV = "validation/results/serving_sim_preset_aiperf_cv1.csv"
PASSES_CSV = PASSES  # the front-end fit's passes (roofline.published.frontend): one file, one name
SCHEMA_VERSION = 1
R_DIGITS = 6
#: Serving figure → (measured, simulated) columns of ``SOURCE_CSV``.
COLUMNS = {"ttft": ("ttft_meas_ms", "ttft_sim0_ms"), "tpot": ("tpot_meas_ms", "tpot_sim0_ms"),
           "e2e": ("e2e_meas_ms", "e2e_sim0_ms")}  # fmt: skip
POOLED = "all"
COVERAGE_LEVELS = (0.8, 0.9)
_FIGURE_OF_PREFIX = {"ttft": "ttft", "tpot": "tpot", "itl": "tpot", "e2e": "e2e"}
#: {pool: {figure: [covered, rows]}} (:func:`serving_coverage`).
Coverage = dict[str, dict[str, list[int]]]


class ServingErrorDoc(TypedDict):
    """The residual document ``roofline/data/serving_error.json`` (module docstring).

    ``engines``: {engine: {model family: {figure: sorted residuals}}}; ``coverage``: {level: :data:`Coverage`}.
    """

    schema_version: int
    generated_by: str
    data: str
    residual: str
    engines: dict[str, dict[str, dict[str, list[float]]]]
    coverage: NotRequired[dict[str, Coverage]]


@dataclass(frozen=True)
class ServingInterval:
    """(low, high) of a simulated figure at ``level``; ``pool`` names the residuals it came from."""

    name: str
    value: float
    low: float
    high: float
    level: float
    pool: str
    n_rows: int
    n_families: int
    supported: bool = True

    @property
    def factors(self) -> tuple[float, float]:
        """(low/value, high/value)."""
        return (self.low / self.value, self.high / self.value) if self.value else (math.nan, math.nan)


def serving_figure(name: str) -> str | None:
    """``ttft``/``tpot``/``e2e`` for a simulated latency (``ttft_p99_s``, ``itl_mean_s``, ``tpot_s``), else None."""
    return _FIGURE_OF_PREFIX.get(name.split("_")[0])


def derive_serving_error(csv_path: str | Path | None = None) -> ServingErrorDoc:
    """The residual document (module docstring) from the preset validation results."""
    path = Path(csv_path) if csv_path is not None else ROOT / SOURCE_CSV
    if not path.is_file():
        raise ScenarioError(
            f"no serving validation results at {path}; run validation/serving/validate_simulator.py "
            "--engine-options preset first"
        )
    pools: dict[str, dict[str, dict[str, list[float]]]] = {}
    passes = _frontend_passes(path.parent / Path(PASSES_CSV).name)
    with path.open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            fam = pools.setdefault(row["engine"], {}).setdefault(row["family"], {f: [] for f in COLUMNS})
            sims = _simulated(row, passes)
            for fig, (meas, _) in COLUMNS.items():
                fam[fig].append(round(math.log(float(row[meas]) / sims[fig]), R_DIGITS))
    engines = {
        e: {f: {fig: sorted(v) for fig, v in figs.items()} for f, figs in sorted(fams.items())}
        for e, fams in sorted(pools.items())
    }
    doc: ServingErrorDoc = {
        "schema_version": SCHEMA_VERSION,
        "generated_by": "roofline.published.serving_error.write_serving_error",
        "data": f"{SOURCE_CSV} (validation/serving/validate_simulator.py --engine-options preset)",
        "residual": "r = ln(measured / simulated) of the row's mean TTFT, TPOT, E2E; simulated: engine preset as "
        "shipped, its front-end latency included (roofline.published.frontend: SGLang 320 ms, TensorRT-LLM 80 ms, "
        "vLLM none)",
        "engines": engines,
    }
    doc["coverage"] = {f"{lv:g}": serving_coverage(lv, doc) for lv in COVERAGE_LEVELS}
    return doc


@functools.cache
def preset_overhead_s(engine: str) -> float:
    """The mean front-end latency (s) the engine's preset ships (0 for an engine without a preset)."""
    from roofline.engine.presets import PRESETS, engine_preset
    from roofline.specs.library import hardware

    return engine_preset(engine, hardware("h100-sxm")).request_overhead_s if engine in PRESETS else 0.0


def _frontend_passes(path: Path) -> dict[str, dict[str, str]]:
    """{row id: its simulated passes per front-end grid value} (``PASSES_CSV``), {} when absent."""
    import gzip

    if not path.is_file():
        return {}
    with gzip.open(path, "rt", newline="", encoding="utf-8") as fh:
        return {r["id"]: r for r in csv.DictReader(fh)}


def _simulated(row: dict[str, str], passes: dict[str, dict[str, str]]) -> dict[str, float]:
    """The row's simulated mean TTFT, TPOT and E2E (ms) under its engine's shipped preset: the physics-only columns
    where the preset has no front-end latency, else the saved pass at that latency, with E2E = TTFT + (O − 1)·TPOT
    (exact for the fixed-length rows: each request's TPOT is (E2E − TTFT)/(O − 1))."""
    y = preset_overhead_s(row["engine"])
    if y == 0.0:
        return {fig: float(row[sim]) for fig, (_, sim) in COLUMNS.items()}
    p = passes.get(row["id"])
    if p is None:
        raise ScenarioError(f"no saved simulation pass for row {row['id']} in {PASSES_CSV}; rerun the validation")
    ttft, tpot = float(p[f"ttft_ms_request_overhead_s={y:g}"]), float(p[f"tpot_ms_request_overhead_s={y:g}"])
    return {"ttft": ttft, "tpot": tpot, "e2e": ttft + (float(row["osl"]) - 1.0) * tpot}


def write_serving_error(path: str | Path | None = None) -> Path:
    """Derive the residuals and write them (and their held-out coverage) as JSON."""
    out = Path(path) if path is not None else SERVING_ERROR_PATH
    out.write_text(json.dumps(derive_serving_error(), indent=1) + "\n", encoding="utf-8")
    load_serving_error.cache_clear()
    return out


@functools.lru_cache(maxsize=4)
def load_serving_error(path: str | None = None) -> ServingErrorDoc:
    """The shipped residual document (``roofline/data/serving_error.json``)."""
    doc: ServingErrorDoc = json.loads(Path(path or SERVING_ERROR_PATH).read_text(encoding="utf-8"))
    return doc


def engine_pool(engine: EngineArg, doc: ServingErrorDoc | None = None) -> str:
    """The residual pool of an engine (a preset name, an ``EngineConfig``, or a label like ``vllm 0.11``)."""
    d = load_serving_error() if doc is None else doc
    name = str(getattr(engine, "name", engine) or "").split(" ")[0].lower()
    return name if name in d["engines"] else POOLED


def pool_residuals(
    figure: str, pool: str, doc: ServingErrorDoc | None = None, exclude_family: str | None = None
) -> tuple[list[float], int]:
    """(sorted residuals of ``figure`` in ``pool``, number of families), without ``exclude_family``."""
    r, _, fams = pool_weighted(figure, pool, doc, exclude_family)
    return r, fams


def pool_weighted(
    figure: str, pool: str, doc: ServingErrorDoc | None = None, exclude_family: str | None = None
) -> tuple[list[float], list[float], int]:
    """(sorted residuals of ``figure`` in ``pool``, their family weights, number of families) without
    ``exclude_family``: each row weighs 1 / its family's rows in the pool (a family of the ``all`` pool is one
    engine's family), so every family weighs 1 (module docstring)."""
    d = load_serving_error() if doc is None else doc
    if figure not in COLUMNS:
        raise ScenarioError(f"no serving residuals for '{figure}'; figures: {', '.join(COLUMNS)}")
    engines = d["engines"].values() if pool == POOLED else [d["engines"][pool]]
    fams = [rs[figure] for fams in engines for f, rs in fams.items() if f != exclude_family and rs[figure]]
    pairs = sorted((r, 1.0 / len(rs)) for rs in fams for r in rs)
    names = {f for fams_ in engines for f in fams_ if f != exclude_family}
    return [r for r, _ in pairs], [w for _, w in pairs], len(names)


def conformal_bounds(r: list[float], level: float, w: list[float] | None = None) -> tuple[float, float, bool]:
    """(lower, upper, supported) of sorted residuals ``r`` with weights ``w`` (None: equal) at ``level``: with
    F(k) = Σ_{j ≤ k} w_j / Σ w and α = 1 − level, the largest r_(k) with F(k) ≤ (n+1)/n · α/2 and the smallest
    with F(k) ≥ (n+1)/n · (1 − α/2) (module docstring); equal weights give the ranks ⌊(n+1)α/2⌋ and ⌈(n+1)(1 − α/2)⌉."""
    n, a = len(r), 1.0 - check_level(level)
    if not n:
        raise ScenarioError("no serving residuals to build an interval from (roofline/data/serving_error.json)")
    cdf = _cdf(n, w)
    p_lo, p_hi = (n + 1) / n * a / 2, (n + 1) / n * (1 - a / 2)
    k_lo = int(np.searchsorted(cdf, p_lo + 1e-12, side="right"))  # F non-decreasing: the largest rank with F ≤ p_lo
    k_hi = int(np.searchsorted(cdf, p_hi - 1e-12, side="left")) + 1  # n + 1 when no rank reaches p_hi
    ok = k_lo >= 1 and k_hi <= n
    return r[max(k_lo, 1) - 1], r[min(k_hi, n) - 1], ok


def _cdf(n: int, w: list[float] | None) -> np.ndarray:
    """F(k), k = 1 … n: the weighted share of the n sorted residuals up to the k-th (equal weights: k / n)."""
    if w is None:
        return np.arange(1, n + 1, dtype=np.float64) / n
    acc = np.cumsum(np.asarray(w, dtype=np.float64))
    return acc / acc[-1]


def weighted_median(r: list[float], w: list[float] | None = None) -> float:
    """The smallest sorted residual with F(k) > 1/2 (equal weights: r[n // 2])."""
    return r[int(np.searchsorted(_cdf(len(r), w), 0.5 + 1e-12, side="right"))]


def serving_interval(
    name: str,
    value: float,
    *,
    engine: EngineArg = None,
    level: float = 0.8,
    extra_sigma_log: float = 0.0,
    doc: ServingErrorDoc | None = None,
) -> ServingInterval:
    """The ``level`` interval of simulated latency figure ``name`` (value ``value``) for ``engine``."""
    fig = serving_figure(name)
    if fig is None:
        raise ScenarioError(f"'{name}' is not a simulated latency figure (ttft_*, tpot_*, itl_*, e2e_*)")
    lv = check_level(level)
    pool = engine_pool(engine, doc)
    r, w, fams = pool_weighted(fig, pool, doc)
    lo, hi, ok = conformal_bounds(r, lv, w)
    med = weighted_median(r, w)  # each side widens around the median residual (module docstring)
    lo, hi = med - combine(med - lo, extra_sigma_log, lv), med + combine(hi - med, extra_sigma_log, lv)
    low, high = (value * math.exp(lo), value * math.exp(hi)) if math.isfinite(value) else (math.nan, math.nan)
    return ServingInterval(name, value, low, high, lv, pool, len(r), fams, ok)


def serving_upper_factor(
    name: str, level: float, engine: EngineArg = None, profile: CalibrationProfile | None = None
) -> float:
    """high/value of :func:`serving_interval`: what an SLO check multiplies a simulated figure by.

    A measured profile (``device`` set) folds in its ceilings' run-to-run spread (the larger of compute and memory).
    """
    from roofline.published.uncertainty import spread_sigma_log

    return serving_interval(
        name, 1.0, engine=engine, level=level, extra_sigma_log=spread_sigma_log(profile, "throughput")
    ).high


def serving_coverage(level: float, doc: ServingErrorDoc | None = None) -> Coverage:
    """{pool: {figure: [covered, rows]}}: each model family held out of its pool in turn (module docstring)."""
    d = load_serving_error() if doc is None else doc
    out: Coverage = {}
    for pool in [*d["engines"], POOLED]:
        engines = d["engines"].values() if pool == POOLED else [d["engines"][pool]]
        fams = sorted({f for fams in engines for f in fams})
        out[pool] = {}
        for fig in COLUMNS:
            hit = tot = 0
            for f in fams:
                rest, w, _ = pool_weighted(fig, pool, d, exclude_family=f)
                if not rest:  # a pool of one family: nothing to build its interval from, not counted
                    continue
                lo, hi, _ = conformal_bounds(rest, level, w)
                held = [r for fams_ in engines for r in fams_.get(f, {}).get(fig, [])]
                hit += sum(lo <= r <= hi for r in held)
                tot += len(held)
            out[pool][fig] = [hit, tot]
    return out


# -> Any: roofline/cli/validation.py iterates these rows and coverage()'s under one loop variable, so a
# TypedDict for either needs that loop renamed first.
def serving_summary(level: float, doc: ServingErrorDoc | None = None) -> list[dict[str, Any]]:
    """Per pool (each engine, then all): rows, and per figure the ``level`` interval's (low, high) factors and
    its coverage with each model family held out (:func:`serving_coverage`), as the CLI and the report show it."""
    d = load_serving_error() if doc is None else doc
    out = []
    for pool, figs in serving_coverage(level, d).items():
        per: dict[str, dict[str, float]] = {}
        for fig, (hit, n) in figs.items():
            iv = serving_interval(f"{fig}_s", 1.0, engine=pool, level=level, doc=d)
            per[fig] = {"low": iv.low, "high": iv.high, "coverage": hit / n if n else math.nan, "held_out_rows": n}
        out.append({"engine": pool, "rows": len(pool_residuals("ttft", pool, d)[0]), "figures": per})
    return out


def main() -> None:
    """Regenerate the shipped file and print the held-out coverage."""
    path = write_serving_error()
    doc = load_serving_error()
    print(f"wrote {path}")
    for lv, table in doc["coverage"].items():
        for pool, figs in table.items():
            iv = serving_interval("ttft_s", 1.0, engine=pool, level=float(lv), doc=doc)
            cov = ", ".join(f"{fig} {h / n:.0%}" for fig, (h, n) in figs.items())
            print(f"level {lv} {pool}: TTFT ×{iv.low:.2f}–×{iv.high:.2f}; held-out coverage {cov}")


if __name__ == "__main__":
    main()
