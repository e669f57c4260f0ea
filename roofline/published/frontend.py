"""Each engine preset's front-end latency (``request_overhead_s``), fitted on public closed-loop rows at low
concurrency with each model family held out, and adopted only where the held-out error falls.

**Data.** Every closed-loop row of the public serving sample was simulated with the engine's own preset once
per candidate mean overhead y on a grid (0, 10, 20, 40, 80, 160, 320 ms, and 640 ms added by
``validation/serving/extend_passes.py``), each request's overhead drawn from an exponential law
(``request_overhead_cv`` = 1): ``validation/results/serving_sim_passes_preset_aiperf_cv1.csv.gz``
(``validation/serving/validate_simulator.py --engine-options preset``), measured values in
``validation/results/serving_sim_preset_aiperf_cv1.csv``.

**Fit.** y is a constant per request (admission, tokenisation, detokenisation, streaming the first token), so it
is fitted where it is not confounded with queueing: the rows at concurrency ≤ :data:`LOW_CONCURRENCY`. For an
engine, y* = the grid value minimising the median |ln(simulated TTFT / measured TTFT)| over those rows. The same
rule with each model family F left out gives y*_F, scored on F's rows (held out); the engine's held-out error is
the median over every family's rows.

**Adoption.** The preset carries y* when the held-out low-concurrency error with y*_F is below physics only (y
= 0), else 0: a fitted term that does not generalise is not shipped. An independent source measured on the same
engine is a second test (:data:`INDEPENDENT`, its rows simulated at the same grid): y* is adopted only if it does
not raise that source's median |ln error| of mean TTFT either, since a value that makes a whole source held out worse
does not generalise.
:func:`fit_frontend` returns the table; ``roofline/engine/presets.py`` cites it and ``tests/test_frontend_latency.py``
re-derives the shipped values.
"""

from __future__ import annotations

import csv
import gzip
import math
from dataclasses import dataclass
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[2]
PASSES_CSV = "validation/results/serving_sim_passes_preset_aiperf_cv1.csv.gz"
RESULTS_CSV = "validation/results/serving_sim_preset_aiperf_cv1.csv"
#: Rows at or below this closed-loop concurrency fit the front-end constant.
LOW_CONCURRENCY = 8
_PREFIX = "ttft_ms_request_overhead_s="
#: Per engine, an independent whole source simulated at the same grid: (passes file with the measured mean TTFT
#: ``ttft_meas_ms`` and one ``ttft_ms_request_overhead_s=y`` column per candidate, what it is).
INDEPENDENT: dict[str, tuple[str, str]] = {
    "vllm": (
        "validation/results/serving_blis_frontend_passes.csv",
        "real vLLM 0.15.1 runs with their engine options recorded (BLIS; python validation/serving/validate_blis.py "
        "--frontend-passes)",
    ),
}


@dataclass(frozen=True)
class FrontEndFit:
    """One engine's fit: y* over every family (s), y*_F per held-out family, the held-out median |ln error| of
    TTFT with physics only and with y*_F (low-concurrency rows, and every row), rows used, and the adopted y."""

    engine: str
    fitted_s: float
    by_family_s: dict[str, float]
    held_out_low_physics: float
    held_out_low_fitted: float
    held_out_all_physics: float
    held_out_all_fitted: float
    low_rows: int
    rows: int
    independent_rows: int = 0
    independent_physics: float = math.nan  # the independent source's median |ln error| with physics only
    independent_fitted: float = math.nan  # … and with y*

    @property
    def adopted_s(self) -> float:
        """y* where it lowers the held-out low-concurrency error and does not raise the independent source's, else 0
        (module docstring)."""
        independent_ok = not self.independent_rows or self.independent_fitted <= self.independent_physics
        return self.fitted_s if self.held_out_low_fitted < self.held_out_low_physics and independent_ok else 0.0


@dataclass(frozen=True)
class _Row:
    family: str
    concurrency: float
    measured_ms: float
    simulated_ms: dict[float, float]  # y (s) → simulated mean TTFT (ms)


def _rows(passes: Path, results: Path) -> dict[str, list[_Row]]:
    """{engine: rows} joining each row's simulated TTFT per grid value with its measured TTFT and concurrency."""
    with results.open(newline="", encoding="utf-8") as fh:
        meas = {r["id"]: r for r in csv.DictReader(fh)}
    out: dict[str, list[_Row]] = {}
    with gzip.open(passes, "rt", newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            m = meas.get(r["id"])
            if m is None:
                continue
            sims = {float(k[len(_PREFIX) :]): float(v) for k, v in r.items() if k.startswith(_PREFIX) and v}
            row = _Row(r["family"], float(m["concurrency"]), float(m["ttft_meas_ms"]), sims)
            out.setdefault(r["backend"], []).append(row)
    return out


def _err(rows: list[_Row], y: float) -> list[float]:
    return [abs(math.log(r.simulated_ms[y] / r.measured_ms)) for r in rows]


def _best(rows: list[_Row], grid: list[float]) -> float:
    """The grid value of least median |ln error| over ``rows`` (the smaller on a tie)."""
    return min(grid, key=lambda y: (median(_err(rows, y)), y))


def _independent(engine: str) -> list[_Row]:
    """The engine's independent source (:data:`INDEPENDENT`) as rows (no concurrency: open loop); [] without one."""
    if engine not in INDEPENDENT:
        return []
    with (ROOT / INDEPENDENT[engine][0]).open(newline="", encoding="utf-8") as fh:
        return [
            _Row(
                r["family"],
                math.nan,
                float(r["ttft_meas_ms"]),
                {float(k[len(_PREFIX) :]): float(v) for k, v in r.items() if k.startswith(_PREFIX) and v},
            )
            for r in csv.DictReader(fh)
        ]


def fit_engine(engine: str, rows: list[_Row], independent: list[_Row] | None = None) -> FrontEndFit:
    """The fit of one engine's rows, checked on ``independent`` rows of another source (module docstring)."""
    grid = sorted(rows[0].simulated_ms)
    low = [r for r in rows if r.concurrency <= LOW_CONCURRENCY]
    fams = sorted({r.family for r in rows})
    by_fam: dict[str, float] = {}
    lo_p: list[float] = []
    lo_f: list[float] = []
    all_p: list[float] = []
    all_f: list[float] = []
    for fam in fams:
        train = [r for r in low if r.family != fam]
        y = _best(train, grid) if train else 0.0
        by_fam[fam] = y
        test = [r for r in rows if r.family == fam]
        test_low = [r for r in test if r.concurrency <= LOW_CONCURRENCY]
        lo_p += _err(test_low, 0.0)
        lo_f += _err(test_low, y)
        all_p += _err(test, 0.0)
        all_f += _err(test, y)
    fitted = _best(low, grid)
    ind = independent or []
    return FrontEndFit(
        engine=engine,
        fitted_s=fitted,
        by_family_s=by_fam,
        held_out_low_physics=median(lo_p),
        held_out_low_fitted=median(lo_f),
        held_out_all_physics=median(all_p),
        held_out_all_fitted=median(all_f),
        low_rows=len(low),
        rows=len(rows),
        independent_rows=len(ind),
        independent_physics=median(_err(ind, 0.0)) if ind else math.nan,
        independent_fitted=median(_err(ind, fitted)) if ind else math.nan,
    )


def fit_frontend(passes: str | Path | None = None, results: str | Path | None = None) -> dict[str, FrontEndFit]:
    """{engine: fit} from the saved simulation passes and the measured rows (module docstring)."""
    p = Path(passes) if passes is not None else ROOT / PASSES_CSV
    r = Path(results) if results is not None else ROOT / RESULTS_CSV
    return {e: fit_engine(e, rows, _independent(e)) for e, rows in sorted(_rows(p, r).items())}


def main() -> None:
    """Print the fit table (``python -m roofline.published.frontend``)."""
    print("engine | rows (conc <= 8) | y* all families | y* per held-out family | held-out median |ln err| of TTFT")
    for f in fit_frontend().values():
        fams = ", ".join(f"{k} {v * 1e3:g}" for k, v in f.by_family_s.items())
        print(
            f"{f.engine} | {f.rows} ({f.low_rows}) | {f.fitted_s * 1e3:g} ms | {fams} ms | low conc: physics "
            f"{f.held_out_low_physics:.3f} -> fitted {f.held_out_low_fitted:.3f}; every row: "
            f"{f.held_out_all_physics:.3f} -> {f.held_out_all_fitted:.3f}"
            + (
                f"; independent ({f.independent_rows} rows): {f.independent_physics:.3f} -> {f.independent_fitted:.3f}"
                if f.independent_rows
                else ""
            )
            + f" | adopted {f.adopted_s * 1e3:g} ms"
        )


if __name__ == "__main__":
    main()
