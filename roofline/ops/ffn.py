"""Feed-forward ops: dense FFN (gated: gate+up fused, act, down; plain: up, act, down) and MoE.

MoE: M tokens each pick top_k of E experts. The expected number of distinct experts
touched is E·(1 − (1 − k/E)^M) (each expert is missed by one token with probability
1 − k/E, independently). Only touched experts' weights are read; FLOPs follow the M·k
token-expert assignments. With expert parallelism ep, each GPU holds E/ep experts and
receives M·k/ep assignments on average; without it, every expert is tp-sharded. Expert slots include the
redundant copies; with attention data parallelism the experts take every DP rank's tokens
(:func:`routed`) and the tokens travel by :func:`moe_exchange_ops`.
"""

from __future__ import annotations

import numpy as np

from roofline.ops import comm
from roofline.ops import expert_parallel as ep_phys
from roofline.ops.context import BuildContext
from roofline.ops.records import Op, elementwise, gemm
from roofline.profile_moe import layer_shape
from roofline.specs.model import ModelSpec
from roofline.specs.moe_layout import expert_slots
from roofline.specs.scenario import Scenario


def expected_distinct_experts(num_experts: int, top_k: int, tokens: np.ndarray) -> np.ndarray:
    """E·(1 − (1 − k/E)^tokens): experts touched by ``tokens`` uniformly routed tokens."""
    e = float(num_experts)
    return e * (1.0 - np.power(1.0 - top_k / e, tokens))


def routed_rows(
    num_experts: float | np.ndarray, top_k: float | np.ndarray, ep: float | np.ndarray, tokens: object
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(touched experts, token-expert assignments, rows per touched expert) on one GPU for M = ``tokens``.

    touched = (E/ep)·(1 − (1 − k/E)^M)   distinct local experts the M uniformly routed tokens hit;
    assignments = M·k/ep                  token-expert pairs one GPU computes (the FLOPs follow these);
    rows = assignments / touched          tokens per touched expert, the grouped GEMM's m.
    All three are counts (dimensionless), float64 arrays broadcast over the arguments.
    """
    M = tokens if isinstance(tokens, np.ndarray) else np.asarray(tokens, dtype=np.float64)
    local_experts = num_experts / ep
    touched = local_experts * (1.0 - np.power(1.0 - top_k / num_experts, M))
    assignments = M * top_k / ep
    rows = assignments / np.maximum(touched, 1e-12)  # tokens per touched expert (GEMM m)
    return touched, assignments, rows


def dense_ffn_ops(
    c: BuildContext,
    layer_kind: str,
    count: int,
    intermediate: float,
    kind: str,
    prefix: str = "ffn",
    group: str = "ffn",
) -> list[Op]:
    """Dense FFN sharded by tp: gated = 3 matrices (gate and up fused into one GEMM), plain = 2."""
    h, M, wb, ab, dt = c.model.hidden_size, c.tokens, c.w_bytes, c.a_bytes, c.gemm_dtype
    i = intermediate / c.tp
    up_n = 2 * i if kind == "gated" else i
    return [
        gemm(
            f"{prefix}.{'gate_up' if kind == 'gated' else 'up'}_proj", group, layer_kind, count, dt, M, up_n, h, wb, ab
        ),
        elementwise(f"{prefix}.act", group, layer_kind, count, dt, M * i, 3.0 if kind == "gated" else 2.0, ab, 4.0),
        gemm(f"{prefix}.down_proj", group, layer_kind, count, dt, M, h, i, wb, ab),
    ]


def moe_ops(c: BuildContext, layer_kind: str, count: int) -> list[Op]:
    """Router, routed experts (touched experts only), shared experts.

    Experts are gated (gate+up fused, 3 matrices) or plain (``expert_kind: mlp``, 2 matrices,
    Nemotron-H relu2). A latent MoE (Nemotron-3 ``moe_latent_size`` L) projects the tokens
    h → L before the routed experts and L → h after them (fc1/fc2_latent_proj, tp-sharded like
    the memory model holds them); the experts then run at width L instead of h.
    """
    moe = c.model.moe
    assert moe is not None
    h, M, wb, ab, dt = c.model.hidden_size, c.tokens, c.w_bytes, c.a_bytes, c.gemm_dtype
    ep, tp = c.sc.ep, c.tp
    shard = expert_shard(c.sc)
    touched, assignments, rows = routed_rows(expert_slots(c.model, c.sc.redundant_experts), moe.top_k, ep, routed(c))
    fused = fused_shared_experts(c)
    if fused:  # the shared expert is one more expert of the grouped GEMM, every token routed to it
        touched, assignments = touched + fused, assignments + fused * routed(c)
        rows = assignments / touched
    i = moe.expert_intermediate_size / shard
    w = moe.latent_size or h  # the width the routed experts run at
    gated = moe.expert_kind == "gated"
    frac = touched  # weight bytes are per expert in the gemm record, times touched experts
    rb = max(ab, 2.0)  # router weights and bias (e_score_correction_bias) stay 16-bit

    def g(name: str, m: object, n: object, k: object, w_bytes: float, frac: object = 1.0, bias: float = 0.0) -> Op:
        return gemm(name, "moe", layer_kind, count, dt, m, n, k, w_bytes, ab, frac, bias_bytes=bias)

    up = (2 if gated else 1) * i
    shape = moe_layer_shape(c.model, c.sc)
    ops = [g("moe.router", M, moe.num_experts, h, rb, bias=moe.num_experts * rb * moe.router_bias)]
    if moe.latent_size:
        ops.append(g("moe.latent_in", M, moe.latent_size / tp, h, wb))
    ops += [
        grouped_rows(
            g(f"moe.experts_{'gate_up' if gated else 'up'}", rows, up, w, wb, frac, up * wb * moe.expert_bias),
            touched,
            shape,
        ),
        elementwise("moe.experts_act", "moe", layer_kind, count, dt, assignments * i, 3.0 if gated else 2.0, ab, 4.0),
        grouped_rows(g("moe.experts_down", rows, w, i, wb, frac, w / shard * wb * moe.expert_bias), touched, shape),
    ]
    if moe.latent_size:
        norm = moe.latent_size * rb * moe.latent_norm  # Kimi-K3 RMSNorm of the latent output, read with latent_out
        ops.append(g("moe.latent_out", M, h, moe.latent_size / tp, wb, bias=norm))
    if moe.num_shared_experts and not fused:
        assert moe.shared_intermediate_size is not None
        shared = moe.num_shared_experts * moe.shared_intermediate_size
        ops += dense_ffn_ops(c, layer_kind, count, shared, moe.expert_kind, prefix="moe.shared", group="moe")
    return ops


def fused_shared_experts(c: BuildContext) -> int:
    """Shared experts the engine runs inside the routed grouped GEMM (0 or 1): the model's (architecture, routed
    experts) is in the engine's ``shared_expert_fusion``, it has one shared expert of the routed experts' width,
    kind and format, and the experts are not expert-parallel (SGLang: DeepSeek-V3/R1 and GLM-5 at ep 1). Then that
    expert adds 1 to the touched experts and M to the assignments, and its own MLP (and the add) is not launched."""
    moe, eng = c.model.moe, c.sc.engine
    if moe is None or eng is None or (c.model.architecture, moe.num_experts) not in eng.shared_expert_fusion:
        return 0
    alike = moe.shared_intermediate_size == moe.expert_intermediate_size and not moe.latent_size
    same_format = c.formats.routed_experts == c.formats.shared_experts
    return 1 if moe.num_shared_experts == 1 and alike and same_format and c.sc.ep == 1 else 0


def expert_shard(sc: Scenario) -> int:
    """GPUs one routed expert's matrices are split over: 1 with expert parallelism (ep > 1: whole experts per GPU),
    else tp × dp (tensor-parallel over every DP rank's GPUs)."""
    return 1 if sc.ep > 1 else sc.tp * sc.dp


def moe_layer_shape(model: ModelSpec, sc: Scenario) -> str:
    """The :func:`roofline.profile_moe.layer_shape` of ``model``'s routed-expert layer on one GPU of ``sc``: the
    experts' width (latent size or hidden), intermediate size / :func:`expert_shard`, expert slots / ep, top-k."""
    moe = model.moe
    assert moe is not None
    width = moe.latent_size or model.hidden_size
    inter = moe.expert_intermediate_size / expert_shard(sc)
    local = expert_slots(model, sc.redundant_experts) / sc.ep
    return layer_shape(width, inter, local, moe.top_k, moe.expert_kind == "gated")


def routed(c: BuildContext) -> np.ndarray:
    """Tokens the busiest EP rank's experts are fed as if routing were even: M without attention DP; with it,
    all DP ranks' tokens × the imbalance factor of their M·k picks over ep ranks
    (:func:`roofline.ops.expert_parallel.imbalance_factor`, ``balanced`` with redundant experts)."""
    if c.sc.dp == 1:
        return c.tokens
    moe = c.model.moe
    assert moe is not None
    mode: ep_phys.Balance = "balanced" if c.sc.redundant_experts else "uniform"
    return c.moe_tokens * ep_phys.imbalance_factor(c.moe_tokens * moe.top_k, c.sc.ep, mode)


def moe_gather_ops(c: BuildContext, layer_kind: str, count: int) -> list[Op]:
    """Attention DP with the experts tensor-parallel over all dp × tp GPUs (ep = 1): every GPU gathers every rank's
    tokens before the routed experts and the partial outputs are reduce-scattered back to their ranks after
    (SGLang ``dp_gather`` / ``dp_scatter`` around a tp-sharded MoE): two collectives of all ranks' tokens × the
    experts' width in activation bytes, each (p − 1)/p of it on the wire (p = dp × tp)."""
    moe = c.model.moe
    assert moe is not None
    p = c.sc.dp * c.tp
    msg = c.moe_tokens * (moe.latent_size or c.model.hidden_size) * c.a_bytes
    gather = comm.all_gather("comm.moe_gather", "comm", layer_kind, count, c.gemm_dtype, msg, p)
    scatter = comm.all_gather("comm.moe_scatter", "comm", layer_kind, count, c.gemm_dtype, msg, p)  # same wire
    return [gather, scatter]


def moe_exchange_ops(c: BuildContext, layer_kind: str, count: int) -> list[Op]:
    """Dispatch and combine of a wide-EP MoE layer under attention DP: two comm ops per layer.

    Each of a DP rank's tp GPUs sends 1/tp of its tokens (the attention output is reduce-scattered before the
    dispatch and all-gathered after the combine, one all-reduce's bytes in all). Prefill uses the ``normal``
    kernels, decode the ``low_latency`` ones (SGLang ``--deepep-mode auto``); the dispatch goes in the routed
    experts' input format (:func:`roofline.ops.expert_parallel.dispatch_dtype`), the combine in bf16; tokens
    travel in the experts' width (the latent width of a latent MoE)."""
    moe = c.model.moe
    assert moe is not None
    sc = c.sc
    kernel: ep_phys.ExchangeKernel = "normal" if c.phase == "prefill" else "low_latency"
    slots = expert_slots(c.model, sc.redundant_experts)
    nodes = ep_phys.exchange_nodes(c.hw, sc.ep)
    width = moe.latent_size or c.model.hidden_size
    first = ep_phys.dispatch_dtype(sc.group_compute_dtype(c.hw, c.formats.get("routed_experts")))
    overlap = "two_batch" if sc.moe_overlap == "two_batch" else ""
    ops = []
    for direction, dt in (("dispatch", first), ("combine", "bf16")):
        wire = ep_phys.exchange_bytes_per_rank(c.tokens / c.tp, width, moe.top_k, slots, sc.ep, nodes, kernel, dt)
        name = f"comm.moe_{direction}"
        ops.append(comm.expert_exchange(name, layer_kind, count, c.gemm_dtype, wire, sc.ep, kernel, direction, overlap))
    return ops


def grouped_rows(op: Op, touched: np.ndarray, shape: str = "") -> Op:
    """Turn a per-expert GEMM (rows = tokens per expert) into the grouped GEMM over touched experts.

    FLOPs and activation bytes scale with the number of touched experts; weight bytes
    already carry it (``weight_fraction``). ``m`` stays the per-expert row count, the
    shape that decides GEMM efficiency; ``shape`` is the layer's
    :func:`roofline.profile_moe.layer_shape` (a measured fraction of the profile applies to it).
    """
    fields = {**op.__dict__, "flops": op.flops * touched, "act_bytes": op.act_bytes * touched, "grouped": True}
    return Op(**{**fields, "expert_shape": shape})
