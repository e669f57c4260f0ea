"""``roofline calibrate import-aiconfigurator``: the tables listing and the comparison summary, as rich or JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from calibrate.aic.compare import FRAMEWORKS, GROUP_KEY, OP_KINDS, comparable_tables, compare, summarise
from calibrate.aic.tables import AIC_VERSION, AicTable, list_tables, unmapped_gpus

if TYPE_CHECKING:
    from rich.table import Table

    from roofline.specs.jsontypes import JsonObject


def known_values(tables: list[AicTable]) -> dict[str, list[str]]:
    """Accepted values of --gpu (GPU folders with tables), --framework and --op."""
    return {"--gpu": sorted({t.gpu for t in tables}), "--framework": list(FRAMEWORKS), "--op": list(OP_KINDS)}


def comparison_summary(
    tables: list[AicTable], gpu: str | None, framework: str | None, op: str | None, engine_profiles: bool = False
) -> pd.DataFrame:
    """The summary of :func:`calibrate.aic.compare.summarise` with measured and predicted medians (s) added, under
    the default profile or (``engine_profiles``) each table's shipped engine-kernel profile."""
    rows = compare(tables, gpu=gpu, framework=framework, op=op, engine_profiles=engine_profiles)
    summary = summarise(rows)
    if summary.empty:
        return summary
    medians = rows.groupby(GROUP_KEY, sort=True)[["measured_s", "predicted_s"]].median().reset_index()
    return summary.merge(medians, on=GROUP_KEY, how="left")


def summary_records(summary: pd.DataFrame) -> list[JsonObject]:
    """JSON records with units in the field names (ratios are predicted / measured, dimensionless)."""
    out: list[JsonObject] = []
    for r in summary.to_dict(orient="records"):
        out.append(
            {
                **{k: str(r[k]) for k in GROUP_KEY},
                "rows": int(r["rows"]),
                "predicted_over_measured_median": float(r["ratio_median"]),
                "predicted_over_measured_p10": float(r["ratio_p10"]),
                "predicted_over_measured_p90": float(r["ratio_p90"]),
                "measured_median_s": float(r["measured_s"]),
                "predicted_median_s": float(r["predicted_s"]),
            }
        )
    return out


def _us(x: float) -> str:
    return f"{x * 1e6:,.1f}" if np.isfinite(x) else ""


def summary_table(summary: pd.DataFrame, engine_profiles: bool = False) -> Table:
    """The rich table of the comparison summary: rows, predicted / measured median (p10–p90), medians in µs."""
    from rich.table import Table

    which = "each table's engine-kernel profile" if engine_profiles else "default profile"
    t = Table(
        title=f"roofline ({which}) vs AIConfigurator {AIC_VERSION} kernel tables: predicted / measured",
        title_justify="left",
    )
    heads = (*GROUP_KEY, "rows", "median", "p10", "p90", "measured µs", "predicted µs")
    for h in heads:
        t.add_column(h, justify="left" if h in GROUP_KEY else "right")
    for r in summary.to_dict(orient="records"):
        t.add_row(
            *(str(r[k]) for k in GROUP_KEY),
            f"{int(r['rows']):,}",
            f"{r['ratio_median']:.2f}",
            f"{r['ratio_p10']:.2f}",
            f"{r['ratio_p90']:.2f}",
            _us(float(r["measured_s"])),
            _us(float(r["predicted_s"])),
        )
    return t


def listing_records(tables: list[AicTable]) -> list[JsonObject]:
    """One JSON record per table: where it lies, its kind, rows and roofline slug (None: unmapped)."""
    return [
        {
            "gpu": t.gpu,
            "hardware": t.hardware,
            "op": t.op,
            "framework": t.framework,
            "version": t.version,
            "kind": t.kind,
            "rows": t.rows,
            "comparable": bool(comparable_tables([t])),
            "path": str(t.path),
        }
        for t in tables
    ]


def listing_table(tables: list[AicTable]) -> Table:
    """The rich table of the installed tables; the caption names the unmapped GPUs."""
    from rich.table import Table

    t = Table(title=f"AIConfigurator {AIC_VERSION} kernel tables", title_justify="left")
    for h in ("gpu", "hardware", "op", "framework", "version", "kind", "rows", "compared"):
        t.add_column(h, justify="right" if h == "rows" else "left")
    for x in tables:
        compared = "yes" if comparable_tables([x]) else ""
        t.add_row(x.gpu, x.hardware or "unmapped", x.op, x.framework, x.version, x.kind, f"{x.rows:,}", compared)
    unmapped = unmapped_gpus(tables)
    if unmapped:
        t.caption = f"unmapped GPUs (no roofline hardware spec; not compared): {', '.join(unmapped)}"
    return t


def installed_tables(gpu: str | None = None) -> list[AicTable]:
    """The installed tables (every GPU, or one)."""
    return list_tables(gpu=gpu)
