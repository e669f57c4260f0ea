"""Disaggregated pools under a closed loop of clients: the fixed point of sends and finishes is the closed loop."""

from __future__ import annotations

import numpy as np
import pytest

import roofline
from roofline.errors import ScenarioError
from roofline.serving.sim.disagg_loop import client_sends
from roofline.serving.simulate import simulate
from roofline.serving.workload.stream import Requests, Workload
from roofline.specs.disagg import DisaggConfig, Pool

POOLS = "prefill=h100-sxm:tp2x1,decode=h100-sxm:tp2x1"


def _requests(n: int, slots: int) -> Requests:
    ones = np.ones(n, dtype=np.int64)
    return Requests(None, ones, ones, None, 16, slots)


def test_client_sends_by_hand() -> None:
    """Two clients, latencies 1, 2, 1, 1 s: requests 0 and 1 at 0; request 0 back at 1 sends request 2 at 1;
    request 1 back at 2 and request 2 back at 1 + 1 = 2 tie, the earlier request first: request 3 at 2."""
    sends = client_sends(_requests(4, 2), np.array([1.0, 2.0, 1.0, 1.0]))
    assert sends.tolist() == [0.0, 0.0, 1.0, 2.0]
    assert client_sends(_requests(3, 1), None).tolist() == [0.0, 0.0, 0.0]  # back at once: all sent at 0
    refused = client_sends(_requests(3, 1), np.array([np.nan, 1.0, 1.0]))  # refused: its slot is free at once
    assert refused.tolist() == [0.0, 0.0, 1.0]


def _served(concurrency: int, n: int = 60) -> tuple[np.ndarray, np.ndarray, dict[str, object]]:
    wl = Workload(concurrency=concurrency, num_requests=n, prompt_len=512, output_len=32, seed=3)
    r = simulate("llama-3.1-8b", disagg=POOLS, workload=wl)
    return r.requests["arrival_s"].to_numpy(), r.requests["finish_s"].to_numpy(), r.config


def test_one_client_sends_each_request_when_the_previous_finishes() -> None:
    """concurrency 1: request j + 1 is sent exactly when request j comes back, and never two in flight."""
    send, finish, cfg = _served(1)
    assert np.all(np.isfinite(finish))
    assert np.array_equal(send[1:], finish[:-1])
    assert int(cfg["closed_loop_rounds"]) >= 2  # type: ignore[call-overload]


@pytest.mark.parametrize("clients", [4, 16])
def test_the_fixed_point_is_a_closed_loop(clients: int) -> None:
    """C clients: at most C requests in flight at any time (C while requests remain), every send after the first
    C is some earlier request's finish, and the run is deterministic."""
    send, finish, _ = _served(clients)
    assert np.all(np.isfinite(finish)) and np.all(finish > send)
    events = np.unique(np.concatenate((send, finish)))
    in_flight = np.array([np.count_nonzero((send <= t) & (finish > t)) for t in events])
    assert in_flight.max() == clients
    assert np.all(np.isin(send[clients:], finish))
    again, _, _ = _served(clients)
    assert np.array_equal(again, send)


def test_more_clients_queue_longer() -> None:
    """More clients on the same pools: a longer mean TTFT, a higher throughput (both monotone in C here)."""
    runs = []
    for c in (1, 4, 16):
        r = simulate(
            "llama-3.1-8b",
            disagg=POOLS,
            workload=Workload(concurrency=c, num_requests=80, prompt_len=512, output_len=32, seed=3),
        )
        runs.append((r.summary["ttft_mean_s"], r.summary["request_throughput_rps"]))
    assert runs[0][0] < runs[1][0] < runs[2][0]
    assert runs[0][1] < runs[1][1] < runs[2][1]


def test_closed_loop_warmup_is_refused_kindly() -> None:
    """A warm-up (or a semaphore) on disaggregated pools is refused naming the field."""
    wl = Workload(concurrency=4, num_requests=20, prompt_len=128, output_len=8, warmup=4)
    with pytest.raises(ScenarioError, match="warmup"):
        simulate("llama-3.1-8b", disagg=POOLS, workload=wl)


def test_pools_of_attention_dp_workers() -> None:
    """``tp1dp4x2``: two instances of 4 attention-DP ranks of one GPU, the experts over all 4 (ep = dp × tp); a
    closed loop on such pools runs, its decode pool prices steps as predict does (one request's TPOT)."""
    cfg = DisaggConfig.parse("prefill=h100-sxm:tp1dp4x1,decode=h100-sxm:tp1dp4x2")
    assert cfg.decode == Pool("h100-sxm", 1, 2, 4, 4) and cfg.decode.gpus == 8
    assert cfg.decode.label() == "h100-sxm:tp1dp4ep4x2"
    r = simulate("qwen3-30b-a3b", disagg=cfg, concurrency=1, prompt_len=1024, output_len=64, num_requests=2)
    p = roofline.predict("qwen3-30b-a3b", "h100-sxm", 1, 1024, 64, tp=1, dp=4, ep=4)
    assert float(r.requests["tpot_s"].iloc[0]) == pytest.approx(p.tpot_s, rel=0.05)
