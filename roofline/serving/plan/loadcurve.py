"""The planner's per-batch formulas for one replica at full load, shared with the report's charts.

At batch B, with t_pre the prefill time of one request and t_dec(B) the decode step time at B (seconds):
TTFT = t_pre + t_dec(B); TPOT = t_dec(B) + B·t_pre / (O − 1); the replica serves λ_max(B) = B / ((O − 1)·t_dec(B)
+ B·t_pre) requests/s (:mod:`roofline.serving.plan.planner` derives them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LoadCurve:
    """Full-load latencies and capacity of one replica against batch B (arrays over B).

    ttft_s = t_pre + t_dec(B); tpot_s = t_dec(B) + B·t_pre/(O−1);
    replica_rps = λ_max(B) = B / ((O−1)·t_dec(B) + B·t_pre).
    """

    batch: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    replica_rps: np.ndarray


def load_curve(batch: np.ndarray, t_prefill_s: float, t_decode_s: np.ndarray, output_len: int) -> LoadCurve:
    """The planner's per-batch formulas (module docstring), shared with the report's charts."""
    b = np.asarray(batch, dtype=np.float64)
    t_dec = np.asarray(t_decode_s, dtype=np.float64)
    n_dec = output_len - 1
    return LoadCurve(
        batch=b,
        ttft_s=t_prefill_s + t_dec,
        tpot_s=t_dec + b * t_prefill_s / n_dec,
        replica_rps=b / (n_dec * t_dec + b * t_prefill_s),
    )


def tokens_per_s_per_gpu(replica_rps: object, output_len: int, gpus_per_replica: int) -> np.ndarray:
    """Output tokens/s per GPU of a replica serving ``replica_rps`` requests/s: λ · O / (tp · pp)."""
    return np.asarray(replica_rps, dtype=np.float64) * output_len / gpus_per_replica
