"""Intervals in the interfaces: plan at a confidence (SLOs at the upper bound, headroom against the
model's error, one-sided latency past the knee) and the CLI's predict / sweep / plan / accuracy output."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

import pytest
from typer.testing import CliRunner

import roofline
from roofline.cli.app import app
from roofline.published.coverage import coverage
from roofline.published.uncertainty import load_residuals

M8, H100 = "llama-3.1-8b", "h100-sxm"
runner = CliRunner()


def run(*args: str) -> Any:
    return runner.invoke(app, list(args))


def _q(regime: str, level: float) -> float:
    """Hand pooling: the ⌈(n+1)·ℓ⌉-th smallest |r| of the shipped rows tagged ``regime``."""
    rs = sorted(abs(x.r) for x in load_residuals() if regime in x.regimes)
    return rs[math.ceil((len(rs) + 1) * level) - 1]


def test_confidence_plan_holds_the_slos_at_the_upper_bound() -> None:
    """GIVEN llama-3.1-8b on one H100, P = O = 512, TPOT SLO 30 ms, confidence 0.8. The decode regime
    (memory-bound, 5 rows from 2 sources) gives q_dec; TTFT pools all rows (q_pre). THEN the plan's
    step times are the point times × e^q, the SLOs hold on those, and capacity uses them."""
    kw: dict[str, Any] = {
        "qps": 10,
        "prompt_len": 512,
        "output_len": 512,
        "ttft_slo_s": 2,
        "tpot_slo_s": 0.03,
        "hardware": [H100],
        "tp_options": [1],
    }
    c = roofline.plan(M8, confidence=0.8, **kw).recommended
    assert c is not None and c.confidence == 0.8
    pre, dec = roofline.predict(M8, H100, 1, 512, 512), roofline.predict(M8, H100, c.batch, 512, 512)
    q_pre = pre.interval_detail("ttft_s", 0.8).half_width_log
    assert q_pre == pytest.approx(sorted(abs(x.r) for x in load_residuals())[math.ceil(23 * 0.8) - 1])
    assert dec.bound_decode == "memory"
    assert c.t_prefill_s == pytest.approx(pre.ttft_s * math.exp(q_pre), rel=1e-12)
    assert c.t_decode_s == pytest.approx(dec.tpot_s * math.exp(_q("decode_memory", 0.8)), rel=1e-12)
    assert c.tpot_full_load_s == pytest.approx(c.t_decode_s + c.batch * c.t_prefill_s / 511, rel=1e-12)
    assert c.tpot_full_load_s <= 0.03 and c.t_prefill_s + c.t_decode_s <= 2
    assert c.replica_rps == pytest.approx(c.batch / (511 * c.t_decode_s + c.batch * c.t_prefill_s), rel=1e-12)
    point = roofline.plan(M8, **kw).recommended
    assert point is not None and point.gpus <= c.gpus  # sizing at the bound never needs fewer GPUs


def test_headroom_inside_the_model_error_is_marked() -> None:
    """Without a confidence, error_margin = e^(q_tput) − 1 with q_tput the 80 % throughput width
    (12 rows from 2 sources), and within_error ⇔ headroom < error_margin. A qps just below one
    replica's capacity (qps = 0.95·λ_max: headroom 1/0.95 − 1 = 5.3 %) is marked, and utilisation
    0.95 > 85 % makes latency one-sided with the knee at 0.85 × λ_max."""
    kw: dict[str, Any] = {
        "prompt_len": 512,
        "output_len": 128,
        "ttft_slo_s": 10,
        "tpot_slo_s": 1,
        "hardware": [H100],
        "tp_options": [1],
    }
    lam = roofline.plan(M8, qps=1, **kw).recommended.replica_rps  # type: ignore[union-attr]
    tight = roofline.plan(M8, qps=lam * 0.95, **kw).recommended
    assert tight is not None and tight.replicas == 1
    assert tight.error_margin == pytest.approx(math.exp(_q("throughput", 0.8)) - 1)
    assert tight.within_error and tight.headroom < tight.error_margin
    assert tight.headroom == pytest.approx(1 / 0.95 - 1)
    assert tight.latency_bound == "lower" and tight.utilisation == pytest.approx(0.95)
    assert tight.saturation_rps == pytest.approx(0.85 * lam, rel=1e-9)
    loose = roofline.plan(M8, qps=lam * 0.5, **kw).recommended
    assert loose is not None and not loose.within_error and loose.latency_bound == "point"
    assert loose.utilisation == pytest.approx(0.5)


def test_cli_predict_prints_ranges_and_json_carries_low_high() -> None:
    # prompt 1024: TTFT stays in the milliseconds (at 2048 it reaches 1 s and prints as "1 s")
    res = run("predict", "llama-3.1-70b", H100, "-b", "8", "-p", "1024", "-n", "256", "--tp", "4")
    assert res.exit_code == 0, res.output
    r = roofline.predict("llama-3.1-70b", H100, 8, 1024, 256, tp=4)
    lo, hi = r.interval("ttft_s")
    assert f"{r.ttft_s * 1e3:.3g} ms ({lo * 1e3:,.0f}–{hi * 1e3:,.0f})" in res.stdout
    assert "80 % interval" in res.stdout
    doc = json.loads(run("predict", M8, H100, "--level", "90%", "--json").stdout)
    r8 = roofline.predict(M8, H100)
    assert doc["interval_level"] == 0.9
    for name in ("ttft_s", "tpot_s", "e2e_s", "throughput_tok_s"):
        assert (doc[f"{name}_low"], doc[f"{name}_high"]) == pytest.approx(r8.interval(name, 0.9))


def test_cli_sweep_interval_columns_and_bad_level() -> None:
    res = run("sweep", M8, H100, "-b", "1,16", "--interval", "0.8")
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    r = roofline.predict(M8, H100, 16, 1024, 128)
    assert (float(rows[1]["tpot_s_low"]), float(rows[1]["tpot_s_high"])) == pytest.approx(r.interval("tpot_s"))
    assert "ttft_s_low" not in run("sweep", M8, H100).stdout
    bad = run("predict", M8, H100, "--level", "1.5")
    assert bad.exit_code == 2 and "--level" in bad.output and "Traceback" not in bad.output


def test_cli_plan_confidence_and_accuracy_coverage() -> None:
    args = ["plan", M8, "--qps", "10", "--ttft-slo", "2s", "--tpot-slo", "30ms", "-H", H100, "--tp", "1"]
    res = run(*args, "--confidence", "0.9", "--json")
    assert res.exit_code == 0, res.output
    want = roofline.plan(
        M8,
        qps=10,
        prompt_len=1024,
        output_len=128,
        ttft_slo_s=2,
        tpot_slo_s=0.03,
        hardware=[H100],
        tp_options=[1],
        confidence=0.9,
    )
    assert json.loads(res.stdout) == json.loads(json.dumps(want.to_dict()))
    table = run(*args, "--confidence", "0.9")
    assert "SLOs hold at the 90 % upper bound" in table.stdout
    cov = run("accuracy", "--coverage", "--json")
    assert cov.exit_code == 0, cov.output
    assert json.loads(cov.stdout)["coverage"] == json.loads(json.dumps(coverage(0.8)))


def test_cli_accuracy_coverage_states_the_serving_simulators_intervals() -> None:
    """`accuracy --coverage` also prints the serving simulator's interval per engine pool and its coverage with
    each model family held out, exactly what roofline.published.serving_error computes at that level."""
    from roofline.published.serving_error import serving_coverage, serving_interval

    doc = json.loads(run("accuracy", "--coverage", "--level", "0.9", "--json").stdout)
    cov = serving_coverage(0.9)
    assert [r["engine"] for r in doc["serving"]] == list(cov)
    for r in doc["serving"]:
        for fig, v in r["figures"].items():
            iv = serving_interval(f"{fig}_s", 1.0, engine=r["engine"], level=0.9)
            hit, n = cov[r["engine"]][fig]
            assert (v["low"], v["high"], v["coverage"]) == (iv.low, iv.high, hit / n)
    table = run("accuracy", "--coverage").stdout
    assert "serving simulator" in table and "×0.61–×2.40" in table  # vLLM's TTFT at 80 %
