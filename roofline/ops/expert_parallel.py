"""Wide expert parallelism: routing, the dispatch / combine exchange, load imbalance, overlap, DP sync, bubbles.

The one home of these formulas: the op builders, the memory function and the evaluator read them.
All functions are vectorised (numpy float64, broadcast over their arguments); counts are dimensionless.

Routing is modelled as uniform: a token's top-k experts are k distinct slots drawn uniformly from the
S = experts + redundant slots, S/R of them on each of the R EP ranks (no node-limited gating, no
popularity skew; the imbalance factor below adds the per-step noise of that routing).

**Exchange kernels** (DeepEP, github.com/deepseek-ai/DeepEP ``docs/legacy.md`` "Performance", V1 kernels
measured on H800 with one CX7 400 Gb/s NIC per GPU, DeepSeek-V3 shapes, FP8 dispatch and BF16 combine):

* ``normal`` (high throughput; SGLang ``--deepep-mode auto`` uses it for prefill batches): inside one
  NVLink domain a token goes once to each destination *rank* (``tests/legacy/test_intranode.py`` counts
  ``recv_x.numel()``), at 153 GB/s dispatch / 158 GB/s combine of the H800's 200 GB/s per direction;
  across nodes once to each destination *node* over RDMA (``test_internode.py`` counts
  ``num_rdma_token_sent``, unique nodes), at 43 / 58 / 51 GB/s (dispatch) and 43 / 57 / 50 GB/s (combine)
  for EP 16 / 32 / 64 of the 50 GB/s NIC;
* ``low_latency`` (SGLang's choice for decode batches): pure RDMA, one copy per (token, expert) pair
  (``test_low_latency.py``: ``hidden + hidden/128·4 + 16`` bytes per FP8 selection, ``2·hidden`` per BF16
  one), at the RDMA bandwidths of the table below for EP 8 … 256 at 128 tokens.

Bandwidths are scaled from the H800 figures by the device's own NVLink or NIC bandwidth; EP sizes between
the measured ones are interpolated in log2(EP) and held flat beyond them.

Also here: the expert load imbalance of a routing (:func:`imbalance_factor`), the two-batch overlap rule
(:func:`overlapped_time_s`, :func:`step_hidden_s`), DP attention's wait for the slowest rank
(:func:`dp_rank_batch`, :func:`dp_sync_time_s`) (the pipeline's bubble: :func:`roofline.pipeline.bubble_fraction`).
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import NormalDist
from typing import Literal

import numpy as np

from roofline.ops.records import Op
from roofline.specs.hardware import HardwareSpec
from roofline.specs.topology import ASSUMED_SCALE_OUT_BYTES_PER_S, comm_path

ExchangeKernel = Literal["normal", "low_latency"]
ExchangeDtype = Literal["bf16", "fp8", "nvfp4"]
Balance = Literal["perfect", "uniform", "balanced"]
Overlap = Literal["none", "two_batch"]

# Bytes per hidden element on the wire. fp8: 1 B + one fp32 scale per 128 elements (DeepEP
# test_internode.py ``fp8_factor = (1 + 4 / 128) / 2`` of bf16); nvfp4: 4 bits + one E4M3 scale per 16
# (NVIDIA NVFP4 layout, as TensorRT-LLM's NVFP4 all-to-all sends it); bf16: 2 B.
EXCHANGE_BYTES_PER_ELEMENT: dict[str, float] = {"bf16": 2.0, "fp8": 1.0 + 4.0 / 128.0, "nvfp4": 0.5 + 1.0 / 16.0}
# DeepEP low-latency dispatch: 16 B of per-token metadata with each FP8 selection (test_low_latency.py).
LOW_LATENCY_META_BYTES = 16.0

# DeepEP legacy README: H800 NVLink "~160 GB/s" achievable of the 200 GB/s per direction datasheet
# (400 GB/s bidirectional); normal intranode kernels at EP 8 reach 153 (dispatch) / 158 (combine) GB/s.
H800_NVLINK_BYTES_PER_S = 200e9
NORMAL_NVLINK_BYTES_PER_S = {"dispatch": 153e9, "combine": 158e9}
# DeepEP measured with one CX7 InfiniBand 400 Gb/s NIC per GPU (~50 GB/s).
DEEPEP_NIC_BYTES_PER_S = 50e9
NORMAL_RDMA_EP = (16.0, 32.0, 64.0)
NORMAL_RDMA_BYTES_PER_S: dict[str, tuple[float, ...]] = {"dispatch": (43e9, 58e9, 51e9), "combine": (43e9, 57e9, 50e9)}
LOW_LATENCY_EP = (8.0, 16.0, 32.0, 64.0, 128.0, 256.0)
LOW_LATENCY_BYTES_PER_S: dict[str, tuple[float, ...]] = {
    "dispatch": (98e9, 63e9, 48e9, 43e9, 39e9, 39e9),
    "combine": (127e9, 74e9, 53e9, 46e9, 39e9, 40e9),
}

# assumed: EPLB places replicas from a window of past loads (vLLM EPLBConfig window_size 1000 steps,
# rearranged every 3000), so the current step keeps some imbalance; 5 % is an assumption, not a published
# measurement. It moves the expert GEMM time of every ``balanced`` (redundant_experts > 0) scenario.
EPLB_RESIDUAL_IMBALANCE = 1.05
# Blom, "Statistical Estimates and Transformed Beta-Variables" (1958): plotting position α = 3/8 for the
# expected normal order statistics.
BLOM_ALPHA = 0.375


def miss_probability(slots: object, ranks: object, top_k: object) -> np.ndarray:
    """P(a token's top-k distinct slots avoid one given rank) = C(S − S/R, k) / C(S, k)
    = Π_{i<k} (S − S/R − i) / (S − i), for S slots, S/R on each of R ranks."""
    s, r, k = (np.asarray(x, dtype=np.float64) for x in (slots, ranks, top_k))
    other = s - s / r
    p = np.ones(np.broadcast_shapes(s.shape, r.shape, k.shape))
    for i in range(int(np.max(k))):
        term = np.clip((other - i) / (s - i), 0.0, 1.0)
        p = p * np.where(i < k, term, 1.0)
    return p


def distinct_ranks(slots: object, ranks: object, top_k: object) -> np.ndarray:
    """Expected distinct ranks one token's top-k experts land on: R·(1 − C(S − S/R, k)/C(S, k)).

    S = 256 experts on R = 8 ranks, k = 8: R·(1 − Π_{i<8} (224 − i)/(256 − i)) = 8·(1 − 0.3374) = 5.30."""
    return np.asarray(ranks, dtype=np.float64) * (1.0 - miss_probability(slots, ranks, top_k))


def remote_ranks(slots: object, ranks: object, top_k: object) -> np.ndarray:
    """Expected distinct *other* ranks a token reaches: (R − 1)·(1 − C(S − S/R, k)/C(S, k)) (each other rank is
    hit with the same probability); the remote share of its destinations is (R − 1)/R."""
    return (np.asarray(ranks, dtype=np.float64) - 1.0) * (1.0 - miss_probability(slots, ranks, top_k))


def exchange_bytes_per_rank(
    tokens_per_rank: object,
    hidden: float,
    top_k: int,
    slots: int,
    ranks: int,
    nodes: int,
    kernel: ExchangeKernel,
    dtype: ExchangeDtype,
) -> np.ndarray:
    """Bytes one EP rank sends in one dispatch (or receives back in one combine) for T = ``tokens_per_rank``.

    normal, one node:     T · R·(1 − C(S − S/R, k)/C(S, k)) · h · b     (once per destination rank)
    normal, N > 1 nodes:  T · N·(1 − C(S − S/N, k)/C(S, k)) · h · b     (once per destination node, RDMA)
    low_latency:          T · k · (h · b + 16 B for an fp8 dispatch)    (once per selected expert)
    b = :data:`EXCHANGE_BYTES_PER_ELEMENT` [dtype]. Local destinations count, as DeepEP's logical bandwidth does.
    """
    t = np.asarray(tokens_per_rank, dtype=np.float64)
    b = EXCHANGE_BYTES_PER_ELEMENT[dtype]
    if kernel == "low_latency":
        meta = LOW_LATENCY_META_BYTES if dtype == "fp8" else 0.0
        return t * top_k * (hidden * b + meta)
    groups = nodes if nodes > 1 else ranks
    return t * distinct_ranks(slots, groups, top_k) * hidden * b


def exchange_bandwidth_bytes_per_s(
    hw: HardwareSpec, kernel: ExchangeKernel, direction: Literal["dispatch", "combine"], ranks: int
) -> float:
    """Per-rank bandwidth of a DeepEP-style exchange over ``ranks`` GPUs of ``hw`` (module doc).

    normal inside the scale-up domain: measured H800 figure × (device per-direction fabric / 200 GB/s);
    normal across domains and low_latency: the table at log2(ranks) × (device NIC / 50 GB/s)."""
    path = comm_path(hw, ranks)
    nic = hw.scale_out_bandwidth_per_direction_bytes_per_s or ASSUMED_SCALE_OUT_BYTES_PER_S
    x = np.log2(max(ranks, 1))
    if kernel == "low_latency":
        table = LOW_LATENCY_BYTES_PER_S[direction]
        return float(np.interp(x, np.log2(LOW_LATENCY_EP), table)) * nic / DEEPEP_NIC_BYTES_PER_S
    if path.scale_up:
        scale = path.bandwidth_bytes_per_s / H800_NVLINK_BYTES_PER_S
        return NORMAL_NVLINK_BYTES_PER_S[direction] * scale
    table = NORMAL_RDMA_BYTES_PER_S[direction]
    return float(np.interp(x, np.log2(NORMAL_RDMA_EP), table)) * nic / DEEPEP_NIC_BYTES_PER_S


def exchange_nodes(hw: HardwareSpec, ranks: int) -> int:
    """Scale-up domains (nodes) an EP group of ``ranks`` GPUs spans (1 when it fits one)."""
    return comm_path(hw, ranks).nodes if ranks > 1 else 1


def dispatch_dtype(expert_compute_dtype: str) -> ExchangeDtype:
    """Format the dispatch sends in: the routed experts' GEMM input format. FP8 experts take FP8 tokens (DeepEP
    FP8 dispatch as DeepSeek-V3 serves), FP4 experts NVFP4 tokens (TensorRT-LLM NVFP4 all-to-all), else bf16.
    Combine always returns bf16 (DeepEP BF16 combine)."""
    return {"fp8": "fp8", "fp4": "nvfp4"}.get(expert_compute_dtype, "bf16")  # type: ignore[return-value]


def expected_max_standard_normal(count: object) -> np.ndarray:
    """E[max of R independent N(0, 1)] by Blom's (1958) order-statistic approximation Φ⁻¹((R − α)/(R − 2α + 1))
    with α = :data:`BLOM_ALPHA`: 0 at R = 1, 0.589 at R = 2 (exact 0.564), 1.434 at R = 8 (exact 1.424)."""
    r = np.asarray(count, dtype=np.float64)
    inv = np.vectorize(NormalDist().inv_cdf, otypes=[np.float64])
    return inv((r - BLOM_ALPHA) / (r - 2.0 * BLOM_ALPHA + 1.0))


def imbalance_factor(picks: object, ranks: object, mode: Balance = "uniform") -> np.ndarray:
    """E[max rank load] / mean rank load for N = ``picks`` token-expert picks (T·k) routed over R ranks.

    perfect:  1.
    uniform:  multinomial routing: each rank's load ~ Binomial(N, 1/R), mean μ = N/R, σ = √(N/R·(1 − 1/R));
              the busiest of R by the normal approximation μ + σ·z_R (z_R = :func:`expected_max_standard_normal`):
              factor = 1 + z_R·√((R − 1)/N), clipped to [1, R] (no rank holds more than all N).
              Exactly 1 at R = 1; grows with R; → 1 as N → ∞. N = 800, R = 8: 1 + 1.4342·√(7/800) = 1.1342.
              Within 5 % of a multinomial Monte Carlo from N/R = 8 up (tests/test_moe_parallel.py); it runs
              ~10 % low at N/R ≈ 2 (decode on very wide EP), where the loads are too discrete for the normal.
    balanced: EPLB with redundant experts: min(uniform, :data:`EPLB_RESIDUAL_IMBALANCE`).
    """
    n, r = np.asarray(picks, dtype=np.float64), np.asarray(ranks, dtype=np.float64)
    if mode == "perfect":
        return np.ones(np.broadcast_shapes(n.shape, r.shape))
    noise = expected_max_standard_normal(r) * np.sqrt((r - 1.0) / np.maximum(n, 1e-300))
    factor = np.clip(1.0 + noise, 1.0, np.maximum(r, 1.0))
    if mode == "balanced":
        return np.minimum(factor, EPLB_RESIDUAL_IMBALANCE)
    return factor


def overlapped_time_s(compute_s: object, comm_s: object, mode: Overlap) -> np.ndarray:
    """Time of a layer's compute and its exchange: two_batch = compute + comm − min(compute, comm)
    (two micro-batches alternate, one computes while the other's tokens travel, hiding min(compute, comm));
    none (single batch) = compute + comm."""
    c, m = np.asarray(compute_s, dtype=np.float64), np.asarray(comm_s, dtype=np.float64)
    return c + m - hidden_s(c, m, mode)


def hidden_s(compute_s: object, comm_s: object, mode: Overlap) -> np.ndarray:
    """Seconds the overlap rule hides: min(compute, comm) under two_batch, 0 under none."""
    c, m = np.asarray(compute_s, dtype=np.float64), np.asarray(comm_s, dtype=np.float64)
    return np.minimum(c, m) if mode == "two_batch" else 0.0 * (c + m)


def dp_rank_batch(batch: object, dp: int) -> np.ndarray:
    """Sequences on the busiest of ``dp`` attention-DP ranks for a batch split as evenly as it goes: ⌈B/dp⌉."""
    return np.ceil(np.asarray(batch, dtype=np.float64) / dp)


def dp_sync_time_s(rank_times_s: object, axis: int = -1) -> np.ndarray:
    """Time of one MoE step's attention under DP attention: the slowest rank's (max over ranks).

    Every EP rank must enter the dispatch together, so the ranks wait for the busiest one: SGLang
    (``python/sglang/srt/layers/dp_attention.py`` ``DpPaddingMode``) pads every DP rank's tokens to the largest
    rank's count (MAX_LEN) in decode when that is cheaper than SUM_LEN, and always packs the sum (SUM_LEN)
    for prefill batches; TensorRT-LLM (``tensorrt_llm/_torch/pyexecutor/py_executor.py``
    ``_pad_attention_dp_dummy_request``) gives an idle attention-DP rank a dummy request so it joins the
    MoE collectives. Either way the step waits for max over ranks of their attention time."""
    return np.max(np.asarray(rank_times_s, dtype=np.float64), axis=axis)


def step_hidden_s(ops: Sequence[Op], shares: Sequence[float | np.ndarray]) -> np.ndarray | None:
    """Seconds the two-batch overlap hides in one step (or in steps summed alike): for every layer kind holding
    ops marked ``overlap == "two_batch"`` (the dispatch and combine), min(Σ its other ops' time, Σ the marked
    ops' time), each term count × op time (``shares``); None when no op is marked. Over summed decode steps the
    minimum is taken of the sums (an upper bound on Σ of per-step minima where the two cross within the steps)."""
    marked = {op.layer_kind for op in ops if op.overlap == "two_batch"}
    if not marked:
        return None
    total = np.asarray(0.0)
    for lk in sorted(marked):
        compute: float | np.ndarray = 0.0
        comm: float | np.ndarray = 0.0
        for op, share in zip(ops, shares, strict=True):
            if op.layer_kind == lk and op.kind != "comm":
                compute = compute + share
            elif op.layer_kind == lk and op.overlap:
                comm = comm + share
        total = total + hidden_s(compute, comm, "two_batch")
    return total


def hide_in_split(bound_time_s: dict[str, np.ndarray], hidden: np.ndarray) -> dict[str, np.ndarray]:
    """A step's time split by bound less ``hidden`` overlapped seconds: out of the communication share, any rest
    (an exchange whose time fell in another bound) out of the overhead share."""
    by = dict(bound_time_s)
    take = np.minimum(hidden, by["communication"])
    by["communication"] = by["communication"] - take
    by["overhead"] = by["overhead"] - (hidden - take)
    return by
