"""Communication ops between GPUs, priced on the path the collective takes.

Per GPU per direction, for a message of S bytes over p GPUs:

* ring all-reduce (NCCL): wire 2(p−1)/p·S, 2(p−1) latency hops;
* one-shot all-reduce (each GPU reads every peer's buffer and reduces): wire (p−1)·S, 1 hop;
* two-shot all-reduce (reduce-scatter + all-gather through peer memory): wire 2(p−1)/p·S, 2 hops;
* ring all-gather of an S-byte result: (p−1)/p·S, p−1 hops; all-to-all of S bytes per GPU:
  (p−1)/p·S, 1 hop (concurrent sends); pipeline hand-off: S, 1 hop.

**Small-message all-reduce.** Engines replace NCCL for small messages inside a fully connected
fabric with a custom kernel; we follow vLLM ``csrc/custom_all_reduce.cuh`` (commit
036bb685581dbedcd6cf7fc845fe87268c7d1191, ``REDUCE_CASE``): 2 GPUs always one-shot; with full
NVLink, one-shot when (p ≤ 4 and S < 512 KiB) or (p ≤ 8 and S < 256 KiB), else two-shot; only
for p in (2, 4, 6, 8) and S ≤ 8 MiB (``CustomAllreduce(max_size=8192 * 1024)`` in
``vllm/distributed/device_communicators/custom_all_reduce.py``); otherwise NCCL's ring. Used for
every engine preset (assumed for SGLang, whose kernel is vLLM's, and TensorRT-LLM, which has
its own one-shot/two-shot switch). Without full connectivity (a bridged pair beyond 2 GPUs,
the network) the ring is used.

``comm_bytes`` stores the wire bytes, ``comm_hops`` the latency hops and ``group_size`` p; the
evaluator divides by :func:`roofline.specs.topology.comm_path` bandwidth and adds the
profile's latency for the path's link kind.
"""

from __future__ import annotations

import numpy as np

from roofline.ops.records import Op, arr, f64, with_fields
from roofline.specs.hardware import ComputeDtype, HardwareSpec
from roofline.specs.topology import comm_path

KIB = 1024.0
CUSTOM_AR_MAX_BYTES = 8192 * KIB  # vLLM CustomAllreduce max_size
CUSTOM_AR_SIZES = (2, 4, 6, 8)  # vLLM REDUCE_CASE world sizes


def _comm(
    name: str,
    group: str,
    layer_kind: str,
    count: int,
    dtype: ComputeDtype,
    message: np.ndarray,
    wire: np.ndarray,
    hops: object,
    p: int,
    collective: str = "",
) -> Op:
    m = arr(message)
    return Op(
        name=name,
        group=group,
        kind="comm",
        layer_kind=layer_kind,
        count=count,
        dtype=dtype,
        m=m,
        n=arr(1.0) + 0 * m,
        k=arr(1.0) + 0 * m,
        flops=0 * m,
        comm_bytes=arr(wire) + 0 * m,
        collectives=1,
        comm_hops=arr(hops) + 0 * m,
        group_size=p,
        collective=collective,
    )


def all_reduce_wire_and_hops(hw: HardwareSpec, message_bytes: object, p: int) -> tuple[np.ndarray, np.ndarray]:
    """(wire bytes per GPU, latency hops) of the all-reduce an engine runs for ``message_bytes`` (module doc)."""
    wire, hops, _ = all_reduce_plan(hw, message_bytes, p)
    return wire, hops


def all_reduce_plan(hw: HardwareSpec, message_bytes: object, p: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(wire bytes per GPU, latency hops, 1 where the engine's custom kernel runs else 0) for ``message_bytes``."""
    s = arr(message_bytes)
    ring = 2.0 * (p - 1) / p * s
    if p <= 1:
        return 0 * s, 0 * s, 0 * s
    path = comm_path(hw, p)
    fully_connected = path.scale_up and not path.slow and p in CUSTOM_AR_SIZES
    if not fully_connected and not (p == 2 and path.scale_up):
        return ring, 2.0 * (p - 1) + 0 * s, 0 * s
    if s.ndim == 0:  # one message size: the same choice in Python booleans, the same floats selected
        x = float(s)
        small = x <= CUSTOM_AR_MAX_BYTES
        one = small and (p == 2 or (p <= 4 and x < 512 * KIB) or (p <= 8 and x < 256 * KIB))
        hop = 1.0 if one else (2.0 if small else 2.0 * (p - 1))
        return arr((p - 1) * s if one else ring), arr(hop), f64(1.0 if small else 0.0)
    custom = s <= CUSTOM_AR_MAX_BYTES
    one_shot = custom & ((p == 2) | ((p <= 4) & (s < 512 * KIB)) | ((p <= 8) & (s < 256 * KIB)))
    wire = np.where(one_shot, (p - 1) * s, ring)
    hops = np.where(one_shot, 1.0, np.where(custom, 2.0, 2.0 * (p - 1)))
    return wire, hops, custom.astype(np.float64)


def all_reduce(
    name: str,
    group: str,
    layer_kind: str,
    count: int,
    dtype: ComputeDtype,
    message_bytes: object,
    p: int,
    hw: HardwareSpec,
) -> Op:
    """All-reduce of ``message_bytes`` over p GPUs with the algorithm engines pick at that size."""
    wire, hops, custom = all_reduce_plan(hw, message_bytes, p)
    op = _comm(name, group, layer_kind, count, dtype, arr(message_bytes), wire, hops, p, "all_reduce")
    return with_fields(op, custom_collective=custom) if np.any(custom) else op


def all_gather(
    name: str, group: str, layer_kind: str, count: int, dtype: ComputeDtype, message_bytes: object, p: int
) -> Op:
    """Ring all-gather of a ``message_bytes`` result: wire bytes = (p−1)/p × message, p − 1 hops."""
    msg = arr(message_bytes)
    return _comm(name, group, layer_kind, count, dtype, msg, (p - 1) / p * msg, p - 1, p)


def all_to_all(
    name: str, group: str, layer_kind: str, count: int, dtype: ComputeDtype, message_bytes: object, p: int
) -> Op:
    """All-to-all where each GPU holds ``message_bytes``: wire bytes = (p−1)/p × message, 1 hop."""
    msg = arr(message_bytes)
    return _comm(name, group, layer_kind, count, dtype, msg, (p - 1) / p * msg, 1, p)


def send_recv(name: str, group: str, count: int, dtype: ComputeDtype, message_bytes: object, span: int) -> Op:
    """Point-to-point hand-off between pipeline stages: wire bytes = message, 1 hop.

    ``span`` is the number of GPUs the replica covers (tp × pp): the hop crosses the scale-up
    domain when the replica does.
    """
    msg = arr(message_bytes)
    return _comm(name, group, "model", count, dtype, msg, msg, 1, span)


def expert_exchange(
    name: str,
    layer_kind: str,
    count: int,
    dtype: ComputeDtype,
    wire_bytes: object,
    p: int,
    kernel: str,
    direction: str,
    overlap: str = "",
) -> Op:
    """One expert dispatch or combine over ``p`` EP ranks: ``wire_bytes`` per rank
    (:func:`roofline.ops.expert_parallel.exchange_bytes_per_rank`), 1 hop, priced at the ``kernel`` family's
    bandwidth for ``direction``; ``overlap`` = "two_batch" lets it hide behind its layer's compute."""
    wire = arr(wire_bytes)
    op = _comm(name, "comm", layer_kind, count, dtype, wire, wire, 1, p)
    return with_fields(op, exchange_kernel=kernel, exchange_direction=direction, overlap=overlap)
