"""Validate roofline's static model on AIConfigurator's public disaggregated rows (issue #30, item 6).

Run: ``python validation/serving/validate_disagg_rows.py [--source CSV] [--out CSV] [--limit N] [--kv-dtype F]``.

Reads every ``mode == disagg`` row of ``/work/shared/validation/serving/aic_silicon_sample.csv``
(ai-dynamo/aiconfigurator @ 095f58a5, Apache-2.0), maps each onto roofline's inputs and predicts TTFT, TPOT and
output throughput per GPU (the rules and AIConfigurator's column meanings, with file/line sources:
:mod:`roofline.published.disagg_rows`). Writes one line per row (inputs, measured, predicted, ln error, skip
reason) to ``validation/results/disagg_rows.csv``, reads that file back and writes the medians of |error| per
metric, overall and per engine / GPU family / GPU / model / data source, to ``disagg_rows_summary.csv`` and the
skip counts with the medians to ``disagg_rows_summary.json``; prints both. Nothing is fitted to these rows.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

from roofline.published.disagg_rows import SOURCE_CSV, load_rows
from roofline.published.disagg_scores import evaluate, skip_counts, summarize

RESULTS = Path(__file__).resolve().parents[1] / "results"
OUT = RESULTS / "disagg_rows.csv"


def summary_paths(out: Path) -> tuple[Path, Path]:
    """(summary CSV, summary JSON) next to the per-row CSV ``out``."""
    return out.with_name(out.stem + "_summary.csv"), out.with_name(out.stem + "_summary.json")


def summarize_file(out: Path) -> tuple[pd.DataFrame, dict[str, int]]:
    """The summary and skip counts of a per-row CSV this script wrote (read back from disk)."""
    results = pd.read_csv(out, keep_default_na=False, na_values=[""])
    results["skip_reason"] = results.skip_reason.fillna("")
    return summarize(results), {str(k): int(v) for k, v in skip_counts(results).items()}


def run(
    source: Path, out: Path, limit: int | None = None, kv_dtype: str = "bf16"
) -> tuple[pd.DataFrame, dict[str, int]]:
    """Evaluate the rows (KV cache in ``kv_dtype``), write ``out`` and its summaries, and return (summary, skip
    counts) read back from ``out``."""
    rows = load_rows(source)
    if limit is not None:
        rows = rows.head(limit)
    out.parent.mkdir(parents=True, exist_ok=True)
    evaluate(rows, kv_dtype).to_csv(out, index=False)
    summary, skips = summarize_file(out)
    s_csv, s_json = summary_paths(out)
    summary.to_csv(s_csv, index=False)
    payload = {
        "source": str(source),
        "rows": len(rows),
        "kv_dtype": kv_dtype,
        "skips": skips,
        "summary": summary.to_dict("records"),
    }
    s_json.write_text(json.dumps(payload, indent=1, default=float) + "\n")
    return summary, skips


def _print(summary: pd.DataFrame, skips: dict[str, int]) -> None:
    print("rows by outcome:")
    for reason, n in skips.items():
        print(f"  {n:5d}  {reason}")
    wide = summary.pivot_table(
        index=["group", "value"], columns="metric", values=["n", "median_ape_pct"], aggfunc="first", sort=False
    )
    pd.set_option("display.width", 200)
    print("\nmedian |predicted/measured - 1| (%) and rows, per held-out group:")
    print(wide.round(1).to_string())


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=SOURCE_CSV)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--limit", type=int, default=None, help="first N disaggregated rows only")
    ap.add_argument("--kv-dtype", default="bf16", help="KV-cache format (rows state none; AIC's default bf16)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    summary, skips = run(args.source, args.out, args.limit, args.kv_dtype)
    _print(summary, skips)
    print(f"\nwrote {args.out} and {', '.join(map(str, summary_paths(args.out)))} in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
