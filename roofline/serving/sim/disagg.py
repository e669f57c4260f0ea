"""Prefill/decode disaggregation in the serving simulator: two pools and the KV transfer between them.

A request (open loop: Poisson/gamma/constant arrivals or a trace) goes to prefill instance
i mod P (round-robin, ASSUMED; routers may balance by load), whose engine runs only its prefill
(output 1 token; the prefill pool's engine, tp and hardware). Its prompt KV then moves to decode
instance j mod D, j its rank in prefill-completion order, over the link between the pools:

* bytes: per GPU, the KV that one sender GPU holds of the P prompt tokens at the prefill tp, and one
  receiver GPU at the decode tp (``kv_bytes_per_sequence_per_gpu``; MLA latents, replicated across tp,
  count on every GPU); every GPU sends/receives its share on its own link, so the transfer takes
  latency + max(send, receive bytes per GPU) / link bandwidth per GPU;
* contention: each prefill instance's send side and each decode instance's receive side carry one
  transfer at a time, FIFO in order of prefill completion (start = max(ready, sender free, receiver
  free)); concurrent transfers thus queue rather than share.

The decode instance then admits the request with its P prompt tokens already cached: one step
computes the first token's KV (a 1-token chunk after P cached ones) and emits token 2; decode steps
follow as in :class:`~roofline.serving.sim.engine.EngineSim`. A preempted request recomputes locally.
``first_token = prefill``: token 1 reaches the client when the prefill finishes, so the transfer
lands in the first inter-token gap; ``decode``: token 1 is returned with the KV, when the transfer ends,
so the transfer lands in TTFT. Prefill KV blocks are released when the prefill completes (the
sender's copy during the transfer is not held against its pool: ASSUMED).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from roofline.engine.config import latency_basis, output_lag_s
from roofline.memory import kv_bytes_per_sequence_per_gpu
from roofline.serving.replica import Deployment, Replica
from roofline.serving.sim.engine import EngineSim
from roofline.serving.sim.lifecycle import Req
from roofline.serving.sim.metrics import GapHistogram, hist_stats, stats
from roofline.serving.sim.result import SimulationResult
from roofline.serving.sim.runstats import TIMELINE_COLUMNS
from roofline.serving.workload.stream import Requests, Workload
from roofline.specs.disagg import DEFAULT_LINK_BYTES_PER_S, DisaggConfig


class DecodeSideSim(EngineSim):
    """An engine whose requests arrive with ``pre[i]`` prompt tokens already in their KV cache (transferred)."""

    def __init__(self, *args: Any, pre: np.ndarray, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.pre = [int(x) for x in pre]

    def _head_cost(self, r: Req, budget: int) -> tuple[int, int, int, int] | None:
        pre = self.pre[r.rid]
        if not pre:
            return super()._head_cost(r, budget)
        new = r.target - pre
        if not self.chunked and new > budget:
            return None
        c = new if new < budget else budget
        if c < new and len(self.prefilling) >= self.max_partial:
            return None
        bs = self.bs
        fresh = -(-(r.prompt + r.output) // bs) if self.pol.reserve_full else -(-(pre + c) // bs)
        return 0, 0, c, fresh

    def _admit_waiting(self, chunks: list[tuple[Req, int]], left: int) -> int:
        n0 = len(chunks)
        left = super()._admit_waiting(chunks, left)
        for r, _ in chunks[n0:]:
            pre = self.pre[r.rid]
            if pre:
                r.computed = pre
                r.cached = pre
        return left

    def _preempt(self, r: Req) -> None:
        self.pre[r.rid] = 0  # the transferred KV is dropped; the request recomputes prompt + generated tokens
        super()._preempt(r)


def transfer_seconds(bytes_send: np.ndarray, bytes_recv: np.ndarray, link_bytes_per_s: float) -> np.ndarray:
    """Link-busy seconds of each transfer: max(send, receive bytes per GPU) / per-GPU bandwidth (latency apart)."""
    return np.maximum(bytes_send, bytes_recv) / link_bytes_per_s


def schedule_transfers(
    ready: np.ndarray, busy: np.ndarray, src: np.ndarray, n_dst: int, n_src: int, latency_s: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, destination) of each transfer, FIFO in ready order on each sender and receiver.

    Destination = rank in ready order mod n_dst; start = max(ready, sender free, receiver free);
    the link is busy for ``busy`` seconds; the KV lands ``latency_s`` after that.
    """
    order = np.argsort(ready, kind="stable")
    start, end = np.empty_like(ready), np.empty_like(ready)
    dst = np.empty(len(ready), dtype=np.int64)
    send_free, recv_free = [0.0] * n_src, [0.0] * n_dst
    for rank, i in enumerate(order):
        d, s = rank % n_dst, int(src[i])
        t0 = max(float(ready[i]), send_free[s], recv_free[d])
        t1 = t0 + float(busy[i])
        send_free[s] = recv_free[d] = t1
        start[i], end[i], dst[i] = t0, t1 + latency_s, d
    return start, end, dst


def run_disagg(
    dep: Deployment,
    cfg: DisaggConfig,
    wl: Workload,
    req: Requests,
    prefill_overrides: Mapping[str, object] | None = None,
    decode_overrides: Mapping[str, object] | None = None,
) -> SimulationResult:
    """Serve the drawn requests ``req`` of ``wl`` on a prefill pool and a decode pool (see the module docstring;
    ``roofline.simulate(..., disagg=cfg)``): open loop as drawn, or a closed loop of ``req.slots`` clients
    (:func:`roofline.serving.sim.disagg_loop.closed_loop`).

    ``dep``'s engine overrides, formats and calibration apply to both pools; ``prefill_overrides`` /
    ``decode_overrides`` apply to one pool's engine over the shared overrides (deployments size the pools
    apart: e.g. a prefill engine that runs one request at a time, ``max_num_seqs`` 1, and a decode engine whose
    token budget is its batch).
    """
    pre, dec_pool = cfg.prefill, cfg.decode
    rp = dep.pool(pre, prefill_overrides, "prefill_overrides").replica(req.prompt_mean, req.output_mean)
    rd = dep.pool(dec_pool, decode_overrides, "decode_overrides").replica(req.prompt_mean, req.output_mean)
    link = cfg.link_bytes_per_s or rd.hardware.scale_out_bandwidth_per_direction_bytes_per_s or DEFAULT_LINK_BYTES_PER_S
    t_wall = time.perf_counter()
    config: dict[str, Any] = {}
    if req.send_s is not None:
        served = serve_pools(rp, rd, cfg, link, req.send_s, req.prompt, req.output)
    else:
        from roofline.serving.sim.disagg_loop import closed_loop

        served, rounds = closed_loop(partial(serve_pools, rp, rd, cfg, link), req)
        config["closed_loop_rounds"] = rounds
    arrays, dec, busy, xfer = served
    wall = time.perf_counter() - t_wall
    gpus = cfg.prefill.gpus + cfg.decode.gpus
    summary = _summary(arrays, dec, busy, xfer, gpus)
    config |= {"disagg": cfg, "ratio": cfg.ratio, "gpus": gpus, "link_bytes_per_s": link, "wall_s": wall}
    config |= {"label": f"{rp.model.name}: {cfg.label()}", "engine": rp.engine.label, "num_requests": len(req.prompt)}
    config |= {"model": rp.model.name, "seed": wl.seed, "workload": wl.describe()}
    config["evidence"] = tuple(dict.fromkeys((*rp.evidence, *rd.evidence)))
    # the prefill pool's request overhead reaches TTFT, the decode pool's output lag every token
    config["latency_basis"] = latency_basis(
        rp.engine.model_copy(update={"output_lag_steps": rd.engine.output_lag_steps})
    )
    return disagg_result(summary, config, arrays)


#: (per-request arrays, the decode pool's output, link-busy seconds and bytes per GPU of each transfer).
Served = tuple[dict[str, np.ndarray], "_DecodePool", np.ndarray, np.ndarray]


def serve_pools(
    rp: Replica,
    rd: Replica,
    cfg: DisaggConfig,
    link: float,
    send: np.ndarray,
    prompt: np.ndarray,
    output: np.ndarray,
) -> Served:
    """The requests sent at ``send`` (s; inf: never sent, left out) through the prefill pool ``rp``, the KV
    transfer over ``link`` (bytes/s per GPU) and the decode pool ``rd``: per-request times (NaN where not served)."""
    n = len(prompt)
    sent = np.isfinite(send)
    src = np.cumsum(sent) - 1  # round-robin over the prefill instances, in request order of those sent
    src = np.where(sent, src % cfg.prefill.count, -1)
    prefill_done = _prefill_pool(rp, send, prompt, src, cfg.prefill.count)
    ok = np.isfinite(prefill_done)
    p = prompt.astype(np.float64)  # KV transfers
    b_send = np.asarray(kv_bytes_per_sequence_per_gpu(rp.model, rp.scenario, p), dtype=np.float64)
    b_recv = np.asarray(kv_bytes_per_sequence_per_gpu(rd.model, rd.scenario, p), dtype=np.float64)
    busy = transfer_seconds(b_send, b_recv, link) + np.zeros(n)
    ready = np.where(ok, prefill_done, np.inf)
    t_start, t_end, dst = schedule_transfers(ready, busy, src, cfg.decode.count, cfg.prefill.count, cfg.latency_s)
    dec = _decode_pool(rd, prompt, output, t_end, np.where(ok, dst, -1), cfg.decode.count)
    first = prefill_done if cfg.first_token == "prefill" else t_end
    finish = np.where(ok & (output == 1), first, dec.finish)
    gap1 = dec.tok2 - first  # the first inter-token gap: from the first token to the decode pool's first
    for g in gap1[np.isfinite(gap1)]:
        dec.hist.add(float(g))
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(output > 1, (finish - first) / (output - 1), np.nan)
    if rd.engine.output_lag_steps:  # the decode server's output lag (each token reaches the client that late)
        lag = output_lag_s(rd.engine.output_lag_steps, np.where(output > 1, tpot, 0.0))
        first, finish = first + lag, finish + lag
    arrays = {
        "arrival_s": np.where(sent, send, np.nan),
        "prefill_done_s": prefill_done,
        "transfer_start_s": t_start,
        "transfer_end_s": t_end,
        "first_token_s": first,
        "finish_s": finish,
        "prompt_tokens": prompt,
        "output_tokens": output,
        "ttft_s": first - send,
        "tpot_s": tpot,
        "e2e_s": finish - send,
        "kv_transfer_s": t_end - prefill_done,
    }
    return arrays, dec, busy, np.maximum(b_send, b_recv) + np.zeros(n)


def _prefill_pool(rp: Replica, send: np.ndarray, prompt: np.ndarray, src: np.ndarray, count: int) -> np.ndarray:
    """Engine time at which each request's prefill completes on its instance ``src`` (output 1 token each;
    NaN if it never completes)."""
    done = np.full(len(prompt), np.nan)
    for j in range(count):
        idx = np.flatnonzero(src == j)
        if not len(idx):
            continue
        one_token = np.ones(len(idx), dtype=prompt.dtype)
        rp.check_requests(prompt[idx], one_token)
        sim = rp.engine_sim(prompt[idx], one_token, send[idx], lag_steps=0.0)  # engine time: the hand-off starts
        sim.run()
        done[idx] = np.frombuffer(sim.rec_first, dtype=np.float64)[: len(idx)]
    return done


@dataclass
class _DecodePool:
    """What the decode instances produced: token 2 and finish times per request, the gap histogram, and the
    busy-time integrals of the batch."""

    tok2: np.ndarray
    finish: np.ndarray
    hist: GapHistogram
    busy_s: float
    batch_int: float


def _decode_pool(
    rd: Replica, prompt: np.ndarray, output: np.ndarray, arrive: np.ndarray, dst: np.ndarray, count: int
) -> _DecodePool:
    """Requests arrive at decode instance ``dst`` (−1: none, the prefill failed) at ``arrive`` with their P
    prompt tokens cached and emit tokens 2 … O."""
    n = len(prompt)
    out = _DecodePool(np.full(n, np.nan), np.full(n, np.nan), GapHistogram(), 0.0, 0.0)
    for d in range(count):
        idx = np.flatnonzero((dst == d) & (output > 1))
        idx = idx[np.argsort(arrive[idx], kind="stable")]
        if not len(idx):
            continue
        sim = rd.engine_sim(
            prompt[idx] + 1,
            output[idx] - 1,
            arrive[idx],
            cls=DecodeSideSim,
            request_overhead_s=0.0,
            lag_steps=0.0,
            pre=prompt[idx],
        )
        sim.run()
        k = len(idx)
        out.tok2[idx] = np.frombuffer(sim.rec_first, dtype=np.float64)[:k]
        out.finish[idx] = np.frombuffer(sim.rec_finish, dtype=np.float64)[:k]
        out.hist.counts += sim.hist.counts
        out.hist.n += sim.hist.n
        out.hist.total_s += sim.hist.total_s
        out.busy_s += sim.busy_s
        out.batch_int += sim.batch_int
    return out


def _summary(
    arrays: dict[str, np.ndarray], dec: _DecodePool, busy: np.ndarray, xfer_bytes: np.ndarray, gpus: int
) -> dict[str, float]:
    """Summary metrics of a disaggregated run (keys as :class:`SimulationResult`'s, plus the KV transfer)."""
    finish, send, output = arrays["finish_s"], arrays["arrival_s"], arrays["output_tokens"]
    done = np.isfinite(finish)
    tpot = arrays["tpot_s"]
    duration = float(np.max(finish[done]) - np.nanmin(send)) if done.any() else float("nan")
    summary: dict[str, float] = {}
    summary |= stats("ttft", arrays["ttft_s"][done])
    summary |= stats("tpot", tpot[done & np.isfinite(tpot)])
    summary |= hist_stats(dec.hist)
    summary |= stats("e2e", arrays["e2e_s"][done])
    summary |= stats("kv_transfer", arrays["kv_transfer_s"][done])
    summary["kv_transfer_link_mean_s"] = float(np.mean(busy[done])) if done.any() else float("nan")
    summary["kv_transfer_bytes_per_gpu_mean"] = float(np.mean(xfer_bytes))
    summary["completed"] = float(done.sum())
    summary["request_throughput_rps"] = float(done.sum() / duration)
    summary["output_throughput_tok_s"] = float(output[done].sum() / duration)
    summary["output_throughput_tok_s_per_gpu"] = summary["output_throughput_tok_s"] / gpus
    summary["decode_mean_batch"] = dec.batch_int / dec.busy_s if dec.busy_s else float("nan")
    return summary


def disagg_result(summary: dict[str, float], config: dict[str, Any], arrays: dict[str, np.ndarray]) -> SimulationResult:
    """The one result type for a disaggregated run: per-request table from ``arrays``; no engine timeline (two
    pools of engines, each with its own)."""
    import pandas as pd

    timeline = pd.DataFrame({c: np.zeros(0) for c in TIMELINE_COLUMNS})
    return SimulationResult(summary, pd.DataFrame(arrays), timeline, None, config)
