"""Prefill/decode disaggregation: grammar, KV-transfer physics, where the transfer lands, contention."""

from __future__ import annotations

import numpy as np
import pytest

import roofline
from roofline.errors import RooflineError
from roofline.serving.simulate import simulate
from roofline.specs.disagg import DisaggConfig, Pool

M, HW = "llama-3.1-8b", "h100-sxm"
# Llama-3.1-8B KV per token, bf16: 2 (K, V) · 32 layers · 8 KV heads · 128 dims · 2 bytes = 131,072 B.
KV_PER_TOKEN_B = 2 * 32 * 8 * 128 * 2


def test_grammar() -> None:
    c = DisaggConfig.parse("prefill=h100-sxm:tp4x2,decode=h200-sxm:tp8,link=25GB/s,latency=1ms,first=decode")
    assert c.prefill == Pool("h100-sxm", 4, 2) and c.decode == Pool("h200-sxm", 8, 1)
    assert (c.link_bytes_per_s, c.latency_s, c.first_token, c.ratio) == (25e9, 1e-3, "decode", "2P:1D")
    assert c.prefill.gpus + c.decode.gpus == 16


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("decode=h100-sxm:tp8x1", "prefill pool is missing"),
        ("prefill=h100-sxm:4,decode=h100-sxm:tp8x1", "HW:tpTxN"),
        ("prefill=h100-sxm:tp4,decode=h100-sxm:tp8,link=fast", "link|unit|read"),
        ("prefill=h100-sxm:tp4,decode=h100-sxm:tp8,first=both", "first"),
        ("prefill=h100-sxm:tp0,decode=h100-sxm:tp8", "and the instance count must be >= 1"),
        ("prefill=h100-sxm:tp1,decode=h100-sxm:tp1,speed=2", "cannot read"),
    ],
)
def test_bad_grammar_is_explained(text: str, what: str) -> None:
    with pytest.raises(RooflineError, match=what):
        DisaggConfig.parse(text)


def test_single_request_transfer_lands_in_first_itl_or_ttft() -> None:
    """GIVEN one request (P = 1000, O = 200) on tp-1 prefill and decode instances, link 50 GB/s, latency 0.1 ms.

    KV transfer = 1000 · 131,072 B / 50 GB/s + 0.1 ms = 2.62144 ms + 0.1 ms. With the first token on the
    prefill side TTFT is the prefill alone (= the co-located simulator's TTFT) and the transfer sits in the first
    inter-token gap; on the decode side TTFT grows by exactly the transfer and E2E is unchanged.
    """
    spec = "prefill=h100-sxm:tp1x1,decode=h100-sxm:tp1x1,link=50GB/s,latency=0.1ms"
    kw = dict(qps=1.0, prompt_len=1000, output_len=200, num_requests=1, engine="vllm")
    a = simulate(M, disagg=spec + ",first=prefill", **kw)  # type: ignore[arg-type]
    b = simulate(M, disagg=spec + ",first=decode", **kw)  # type: ignore[arg-type]
    xfer = 1000 * KV_PER_TOKEN_B / 50e9 + 1e-4
    assert a.summary["kv_transfer_mean_s"] == pytest.approx(xfer, rel=1e-12)
    r = roofline.predict(M, HW, 1, 1000, 200, engine="vllm")
    plain = roofline.simulate(M, HW, engine="vllm", qps=1.0, prompt_len=1000, output_len=200, num_requests=1)
    ttft = plain.summary["ttft_mean_s"]  # the prefill step of the compiled step model
    assert a.summary["ttft_mean_s"] == pytest.approx(ttft, rel=1e-12)
    assert b.summary["ttft_mean_s"] == pytest.approx(ttft + xfer, rel=1e-12)
    assert b.summary["e2e_mean_s"] == pytest.approx(a.summary["e2e_mean_s"], rel=1e-12)
    req = a.requests.iloc[0]
    # decode side: one 1-token step after 1000 cached (token 2), then 198 decode steps (tokens 3 … 200)
    assert req["finish_s"] > req["transfer_end_s"] + 198 * r.tpot_first_s * 0.99


def test_overlapping_transfers_queue_on_the_receiver() -> None:
    """GIVEN two simultaneous requests on two prefill instances feeding one decode instance WHEN their
    prefills end together THEN the second transfer waits for the first: transfer times busy + lat and
    2·busy + lat (busy = 1000 · 131,072 B / 10 GB/s = 13.1072 ms)."""
    spec = "prefill=h100-sxm:tp1x2,decode=h100-sxm:tp1x1,link=10GB/s,latency=0.1ms"
    r = simulate(M, disagg=spec, qps=1e9, arrival="constant", prompt_len=1000, output_len=20, num_requests=2)
    busy = 1000 * KV_PER_TOKEN_B / 10e9
    x = np.sort(r.requests["kv_transfer_s"].to_numpy())
    assert x[0] == pytest.approx(busy + 1e-4, rel=1e-6)
    assert x[1] == pytest.approx(2 * busy + 1e-4, rel=1e-6)


def test_tp_shards_the_transfer() -> None:
    """KV heads shard over tp: a tp-4 → tp-8 transfer moves per GPU max(1/4, 1/8) of the KV: bytes = P·131,072/4."""
    r = simulate(
        M,
        disagg="prefill=h100-sxm:tp4x1,decode=h100-sxm:tp8x1,link=50GB/s,latency=0s",
        qps=1.0,
        prompt_len=1000,
        output_len=10,
        num_requests=1,
    )
    assert r.summary["kv_transfer_mean_s"] == pytest.approx(1000 * KV_PER_TOKEN_B / 4 / 50e9, rel=1e-12)


def test_every_request_completes_and_decode_is_free_of_prefill_interference() -> None:
    """GIVEN 2,000 Poisson requests at 15/s WHEN disaggregated 1P:1D THEN all complete and the mean TPOT is
    below co-located serving's on one GPU (no prefill chunks share decode steps)."""
    kw = dict(qps=15.0, prompt_len="lognormal:1024:0.5", output_len="lognormal:256:0.5", num_requests=2000)
    d = simulate(M, disagg="prefill=h100-sxm:tp1x1,decode=h100-sxm:tp1x1", **kw)  # type: ignore[arg-type]
    c = roofline.simulate(M, HW, **kw)  # type: ignore[arg-type]
    assert d.summary["completed"] == 2000
    assert d.summary["tpot_mean_s"] < c.summary["tpot_mean_s"]


def test_grammar_expert_parallel_pool() -> None:
    c = DisaggConfig.parse("prefill=h200-sxm:tp8ep8x2,decode=h200-sxm:tp8ep8")
    assert c.prefill == Pool("h200-sxm", 8, 2, 8) and c.decode.ep == 8 and c.decode.count == 1
    assert c.prefill.label() == "h200-sxm:tp8ep8x2"


def test_cli_simulate_disagg_matches_api() -> None:
    import json

    from typer.testing import CliRunner

    from roofline.cli.app import app

    spec = "prefill=h100-sxm:tp1x1,decode=h100-sxm:tp1x1,first=decode"
    res = CliRunner().invoke(
        app, ["simulate-disagg", M, "--disagg", spec, "--qps", "4", "-N", "40", "-p", "512", "-n", "32", "--json"]
    )
    assert res.exit_code == 0, res.output
    api = simulate(M, disagg=spec, qps=4.0, num_requests=40, prompt_len=512, output_len=32)
    doc = json.loads(res.output)
    assert doc["summary"]["ttft_mean_s"] == api.summary["ttft_mean_s"]
    assert doc["config"]["ratio"] == "1P:1D"
    table = CliRunner().invoke(app, ["simulate-disagg", M, "--disagg", spec, "--qps", "4", "-N", "10"])
    assert table.exit_code == 0 and "KV transfer (ms)" in table.output
