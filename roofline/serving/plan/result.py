"""The planner's typed results: one :class:`Candidate` per (hardware, precision, tp) and the ranked
:class:`PlanResult` (see :mod:`roofline.serving.plan.planner` for how they are sized)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from roofline.units import fmt_seconds

if TYPE_CHECKING:
    import pandas as pd

#: Utilisation above which latencies are one-sided bounds (queueing explodes near saturation).
SATURATION = 0.85
#: Interval level of the model's error the headroom is compared with.
MARGIN_LEVEL = 0.8
NAN = float("nan")


@dataclass(frozen=True)
class Candidate:
    """One (hardware, precision, tp) deployment and its plan; times in s, rates in requests/s.

    ``ttft_s``/``tpot_s``/``prefill_share``/``concurrency`` are at the operating load
    qps/replicas; ``tpot_full_load_s`` is TPOT_eff at λ_max (what the SLO was checked on).
    """

    hardware: str
    precision: str
    tp: int
    kv_dtype: str = "bf16"
    pp: int = 1
    dp: int = 1  # attention data-parallel ranks of tp GPUs (MoE; then ep = dp × tp, wide EP)
    ep: int = 1
    feasible: bool = False
    reason: str = ""
    batch: int = 0
    max_batch_memory: int = 0
    limited_by: str = ""
    t_prefill_s: float = NAN
    t_decode_s: float = NAN
    ttft_s: float = NAN
    tpot_s: float = NAN
    tpot_full_load_s: float = NAN
    replica_rps: float = NAN
    replicas: int = 0
    gpus: int = 0
    headroom: float = NAN
    prefill_share: float = NAN
    concurrency: float = NAN
    usd_per_gpu_hour: float | None = None
    gpus_per_instance: int = 1  # capacity is rented in whole instances of this many GPUs (Price.gpus_per_instance)
    usd_per_hour: float | None = None
    usd_per_million_output_tokens: float | None = None
    missing_bytes: float = 0.0
    slo_excess: float = NAN
    link_flag: str = ""
    link_note: str = ""
    confidence: float | None = None
    error_margin: float = NAN
    within_error: bool = False
    utilisation: float = NAN
    saturation_rps: float = NAN  # load at which utilisation reaches SATURATION (not the knee: see screening.knee_qps)
    latency_bound: str = "point"
    spare_replicas: int = 0  # paid for beyond ``replicas`` (included in gpus and usd_per_hour)

    def rented_gpus(self, replicas: int) -> int:
        """GPUs rented for ``replicas`` replicas: :func:`rented_gpus` at this candidate's instance size."""
        return rented_gpus(replicas, self.gpus_per_replica, self.gpus_per_instance)

    @property
    def gpus_per_replica(self) -> int:
        """GPUs of one replica: tp × pp × dp."""
        return self.tp * self.pp * self.dp

    @property
    def parallelism(self) -> str:
        """``tp 8``, ``tp 4 · pp 2`` or ``tp 1 · dp 8 · ep 8`` (attention DP with wide expert parallelism)."""
        pp = f" · pp {self.pp}" if self.pp > 1 else ""
        wide = f" · dp {self.dp} · ep {self.ep}" if self.dp > 1 else (f" · ep {self.ep}" if self.ep > 1 else "")
        return f"tp {self.tp}{pp}{wide}"

    @property
    def label(self) -> str:
        """Short name such as ``h100-sxm tp=4 bf16`` (``… dp=8 ep=8 …`` with attention DP)."""
        pp = f" pp={self.pp}" if self.pp > 1 else ""
        wide = f" dp={self.dp} ep={self.ep}" if self.dp > 1 else ""
        return f"{self.hardware} tp={self.tp}{pp}{wide} {self.precision}"


@dataclass(frozen=True)
class PlanResult:
    """Every candidate considered, ranked (feasible first), with the request that produced them."""

    model: str
    qps: float
    prompt_len: int
    output_len: int
    ttft_slo_s: float
    tpot_slo_s: float
    max_gpus: int | None
    candidates: list[Candidate] = field(default_factory=list)
    confidence: float | None = None
    mix: Any = None  # the WorkloadMix whose mean request was sized (roofline.serving.workload.mix), or None

    @property
    def recommended(self) -> Candidate | None:
        """The cheapest feasible candidate, or None."""
        return self.candidates[0] if self.candidates and self.candidates[0].feasible else None

    def to_frame(self) -> pd.DataFrame:
        """One row per candidate, columns as the Candidate fields (units in the names)."""
        import pandas as pd

        return pd.DataFrame([asdict(c) for c in self.candidates])

    def _repr_html_(self) -> str:
        from roofline.report.notebook import plan_html

        return plan_html(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict: the request, the recommendation and every candidate (NaN → None)."""
        rec = self.recommended
        return _clean(
            {
                "model": self.model,
                "qps": self.qps,
                "prompt_len": self.prompt_len,
                "output_len": self.output_len,
                "ttft_slo_s": self.ttft_slo_s,
                "tpot_slo_s": self.tpot_slo_s,
                "max_gpus": self.max_gpus,
                "confidence": self.confidence,
                **({"mix": mix_dict(self.mix)} if self.mix is not None else {}),
                "recommended": asdict(rec) if rec else None,
                "candidates": [asdict(c) for c in self.candidates],
            }
        )

    def explain_infeasible(self) -> str:
        """One paragraph on why nothing is feasible, naming the closest candidate and a fix."""
        slo = f"TTFT ≤ {fmt_seconds(self.ttft_slo_s)} and TPOT ≤ {fmt_seconds(self.tpot_slo_s)}"
        if not self.candidates:
            return f"no candidate to evaluate for {self.model}; pass hardware and precisions values that exist"
        gpu = [c for c in self.candidates if c.gpus and not c.feasible and "max_gpus" in c.reason]
        slo_miss = [c for c in self.candidates if math.isfinite(c.slo_excess)]
        no_fit = [c for c in self.candidates if c.missing_bytes > 0]
        if gpu:
            best = min(gpu, key=lambda c: c.gpus)
            fix = f"raise max_gpus to {best.gpus}, lower qps or allow other hardware"
        elif slo_miss:
            best = min(slo_miss, key=lambda c: c.slo_excess)
            fix = "relax the SLOs, use a shorter prompt, a higher tp or fp8 weights (precisions bf16,fp8)"
        elif no_fit:
            best = min(no_fit, key=lambda c: c.missing_bytes)
            fix = "allow a higher tp (tp_options 8,16), a lower precision (precisions fp8,int4) or larger GPUs"
        else:
            best = self.candidates[0]
            fix = "check the hardware, precision and tp options"
        return (
            f"no candidate serves {self.qps:g} requests/s of {self.model} (prompt {self.prompt_len}, "
            f"output {self.output_len}) with {slo}. Closest: {best.label}: {best.reason}. Fix: {fix}."
        )


def _clean(x: Any) -> Any:
    """Recursively replace NaN/inf floats with None and numpy scalars with Python ones (for JSON)."""
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def rented_gpus(replicas: int, gpus_per_replica: int, gpus_per_instance: int) -> int:
    """GPUs a buyer rents for ``replicas`` replicas of ``gpus_per_replica`` GPUs, in whole instances of
    ``gpus_per_instance`` GPUs. A replica stays inside its instances (its tensor-parallel group on one node's
    interconnect): k = ⌊instance / replica⌋ replicas share an instance, so ⌈replicas / k⌉ instances; a replica
    larger than an instance takes ⌈replica / instance⌉ of them. E.g. 3 × tp 4 on 8-GPU nodes: 2 nodes, 16 GPUs."""
    if replicas <= 0:
        return 0
    per, inst = max(1, gpus_per_replica), max(1, gpus_per_instance)
    instances = -(-replicas // (inst // per)) if per <= inst else replicas * -(-per // inst)
    return instances * inst


def mix_dict(mix: Any) -> list[dict[str, Any]]:
    """JSON fields of a workload mix's classes (lengths as their labels, SLOs in seconds)."""
    return [
        {
            "name": c.name,
            "share": c.share,
            "prompt": c.prompt.describe(),
            "output": c.output.describe(),
            "prompt_mean": c.prompt.mean,
            "output_mean": c.output.mean,
            "ttft_slo_s": c.ttft_slo_s,
            "ttft_pct": c.ttft_pct,
            "tpot_slo_s": c.tpot_slo_s,
            "tpot_pct": c.tpot_pct,
            "prefix_share": c.prefix_share,
        }
        for c in mix.classes
    ]
