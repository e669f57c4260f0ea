"""Attention-DP ranks with their own schedulers and KV pools behind a load balancer (roofline.serving.sim.dpranks):
each balancer's choices by hand, every step waiting for the slowest rank, a rank's KV pool its own, conservation."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.errors import ScenarioError
from roofline.serving.replica import Deployment
from roofline.serving.sim.dpranks import DPReplicaSim
from roofline.serving.sim.steptime import StepModel
from roofline.serving.simulate import simulate

M, HW = "qwen3-30b-a3b", "h100-sxm"  # 128 experts, top-8: ranks of one GPU, wide EP


def _sim(dp: int, balance: str, prompt: list[int], output: list[int], **over: object) -> DPReplicaSim:
    """The replica simulation of these requests, all sent at t = 0 (open loop), with ``balance``."""
    dep = Deployment(M, HW, "vllm", 1, ep=dp, dp=dp, engine_overrides={"dp_load_balance": balance, **over})
    rep = dep.replica(float(np.mean(prompt)), float(np.mean(output)))
    p, o = np.asarray(prompt, np.int64), np.asarray(output, np.int64)
    sim = rep.engine_sim(p, o, np.zeros(len(p)))
    assert isinstance(sim, DPReplicaSim)
    return sim


def _dispatched(sim: DPReplicaSim) -> list[int]:
    """The rank each request was handed to, after every arrival at t = 0 reached the queue."""
    sim._admit_arrivals(0.0)
    sim._dispatch()
    where = {q.rid: k for k, rank in enumerate(sim.ranks) for q in rank.waiting}
    return [where[i] for i in range(sim.n)]


def test_round_robin_hands_request_k_to_rank_k_mod_dp() -> None:
    assert _dispatched(_sim(4, "round_robin", [100] * 8, [4] * 8)) == [0, 1, 2, 3, 0, 1, 2, 3]


def test_shortest_queue_and_waiting_weighted_count_what_the_engines_count() -> None:
    """Rank 0 runs 3 requests, rank 1 has 1 waiting: SGLang's shortest queue (running + waiting: 3 vs 1) picks rank 1,
    vLLM's score (4 × waiting + running: 3 vs 4) picks rank 0."""
    for balance, expect in (("shortest_queue", 1), ("waiting_weighted", 0)):
        sim = _sim(2, balance, [100] * 5, [4] * 5)
        sim._admit_arrivals(0.0)
        reqs = list(sim.waiting)
        sim.waiting.clear()
        sim.ranks[0].running.extend(reqs[:3])
        sim.ranks[1].waiting.append(reqs[3])
        assert sim._pick() == expect, balance


def test_fewest_tokens_balances_prompt_tokens_below_the_request_cap() -> None:
    """Prompts 1,000, 10, 10, 10 over 2 ranks (TensorRT-LLM): 0 → rank 0 (tie: the lowest), 1 → rank 1 (0 tokens
    held against rank 0's 1,000), 2 → rank 1 (1,000 vs 10 tokens; both below ⌈3/2⌉ = 2 requests), 3 → rank 0
    (rank 1 holds 2 = ⌈4/2⌉ requests: rank 0 is the only one with room)."""
    assert _dispatched(_sim(2, "fewest_tokens", [1000, 10, 10, 10], [4] * 4)) == [0, 1, 1, 0]


def test_a_step_waits_for_the_slowest_rank() -> None:
    """Rank 0 prefills a 6,000-token prompt while rank 1 decodes: the step costs finish(max of the two ranks' own GPU
    seconds + the experts at both ranks' tokens), and rank 1's row gets its token at that step's end."""
    sim = _sim(2, "round_robin", [6000, 64], [2, 50])
    sim._admit_arrivals(0.0)
    sim._dispatch()
    rank0, rank1 = sim.ranks
    rank0.waiting.rotate()  # hold the long prompt back: rank 1 prefills first, then decodes alone
    held = rank0.waiting.popleft()
    now = sim._step(0.0, [rank1])
    assert rank1.d_count == 1
    rank0.waiting.append(held)
    step = sim.dp_step
    d_span = rank1._spans()[0]
    own0 = StepModel.gpu_time(step, 0, (0.0,), [6000.0], [0.0])
    own1 = StepModel.gpu_time(step, 1, d_span)
    expect = step.finish(max(own0, own1) + step._shared_s(6000 + 1, True))
    end = sim._step(now, [rank0, rank1])
    assert end - now == pytest.approx(expect, rel=1e-12)
    assert own0 > 10 * own1  # the decoding rank waited for the prefill


def test_each_rank_holds_its_own_kv_pool() -> None:
    """Three long prompts over 2 ranks whose pools hold one request each: round robin puts the third behind the
    first on rank 0, where it starts only once the first released its blocks, though rank 1 frees its own sooner."""
    sim = _sim(2, "round_robin", [24000, 24000, 24000], [400, 20, 20], memory_fraction=0.46)
    per_rank_tokens = sim.ranks[0].pool.total * 16
    assert 24400 < per_rank_tokens < 2 * 24000  # one request's blocks fit a rank's pool, two do not
    sim.run()
    first, finish = np.frombuffer(sim.rec_first), np.frombuffer(sim.rec_finish)
    assert finish[1] < finish[0]  # rank 1's short request is long done...
    assert first[2] > finish[0]  # ...but the third waited for rank 0's pool


def test_tokens_and_blocks_are_conserved_over_the_ranks() -> None:
    """A 200-request Poisson run over 4 ranks: every request emits its output tokens, the prefills write every prompt
    token, and every rank's pool is empty at the end."""
    lengths = {"prompt_len": "lognormal:800:0.6", "output_len": "lognormal:80:0.6"}
    s = simulate(M, HW, tp=1, dp=4, ep=4, qps=30.0, num_requests=200, seed=3, **lengths)
    r = s.requests
    assert np.isfinite(r["finish_s"]).all()
    cfg = s.config
    assert cfg["generated_tokens"] == int(r["output_tokens"].sum())
    assert cfg["decode_tokens"] + cfg["prefill_completions"] == int(r["output_tokens"].sum())
    assert cfg["prefill_tokens"] >= int(r["prompt_tokens"].sum())
    assert cfg["kv_blocks_used_at_end"] == 0


def test_pooled_keeps_the_pooled_model_and_an_unknown_balancer_is_refused() -> None:
    kw = dict(tp=1, dp=2, ep=2, qps=20.0, num_requests=30, prompt_len=1024, output_len=32)
    pooled = simulate(M, HW, engine_overrides={"dp_load_balance": "pooled"}, **kw)
    ranks = simulate(M, HW, engine_overrides={"dp_load_balance": "round_robin"}, **kw)
    assert "dp_load_balance" not in str(pooled.config.get("label", ""))
    assert pooled.summary["ttft_mean_s"] != ranks.summary["ttft_mean_s"]
    with pytest.raises(ScenarioError, match="dp_load_balance"):
        simulate(M, HW, engine_overrides={"dp_load_balance": "random"}, **kw)


def test_decode_stretches_across_ranks_are_the_steps_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decode-only steps run in one go (every rank's stretch, step j the slowest rank's) give the same request
    times as stepping every rank one step at a time, to rounding (1e-9), with fewer events."""
    kw = dict(
        tp=1, dp=4, ep=4, qps=12.0, num_requests=120, prompt_len="lognormal:1500:0.5", output_len="lognormal:120:0.5"
    )
    runs = {}
    for mode in ("stretch", "steps"):
        if mode == "steps":
            monkeypatch.setattr(DPReplicaSim, "_decode_stretch", lambda self, now, active, lag: None)
        runs[mode] = simulate(M, HW, engine="sglang", seed=1, **kw)
    a, b = runs["stretch"], runs["steps"]
    for col in ("first_token_s", "finish_s"):
        assert np.allclose(a.requests[col], b.requests[col], rtol=1e-9, atol=0.0)
    assert a.summary["itl_p99_s"] == pytest.approx(b.summary["itl_p99_s"], rel=1e-9)
    assert len(a.timeline) < len(b.timeline)


def test_disaggregated_dp_pools_run_per_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    """Prefill and decode pools of attention-DP workers: both run rank by rank (the decode ranks take requests with
    their transferred KV cached, DecodeSideSim's rule), every request finishes, and the decode side's ranks did run."""
    built: list[str] = []
    real = DPReplicaSim.__init__

    def spy(self: DPReplicaSim, *a: object, **kw: object) -> None:
        real(self, *a, **kw)  # type: ignore[arg-type]
        built.append(type(self.ranks[0]).__name__)

    monkeypatch.setattr(DPReplicaSim, "__init__", spy)
    pools = "prefill=h100-sxm:tp1dp2ep2x1,decode=h100-sxm:tp1dp2ep2x1"
    s = simulate(M, disagg=pools, qps=6.0, num_requests=40, prompt_len=1024, output_len=48, seed=2)
    assert np.isfinite(s.requests["finish_s"]).all()
    assert {"RankSim", "DecodeSideSimRank"} <= set(built)


def test_the_cli_reads_a_balancer_by_name_and_refuses_others_kindly() -> None:
    from roofline.cli.options import OptionError, parse_engine_set

    assert parse_engine_set(["dp_load_balance=Round-Robin", "load_balance_method=shortest_queue"]) == {
        "dp_load_balance": "round_robin",
        "load_balance_method": "shortest_queue",
    }
    with pytest.raises(OptionError, match="not one of round_robin, shortest_queue"):
        parse_engine_set(["dp_load_balance=random"])
