"""Do a quick CPU calibration's fitted ceilings agree with independent timings? (not a test: it compares timings)

Run: ``python benchmarks/calibrate_agreement.py [--strict]`` (about 40 s; needs torch: ``.[calibrate]``).

One quick CPU calibration (25 s budget, as ``tests/test_calibrate.py`` runs it) with independent timings before,
after and interleaved with it (after every 10th measurement), so both see the same machine load:

* bandwidth: a read-only numpy stream (``np.max``) and ``np.copyto`` over float32 arrays of max(256 MiB, 2 × the
  last-level cache) each, so they stream from memory (a 256 MiB copy on a 480 MiB-L3 host ran ~1.7× faster than
  a 1 GiB one: partly cache-served);
* compute: a one-thread fp32 1024³ ``torch.mm``, median of repeats.

Target: each fitted ceiling within the range of the independent timings widened by 1.5× (the drift between the
moments they were taken: on this shared 2-core VM 15 repetitions 4 s apart gave copy 5.9–22 GB/s and matmul
54–147 GFLOP/s; on a quiet machine they agree to ±5 %), and the bandwidth within the copy's range widened by a
further 1.5×: glibc's memcpy uses non-temporal stores beyond the cache, so a copy's reads and writes overlap
(measured interleaved on a quiet machine, 960 MiB arrays: np.copyto 20.8 GB/s read + write counted, np.max 13.8,
torch.dot 15.0, torch.mm at M = 1 14.5, torch copy_ 10.3). These checks used to be a test; a test must not
assert on elapsed time. ``--strict`` exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


class NumpyStream:
    """np.copyto and np.max over float32 arrays that stream from memory; allocated once, page faults not timed."""

    def __init__(self) -> None:
        from calibrate.measure.env import last_level_cache_bytes

        self.nbytes = max(256 * 2**20, 2 * last_level_cache_bytes())
        self.a = np.full(self.nbytes // 4, 1.0, dtype=np.float32)
        self.b = np.empty_like(self.a)
        np.copyto(self.b, self.a)

    def _median_s(self, fn: Any, reps: int) -> float:
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return float(np.median(times))

    def copy_rate(self, reps: int = 3) -> float:
        """Bytes/s of np.copyto, read + write counted."""
        return 2 * self.nbytes / self._median_s(lambda: np.copyto(self.b, self.a), reps)

    def read_rate(self, reps: int = 3) -> float:
        """Bytes/s of np.max (a read-only stream)."""
        return self.nbytes / self._median_s(self.a.max, reps)


def torch_matmul_rate(m: int = 1024, n: int = 1024, k: int = 1024, reps: int = 5) -> float:
    """FLOP/s of one-thread fp32 (m×k)·(k×n), timed directly, median of reps."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        x, w, out = torch.ones(m, k), torch.ones(n, k), torch.empty(m, n)
        torch.mm(x, w.t(), out=out)
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            torch.mm(x, w.t(), out=out)
            times.append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(old)
    return 2 * m * n * k / float(np.median(times))


def run() -> list[tuple[str, float, float, float, bool]]:
    """(name, fitted value, lowest allowed, highest allowed, within) of bandwidth vs read, vs copy, and compute."""
    from calibrate.cli import run_calibration
    from calibrate.measure.records import Record

    stream = NumpyStream()
    independent: list[tuple[float, float, float]] = []
    seen: list[str] = []

    def sample(reps: int = 3) -> None:
        independent.append((stream.copy_rate(), stream.read_rate(), torch_matmul_rate(reps=reps)))

    def interleave(rec: Record) -> None:
        seen.append(rec["key"])
        if len(seen) % 10 == 0:
            sample()

    sample(5)
    sample(5)
    with tempfile.TemporaryDirectory() as d:
        prof = run_calibration(
            device="cpu", budget_s=25, output=Path(d) / "cpu.yaml", quick=True, progress=False, on_record=interleave
        )
    sample(5)
    sample(5)
    copy, read, mm = (np.array(col) for col in zip(*independent, strict=True))
    bw, c32 = prof.memory.value, prof.compute["fp32"].value
    assert bw is not None and c32 is not None
    rows = [
        ("bandwidth vs np.max", bw, read.min() / 1.5, read.max() * 1.5),
        ("bandwidth vs np.copyto", bw, copy.min() / 2.25, copy.max() * 1.5),
        ("fp32 compute vs torch.mm", c32, mm.min() / 1.5, mm.max() * 1.5),
    ]
    return [(n, v, lo, hi, bool(lo <= v <= hi)) for n, v, lo, hi in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strict", action="store_true", help="exit 1 when a fitted ceiling is outside its range")
    a = ap.parse_args()
    rows = run()
    for name, v, lo, hi, ok in rows:
        print(f"{name:26s} fitted {v:.4g}  allowed {lo:.4g} … {hi:.4g}  {'ok' if ok else 'OUTSIDE'}")
    if a.strict and not all(r[4] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
