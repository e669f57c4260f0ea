"""Speed benchmark of the Python API (not a test): single predict and a 1,000,000-point sweep.

Run: ``python benchmarks/speed.py [--sweeps 5]``. Prints the median of several repeats next to
the targets of issue #28 (predict ≤ 2 ms warm, a 1M-point sweep ≤ 0.25 s); the figures are
quoted in docs/accuracy.md (Speed). The sweep is split into its physics (the op costs,
latencies and memory budget on the numpy grid) and the rest (building the DataFrame), timed on
the same grid. ``PYTHONPATH=OTHER_TREE python benchmarks/speed.py`` times another checkout's
package with this script.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

import roofline

PREDICT_TARGET_S = 2e-3
SWEEP_TARGET_S = 0.25
GRID = {
    "batch": list(range(1, 101)),
    "prompt_len": list(range(128, 12928, 128)),
    "output_len": list(range(16, 1616, 16)),
}


def _time(fn: Callable[[], object], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _physics() -> None:
    """What sweep() computes before it builds the frame: roofline.grid.physics (op costs, latencies, memory
    budget, bound codes) on each piece of the grid roofline.grid.chunks gives, as roofline.grid._grid_frame runs it."""
    from roofline.grid import chunks, physics
    from roofline.prediction import resolve
    from roofline.specs.scenario import make_scenario

    m, hw, prof = resolve("llama-3.1-8b", "h100-sxm", None)
    b, p, o = (np.asarray(GRID[k], dtype=np.float64) for k in ("batch", "prompt_len", "output_len"))
    bg, pg, og = b[:, None, None], p[None, :, None], o[None, None, :]
    sc = make_scenario(hw, bg, pg, og, tp=1)
    for _, _, part in chunks(sc, bg, np.broadcast_shapes(bg.shape, pg.shape, og.shape)):
        physics(m, hw, part, prof)


def _verdict(value: float, target: float) -> str:
    return f"target ≤ {target * 1e3:.0f} ms {'ok' if value <= target else 'MISSED'}"


def main() -> None:
    """Time predict (llama-3.1-70b on 4×H100) and a 100×100×100 sweep (llama-3.1-8b on H100)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=5, help="repeats of the 1M-point sweep (default 5)")
    parser.add_argument("--predicts", type=int, default=200, help="repeats of predict (default 200)")
    args = parser.parse_args()
    pargs = ("llama-3.1-70b", "h100-sxm")
    roofline.predict(*pargs, batch=8, prompt_len=2048, output_len=256, tp=4)  # warm: spec index, imports
    pred = _time(lambda: roofline.predict(*pargs, batch=8, prompt_len=2048, output_len=256, tp=4), args.predicts)
    roofline.sweep("llama-3.1-8b", "h100-sxm", batch=[1], prompt_len=[128], output_len=[16])
    sw, phys = [], []
    for _ in range(args.sweeps):  # alternate, so both see the same machine load
        sw += _time(lambda: roofline.sweep("llama-3.1-8b", "h100-sxm", **GRID), 1)
        phys += _time(_physics, 1)
    n = len(GRID["batch"]) * len(GRID["prompt_len"]) * len(GRID["output_len"])
    med_p, med_s, med_phys = statistics.median(pred), statistics.median(sw), statistics.median(phys)
    print(
        f"predict: median {med_p * 1e3:.2f} ms, min {min(pred) * 1e3:.2f} ms ({args.predicts} runs, warm)  "
        f"{_verdict(med_p, PREDICT_TARGET_S)}"
    )
    print(
        f"sweep:   {n:,} points, median {med_s:.3f} s, min {min(sw):.3f} s ({args.sweeps} runs)  "
        f"{_verdict(med_s, SWEEP_TARGET_S)}"
    )
    frame = med_s - med_phys
    print(
        f"  of which physics {med_phys:.3f} s (min {min(phys):.3f} s), frame and the rest {frame:.3f} s "
        f"({frame / med_s * 100:.0f} %)"
    )
    r = roofline.predict(*pargs, batch=8, prompt_len=2048, output_len=256, tp=4)
    names = (
        "ttft_s",
        "tpot_s",
        "tpot_first_s",
        "tpot_last_s",
        "decode_s",
        "e2e_s",
        "throughput_tok_s",
        "throughput_tok_s_per_gpu",
        "total_throughput_tok_s",
    )
    iv = _time(lambda: [r.interval(name) for name in names], 200)
    share = statistics.median(iv) / med_p * 100
    print(
        f"intervals: {len(names)} headline figures, median {statistics.median(iv) * 1e3:.3f} ms "
        f"= {share:.1f} % of predict"
    )


if __name__ == "__main__":
    main()
