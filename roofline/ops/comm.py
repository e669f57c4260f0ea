"""Communication ops between GPUs.

Ring all-reduce of S bytes over p GPUs sends 2(p−1)/p·S bytes per GPU per direction;
all-gather sends (p−1)/p·S; a pipeline hand-off sends S once; an all-to-all of S bytes
per GPU sends (p−1)/p·S. ``comm_bytes`` stores these wire bytes; the evaluator divides
by the link's per-direction bandwidth and adds one latency per collective.
"""

from __future__ import annotations

import numpy as np

from roofline.ops.records import Op, arr
from roofline.specs.hardware import ComputeDtype


def _comm(name: str, group: str, layer_kind: str, count: int, dtype: ComputeDtype, message: np.ndarray,
          wire: np.ndarray) -> Op:  # fmt: skip
    m = arr(message)
    return Op(
        name=name, group=group, kind="comm", layer_kind=layer_kind, count=count, dtype=dtype, m=m,
        n=arr(1.0) + 0 * m, k=arr(1.0) + 0 * m, flops=0 * m, comm_bytes=arr(wire) + 0 * m, collectives=1,
    )  # fmt: skip


def all_reduce(name: str, group: str, layer_kind: str, count: int, dtype: ComputeDtype, message_bytes: object,
               p: int) -> Op:  # fmt: skip
    """Ring all-reduce: wire bytes = 2(p−1)/p × message."""
    msg = arr(message_bytes)
    return _comm(name, group, layer_kind, count, dtype, msg, 2.0 * (p - 1) / p * msg)


def all_gather(name: str, group: str, layer_kind: str, count: int, dtype: ComputeDtype, message_bytes: object,
               p: int) -> Op:  # fmt: skip
    """Ring all-gather of a ``message_bytes`` result: wire bytes = (p−1)/p × message."""
    msg = arr(message_bytes)
    return _comm(name, group, layer_kind, count, dtype, msg, (p - 1) / p * msg)


def all_to_all(name: str, group: str, layer_kind: str, count: int, dtype: ComputeDtype, message_bytes: object,
               p: int) -> Op:  # fmt: skip
    """All-to-all where each GPU holds ``message_bytes``: wire bytes = (p−1)/p × message."""
    msg = arr(message_bytes)
    return _comm(name, group, layer_kind, count, dtype, msg, (p - 1) / p * msg)


def send_recv(name: str, group: str, count: int, dtype: ComputeDtype, message_bytes: object) -> Op:
    """Point-to-point hand-off between pipeline stages: wire bytes = message."""
    msg = arr(message_bytes)
    return _comm(name, group, "model", count, dtype, msg, msg)
