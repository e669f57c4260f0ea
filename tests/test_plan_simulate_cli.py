"""``roofline plan --simulate``: the cheapest candidates re-sized on the serving simulator at the planned load.

GIVEN Llama-3.1-8B, chat lengths at 20 requests/s on one H100 with tp 1 or 2, WHEN ``plan --simulate --json``
runs, THEN each of the (at most 3) cheapest feasible candidates is re-sized: never fewer replicas than the
planner's, headroom at least the model's 80 % error bound when it meets the SLOs, and the same figures as
:func:`roofline.serving.plan.finalists.size_finalist` called directly.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import roofline
from roofline.cli.app import app
from roofline.serving.plan.finalists import size_finalist

ARGS = ["plan", "llama-3.1-8b", "--qps", "20", "--ttft-slo", "500ms", "--tpot-slo", "50ms", "-p", "1024", "-n", "256",
        "-H", "h100-sxm", "--tp", "1,2", "--precision", "checkpoint"]  # fmt: skip


def test_plan_simulate_json_matches_size_finalist() -> None:
    res = CliRunner().invoke(app, [*ARGS, "--simulate", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    sims = doc["simulated"]
    feasible = [c for c in doc["candidates"] if c["feasible"]]
    assert 1 <= len(sims) == min(3, len(feasible))
    plan = roofline.plan(
        "llama-3.1-8b",
        qps=20.0,
        prompt_len=1024,
        output_len=256,
        ttft_slo_s=0.5,
        tpot_slo_s=0.05,
        hardware=["h100-sxm"],
        tp_options=[1, 2],
    )
    for s, c in zip(sims, [c for c in plan.candidates if c.feasible], strict=False):
        assert s["label"] == c.label and s["replicas"] >= c.replicas
        if s["meets_slo"]:
            assert s["headroom"] >= s["min_headroom"] == pytest.approx(c.error_margin)
        f = size_finalist(
            "llama-3.1-8b",
            c,
            qps=20.0,
            prompt_len=1024,
            output_len=256,
            ttft_slo_s=0.5,
            tpot_slo_s=0.05,
            tdp_watts=700.0,
            curve=False,
        )
        assert s["gpus"] == f.gpus and s["ttft_s"] == pytest.approx(f.ttft_s, rel=1e-12)


def test_plan_simulate_prints_the_simulated_lines() -> None:
    res = CliRunner().invoke(app, [*ARGS, "--simulate"], terminal_width=200)
    assert res.exit_code == 0 and "simulated:" in res.stdout and "TTFT P99" in res.stdout


def test_plan_simulate_recommends_what_the_report_recommends(readme_report: object) -> None:
    """One answer: on the README main job's inputs ``plan --simulate`` recommends from its simulated check only,
    and that is the report's recommendation (same hardware, tp and GPUs)."""
    args = ["plan", "llama-3.1-70b", "--qps", "10", "-p", "1024", "-n", "256", "--ttft-slo", "p99=500ms",
            "--tpot-slo", "p90=50ms", "-H", "h100-sxm,h200-sxm,a100-80gb-sxm", "--simulate", "--json"]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    pick = json.loads(res.stdout)["recommended_simulated"]
    rec = readme_report.data.recommended.finalist  # type: ignore[attr-defined]
    assert pick["meets_slo"] and (pick["label"], pick["gpus"]) == (rec.candidate.label, rec.gpus)
    text = CliRunner().invoke(app, args[:-1], terminal_width=250).stdout
    assert (
        "closed-form pick (before simulation):" in text
        and f"recommended: {rec.replicas} × {rec.candidate.label}" in text
    )
