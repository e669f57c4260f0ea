"""Speed and memory benchmark of the serving simulator (not a test).

Run: ``python benchmarks/simulate.py [--big]``.

1. Simulated requests per second of wall time for a 10,000-request Poisson run of Llama-3.1-8B on
   one H100 (vLLM preset: chunked prefill, 8,192-token budget), prompt lognormal(1024, CV 0.5),
   output lognormal(256, CV 0.5), at 15 requests/s (about 65 % of the sustainable rate). The
   median of 5 repeats of the event loop alone (``config["wall_s"]``) and of the whole call
   (workload generation, step-model compilation, result tables; the tables become DataFrames when read).
   Target (issue #28): >= 50,000 req/s warm.
2. The first call in a fresh process (imports done, nothing compiled or memoised yet), timed in a child
   process. Target: >= 25,000 req/s.
3. ``--big``: peak resident memory of a 1,000,000-request run (same workload), which must stay
   bounded: per-request records (~20 fields), a fixed-size ITL histogram and a timeline capped at
   200,000 rows. Target: <= 400 MiB.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

from roofline.serving.simulate import simulate

ARGS = dict(
    qps=15.0, prompt_len="lognormal:1024:0.5", output_len="lognormal:256:0.5", engine="vllm", seed=0,
)  # fmt: skip


def speed(n: int = 10_000, repeats: int = 5) -> None:
    """Median simulated requests/s of the event loop and of the whole ``simulate`` call."""
    simulate("llama-3.1-8b", "h100-sxm", num_requests=200, **ARGS)  # warm imports and spec caches
    loop, whole, cpu = [], [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        s = simulate("llama-3.1-8b", "h100-sxm", num_requests=n, **ARGS)
        whole.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        loop.append(s.config["wall_s"])
    print(
        f"{n} requests, {len(s.timeline)} events: event loop {n / statistics.median(loop):,.0f} simulated req/s; "
        f"whole call {n / statistics.median(whole):,.0f} req/s wall, {n / statistics.median(cpu):,.0f} req/s per "
        f"CPU second (median of {repeats}; one thread)"
    )
    sm = s.summary
    print(
        f"  TTFT mean {sm['ttft_mean_s'] * 1e3:.1f} ms p99 {sm['ttft_p99_s'] * 1e3:.1f} ms; TPOT mean "
        f"{sm['tpot_mean_s'] * 1e3:.2f} ms; {sm['request_throughput_rps']:.2f} req/s; mean batch "
        f"{sm['mean_batch']:.1f}"
    )


def first(n: int = 10_000, repeats: int = 3) -> None:
    """Median simulated requests/s of the first ``simulate`` call in a fresh process (imports excluded)."""
    code = (
        "import time; from roofline.serving.simulate import simulate; import roofline.serving.sim.result; "
        f"t0 = time.perf_counter(); simulate('llama-3.1-8b', 'h100-sxm', num_requests={n}, **{ARGS!r}); "
        "print(time.perf_counter() - t0)"
    )
    walls = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        walls.append(float(out))
    print(f"first call in a fresh process: {n / statistics.median(walls):,.0f} req/s wall (median of {repeats})")


def big(n: int = 1_000_000) -> None:
    """Peak RSS of a 1,000,000-request run."""
    t0 = time.perf_counter()
    s = simulate("llama-3.1-8b", "h100-sxm", num_requests=n, **ARGS)
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{n:,} requests in {dt:.1f} s ({n / dt:,.0f} req/s); timeline {len(s.timeline):,} rows; "
        f"peak RSS {peak:,.0f} MiB"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--big", action="store_true", help="also run 1,000,000 requests and report peak memory")
    a = ap.parse_args()
    speed()
    first()
    if a.big:
        big()
