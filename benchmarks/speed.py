"""Speed benchmark of the Python API (not a test): single predict and a 1,000,000-point sweep.

Run: ``python benchmarks/speed.py``. Prints the median of several repeats; the figures
are quoted in docs/accuracy.md (Speed).
"""

from __future__ import annotations

import statistics
import time

import roofline


def _time(fn: object, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    """Time predict (llama-3.1-70b on 4×H100) and a 100×100×100 sweep (llama-3.1-8b on H100)."""
    args = ("llama-3.1-70b", "h100-sxm")
    roofline.predict(*args, batch=8, prompt_len=2048, output_len=256, tp=4)  # warm: spec index, imports
    pred = _time(lambda: roofline.predict(*args, batch=8, prompt_len=2048, output_len=256, tp=4), 200)
    grid = {
        "batch": list(range(1, 101)),
        "prompt_len": list(range(128, 12928, 128)),
        "output_len": list(range(16, 1616, 16)),
    }
    roofline.sweep("llama-3.1-8b", "h100-sxm", batch=[1], prompt_len=[128], output_len=[16])
    sw = _time(lambda: roofline.sweep("llama-3.1-8b", "h100-sxm", **grid), 5)
    n = len(grid["batch"]) * len(grid["prompt_len"]) * len(grid["output_len"])
    print(f"predict: median {statistics.median(pred) * 1e3:.2f} ms, min {min(pred) * 1e3:.2f} ms (200 runs)")
    print(f"sweep:   {n:,} points, median {statistics.median(sw):.2f} s, min {min(sw):.2f} s (5 runs)")
    r = roofline.predict(*args, batch=8, prompt_len=2048, output_len=256, tp=4)
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
    share = statistics.median(iv) / statistics.median(pred) * 100
    print(
        f"intervals: {len(names)} headline figures, median {statistics.median(iv) * 1e3:.3f} ms "
        f"= {share:.1f} % of predict"
    )


if __name__ == "__main__":
    main()
