"""The time of a phase split by bound, summed op by op: the accumulator :mod:`roofline.costs` uses."""

from __future__ import annotations

import numpy as np

from roofline.evaluate import BOUNDS


class BoundBuckets:
    """The time of a phase split by bound (compute, memory, communication, overhead), summed op by op.

    Equal, float for float and in shape, to adding ``where(code == i, share, 0.0)`` to every bucket i:
    a bucket no point of the op lands in is left alone (adding 0.0 changes no float but −0.0, which no
    bucket holds), one every point lands in takes ``share`` whole, and each bucket is broadcast to the
    shape those additions would have given it when the split is read (:meth:`done`).
    """

    def __init__(self, overhead: object) -> None:
        self.by = [np.asarray(0.0) for _ in BOUNDS]
        self.by[3] = self.by[3] + overhead
        self.shapes = [np.shape(b) for b in self.by]

    def add(self, code: np.ndarray, share: np.ndarray) -> None:
        """Add ``share`` to the bucket of its bound code (scalar fast path)."""
        if code.ndim == 0:
            i = int(code)
            self.by[i] = self.by[i] + share
            if np.shape(share) != self.shapes[i]:
                self.shapes[i] = np.broadcast_shapes(self.shapes[i], np.shape(share))
            return
        full = np.broadcast_shapes(code.shape, np.shape(share))
        counts = np.bincount(code.ravel(), minlength=len(BOUNDS))
        for i, n in enumerate(counts[: len(BOUNDS)]):
            self.shapes[i] = np.broadcast_shapes(self.shapes[i], full)
            if n:
                self.by[i] = add_in_place(self.by[i], share if n == code.size else np.where(code == i, share, 0.0))

    def done(self) -> dict[str, np.ndarray]:
        """The buckets by bound label, each in the shape the op-by-op broadcast gives it."""
        by = [b if np.shape(b) == s else b + np.zeros(s) for b, s in zip(self.by, self.shapes, strict=True)]
        return dict(zip(BOUNDS, by, strict=True))


def add_in_place(total: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``total + x``, written into ``total`` where it is a float array with the sum's shape already.

    Only for running sums whose arrays the summing function made itself (no caller holds them);
    the floats are those of ``total + x`` either way, without a fresh grid-sized array per op."""
    if (
        isinstance(total, np.ndarray)
        and total.ndim
        and total.dtype == np.float64
        and np.result_type(total, x) == np.float64
        and total.shape == np.broadcast_shapes(total.shape, np.shape(x))
    ):
        return np.add(total, x, out=total)
    return total + x
