"""One request path: every simulation variant runs through ``roofline.simulate`` and returns one result type.

GIVEN a workload (keywords or a typed ``Workload``) WHEN it is simulated plain, with speculative decoding or
disaggregated THEN each comes back as a ``SimulationResult`` from the same front door, the typed workload
gives exactly the keyword run, and what a variant cannot run is refused with the option named.
"""

from __future__ import annotations

import pytest

import roofline
from roofline.errors import ScenarioError
from roofline.serving.sim.result import SimulationResult
from roofline.serving.workload.stream import Workload

M70, M8, HW = "llama-3.1-70b", "llama-3.1-8b", "h100-sxm"
SMALL = dict(prompt_len=512, output_len=32, num_requests=40)


def test_speculative_and_disagg_through_the_one_front_door() -> None:
    spec = roofline.simulate(M8, HW, qps=2.0, speculative="eagle:k=3,alpha=0.7", **SMALL)
    dis = roofline.simulate(M70, disagg="prefill=h100-sxm:tp4x2,decode=h100-sxm:tp8x1", qps=2.0, **SMALL)
    plain = roofline.simulate(M8, HW, qps=2.0, **SMALL)
    for s in (spec, dis, plain):
        assert type(s) is SimulationResult
        assert len(s.requests) == SMALL["num_requests"]
        assert s.summary["ttft_mean_s"] > 0 and s.summary["tpot_mean_s"] > 0
    assert spec.config["spec_k"] == 3 and spec.config["speculative"].startswith("eagle")
    # at 2 req/s one H100 decodes lightly loaded: 1 + α + α² + α³ = 2.53 tokens a verify step cut TPOT
    assert spec.summary["tpot_mean_s"] < plain.summary["tpot_mean_s"]
    assert dis.config["gpus"] == 4 * 2 + 8 * 1
    assert dis.summary["kv_transfer_mean_s"] > 0
    assert set(dis.requests.columns) >= {"ttft_s", "tpot_s", "e2e_s", "kv_transfer_s"}
    assert dis.timeline.empty
    lo, hi = dis.interval("ttft_p99_s")
    assert lo < dis.summary["ttft_p99_s"] < hi


def test_typed_workload_is_exactly_the_keyword_run() -> None:
    wl = Workload(qps=5.0, prompt_len="lognormal:600:0.5", output_len=48, num_requests=60, seed=3)
    a = roofline.simulate(M8, HW, workload=wl)
    b = roofline.simulate(M8, HW, qps=5.0, prompt_len="lognormal:600:0.5", output_len=48, num_requests=60, seed=3)
    assert a.summary == b.summary
    assert roofline.Workload is Workload and roofline.SimulationResult is SimulationResult
    assert a.config["workload"] == b.config["workload"] == wl.describe()
    closed = Workload(concurrency=4, prompt_len=256, output_len=16, num_requests=12)
    assert closed.closed_loop and closed.draw().send_s is None
    assert len(roofline.simulate(M8, HW, workload=closed).requests) == 12


def test_seeded_replicas_run_for_every_variant() -> None:
    s = roofline.simulate(M8, HW, qps=2.0, speculative="ngram:k=4,alpha=0.5", replicas=3, **SMALL)
    reps = s.config["replica_summaries"]
    assert len(reps) == 3 and reps[0] == s.summary
    assert len({r["ttft_p99_s"] for r in reps}) > 1  # other seeds, other requests


P1 = "prefill=h100-sxm:tp1x1,decode=h100-sxm:tp1x1"
TINY = dict(num_requests=4, prompt_len=64, output_len=4)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        (dict(hardware=HW, workload=Workload(qps=1.0), qps=2.0), "workload= or as keywords"),
        (dict(hardware=HW, workload="qps=1"), "must be a roofline Workload"),
        (dict(hardware=HW, qps=1.0, speculative="eagle:k=3,alpha=0.7", disagg=P1, **TINY), "combined"),
        (dict(disagg=P1, concurrency=4, warmup=2, **TINY), "drop warmup="),
        (dict(disagg=P1, qps=1.0, tp=2, **TINY), "each pool sets its own tp"),
        (dict(hardware="a100-80gb-sxm", disagg=P1, qps=1.0, **TINY), "drop hardware="),
        (dict(qps=1.0, **TINY), "hardware is missing"),
        (dict(hardware=HW, qps=1.0, prefill_overrides={"max_num_seqs": 1}, **TINY), "give disagg= too"),
        (dict(hardware=HW, qps=1.0, speculative="eagle:k=3,alpha=0.7", prefix_share=0.5, **TINY), "prefix sharing"),
        (dict(hardware=HW, qps=1.0, prefix_share=1.5, **TINY), "prefix_share must be between 0 and 1"),
    ],
)
def test_what_a_variant_cannot_run_is_refused_by_name(kwargs: dict[str, object], named: str) -> None:
    with pytest.raises(ScenarioError, match=named):
        roofline.simulate(M8, **kwargs)  # type: ignore[arg-type]
