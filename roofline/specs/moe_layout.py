"""How a replica lays out attention data parallelism and experts, and the checks for impossible layouts.

The layout rule (:class:`roofline.specs.scenario.Scenario`):

* ``dp`` attention-DP ranks, each ``tp`` GPUs: every rank holds the attention and dense weights (sharded by
  tp), its own requests and their KV; a stage spans dp × tp GPUs and a replica tp × pp × dp.
* with dp > 1 the MoE layers run wide-EP over all dp × tp GPUs of a stage: ``ep`` must equal dp × tp (as
  SGLang ``--enable-dp-attention --moe-a2a-backend deepep`` and TensorRT-LLM attention DP with
  ``moe_expert_parallel_size`` = world size deploy); MoE tensor parallelism inside DP attention (ep < dp × tp)
  is not modelled and is refused.
* with dp = 1, ep keeps its earlier meaning: experts spread over ep GPUs, ep ≤ tp inside the TP group,
  ep > tp adding ep // tp groups of GPUs (tp × pp × max(1, ep // tp) GPUs).
* the expert slots S = num_experts + ``redundant_experts`` must split evenly: S % ep == 0, S/ep per EP rank.
* dp on a dense model is refused: its DP ranks would share nothing; ``replicas`` says that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from roofline.boundary.limits import MAX_PARALLEL
from roofline.errors import ScenarioError
from roofline.specs.model import ModelSpec

if TYPE_CHECKING:
    from roofline.specs.scenario import Scenario

MOE_OVERLAPS = ("none", "two_batch")


def expert_slots(model: ModelSpec, redundant_experts: int) -> int:
    """Expert slots of one MoE layer: the model's routed experts plus the redundant copies (0 if dense)."""
    return (model.moe.num_experts + redundant_experts) if model.moe is not None else 0


def wide_ep(tp: int, dp: int) -> int:
    """The ep of a layout of dp attention-DP ranks of tp GPUs with the experts wide-EP: dp × tp (1 without DP)."""
    return dp * tp if dp > 1 else 1


def normalise_overlap(value: str) -> str:
    """``two-batch`` / ``two_batch`` / ``none`` as the Scenario field spells it (``two_batch``, ``none``)."""
    v = str(value).strip().lower().replace("-", "_")
    if v not in MOE_OVERLAPS:
        raise ScenarioError(f"moe_overlap must be none or two-batch (got {value!r})")
    return v


def check_moe_layout(sc: Scenario, model: ModelSpec) -> None:
    """Raise ScenarioError, naming the field and a fix, for a dp / ep / redundant_experts / moe_overlap layout
    the model or the rule above cannot take."""
    r = sc.redundant_experts
    if isinstance(r, bool) or not isinstance(r, int) or r < 0:
        raise ScenarioError(f"redundant_experts must be a whole number >= 0 (got {r!r})")
    if sc.moe_overlap not in MOE_OVERLAPS:
        raise ScenarioError(f"moe_overlap must be none or two_batch (got {sc.moe_overlap!r})")
    moe = model.moe
    if sc.dp > 1 and moe is None:
        raise ScenarioError(
            f"dp={sc.dp} (attention data parallelism) needs a mixture-of-experts model, whose DP ranks share the "
            f"experts; {model.name} is dense, so its DP ranks would share nothing: keep dp=1 and serve the traffic "
            f"with {sc.dp} independent replicas (roofline plan sizes how many)."
        )
    if sc.dp * sc.tp * sc.pp > MAX_PARALLEL:
        raise ScenarioError(
            f"dp × tp × pp = {sc.dp} × {sc.tp} × {sc.pp} = {sc.dp * sc.tp * sc.pp:,} GPUs per replica is beyond the "
            f"limit of {MAX_PARALLEL:,} GPUs (roofline.boundary.limits): lower dp or tp"
        )
    if sc.ep > 1 and moe is None:
        raise ScenarioError(f"ep={sc.ep} needs a mixture-of-experts model; {model.name} is dense. Use ep=1.")
    if moe is None:
        if r or sc.moe_overlap != "none":
            raise ScenarioError(
                f"redundant_experts and moe_overlap need a mixture-of-experts model; {model.name} is dense: "
                "leave them at 0 and none"
            )
        return
    _check_experts(sc, model)


def _check_experts(sc: Scenario, model: ModelSpec) -> None:
    """The MoE half of :func:`check_moe_layout`: ep against dp × tp and the slots, redundancy, overlap."""
    assert model.moe is not None
    n, r = model.moe.num_experts, sc.redundant_experts
    slots = n + r
    if sc.dp > 1 and sc.ep not in (1, sc.dp * sc.tp):
        raise ScenarioError(
            f"ep={sc.ep} with dp={sc.dp} and tp={sc.tp}: under attention data parallelism the MoE layers run over "
            f"the dp × tp = {sc.dp * sc.tp} GPUs of a stage, either wide-EP (set ep={sc.dp * sc.tp}) or with every "
            f"expert tensor-parallel over them (set ep=1); mixes of the two are not modelled"
        )
    if r and sc.ep == 1:
        raise ScenarioError(
            f"redundant_experts={r} places extra expert copies on other EP ranks; with ep=1 there are none: "
            "set ep > 1 or redundant_experts=0"
        )
    if slots % sc.ep:
        ok = [e for e in range(2, min(slots, 1024) + 1) if slots % e == 0][:8]
        what = f"{n} experts + {r} redundant = {slots} expert slots" if r else f"{n} experts"
        extra = sc.ep - slots % sc.ep
        raise ScenarioError(
            f"ep={sc.ep} does not divide the {what} of {model.name}: pick ep in {ok} or add "
            f"redundant_experts={r + extra} so that every EP rank holds the same number of slots"
        )
    if sc.moe_overlap == "two_batch" and not (sc.dp > 1 or sc.ep > sc.tp):
        raise ScenarioError(
            f"moe_overlap=two_batch hides the expert all-to-all behind compute, but with ep={sc.ep} <= tp={sc.tp} "
            "and dp=1 the experts sit inside the TP group and no token travels: set dp > 1 (ep = dp × tp) or "
            "moe_overlap=none"
        )
