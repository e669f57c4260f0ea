"""Accuracy against published real-world measurements (``validation/published.csv``).

For every row the project can express (see ``roofline.published.rows``) the prediction is
computed under the row's own metric definition, then

    APE = |predicted − measured| / measured × 100 %,   signed error = (predicted − measured) / measured × 100 %.

Summaries give the median and the 90th percentile (numpy linear interpolation) of APE per
metric kind (latency: ttft/tpot/itl/e2e; throughput), metric, hardware and source.

Every metric is a function of one predicted time T (seconds) that is *linear* in the fixed
overheads of the profile: T = T₀ + a·per_kernel_s + b·per_step_s (+ c·per_kernel_graph_s when
decode steps replay as CUDA graphs). ``case_time_s`` returns T;
``metric_from_time`` / ``time_from_metric`` convert between T and the row's metric:

* ``ttft_context_phase``: T = prefill(P) (with its one per-step overhead); metric = 1000·T ms.
* ``static_batch_out_tok_s_per_gpu``: T = prefill + (OSL − 1) decode steps; metric = OSL·BS / T / GPUs.
* ``static_batch_out_tok_s``: as above without the division by GPUs.

Rows are evaluated with the engine semantics of their source (``Source.gqa_kv_reuse``: decode
attention K/V reuse; ``Source.cuda_graphs``: decode steps launched eagerly or replayed as CUDA
graphs) unless ``engine_semantics=False``, which predicts them as a modern engine would run them.
Measured runs are known to fit, so memory is budgeted with the whole device (utilisation 1, no
reserve); a row that still does not fit is skipped with the missing bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from roofline.errors import RooflineError
from roofline.prediction import evaluate_scenario, make_scenario
from roofline.profile import Attention, CalibrationProfile, load_profile
from roofline.published.rows import SOURCES, RowCase, Skip, at_least, express, read_rows
from roofline.specs.library import hardware as load_hardware
from roofline.specs.library import model as load_model

if TYPE_CHECKING:
    import pandas as pd

    from roofline.result import PredictionResult
    from roofline.specs.jsontypes import JsonObject

SUMMARY_GROUPS = ("kind", "metric", "hardware", "source")
ROW_COLUMNS = (
    "id", "source", "grade", "hardware", "model", "model_label", "tp", "batch", "input_len", "output_len",
    "weight_dtype", "kv_dtype", "metric", "kind", "definition", "measured", "predicted", "ape_pct", "error_pct",
)  # fmt: skip


def published_path() -> Path:
    """The shipped copy of the public validation rows."""
    from roofline.published.rows import published_csv_path

    return published_csv_path()


def engine_profile(profile: CalibrationProfile, case: RowCase) -> CalibrationProfile:
    """``profile`` with the source's engine semantics (decode-attention K/V reuse) applied."""
    if case.gqa_kv_reuse is None or case.gqa_kv_reuse == profile.attention.gqa_kv_reuse:
        return profile
    att: Attention = profile.attention.model_copy(update={"gqa_kv_reuse": case.gqa_kv_reuse})
    return profile.model_copy(update={"attention": att})


class ApeStats(TypedDict):
    """Error statistics of a rows frame (percent)."""

    n: int
    median_ape_pct: float
    p90_ape_pct: float
    median_error_pct: float


class AccuracyDoc(TypedDict):
    """:meth:`AccuracyReport.to_dict`: provenance, then the rows, skipped rows and summary as records."""

    profile: str
    data: str
    engine_semantics: bool
    engines: dict[str, str]
    rows: list[JsonObject]
    skipped: list[JsonObject]
    summary: list[JsonObject]


@dataclass(frozen=True)
class CaseTime:
    """Predicted time T (s) behind a row's metric, and whether the run fits in device memory."""

    time_s: float
    fits: bool
    missing_bytes: float


def case_time_s(case: RowCase, profile: CalibrationProfile, *, engine_semantics: bool = True) -> CaseTime:
    """Predicted time T behind the row's metric (see module docstring), under the row's engine semantics."""
    r = case_result(case, profile, engine_semantics=engine_semantics)
    return CaseTime(float(r.e2e_s), bool(r.fits), float(r.missing_bytes))


def case_result(case: RowCase, profile: CalibrationProfile, *, engine_semantics: bool = True) -> PredictionResult:
    """The full prediction behind a row (T = its ``e2e_s``), under the row's engine semantics."""
    prof = engine_profile(profile, case) if engine_semantics else profile
    m, hw = load_model(case.model), load_hardware(case.hardware)
    out = 1 if case.definition == "ttft_context_phase" else case.output_len
    graphs = case.cuda_graphs if engine_semantics and case.cuda_graphs is not None else True
    sc = make_scenario(
        hw,
        case.batch,
        case.prompt_len,
        out,
        tp=case.tp,
        weight_dtype=case.weight_dtype,
        kv_dtype=case.kv_dtype,
        engine="ideal",
        engine_overrides={"reserve_bytes": 0.0},
        cuda_graphs=graphs,
    )
    sc.validate_for(m, hw)
    return evaluate_scenario(m, hw, sc, prof)


def metric_from_time(case: RowCase, time_s: float) -> float:
    """The row's metric value for a predicted time T (see module docstring)."""
    if case.definition == "ttft_context_phase":
        return time_s * 1e3
    tokens = case.output_len * case.batch / time_s
    return tokens / case.tp if case.definition == "static_batch_out_tok_s_per_gpu" else tokens


def time_from_metric(case: RowCase, value: float) -> float:
    """Inverse of :func:`metric_from_time`: the time T a measured metric value implies."""
    if case.definition == "ttft_context_phase":
        return value / 1e3
    gpus = case.tp if case.definition == "static_batch_out_tok_s_per_gpu" else 1
    return case.output_len * case.batch / (value * gpus)


@dataclass(frozen=True)
class AccuracyReport:
    """Predicted vs measured per expressible row, the skipped rows with reasons, and summaries."""

    rows: pd.DataFrame
    skipped: pd.DataFrame
    profile: str
    data: str
    engine_semantics: bool = True
    cases: tuple[RowCase, ...] = field(default=(), repr=False)

    def grade(self, minimum: str) -> AccuracyReport:
        """Only rows of grade ``minimum`` or better (A > A- > B+ > B); skipped rows are kept."""
        keep = self.rows["grade"].map(lambda g: at_least(str(g), minimum)).astype(bool)
        cases = tuple(c for c in self.cases if at_least(c.grade, minimum))
        return AccuracyReport(
            self.rows[keep].reset_index(drop=True), self.skipped, self.profile, self.data, self.engine_semantics, cases
        )

    def summary(self, groups: tuple[str, ...] = SUMMARY_GROUPS) -> pd.DataFrame:
        """Median / p90 APE (%) and median signed error (%) per group value, plus 'all' per kind."""
        import pandas as pd

        out: list[dict[str, Any]] = []
        for g in groups if len(self.rows) else ():
            for value, sub in self.rows.groupby(g, sort=True):
                out.append({"group": g, "value": str(value), **ape_stats(sub)})
        return pd.DataFrame(out, columns=["group", "value", "n", "median_ape_pct", "p90_ape_pct", "median_error_pct"])

    def engines(self) -> dict[str, str]:
        """Engine semantics applied per source key of the predicted rows (empty when switched off)."""
        used = set(self.rows["source"]) if self.engine_semantics else set()
        return {s.key: s.engine for s in SOURCES if s.key in used and s.has_engine_semantics}

    def to_dict(self) -> AccuracyDoc:
        """JSON-friendly dict: rows, skipped rows, summary and provenance."""
        return {
            "profile": self.profile,
            "data": self.data,
            "engine_semantics": self.engine_semantics,
            "engines": self.engines(),
            "rows": _records(self.rows),
            "skipped": _records(self.skipped),
            "summary": _records(self.summary()),
        }


def ape_stats(rows: pd.DataFrame) -> ApeStats:
    """n, median and p90 of APE (%), and the median signed error (%) of a rows frame."""
    ape = rows["ape_pct"].to_numpy(dtype=float)
    err = rows["error_pct"].to_numpy(dtype=float)
    if ape.size == 0:
        return {"n": 0, "median_ape_pct": float("nan"), "p90_ape_pct": float("nan"), "median_error_pct": float("nan")}
    return {
        "n": int(ape.size),
        "median_ape_pct": float(np.median(ape)),
        "p90_ape_pct": float(np.percentile(ape, 90)),
        "median_error_pct": float(np.median(err)),
    }


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts with NaN turned into None."""
    return [{str(k): v for k, v in r.items()} for r in df.astype(object).where(df.notna(), None).to_dict("records")]


def expressed_cases(path: Path | None = None) -> tuple[list[RowCase], list[Skip]]:
    """Split the csv rows into expressible cases and skips (no prediction yet)."""
    cases: list[RowCase] = []
    skips: list[Skip] = []
    for row in read_rows(path or published_path()):
        (cases if isinstance(got := express(row), RowCase) else skips).append(got)  # type: ignore[arg-type]
    return cases, skips


def evaluate_rows(
    path: str | Path | None = None,
    profile: CalibrationProfile | str | Path | None = None,
    *,
    engine_semantics: bool = True,
) -> AccuracyReport:
    """Predict every expressible published row with ``profile`` (default profile when None)."""
    import pandas as pd

    prof = load_profile(profile)
    src = Path(path) if path is not None else published_path()
    cases, skips = expressed_cases(src)
    rows: list[dict[str, Any]] = []
    kept: list[RowCase] = []
    for c in cases:
        try:
            ct = case_time_s(c, prof, engine_semantics=engine_semantics)
        except RooflineError as exc:  # e.g. a batch or length beyond roofline.boundary.limits in a user CSV
            skips.append(Skip(c.id, c.source, c.grade, c.hardware_label, c.model_label, c.metric, c.model, str(exc)))
            continue
        if not ct.fits:
            why = f"does not fit in the modelled device memory (missing {ct.missing_bytes / 2**30:.1f} GiB)"
            skips.append(Skip(c.id, c.source, c.grade, c.hardware_label, c.model_label, c.metric, c.model, why))
            continue
        pred = metric_from_time(c, ct.time_s)
        kept.append(c)
        rows.append(
            {
                "id": c.id,
                "source": c.source,
                "grade": c.grade,
                "hardware": c.hardware,
                "model": c.model,
                "model_label": c.model_label,
                "tp": c.tp,
                "batch": c.batch,
                "input_len": c.prompt_len,
                "output_len": c.output_len,
                "weight_dtype": c.weight_dtype,
                "kv_dtype": c.kv_dtype,
                "metric": c.metric,
                "kind": c.kind,
                "definition": c.definition,
                "measured": c.measured,
                "predicted": pred,
                "ape_pct": abs(pred - c.measured) / c.measured * 100.0,
                "error_pct": (pred - c.measured) / c.measured * 100.0,
            }
        )
    skipped = pd.DataFrame(
        [s.__dict__ for s in sorted(skips, key=lambda s: s.id)],
        columns=["id", "source", "grade", "hardware_label", "model_label", "metric", "model", "reason"],
    )
    frame = pd.DataFrame(rows, columns=list(ROW_COLUMNS))
    return AccuracyReport(frame, skipped, prof.name, str(src), engine_semantics, tuple(kept))
