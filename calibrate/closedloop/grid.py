"""Validation grids and result tables (no torch): which points to time, and how to summarise them.

A grid lists prefill points (batch B, prompt length P) and decode points (batch B, context L).
The error of a point is predicted / measured − 1; a phase is summarised by the median and
the worst absolute error over its points.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from roofline.errors import ScenarioError

if TYPE_CHECKING:
    import pandas as pd

Phase = Literal["prefill", "decode"]


@dataclass(frozen=True)
class Point:
    """One measurement: ``tokens`` is the prompt length P (prefill) or the context L (decode)."""

    phase: Phase
    batch: int
    tokens: int


@dataclass(frozen=True)
class Grid:
    """Prefill (B, P) and decode (B, L) pairs."""

    prefill: tuple[tuple[int, int], ...]
    decode: tuple[tuple[int, int], ...]

    def points(self) -> list[Point]:
        """Every point, prefill first."""
        return [Point("prefill", b, p) for b, p in self.prefill] + [Point("decode", b, L) for b, L in self.decode]


def _pairs(batches: Sequence[int], lengths: Sequence[int]) -> tuple[tuple[int, int], ...]:
    return tuple(itertools.product(batches, lengths))


GRIDS: dict[str, Grid] = {
    # one CPU thread, a tiny model: ~10-20 s
    "cpu": Grid(_pairs((1, 4), (32, 128, 512)), _pairs((1, 4, 16), (64, 512, 2048))),
    "cpu-quick": Grid(_pairs((1, 4), (64, 256)), _pairs((1, 8), (128, 1024))),
    # Llama-3.1-8B bf16 on one H200: ~1-2 min including graph captures; KV caches ≤ 17 GB
    "gpu": Grid(
        ((1, 128), (1, 512), (1, 2048), (1, 8192), (4, 2048), (16, 1024)),
        ((1, 512), (1, 4096), (1, 32768), (8, 512), (8, 4096), (32, 512), (32, 4096), (128, 512), (64, 1024)),
    ),
    "gpu-quick": Grid(((1, 512), (1, 4096)), ((1, 1024), (16, 1024))),
}


def parse_grid(text: str | None, device: str) -> Grid:
    """A named grid (``cpu``, ``cpu-quick``, ``gpu``, ``gpu-quick``) or ``prefill=BxP,…;decode=BxL,…``.

    None picks ``gpu`` on CUDA devices and ``cpu`` otherwise.
    """
    if text is None:
        return GRIDS["cpu" if device == "cpu" else "gpu"]
    if text in GRIDS:
        return GRIDS[text]
    parts: dict[str, tuple[tuple[int, int], ...]] = {"prefill": (), "decode": ()}
    try:
        for chunk in filter(None, (c.strip() for c in text.split(";"))):
            phase, _, pairs = chunk.partition("=")
            if phase.strip() not in parts:
                raise ValueError(phase)
            parts[phase.strip()] = tuple(
                (int(b), int(n)) for b, n in (p.lower().split("x") for p in pairs.split(",") if p.strip())
            )
    except ValueError:
        raise ScenarioError(
            f"cannot read --grid '{text}'; use a preset ({', '.join(GRIDS)}) or "
            "'prefill=1x128,4x512;decode=1x512,8x2048' (batch x prompt length, batch x context)"
        ) from None
    if any(b < 1 or n < 1 for b, n in parts["prefill"] + parts["decode"]) or any(n < 2 for _, n in parts["decode"]):
        raise ScenarioError("--grid needs batch ≥ 1, prompt length ≥ 1 and decode context ≥ 2")
    return Grid(parts["prefill"], parts["decode"])


def summarize(df: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per phase: n, median and worst |error| (%), median signed error (%), the same for the bare
    prediction (no eager extras), the ideal ≤ measured share and the median timing spread."""
    out: dict[str, dict[str, float]] = {}
    for phase, g in df.groupby("phase", sort=False):
        e = g["error_pct"].to_numpy(dtype=np.float64)
        out[str(phase)] = {
            "n": int(e.size),
            "median_abs_error_pct": float(np.median(np.abs(e))),
            "worst_abs_error_pct": float(np.max(np.abs(e))),
            "bias_pct": float(np.median(e)),
            "model_only_median_abs_error_pct": float(np.median(np.abs(g["error_model_only_pct"]))),
            "model_only_bias_pct": float(np.median(g["error_model_only_pct"])),
            "ideal_le_measured_frac": float(g["ideal_le_measured"].mean()),
            "median_spread_pct": float(np.median(g["spread_pct"])),
        }
    return out


def combine_pairs(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """One row per point from repeated calibrate-then-measure pairs: medians of the times and of the errors.

    ``error_pct`` is the median of each pair's own error (its prediction against its own
    measurement), ``error_min_pct`` / ``error_max_pct`` the range over pairs; descriptive
    columns come from the first pair. One frame is returned unchanged.
    """
    import pandas as pd

    if len(frames) == 1:
        return frames[0]
    keys = ["phase", "batch", "context"]
    long = pd.concat([f.assign(pair=i) for i, f in enumerate(frames)], ignore_index=True)
    med = long.groupby(keys, sort=False).agg(
        measured_s=("measured_s", "median"),
        predicted_s=("predicted_s", "median"),
        error_pct=("error_pct", "median"),
        eager_extra_s=("eager_extra_s", "median"),
        error_model_only_pct=("error_model_only_pct", "median"),
        error_min_pct=("error_pct", "min"),
        error_max_pct=("error_pct", "max"),
        ideal_s=("ideal_s", "median"),
        spread_pct=("spread_pct", "median"),
    )
    first = frames[0].set_index(keys).drop(columns=[c for c in med.columns if c in frames[0].columns])
    out = first.join(med).reset_index()
    out["ideal_le_measured"] = out["ideal_s"] <= out["measured_s"]
    out["pairs"] = len(frames)
    return out[[*frames[0].columns, "error_min_pct", "error_max_pct", "pairs"]]


def format_table(df: pd.DataFrame) -> str:
    """Plain-text table of the points and the per-phase summary (times in ms)."""
    lines = [
        f"{'phase':7s} {'B':>4s} {'P/L':>6s} {'measured ms':>12s} {'predicted ms':>13s} {'+eager ms':>10s} "
        f"{'error':>8s} {'model only':>10s} {'ideal ms':>10s} {'spread':>7s}  method"
    ]
    for r in df.to_dict("records"):
        n = int(r["context"] if r["phase"] == "decode" else r["prompt_len"])
        lines.append(
            f"{r['phase']:7s} {int(r['batch']):4d} {n:6d} {1e3 * float(r['measured_s']):12.3f} "
            f"{1e3 * float(r['predicted_s']):13.3f} {1e3 * float(r['eager_extra_s']):10.3f} "
            f"{float(r['error_pct']):+7.1f}% {float(r['error_model_only_pct']):+9.1f}% "
            f"{1e3 * float(r['ideal_s']):10.3f} {float(r['spread_pct']):6.1f}%  {r['method']}"
        )
    lines.append("")
    for phase, s in summarize(df).items():
        lines.append(
            f"{phase}: n={s['n']}, median |error| {s['median_abs_error_pct']:.1f}%, "
            f"worst {s['worst_abs_error_pct']:.1f}%, bias {s['bias_pct']:+.1f}% "
            f"(model only: median |error| {s['model_only_median_abs_error_pct']:.1f}%, "
            f"bias {s['model_only_bias_pct']:+.1f}%), ideal ≤ measured {100 * s['ideal_le_measured_frac']:.0f}% "
            f"of points, timing spread {s['median_spread_pct']:.1f}%"
        )
    return "\n".join(lines)
