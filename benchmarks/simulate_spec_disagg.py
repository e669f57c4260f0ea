"""Speed of the serving simulator with speculative decoding and with disaggregation (not a test).

Run: ``python benchmarks/simulate_spec_disagg.py``. The workload of ``benchmarks/simulate.py`` (10,000
Poisson requests of Llama-3.1-8B on one H100, vLLM preset, prompt lognormal(1024, CV 0.5), output
lognormal(256, CV 0.5), 15 requests/s) with EAGLE drafting (k = 4, α = 0.8) and with n-gram drafting
(k = 4, α = 0.6), and disaggregated on one tp-1 prefill and one tp-1 decode H100. Prints the median
simulated requests/s over 3 repeats of the event loop alone and of the whole call.
Target (issue 13): >= 5,000 simulated requests/s.
"""

from __future__ import annotations

import statistics
import time

from roofline.serving.simulate import simulate

ARGS = dict(
    qps=15.0, prompt_len="lognormal:1024:0.5", output_len="lognormal:256:0.5", engine="vllm", seed=0,
)  # fmt: skip


def speed(spec: str, n: int = 10_000, repeats: int = 3) -> None:
    """Median simulated requests/s of the event loop and of the whole call."""
    simulate("llama-3.1-8b", "h100-sxm", speculative=spec, num_requests=200, **ARGS)  # warm caches
    loop, whole = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        s = simulate("llama-3.1-8b", "h100-sxm", speculative=spec, num_requests=n, **ARGS)
        whole.append(time.perf_counter() - t0)
        loop.append(s.config["wall_s"])
    sm = s.summary
    print(
        f"{spec}: {n} requests: event loop {n / statistics.median(loop):,.0f} simulated req/s; whole call "
        f"{n / statistics.median(whole):,.0f} req/s (median of {repeats}); TPOT mean {sm['tpot_mean_s'] * 1e3:.2f} "
        f"ms, ITL p50/p90/p99 {sm['itl_p50_s'] * 1e3:.2f}/{sm['itl_p90_s'] * 1e3:.2f}/{sm['itl_p99_s'] * 1e3:.2f} "
        f"ms, {sm['request_throughput_rps']:.2f} req/s"
    )


def speed_disagg(
    pools: str = "prefill=h100-sxm:tp1x1,decode=h100-sxm:tp1x1", n: int = 10_000, repeats: int = 3
) -> None:
    """Median simulated requests/s of a disaggregated run (both pools and the transfers)."""
    whole, loop = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = simulate("llama-3.1-8b", disagg=pools, num_requests=n, **ARGS)
        whole.append(time.perf_counter() - t0)
        loop.append(r.config["wall_s"])
    s = r.summary
    print(
        f"{pools}: {n} requests: pools + transfers {n / statistics.median(loop):,.0f} simulated req/s; whole call "
        f"{n / statistics.median(whole):,.0f} req/s (median of {repeats}); TTFT mean {s['ttft_mean_s'] * 1e3:.1f} "
        f"ms, TPOT mean {s['tpot_mean_s'] * 1e3:.2f} ms, KV transfer mean "
        f"{s['kv_transfer_mean_s'] * 1e3:.2f} ms"
    )


if __name__ == "__main__":
    for spec in ("eagle:k=4,alpha=0.8", "ngram:k=4,alpha=0.6"):
        speed(spec)
    speed_disagg()
