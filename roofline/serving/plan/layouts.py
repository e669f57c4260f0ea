"""The parallel layouts the planner tries for one replica: tp alone, and for MoE models attention DP with wide EP.

A dense model's replica is tp GPUs (pp 1). A mixture-of-experts model is also served as dp attention ranks of tp
GPUs each with its routed experts spread over all dp × tp GPUs (ep = dp × tp: SGLang / vLLM / TensorRT-LLM
wide-EP, :mod:`roofline.specs.moe_layout`). By default the planner tries dp in :data:`DEFAULT_DP` with dp × tp up
to :data:`DEFAULT_MAX_DP_GPUS` GPUs (one to four 8-GPU nodes: the deployments of DeepSeek-V3/R1, Kimi-K2 and
Qwen3-235B the engines document run EP 8 to 32 per decode worker), keeping only layouts whose ep divides the expert
slots; ``dp_options`` replaces the list (1 keeps tp alone).
"""

from __future__ import annotations

from collections.abc import Sequence

from roofline.errors import ScenarioError
from roofline.specs.model import ModelSpec

#: Attention-DP sizes tried by default for a mixture-of-experts model (1: tp alone, experts tp-sharded).
DEFAULT_DP = (1, 2, 4, 8, 16, 32)
#: The most GPUs a default DP layout spans (dp × tp).
DEFAULT_MAX_DP_GPUS = 32


def layouts(model: ModelSpec, tps: Sequence[int], dp_options: Sequence[int] | None = None) -> list[tuple[int, int]]:
    """(tp, dp) layouts for ``model`` (module docstring), in tp order then dp order; dp > 1 only for MoE models
    and only where ep = dp × tp divides the experts (no redundant slots)."""
    if dp_options is not None:
        bad = [d for d in dp_options if isinstance(d, bool) or not isinstance(d, int) or d < 1]
        if bad or not dp_options:
            raise ScenarioError(f"dp_options must be whole numbers >= 1, e.g. [1, 2, 4, 8] (got {list(dp_options)!r})")
    moe = model.moe
    if moe is None:
        if dp_options is not None and any(d > 1 for d in dp_options):
            raise ScenarioError(
                f"dp_options={list(dp_options)} (--dp): attention data parallelism needs a mixture-of-experts model; "
                f"{model.name} is dense (its replicas are the planner's replicas): drop dp_options"
            )
        return [(int(t), 1) for t in tps]
    dps = DEFAULT_DP if dp_options is None else tuple(int(d) for d in dp_options)
    cap = DEFAULT_MAX_DP_GPUS if dp_options is None else None
    out = []
    for t in tps:
        for d in dps:
            if d == 1:
                out.append((int(t), 1))
            elif moe.num_experts % (d * t) == 0 and (cap is None or d * t <= cap):
                out.append((int(t), int(d)))
    return out
