"""How a benchmark client sends requests, hand-derived: slots, release times, warm-up drained or not, ramps.

send_j = max(release_j + shift_j, the time a slot is free for j), slots taken in request order; a drained warm-up
of W requests holds request W until all W finished (roofline.serving.sim.sends).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import roofline
from roofline.errors import ScenarioError
from roofline.serving.sim.sends import ClientSends

M, HW = "llama-3.1-8b", "h100-sxm"
KW = {"prompt_len": 1024, "output_len": 64, "num_requests": 40}


def test_send_rule_by_hand() -> None:
    """Two slots, releases 0, 0.1, 0.2, 0.3: requests 0 and 1 go at their releases; 0 is back at 0.5, so 2 (released
    at 0.2) goes at 0.5, having waited for the slot; 1 is back at 0.55, so 3 goes then; nothing is left after."""
    c = ClientSends(4, 2, np.array([0.0, 0.1, 0.2, 0.3]))
    assert c.start() == [(0, 0.0), (1, 0.1)]
    assert c.freed(0.5, 0) == [(2, 0.5)]
    assert c.freed(0.55, 1) == [(3, 0.55)]
    assert c.freed(0.9, 2) == []


def test_drained_warmup_holds_the_measured_phase_until_the_last_warmup_request() -> None:
    """W = 3 warm-up requests on 2 slots (closed loop: releases 0): 0, 1 at 0; 2 when 0 is back; request 3 waits
    for all three (not for a free slot): at the drain t_d = 0.7 both slots send, 3 and 4 at 0.7."""
    c = ClientSends(6, 2, None, warmup=3, drained=True)
    assert c.start() == [(0, 0.0), (1, 0.0)]
    assert c.freed(0.3, 0) == [(2, 0.3)]
    assert c.freed(0.4, 1) == []  # a slot is free, but the warm-up has not drained
    assert c.freed(0.7, 2) == [(3, 0.7), (4, 0.7)]
    assert c.freed(0.9, 3) == [(5, 0.9)]
    undrained = ClientSends(6, 2, None, warmup=3, drained=False)
    undrained.start()
    undrained.freed(0.3, 0)
    assert undrained.freed(0.4, 1) == [(3, 0.4)]  # the measured requests follow the warm-up straight on


def _measured(r: roofline.SimulationResult) -> pd.DataFrame:
    q = r.requests
    return q[~q.warmup].reset_index(drop=True)


def test_a_drained_warmup_is_a_cold_start_for_the_measured_requests() -> None:
    """Random prompts leave nothing in the cache, and after the drain the engine is empty: the measured requests
    see exactly a cold start of C simultaneous requests (aiperf's protocol), shifted by the drain time."""
    cold = roofline.simulate(M, HW, concurrency=4, **KW)
    warm = roofline.simulate(M, HW, concurrency=4, warmup=8, **KW)
    assert len(warm.requests) == 48 and int(warm.requests.warmup.sum()) == 8
    a, b = cold.requests, _measured(warm)
    t_d = float(b.arrival_s.min())
    assert t_d > 0
    for col in ("ttft_s", "tpot_s", "e2e_s"):
        np.testing.assert_allclose(b[col].to_numpy(), a[col].to_numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(b.arrival_s - t_d, a.arrival_s, atol=1e-9)
    for key in ("ttft_mean_s", "tpot_mean_s", "itl_mean_s", "e2e_p99_s"):
        assert warm.summary[key] == pytest.approx(cold.summary[key], rel=1e-9), key


def test_warmup_requests_are_served_and_left_out_of_every_statistic() -> None:
    r = roofline.simulate(M, HW, concurrency=4, warmup=6, warmup_drained=False, prompt_len="uniform:256:2048",
                          output_len=64, num_requests=40)  # fmt: skip
    q = r.requests
    assert q.warmup.iloc[:6].all() and not q.warmup.iloc[6:].any()
    m = q[~q.warmup]
    assert r.summary["ttft_mean_s"] == pytest.approx(float(m.ttft_s.mean()), rel=1e-12)
    assert r.summary["e2e_p99_s"] == pytest.approx(float(np.percentile(m.e2e_s, 99)), rel=1e-9)
    assert m.arrival_s.min() < q.finish_s.iloc[:6].max()  # not drained: measured requests overlap the warm-up


def test_a_ramp_sends_worker_i_first_at_i_ramp_over_c() -> None:
    """4 clients started over 8 s: their first requests (0-3, slots taken in order) go at 0, 2, 4, 6 s, while
    worker 0 already sends its next ones as each comes back; the first request meets an empty engine, so its TTFT
    is that of a lone request (concurrency 1)."""
    q = roofline.simulate(M, HW, concurrency=4, ramp_s=8.0, **KW).requests
    np.testing.assert_allclose(q.arrival_s.iloc[:4], [0.0, 2.0, 4.0, 6.0])
    assert q.arrival_s.iloc[4] == pytest.approx(q.finish_s.iloc[0])  # worker 0's second request: its first is back
    alone = roofline.simulate(M, HW, concurrency=1, **KW).requests
    assert q.ttft_s.iloc[0] == pytest.approx(alone.ttft_s.iloc[0], rel=1e-12)


def test_a_cap_above_the_load_changes_nothing_and_a_binding_cap_bounds_the_requests_in_flight() -> None:
    free = roofline.simulate(M, HW, qps=2.0, **KW)
    capped = roofline.simulate(M, HW, qps=2.0, max_concurrency=16, **KW)
    pd.testing.assert_frame_equal(free.requests.drop(columns="warmup"), capped.requests.drop(columns="warmup"))
    tight = roofline.simulate(M, HW, qps=500.0, max_concurrency=3, **KW).requests
    for t in tight.arrival_s:
        in_flight = int(((tight.arrival_s <= t) & (tight.finish_s > t)).sum())
        assert in_flight <= 3
    assert (np.diff(tight.arrival_s.to_numpy()) >= 0).all()  # slots are taken in request order


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"concurrency": 4, "max_concurrency": 2}, "max_concurrency"),
        ({"qps": 2.0, "warmup": 4}, "warmup"),
        ({"qps": 2.0, "ramp_s": 1.0}, "ramp_s"),
        ({"concurrency": 4, "warmup": -1}, "warmup"),
        ({"qps": 2.0, "max_concurrency": 0}, "max_concurrency"),
        ({"qps": 2.0, "max_concurrency": 2.5}, "max_concurrency"),
        ({"concurrency": 2, "warmup": 4.0}, "warmup"),
        ({"concurrency": 2, "warmup": 10**9}, "num_requests"),
        ({"concurrency": 2, "ramp_s": 1e300}, "ramp_s"),
        ({"concurrency": 2, "ramp_s": float("nan")}, "ramp_s"),
        ({"concurrency": 2, "warmup": 2, "warmup_drained": "yes"}, "warmup_drained"),
        ({"concurrency": 2, "client": 5}, "unknown client"),
    ],
)
def test_a_protocol_the_load_cannot_run_is_refused_by_name(kw: dict[str, object], field: str) -> None:
    with pytest.raises(ScenarioError, match=field):
        roofline.simulate(M, HW, prompt_len=256, output_len=8, num_requests=10, **kw)  # type: ignore[arg-type]


def test_every_client_states_its_protocol_with_a_citation() -> None:
    from roofline.serving.workload.clients import PROTOCOL_FIELDS, clients

    tools = {k: v for k, v in clients().items() if k != "ideal"}
    assert set(tools) == {"vllm-bench", "sglang-bench", "aiperf", "genai-perf", "inference-perf"}
    for name, c in tools.items():
        assert c["load"] in ("rate", "concurrency"), name
        for field in (*PROTOCOL_FIELDS, "ttft", "tpot", "itl"):
            assert field in c, (name, field)
            assert len(str(c["sources"].get(field, ""))) > 20, (name, field)  # cited from the tool's source


def test_aiperf_without_warmup_is_the_ideal_closed_loop() -> None:
    a = roofline.simulate(M, HW, concurrency=4, client="aiperf", **KW)
    b = roofline.simulate(M, HW, concurrency=4, **KW)
    pd.testing.assert_frame_equal(a.requests, b.requests)


def test_vllm_bench_waits_for_its_ready_check_request_before_the_run() -> None:
    """vllm bench serve sends one request and awaits it before the run (its endpoint ready check): with
    --max-concurrency the simulation serves it first, alone, and counts only the run's requests."""
    r = roofline.simulate(M, HW, qps=8.0, max_concurrency=4, client="vllm-bench", **KW)
    q = r.requests
    assert len(q) == 41 and bool(q.warmup.iloc[0]) and int(q.warmup.sum()) == 1
    assert q.arrival_s.iloc[1:].min() >= q.finish_s.iloc[0]  # the run starts once the ready check is back
    assert r.summary["ttft_mean_s"] == pytest.approx(float(q.ttft_s.iloc[1:].mean()), rel=1e-12)


def test_rate_conventions_of_the_clients() -> None:
    """genai-perf's (perf_analyzer's) rate mode sends at a constant interval; vLLM's burstiness k is gamma
    arrivals of CV 1/sqrt(k) (a client file stating k = 4 gives CV 0.5); an unknown name is refused with the nearest."""
    from roofline.serving.workload import clients as cl
    from roofline.serving.workload.stream import Workload

    q = roofline.simulate(M, HW, qps=4.0, client="genai-perf", **KW).requests
    np.testing.assert_allclose(np.diff(q.arrival_s.to_numpy()), 0.25, rtol=1e-9)
    known = {**cl.clients(), "bursty": {**cl.clients()["vllm-bench"], "burstiness": 4.0, "warmup_requests": 0}}
    orig = cl.clients
    try:
        cl.clients = lambda: known  # type: ignore[assignment]
        wl = cl.with_client(Workload(qps=2.0, client="bursty"))
    finally:
        cl.clients = orig  # type: ignore[assignment]
    assert (wl.arrival, wl.arrival_cv, wl.client) == ("gamma", 0.5, None)
    with pytest.raises(ScenarioError, match="unknown client 'vllm-bnech'; did you mean vllm-bench"):
        roofline.simulate(M, HW, concurrency=2, client="vllm-bnech", **KW)


def test_the_clients_command_lists_every_protocol() -> None:
    from typer.testing import CliRunner

    from roofline.cli.app import app

    res = CliRunner().invoke(app, ["clients"])
    assert res.exit_code == 0, res.output
    names = [line.split()[0] for line in res.output.splitlines() if line.strip()]
    assert names == ["aiperf", "genai-perf", "ideal", "inference-perf", "sglang-bench", "vllm-bench"]
