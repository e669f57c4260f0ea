"""roofline.plan: hand-derived replica counts, SLO-limited batches, ranking and rejections.

Every expected number is derived from ``roofline.predict`` with the planner's formulas
(module docstring of roofline.serving.plan.planner), never read back from ``plan`` itself.
"""

from __future__ import annotations

import json
import math

import pytest

import roofline
from roofline.errors import RooflineError, ScenarioError
from roofline.profile import default_profile
from roofline.result import PredictionResult
from roofline.serving.plan.planner import PlanResult

M8, H100 = "llama-3.1-8b", "h100-sxm"


def _pred(batch: int, p: int, o: int, **kw: object) -> PredictionResult:
    # the planner uses the same engine (default vllm) and memory function as predict
    return roofline.predict(M8, H100, batch, p, o, **kw)


def test_decode_bound_memory_limited_replicas_by_hand() -> None:
    # GIVEN llama-3.1-8b bf16 on one H100 (tp=1), P = O = 512, loose SLOs (TTFT 10 s, TPOT 1 s), 50 req/s.
    # Decode dominates and the SLOs never bind, so B is the memory limit at context P+O = 1024:
    #   B = max_batch of the vllm engine at context 1024 (the one memory function: it does not depend
    #   on the batch asked for, so B itself fits).
    # Numbers from predict (default profile): t_pre = ttft(batch 1), t_dec(B) = tpot at batch B;
    #   λ_max = B / ((O−1)·t_dec + B·t_pre)
    #   replicas = ceil(50 / 19.7) = 3 → 3 GPUs; headroom = 3 × 19.7 / 50 − 1 ≈ 18 %.
    #   Little's law at λ = 50/3: ρ = λ·t_pre ≈ 0.26, N = λ·(t_pre + t_dec + 511·t_dec/(1−ρ)) ≈ 346 ≤ 438.
    p = o = 512
    b = _pred(1, p, o).max_batch
    while not _pred(b, p, o).fits:
        b -= 1
    t_pre, t_dec = _pred(1, p, o).ttft_s, _pred(b, p, o).tpot_s
    lam_max = b / ((o - 1) * t_dec + b * t_pre)
    expected = math.ceil(50 / lam_max)
    lam = 50 / expected
    assert lam * (t_pre + t_dec + (o - 1) * t_dec / (1 - lam * t_pre)) <= b  # Little's law adds no replica
    assert expected == 3

    res = roofline.plan(
        M8, qps=50, prompt_len=p, output_len=o, ttft_slo_s=10, tpot_slo_s=1, hardware=[H100], tp_options=[1]
    )
    rec = res.recommended
    assert rec is not None
    assert (rec.batch, rec.limited_by, rec.replicas, rec.gpus) == (b, "memory", expected, expected)
    assert rec.replica_rps == pytest.approx(lam_max, rel=1e-12)
    assert rec.headroom == pytest.approx(expected * lam_max / 50 - 1, rel=1e-12)
    # 3 GPUs used, rented as one 8-GPU instance (the price's source: Lambda's 8x H100 SXM instance)
    assert rec.rented_gpus(rec.replicas) == 8
    assert rec.usd_per_hour == pytest.approx(8 * 3.99)
    assert rec.usd_per_million_output_tokens == pytest.approx(8 * 3.99 / (50 * o * 3600) * 1e6)


def test_tpot_limited_batch_is_the_largest_meeting_the_slo() -> None:
    # GIVEN a TPOT SLO of 25 ms: at full load TPOT_eff(B) = t_dec(B) + B·t_pre/(O−1) grows with B,
    # so the chosen B meets it and B+1 does not.
    p, o, slo = 1024, 256, 0.025
    res = roofline.plan(
        M8, qps=10, prompt_len=p, output_len=o, ttft_slo_s=1, tpot_slo_s=slo, hardware=[H100], tp_options=[1]
    )
    rec = res.recommended
    assert rec is not None and rec.limited_by == "tpot_slo"
    t_pre = _pred(1, p, o).ttft_s

    def tpot_full(b: int) -> float:
        return float(_pred(b, p, o).tpot_s + b * t_pre / (o - 1))

    assert tpot_full(rec.batch) <= slo < tpot_full(rec.batch + 1)
    assert rec.tpot_full_load_s == pytest.approx(tpot_full(rec.batch), rel=1e-12)
    assert rec.tpot_s <= rec.tpot_full_load_s  # at the planned load the prefill share is smaller


def test_little_law_adds_a_replica_at_exact_capacity() -> None:
    # At λ = λ_max a replica holds N = B + λ·TTFT_eff > B requests, so qps = λ_max needs 2 replicas.
    base = roofline.plan(
        M8, qps=1, prompt_len=512, output_len=128, ttft_slo_s=10, tpot_slo_s=1, hardware=[H100], tp_options=[1]
    ).recommended
    assert base is not None
    res = roofline.plan(
        M8,
        qps=base.replica_rps * (1 - 1e-9),
        prompt_len=512,
        output_len=128,
        ttft_slo_s=10,
        tpot_slo_s=1,
        hardware=[H100],
        tp_options=[1],
    )
    assert res.recommended is not None and res.recommended.replicas == 2


def test_ranking_by_cost_and_price_override() -> None:
    kw = dict(qps=20, prompt_len=2048, output_len=256, ttft_slo_s=0.5, tpot_slo_s=0.05)
    res = roofline.plan("llama-3.1-70b", hardware=["h100-sxm", "a100-80gb-sxm"], **kw)
    ok = [c for c in res.candidates if c.feasible]
    costs = [c.usd_per_hour for c in ok]
    assert costs == sorted(costs) and res.recommended is ok[0]
    assert all(not c.feasible for c in res.candidates[len(ok) :])
    cheap = roofline.plan("llama-3.1-70b", hardware=["h100-sxm", "a100-80gb-sxm"], prices={"a100-80gb-sxm": 0.01}, **kw)
    assert cheap.recommended is not None and cheap.recommended.hardware == "a100-80gb-sxm"
    assert cheap.recommended.usd_per_gpu_hour == 0.01


def test_rejections_carry_reasons() -> None:
    res = roofline.plan(
        "llama-3.1-70b",
        qps=20,
        prompt_len=2048,
        output_len=256,
        ttft_slo_s=0.5,
        tpot_slo_s=0.05,
        hardware=["h100-sxm", "a100-80gb-sxm"],
        precisions=["bf16", "fp8"],
        max_gpus=40,
    )
    by = {(c.hardware, c.precision, c.tp): c for c in res.candidates}
    assert "does not fit: short by" in by["h100-sxm", "bf16", 1].reason
    assert "tp=2" in by["h100-sxm", "bf16", 1].reason
    assert "no published fp8" in by["a100-80gb-sxm", "fp8", 4].reason
    assert "misses the SLO at batch 1" in by["a100-80gb-sxm", "bf16", 2].reason
    over = [c for c in res.candidates if "max_gpus" in c.reason]
    assert over and all(c.gpus > 40 for c in over)
    assert all(c.gpus <= 40 for c in res.candidates if c.feasible)


def test_no_feasible_candidate_names_the_closest() -> None:
    res = roofline.plan(M8, qps=5, prompt_len=2048, output_len=128, ttft_slo_s=0.5, tpot_slo_s=0.001, hardware=[H100])
    assert res.recommended is None
    msg = res.explain_infeasible()
    assert "Closest: h100-sxm tp=" in msg and "TPOT" in msg and "over by" in msg


def test_fits_nowhere() -> None:
    res = roofline.plan(
        "llama-3.1-405b",
        qps=1,
        prompt_len=1024,
        output_len=128,
        ttft_slo_s=5,
        tpot_slo_s=1,
        hardware=["l4"],
        tp_options=[1],
    )
    assert res.recommended is None
    assert "does not fit" in res.explain_infeasible()
    assert res.candidates[0].missing_bytes > 700e9


def test_outputs_are_json_and_frames() -> None:
    res = roofline.plan(
        M8, qps=10, prompt_len=1024, output_len=128, ttft_slo_s=1, tpot_slo_s=0.05, hardware=[H100, "l4"]
    )
    assert isinstance(res, PlanResult)
    doc = json.loads(json.dumps(res.to_dict(), allow_nan=False))
    assert doc["recommended"]["hardware"] == res.candidates[0].hardware
    df = res.to_frame()
    assert len(df) == len(res.candidates) and {"replicas", "gpus", "usd_per_hour", "reason"} <= set(df.columns)


@pytest.mark.parametrize(
    "kw", [{"qps": 0}, {"qps": -1}, {"output_len": 1}, {"ttft_slo_s": 0}, {"tpot_slo_s": -0.1}, {"max_gpus": 0}]
)
def test_bad_requests(kw: dict[str, float]) -> None:
    args = dict(qps=1.0, prompt_len=128, output_len=64, ttft_slo_s=1.0, tpot_slo_s=0.1) | kw
    with pytest.raises(ScenarioError):
        roofline.plan(M8, hardware=[H100], **args)


def test_unknown_names_raise() -> None:
    with pytest.raises(RooflineError, match="did you mean"):
        roofline.plan(M8, qps=1, prompt_len=128, output_len=64, ttft_slo_s=1, tpot_slo_s=0.1, hardware=["h100-sx"])
    with pytest.raises(RooflineError, match="unknown hardware"):
        roofline.plan(
            M8,
            qps=1,
            prompt_len=128,
            output_len=64,
            ttft_slo_s=1,
            tpot_slo_s=0.1,
            hardware=[H100],
            prices={"nope": 1.0},
        )


def test_min_headroom_adds_replicas_until_it_holds() -> None:
    """GIVEN a plan sized to the load alone (replicas r0, λ_max per replica) WHEN a minimum headroom h is
    asked THEN replicas = max(r0, ceil(qps·(1 + h)/λ_max)) and headroom ≥ h; 'error' uses the model's
    80 % throughput error bound (the candidate's error_margin), so the candidate is no longer within it."""
    kw = {
        "qps": 22,
        "prompt_len": 2048,
        "output_len": 256,
        "ttft_slo_s": 0.5,
        "tpot_slo_s": 0.05,
        "hardware": ["h200-sxm"],
        "tp_options": [4],
        "calibration": default_profile(),  # the headroom rule under the profile its numbers were derived with
    }
    base = roofline.plan("llama-3.1-70b", **kw).recommended
    assert base is not None and base.within_error  # 10 % headroom inside the ±16 % error
    for h in (0.3, "error"):
        c = roofline.plan("llama-3.1-70b", min_headroom=h, **kw).recommended
        assert c is not None
        need = base.error_margin if h == "error" else h
        assert c.replicas == max(base.replicas, math.ceil(22 * (1 + need) / base.replica_rps))
        assert c.headroom >= need - 1e-12 and not c.within_error
    with pytest.raises(ScenarioError, match="min_headroom"):
        roofline.plan("llama-3.1-70b", min_headroom=-0.1, **kw)
