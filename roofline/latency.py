"""Headline latencies of a static batch from its phase costs: TTFT, TPOT, E2E and throughput.

Request overhead y and output lag k (``request_overhead_s``, ``output_lag_steps``) delay what the client
sees: TTFT = y + prefill + k·TPOT, E2E = TTFT + decode (:func:`latencies`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline.costs import ScenarioCosts
from roofline.specs.scenario import Scenario


@dataclass(frozen=True)
class Latencies:
    """Headline figures of a static batch, assembled once for ``predict`` and ``sweep``.

    decode = Σ decode steps; tpot = decode / (O − 1) (the first step's time when O = 1);
    ttft = y + prefill + lag and e2e = ttft + decode, with y the engine's request overhead and
    lag = k × (tpot, or the prefill step when O = 1) its output lag of k steps (as the simulator:
    :meth:`roofline.serving.sim.lifecycle.RequestLifecycle._done`); output tok/s = B·O / e2e ×
    replicas; total tok/s = B·(P + O) / e2e × replicas; per GPU = output tok/s / GPUs.
    """

    ttft_s: np.ndarray
    tpot_s: np.ndarray
    decode_s: np.ndarray
    e2e_s: np.ndarray
    throughput_tok_s: np.ndarray
    total_throughput_tok_s: np.ndarray
    throughput_tok_s_per_gpu: np.ndarray


def client_delays(sc: Scenario) -> tuple[float, float]:
    """(request overhead y in seconds, output lag k in steps) of ``sc``'s engine ((0, 0) without one)."""
    eng = sc.engine
    return (0.0, 0.0) if eng is None else (eng.request_overhead_s, eng.output_lag_steps)


def latencies(costs: ScenarioCosts, sc: Scenario) -> Latencies:
    """The headline figures of :class:`Latencies` from the phase costs (formulas there)."""
    b, p, o = (np.asarray(x, dtype=np.float64) for x in (sc.batch, sc.prompt_len, sc.output_len))
    pre = np.asarray(costs.prefill.time_s, dtype=np.float64)
    dec = np.asarray(costs.decode.time_s, dtype=np.float64)
    tpot = np.where(o > 1, dec / np.maximum(o - 1, 1), costs.first_step.time_s)
    y, k = client_delays(sc)
    ttft = y + pre + k * np.where(o > 1, tpot, pre) if y or k else pre
    e2e = ttft + dec
    out = b * o / e2e * sc.replicas
    return Latencies(ttft, tpot, dec, e2e, out, b * (p + o) / e2e * sc.replicas, out / sc.num_gpus)
