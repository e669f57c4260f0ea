"""Where the collectors' ``balanced`` MoE rows really route their tokens when the engine's grouped top-k runs.

Every ``moe_perf`` row times the engine's MoE module from router logits the collector builds
(AIConfigurator ``collector/helper.py`` ``balanced_logits``): token t of M picks experts
``(t + j·s) mod E`` for j < k, s = ⌈E/k⌉ (``(t·s/M + j·s) mod E`` when M < s), a one-hot map pushed through a
softmax. Uniform routing is what :func:`roofline.ops.ffn.routed_rows` assumes, and it holds where the module
takes the top k of those logits. It does not hold where the collector builds the module with DeepSeek-V3's grouped
top-k (``n_group`` 8, ``topk_group`` 4: SGLang ``collector/cases/models/DeepseekV3ForCausalLM_cases.yaml``
``sglang_moe_num_expert_group`` / ``sglang_moe_topk_group``; vLLM ``collector/vllm/collect_moe.py``
``use_grouped_topk`` for ``deepseek_v3``; TensorRT-LLM only in its min-latency mode, not in the tables):

1. every one of the 8 groups of 32 experts holds exactly one of a token's picks, so all group scores tie and
   the kernel keeps the lowest-index groups, 0–3: every token routes inside experts 0–127;
2. inside them 4 picks score high and the other 124 tie, so the 4 remaining slots go to the lowest-index experts
   (0–3, or 0–4 when one of those is the token's own pick).

The measured rank holds the local experts 0 … E/ep − 1. So at ep 1 half the experts are touched (their rows take
half the weight bytes uniform routing streams, which read as 7–10 TB/s of "bandwidth" on H100–B200), and at ep ≥ 2
the rank computes 8 / 6 / 5 / 4.5 / 4.25 / 4 / 2 / 1 × M assignments at ep 2 / 4 / 8 / 16 / 32 / 64 / 128 / 256
where uniform routing gives 8/ep × M. The tables bear this out: on h200_sxm, 16,384 tokens, moe_tp 1, vLLM 0.24
fp8_block takes 20.3 / 14.9 / 12.1 / 10.5 / 10.0 / 9.4 / 4.9 / 2.5 ms at those ep (8.07 / 5.90 / 4.79 / 4.15 / 3.97 /
3.74 / 1.95 / 1 × the ep-256 row), and ep 1 and ep 2 time alike at every M (1,381 vs 1,397 µs at 48 tokens).

:func:`collector_routing` replays that routing (ties to the lower index, as the tables show) and gives the
measured rank's touched experts, assignments and rows per touched expert, for the fits and the comparison; rows of
other shapes, engines or distributions keep uniform routing.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd

from roofline.ops.ffn import routed_rows

#: (framework, hidden size, intermediate size, experts, top-k) → (expert groups, groups kept) the collector's
#: module routes with (module docstring); DeepSeek-V3's shape, in the engines whose collectors build it grouped.
GROUPED_ROUTING: dict[tuple[str, int, int, int, int], tuple[int, int]] = {
    ("sglang", 7168, 2048, 256, 8): (8, 4),
    ("vllm", 7168, 2048, 256, 8): (8, 4),
}


def balanced_picks(tokens: int, experts: int, top_k: int) -> np.ndarray:
    """The experts ``balanced_logits`` marks for each token, int array [tokens, top_k] (module docstring)."""
    stride = math.ceil(experts / top_k)
    t = np.arange(tokens, dtype=np.float64)[:, None]
    j = np.arange(top_k, dtype=np.float64)[None, :]
    base = t if tokens >= stride else t * stride / tokens
    return np.floor(np.mod(base + j * stride, experts)).astype(np.int64)


def grouped_top_k(picks: np.ndarray, experts: int, top_k: int, groups: int, kept: int) -> np.ndarray:
    """The experts a grouped top-k keeps for one-hot logits at ``picks`` (ties to the lower index), [tokens, top_k].

    Group score = the sum of the group's two highest logits; the ``kept`` best groups stay, and the ``top_k``
    highest logits inside them are taken. Logits are monotone in the one-hot count, so counts stand in for them."""
    n = picks.shape[0]
    marks = np.zeros((n, experts), dtype=np.int64)
    np.add.at(marks, (np.repeat(np.arange(n), picks.shape[1]), picks.ravel()), 1)
    per_group = marks.reshape(n, groups, experts // groups)
    top2 = -np.sort(-per_group, axis=2)[:, :, :2].sum(axis=2)
    chosen = np.argsort(-top2, axis=1, kind="stable")[:, :kept]
    allowed = np.zeros((n, groups), dtype=bool)
    allowed[np.arange(n)[:, None], chosen] = True
    score = np.where(np.repeat(allowed, experts // groups, axis=1), marks, -1)
    return np.argsort(-score, axis=1, kind="stable")[:, :top_k]


@functools.lru_cache(maxsize=256)
def expert_counts(tokens: int, experts: int, top_k: int, groups: int, kept: int) -> np.ndarray:
    """Token-expert assignments per expert of the collector's grouped routing of ``tokens`` (int array [E])."""
    ids = grouped_top_k(balanced_picks(tokens, experts, top_k), experts, top_k, groups, kept)
    return np.bincount(ids.ravel(), minlength=experts)


def rank_load(tokens: int, experts: int, top_k: int, ep: int, groups: int, kept: int) -> tuple[int, int]:
    """(touched local experts, token-expert assignments) of the rank holding experts 0 … E/ep − 1."""
    counts = expert_counts(tokens, experts, top_k, groups, kept)[: experts // ep]
    return int((counts > 0).sum()), int(counts.sum())


def _case_mask(engine: np.ndarray, shape: list[np.ndarray], key: tuple[str, int, int, int, int]) -> np.ndarray:
    """Rows (framework, hidden, intermediate, experts, top-k arrays) of one :data:`GROUPED_ROUTING` case."""
    hit = engine == key[0]
    for col, value in zip(shape, key[1:], strict=True):
        hit &= col == value
    return hit


def collector_routing(
    engine: str, cols: dict[str, np.ndarray], distribution: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(touched experts, assignments, rows per touched expert) of the measured rank, per row: the replayed grouped
    routing for the ``balanced`` rows of a :data:`GROUPED_ROUTING` case of ``engine``, uniform routing
    (:func:`roofline.ops.ffn.routed_rows`) for every other row.

    ``cols``: the rows' ``num_tokens``, ``hidden_size``, ``inter_size``, ``num_experts``, ``topk``,
    ``moe_ep_size`` as float arrays; ``distribution``: the rows' routing column (None: all uniform)."""
    keys = ("num_tokens", "hidden_size", "inter_size", "num_experts", "topk", "moe_ep_size")
    n_tok, h, inter, e, k, ep = (np.asarray(cols[c], dtype=np.float64) for c in keys)
    touched, assignments, rows = (np.array(a, dtype=np.float64) for a in routed_rows(e, k, ep, n_tok))
    if distribution is None:
        return touched, assignments, rows
    engines, balanced = np.full(len(n_tok), engine), np.asarray(distribution) == "balanced"
    for key, grouping in GROUPED_ROUTING.items():
        hit = balanced & _case_mask(engines, [h, inter, e, k], key)
        pairs = np.unique(np.stack([n_tok[hit], ep[hit]], axis=1), axis=0) if hit.any() else np.zeros((0, 2))
        for tokens, ranks in pairs:  # one replay per (tokens, ep) of the case, not per row
            t, a = rank_load(int(tokens), key[3], key[4], int(ranks), *grouping)
            sel = hit & (n_tok == tokens) & (ep == ranks)
            touched[sel], assignments[sel], rows[sel] = t, a, a / max(t, 1)
    return touched, assignments, rows


def grouped_case(rows: pd.DataFrame) -> np.ndarray:
    """Whether each row of a ``moe_perf`` frame is of a :data:`GROUPED_ROUTING` case (any distribution)."""
    shape = [rows[c].to_numpy(np.float64) for c in ("hidden_size", "inter_size", "num_experts", "topk")]
    engines = rows["framework"].astype(str).to_numpy()
    out = np.zeros(len(rows), dtype=bool)
    for key in GROUPED_ROUTING:
        out |= _case_mask(engines, shape, key)
    return out
