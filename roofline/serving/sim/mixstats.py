"""Per-class figures of a simulated workload mix (:mod:`roofline.serving.workload.mix`).

:attr:`roofline.serving.sim.result.SimulationResult.class_summary` reads them: for each class, the finished
requests counted (warm-up left out) and TTFT and TPOT at the class's own percentiles over its own requests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from roofline.serving.sim.metrics import finite_percentile as pct

if TYPE_CHECKING:
    import pandas as pd

    from roofline.serving.workload.mix import WorkloadMix


def class_summary(requests: pd.DataFrame, mix: WorkloadMix) -> pd.DataFrame:
    """One row per class of a simulated mix: its share, the requests counted (finished, not warm-up), and TTFT and
    TPOT (s) at the class's own percentiles over the class's requests, beside its SLOs."""
    import pandas as pd

    r = requests
    done = np.isfinite(r["finish_s"].to_numpy()) & ~r["warmup"].to_numpy(dtype=bool)
    names = r["class"].to_numpy()
    rows = []
    for c in mix.classes:
        sel = done & (names == c.name)
        t, u = r["ttft_s"].to_numpy()[sel], r["tpot_s"].to_numpy()[sel]
        rows.append(
            {
                "class": c.name,
                "share": c.share,
                "requests": int(sel.sum()),
                "ttft_pct": c.ttft_pct,
                "ttft_s": pct(t, c.ttft_pct),
                "ttft_slo_s": c.ttft_slo_s,
                "tpot_pct": c.tpot_pct,
                "tpot_s": pct(u, c.tpot_pct),
                "tpot_slo_s": c.tpot_slo_s,
            }
        )
    return pd.DataFrame(rows)
