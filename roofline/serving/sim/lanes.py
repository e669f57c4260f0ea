"""The compiled step of a pipeline-parallel replica with micro-batch lanes in flight (:mod:`roofline.pipeline`).

The simulator keeps one running set; with L lanes its d decode rows spread over min(L, d) lanes of
⌈d / min(L, d)⌉ rows, each lane one pass through every stage, and the lanes follow each other through the
stages, so every row gets its next token one lane's pass later: a step of the running set costs the pass of its
largest lane, :meth:`StepModel.gpu_time` at ⌈d / min(L, d)⌉ rows with that share of the decode rows' attended
tokens. A step's prefill chunks ride in the lane being formed, with its decode rows (so a prompt's prefill
takes a whole pass, as alone; the lanes it does not ride in are not charged for it). The token budget stays per
step: one lane carries the new tokens of a step (conservative when many prompts wait: each engine lane could
carry a budget of its own). Static ``predict`` follows the same rule for decode (TPOT = the pass at the largest
lane), so one request, or a decode batch alone, gets the same step in both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from roofline.pipeline import lane_rows
from roofline.serving.sim.steptime import StepModel
from roofline.serving.sim.stretch import Stretch


class LanedStepModel(StepModel):
    """:class:`StepModel` of a pipeline with ``lanes`` micro-batches in flight (module docstring): every step is
    priced at its largest lane. The one-line decode stretches are off (:attr:`line_ok`), so every decode stretch
    goes through :meth:`decode_affine`, which takes the lane too."""

    def __init__(self, *args: Any, lanes: int, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.lanes = int(lanes)
        self.line_ok = False

    def _lane(self, rows: int, spans: Sequence[float]) -> tuple[int, tuple[float, ...]]:
        """(rows of the largest lane, its share of each attended-token sum)."""
        r = lane_rows(rows, self.lanes)
        f = r / rows if rows else 0.0
        return r, tuple(float(s) * f for s in spans)

    def gpu_time(
        self,
        decode_rows: int,
        decode_span: tuple[float, ...],
        prefill_new: Sequence[float] | np.ndarray | None = None,
        prefill_past: Sequence[float] | np.ndarray | None = None,
    ) -> float:
        """GPU seconds of the step's largest lane: its decode rows and every prefill chunk of the step."""
        r, spans = self._lane(decode_rows, decode_span)
        return super().gpu_time(r, spans, prefill_new, prefill_past)

    def chunk_step_s(
        self, decode_rows: int, decode_span: tuple[float, ...], chunks: Sequence[tuple[float, float]]
    ) -> float:
        """:meth:`step_time` of the step (its chunks ((cached, new) tokens) in the lane being formed)."""
        return self.step_time(decode_rows, decode_span, [n for _, n in chunks], [p for p, _ in chunks])

    def decode_affine(
        self,
        rows: int,
        span0: tuple[float, ...],
        slope: tuple[float, ...],
        *,
        tokens_per_row: int = 1,
        kv_span0: tuple[float, ...] | None = None,
        kv_slope: tuple[float, ...] | None = None,
        extra_s: float = 0.0,
    ) -> Stretch:
        """The stretch of decode-only steps of the largest lane: its rows and share of every attended-token sum."""
        r, s0 = self._lane(rows, span0)
        _, s1 = self._lane(rows, slope)
        k0 = None if kv_span0 is None else self._lane(rows, kv_span0)[1]
        k1 = None if kv_slope is None else self._lane(rows, kv_slope)[1]
        return super().decode_affine(
            r, s0, s1, tokens_per_row=tokens_per_row, kv_span0=k0, kv_slope=k1, extra_s=extra_s
        )

    def mean_step_s(
        self, rows: np.ndarray, ctx: float, chunk: np.ndarray | None = None, chunk_past: np.ndarray | None = None
    ) -> np.ndarray:
        """The screening tier's mean step at the largest lane of a mean population of ``rows`` rows: rows /
        min(L, max(rows, 1)) (real-valued, as the tier's populations are)."""
        n = np.asarray(rows, dtype=np.float64)
        lane = np.where(n > 0, n / np.minimum(float(self.lanes), np.maximum(n, 1.0)), n)
        return super().mean_step_s(lane, ctx, chunk, chunk_past)
