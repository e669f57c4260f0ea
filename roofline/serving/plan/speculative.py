"""Search the number of speculated tokens k over load, and find where speculation stops paying.

For each batch B (static batch of the static model) and each k = 1 … k_max, with a fixed per-token
acceptance rate α: τ(k) = (1 − α^(k+1))/(1 − α) grows towards 1/(1 − α) while the verify pass
(B·(k + 1) query tokens) and the draft (k passes) cost more with k, so TPOT(k) has an interior minimum
once the draft or the compute-bound verify costs enough. The best k at each batch, its speedup over plain
decoding, and the crossover batch — the smallest batch where even the best k gives a speedup < 1 — are
what ``roofline spec-plan`` prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from roofline.boundary.limits import MAX_SPEC_K, MAX_SPEC_POINTS
from roofline.errors import NoFitError, ScenarioError
from roofline.prediction import HardwareArg, ModelArg, predict
from roofline.specs.speculative import SpeculativeConfig
from roofline.speculation.decode import with_speculation


@dataclass(frozen=True)
class KPoint:
    """One (batch, k) evaluation."""

    batch: int
    k: int
    tokens_per_step: float
    tpot_s: float
    plain_tpot_s: float
    speedup: float
    verify_s: float
    draft_s: float


@dataclass(frozen=True)
class SpecPlan:
    """Every evaluated point, the best k per batch and the crossover batch (None: speculation pays everywhere)."""

    config: SpeculativeConfig
    points: tuple[KPoint, ...]

    def best(self) -> dict[int, KPoint]:
        """Batch → the point with the lowest TPOT (ties: smaller k)."""
        out: dict[int, KPoint] = {}
        for p in self.points:
            cur = out.get(p.batch)
            if cur is None or p.tpot_s < cur.tpot_s:
                out[p.batch] = p
        return out

    @property
    def crossover_batch(self) -> int | None:
        """Smallest batch whose best k is no faster than plain decoding (speedup ≤ 1), None if none is."""
        for b, p in sorted(self.best().items()):
            if p.speedup <= 1.0:
                return b
        return None


def search_k(
    model: ModelArg,
    hardware: HardwareArg,
    spec: SpeculativeConfig | str,
    batches: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256),
    k_max: int = 8,
    prompt_len: int = 1024,
    output_len: int = 256,
    **predict_kw: Any,
) -> SpecPlan:
    """Evaluate k = 1 … k_max at every batch (``spec`` must carry alpha: a measured τ belongs to one k).

    ``predict_kw`` go to :func:`roofline.predict` (tp, weight_dtype, engine, …). Batches that do not fit
    in memory, and (batch, k) points whose drafter does not fit beside the batch, are skipped.
    """
    if isinstance(k_max, bool) or not isinstance(k_max, int) or not 1 <= k_max <= MAX_SPEC_K:
        raise ScenarioError(
            f"k_max={k_max!r} must be a whole number from 1 to {MAX_SPEC_K} (roofline.boundary.limits MAX_SPEC_K): "
            "published draft depths are at most 16, and τ(k) stops growing long before"
        )
    batches = list(batches)
    if len(batches) * k_max > MAX_SPEC_POINTS:
        raise ScenarioError(
            f"{len(batches):,} batches × k_max={k_max} is {len(batches) * k_max:,} points, more than "
            f"{MAX_SPEC_POINTS:,} (roofline.boundary.limits MAX_SPEC_POINTS): give fewer batches or a smaller k_max"
        )
    cfg = SpeculativeConfig.parse(spec) if isinstance(spec, str) else spec
    points = []
    first_miss = None
    for b in batches:
        plain = predict(model, hardware, int(b), prompt_len, output_len, **predict_kw)
        if not plain.fits:
            first_miss = first_miss or plain
            continue
        for k in range(1, k_max + 1):
            r = with_speculation(plain, cfg.with_k(k))
            sd = r.speculative
            assert sd is not None
            if not r.fits:  # the drafter's memory does not fit beside this batch
                continue
            s = sd.summary()
            points.append(
                KPoint(
                    int(b),
                    k,
                    sd.tokens_per_step,
                    r.tpot_s,
                    plain.tpot_s,
                    sd.speedup,
                    float(s["spec_verify_s"]),
                    float(s["spec_draft_s"]),
                )
            )
    if not points:  # nothing to compare: an empty table would read as "speculation pays everywhere"
        if first_miss is not None:
            from roofline.advice import no_fit_reason

            why = no_fit_reason(first_miss.model, first_miss.hardware, first_miss.scenario)
            raise NoFitError(f"no batch tried fits ({first_miss.model.name} on {first_miss.hardware.name}): {why}")
        raise NoFitError("no (batch, k) point fits: the drafter does not fit beside any batch tried")
    return SpecPlan(cfg, tuple(points))
