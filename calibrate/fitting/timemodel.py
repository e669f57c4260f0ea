"""The algebra the fitter solves, in numpy: the time model a profile encodes, term by term.

The fit (:mod:`calibrate.fitting.fit`) inverts these terms to find the parameters; the finished
profile is then checked by roofline's own evaluator (:mod:`calibrate.fitting.residuals`), so any
drift between this algebra and ``roofline.evaluate.op_time`` shows up in the residuals:

    gemm       t = max(F / (C_dtype · g(M)), B_moved / (BW · s(B_moved))) + k · kernels
    elementwise/copy/reduction
               t = B_moved / (BW · s(B_moved)) + k · kernels
    attention  t = max(F / (C_dtype · a_c), (B_qo + B_kv · f_kv) / (BW · a_m)) + k · kernels,
               f_kv = 1 + (1 − r)·(q_per_kv − 1)
    collective t = wire_bytes / link_BW + latency + k · kernels

with C the large-GEMM compute ceiling (FLOP/s), g the GEMM-M curve, BW the memory
ceiling (bytes/s), s the transfer-size curve, a_c and a_m the attention multipliers,
r the GQA K/V reuse (1: K/V read once per KV head), and k the per-kernel overhead (s):
``per_kernel_graph_s`` for a measurement timed on the device (CUDA events or graph
replays: only the GPU-side gap between kernels shows), ``per_kernel_s`` for one timed
on the host (eager dispatch and launch). Curves are piecewise-linear in log2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from roofline.profile import interp_log2


@dataclass(frozen=True)
class CurveFit:
    """Knots of a multiplier curve: x (M or bytes), y (fraction of the ceiling)."""

    x: tuple[float, ...]
    y: tuple[float, ...]

    def __call__(self, x: np.ndarray | float) -> np.ndarray:
        """Multiplier at ``x`` (piecewise-linear in log2 x, clamped)."""
        return interp_log2(np.asarray(self.x), np.asarray(self.y), x)


@dataclass(frozen=True)
class Params:
    """Fitted parameters in SI units; None where the suite gave no data."""

    per_kernel_s: float = 0.0
    per_kernel_graph_s: float = 0.0
    compute: dict[str, float] = field(default_factory=dict)  # dtype -> FLOP/s
    gemm_curve: CurveFit | None = None
    memory_bps: float | None = None
    memory_curve: CurveFit | None = None
    attention_compute: float = 1.0
    attention_memory: float = 1.0
    gqa_kv_reuse: float = 1.0
    comm_bps: float | None = None  # wire bytes per second per direction
    comm_latency_s: float = 0.0


DEVICE_METHODS = ("cuda_graph", "cuda_event")
FloatOrArray = TypeVar("FloatOrArray", float, np.ndarray)


def fixed_s(p: Params, method: str | None, kernels: float) -> float:
    """Fixed cost of ``kernels`` kernels timed by ``method``: graph per-kernel cost when timed on
    the device, eager per-kernel cost when timed on the host."""
    return kernels * (p.per_kernel_graph_s if method in DEVICE_METHODS else p.per_kernel_s)


def predict_transfer_core(p: Params, nbytes: float) -> float:
    """B / (BW · s(B)) without the fixed term (0 when no memory ceiling is fitted)."""
    if p.memory_bps is None:
        return 0.0
    s = float(p.memory_curve(nbytes)) if p.memory_curve is not None else 1.0
    return nbytes / (p.memory_bps * s)


def kv_factor(reuse: float, q_per_kv: FloatOrArray) -> FloatOrArray:
    """HBM reads per cached K/V byte: 1 + (1 − reuse)·(q_per_kv − 1)."""
    return 1.0 + (1.0 - reuse) * (q_per_kv - 1.0)
