"""The public disaggregated rows on the serving simulator: each row's pools and clients as a closed loop.

:mod:`roofline.published.disagg_rows` scores the static model (one prefill pass, one decode step: no queueing).
Here a row runs as it was measured: ``Np`` prefill instances and ``Nd`` decode instances of its workers
(``HW:tpTdpDxN``, each rank's batch cap and CUDA graphs as the row's benchmark generator writes them:
:func:`~roofline.published.disagg_rows.worker_overrides`), C = decode batch × dp × Nd clients each sending its
next request when the previous returns (``simulate(..., disagg=..., concurrency=C)``), ISL/OSL fixed, the first
token on the prefill side, the KV transfer at the default link. TTFT and TPOT are the simulated means, throughput
per GPU the closed loop's output tokens/s over all G GPUs. Nothing is fitted to these rows.
"""

from __future__ import annotations

import math

from roofline.published.disagg_rows import RowMap, worker_overrides
from roofline.specs.disagg import DisaggConfig, Pool

#: Requests a simulated row serves: 3 × C, within these bounds (a few generations of every client).
MIN_REQUESTS, MAX_REQUESTS = 120, 20_000


def row_pools(m: RowMap) -> DisaggConfig:
    """The row's prefill and decode pools (instances of tp × dp GPUs, experts over roofline's ep)."""
    p, d = m.prefill, m.decode
    return DisaggConfig(
        Pool(m.hardware, p.tp, p.workers, p.ep, p.dp),
        Pool(m.hardware, d.tp, d.workers, d.ep, d.dp),
    )


def simulate_row(m: RowMap) -> dict[str, float]:
    """Simulated mean TTFT and TPOT (s) and output tokens/s per GPU of row ``m`` (module docstring)."""
    from roofline.serving.simulate import simulate

    c = m.concurrency
    dec = worker_overrides(m, m.decode, "decode")
    pre = {k: v for k, v in worker_overrides(m, m.prefill, "prefill").items() if k not in ("request_overhead_s",)}
    r = simulate(
        m.model,
        disagg=row_pools(m),
        engine=m.engine,
        concurrency=c,
        prompt_len=m.isl,
        output_len=m.osl,
        num_requests=int(min(max(3 * c, MIN_REQUESTS), MAX_REQUESTS)),
        weight_dtype=dict(m.weights),  # type: ignore[arg-type]
        kv_dtype=m.kv_dtype,
        prefill_overrides=pre,
        decode_overrides=dec,
    )
    s = r.summary
    return {
        "sim_ttft_s": float(s["ttft_mean_s"]),
        "sim_tpot_s": float(s["tpot_mean_s"]),
        "sim_tput_per_gpu": float(s["output_throughput_tok_s_per_gpu"]),
        "sim_rounds": float(r.config.get("closed_loop_rounds", math.nan)),
    }
