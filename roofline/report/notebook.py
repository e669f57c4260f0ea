"""Notebook view of a :class:`~roofline.result.PredictionResult` (its ``_repr_html_``).

Uses the report's templates, macros and stylesheet, so a prediction looks the same in a
notebook and in a saved report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from roofline.report.charts import MEMORY_PARTS, memory_parts
from roofline.report.templating import render_template

if TYPE_CHECKING:
    from roofline.result import PredictionResult


def layer_groups(result: PredictionResult) -> list[tuple[str, float, float]]:
    """(group, prefill seconds, mean decode-step seconds) in the order ops appear."""
    df = result.layer_breakdown()
    groups: dict[str, list[float]] = {}
    for _, row in df.iterrows():
        g = groups.setdefault(str(row["group"]), [0.0, 0.0])
        g[0 if row["phase"] == "prefill" else 1] += float(row["time_s"])
    return [(g, pre, dec) for g, (pre, dec) in groups.items() if pre > 0 or dec > 0]


def prediction_html(result: PredictionResult) -> str:
    """Self-contained HTML fragment (scoped styles, no scripts) summarising one prediction."""
    parts = [(name, v, col) for (name, col), v in zip(MEMORY_PARTS, memory_parts(result), strict=True)]
    return render_template(
        "prediction.html.j2", r=result, summary=result.summary(), memory_parts=parts, groups=layer_groups(result)
    )
