"""Workload mixes (roofline.serving.workload.mix): drawing, simulation, planning, the CLI and the report.

GIVEN named request classes with shares, each with its own lengths, SLOs at percentiles and prefix share, THEN
each request's class is drawn from the shares (binomial counts, deterministic for a seed), a mix of one class
simulates bit for bit as the plain workload, the planner tier sizes the mix's mean request
P̄ = Σ w_i·E[P_i], Ō = Σ w_i·E[O_i], every class is checked at its own percentile on its own requests, and the
binding class is the one whose SLO leaves the least room.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import roofline
from roofline.cli.app import app
from roofline.errors import ScenarioError
from roofline.serving.plan.finalists import size_finalist
from roofline.serving.workload.arrivals import LengthSpec
from roofline.serving.workload.mix import RequestClass, WorkloadMix
from roofline.serving.workload.mixparse import parse_mix
from roofline.serving.workload.stream import Workload

MODEL, HW = "llama-3.1-8b", "h100-sxm"


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "mix.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def test_class_draws_are_binomial_and_deterministic() -> None:
    mix = parse_mix("chat:0.6,rag:0.3,summarize:0.1")
    n = 20_000
    k = mix.draw_classes(n, seed=7)
    counts = np.bincount(k, minlength=3)
    for c, w in zip(counts, (0.6, 0.3, 0.1), strict=True):
        sd = math.sqrt(n * w * (1 - w))  # Binomial(n, w): mean n·w, sd √(n·w·(1 − w))
        assert abs(c - n * w) < 4 * sd
    assert np.array_equal(k, mix.draw_classes(n, seed=7))
    assert not np.array_equal(k, mix.draw_classes(n, seed=8))
    req = Workload(qps=5.0, mix=mix, num_requests=2000, seed=3).draw()  # lengths follow the class
    assert req.klass is not None
    for i, (p, o) in enumerate(((1024, 256), (8192, 256), (4096, 512))):
        assert set(req.prompt[req.klass == i]) == {p} and set(req.output[req.klass == i]) == {o}


def test_one_class_mix_simulates_exactly_as_the_plain_workload(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "classes:\n  only: {share: 1, prompt: 'lognormal:1024:0.5', output: 'uniform:100:300', ttft_slo: 500ms,\n"
        "         tpot_slo: p95=50ms, prefix_share: 0.3}\n",
    )
    kw = {"qps": 5.0, "num_requests": 150, "seed": 3}
    plain = roofline.simulate(
        MODEL, HW, prompt_len="lognormal:1024:0.5", output_len="uniform:100:300", prefix_share=0.3, **kw
    )
    mixed = roofline.simulate(MODEL, HW, mix=str(path), **kw)
    for col in ("arrival_s", "prompt_tokens", "output_tokens", "cached_tokens", "ttft_s", "tpot_s", "e2e_s"):
        assert np.array_equal(plain.requests[col].to_numpy(), mixed.requests[col].to_numpy(), equal_nan=True), col
    assert mixed.requests["cached_tokens"].sum() > 0  # the class's common prefix is cached
    summary = mixed.class_summary
    assert summary is not None and list(summary["class"]) == ["only"] and summary["requests"][0] == 150
    assert summary["tpot_pct"][0] == 95.0
    expect = np.percentile(mixed.requests["tpot_s"].dropna(), 95)
    assert summary["tpot_s"][0] == pytest.approx(expect)
    assert plain.class_summary is None


def test_class_prefixes_are_per_class(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "classes:\n"
        "  a: {share: 0.5, prompt: 1024, output: 16, ttft_slo: 1s, tpot_slo: 100ms, prefix_share: 0.5}\n"
        "  b: {share: 0.5, prompt: 2048, output: 16, ttft_slo: 1s, tpot_slo: 100ms}\n",
    )
    req = Workload(qps=1.0, mix=str(path), num_requests=50, seed=0).draw()
    chains = req.hashes(16, 0.0)
    assert chains is not None and req.klass is not None
    for chain, k in zip(chains, req.klass, strict=True):
        # a: round(0.5 × 1024) = 512 tokens = 32 blocks of 16; b shares nothing
        assert chain == (tuple(("sys", "a", b) for b in range(32)) if k == 0 else ())


def test_mean_lengths_and_strictest_slos_size_the_planner_tier() -> None:
    res = roofline.plan(MODEL, qps=4, mix="chat:0.6,rag:0.3,summarize:0.1", hardware=HW, tp_options=[1])
    # P̄ = 0.6·1024 + 0.3·8192 + 0.1·4096 = 3481.6; Ō = 0.6·256 + 0.3·256 + 0.1·512 = 281.6
    assert (res.prompt_len, res.output_len) == (3482, 282)
    assert (res.ttft_slo_s, res.tpot_slo_s) == (0.5, 0.05)  # chat's, the strictest
    assert res.mix is not None and res.to_dict()["mix"][1]["name"] == "rag"
    m = parse_mix("chat:0.6,rag:0.3,summarize:0.1")
    assert m.prompt_mean == pytest.approx(3481.6) and m.output_mean == pytest.approx(281.6)
    logn = WorkloadMix((RequestClass("x", 1.0, LengthSpec("lognormal", 900.0, 0.5), LengthSpec("fixed", 8.0), 1, 1),))
    assert logn.prompt_mean == 900.0  # a lognormal's parameter is its mean
    with pytest.raises(ScenarioError, match="drop prompt_len"):
        roofline.plan(MODEL, qps=4, mix="chat:1", prompt_len=100, hardware=HW)


def _class(name: str, ttft_slo_s: float) -> RequestClass:
    return RequestClass(name, 0.5, LengthSpec("fixed", 512.0), LengthSpec("fixed", 64.0), ttft_slo_s, 0.05)


def test_the_class_with_the_tight_slo_binds_and_adds_replicas() -> None:
    from roofline.published.serving_error import serving_upper_factor

    res = roofline.plan(MODEL, qps=20, prompt_len=512, output_len=64, ttft_slo_s=0.5, tpot_slo_s=0.05, hardware=HW)
    c = next(c for c in res.candidates if c.feasible and c.tp == 1)
    kw = {"qps": 20, "prompt_len": 512, "output_len": 64, "ttft_slo_s": 0.5, "tpot_slo_s": 0.05}
    kw |= {"num_requests": 400, "curve": False}
    plain = size_finalist(MODEL, c, **kw)
    same = size_finalist(MODEL, c, **kw, mix=parse_mix("chat:1"))  # chat's lengths differ: only its SLOs compare
    loose = size_finalist(MODEL, c, **kw, mix=WorkloadMix((_class("a", 0.5), _class("b", 0.5))))
    # 80 ms: one replica holds the loose SLOs, and this TTFT SLO needs a second one
    tight = size_finalist(MODEL, c, **kw, mix=WorkloadMix((_class("tight", 0.08), _class("loose", 0.5))))
    assert same.binding_class == "chat" and len(same.classes) == 1
    assert loose.replicas == plain.replicas  # the same requests and SLOs as the plain workload
    assert tight.meets_slo and tight.replicas > loose.replicas
    assert tight.binding_class == tight.ttft_class == "tight"
    k = {x.name: x for x in tight.classes}
    f_ttft = serving_upper_factor("ttft_s", 0.8, "vllm")
    assert k["tight"].ttft_threshold_s == pytest.approx(0.08 / f_ttft)  # SLO ÷ the model-error factor
    assert tight.ttft_threshold_s == k["tight"].ttft_threshold_s
    assert k["tight"].margin < k["loose"].margin
    assert k["tight"].requests + k["loose"].requests == 400 * tight.sizing_runs


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("chta:0.5,rag:0.5", "did you mean chat"),
        ("chat:0.5,rag:0", "share must be > 0"),
        ("chat:0.5,rag:-0.2", "share must be > 0"),
        ("chat:0.6,rag:0.6", "must sum to 1"),
        ("chat", "has no share"),
        ("chat:lots", "is not a number"),
        ("chat:0.5,chat:0.5", "distinct"),
    ],
)
def test_mix_string_errors_name_the_field(spec: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        parse_mix(spec)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("classes:\n  long: {share: 1, prompt: 32768, output: 512, ttft_slo: 10s}\n", "missing tpot_slo"),
        ("classes:\n  long: {share: 1, preset: rga}\n", "did you mean rag"),
        ("classes:\n  long: {share: 1, preset: rag, ttft_slo: 500}\n", "has no unit"),
        ("classes:\n  long: {share: 1, preset: rag, prefix_shar: 0.3}\n", "did you mean prefix_share"),
        ("classes:\n  long: {share: 1, preset: rag, prefix_share: 1.5}\n", "prefix_share must be in"),
        ("classes:\n  long: {share: 1, preset: rag, ttft_pct: 100}\n", "ttft_pct must be in"),
        ("classes:\n  long: {share: 1, preset: rag, prompt: 'lognormal:0:1'}\n", "prompt"),
        ("classes:\n  long: {preset: rag}\n", "share is missing"),
        ("classes:\n  long: {share: 1, preset: rag, output: 1}\n", "at least 2 tokens"),
        ("clases: {}\n", "expected a mapping with 'classes'"),
    ],
)
def test_mix_file_errors_name_the_field(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        parse_mix(_write(tmp_path, text))


def test_mix_file_with_a_long_context_tail(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "qps: 12\nclasses:\n  chat: {preset: chat, share: 0.333, prefix_share: 0.25}\n"
        "  rag: {preset: rag, share: 0.333, ttft_slo: p99=3s}\n"
        "  long: {share: 0.333, prompt: 32768, output: {dist: uniform, low: 100, high: 900}, ttft_slo: 10s,\n"
        "         tpot_slo_s: 0.08, ttft_pct: 90}\n",
    )
    m = parse_mix(path)
    assert math.fsum(c.share for c in m.classes) == pytest.approx(1.0, abs=1e-9)  # 0.999 normalised
    assert m.qps == 12 and m.names == ("chat", "rag", "long")
    rag, long = m.get("rag"), m.get("long")
    assert (rag.ttft_pct, rag.ttft_slo_s, rag.tpot_slo_s) == (99.0, 3.0, 0.06)  # the preset's TPOT kept
    assert (long.prompt.mean, long.output.mean, long.ttft_pct, long.tpot_pct) == (32768, 500, 90.0, 90.0)
    assert m.get("chat").prefix_share == 0.25


def test_cli_plan_and_report_with_a_mix(tmp_path: Path) -> None:
    base = ["plan", MODEL, "--qps", "4", "-H", HW, "--tp", "1", "--mix", "chat:0.8,summarize:0.2"]
    res = CliRunner().invoke(app, [*base, "--simulate", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert (doc["prompt_len"], doc["output_len"]) == (1638, 307)  # 0.8·1024 + 0.2·4096, 0.8·256 + 0.2·512
    sim = doc["recommended_simulated"]
    assert sim["binding_class"] in ("chat", "summarize") and [c["name"] for c in sim["classes"]] == [
        "chat",
        "summarize",
    ]
    bad = CliRunner().invoke(app, [*base, "--prompt", "2k", "--ttft-slo", "1s"])
    assert bad.exit_code == 2 and "--prompt, --ttft-slo would conflict" in bad.output
    none = CliRunner().invoke(app, ["plan", MODEL, "--qps", "4", "-H", HW])
    assert none.exit_code == 2 and "--ttft-slo and --tpot-slo" in none.output

    from roofline.report import build

    rep = build(MODEL, hardware=HW, mix="chat:0.8,summarize:0.2", qps=4, jobs=1)
    f = rep.data.recommended.finalist  # type: ignore[union-attr]
    assert f is not None and f.binding_class
    assert 'id="mix-table"' in rep.html and f'data-class="{f.binding_class}" class="best"' in rep.html
    assert "--mix chat:0.8,summarize:0.2 --qps 4" in rep.html  # the reproduce command
    with pytest.raises(ScenarioError, match="needs the total request rate"):
        build(MODEL, hardware=HW, mix="chat:1")


def test_cli_simulate_with_a_mix() -> None:
    args = ["simulate", MODEL, HW, "--qps", "5", "--mix", "chat:0.7,rag:0.3", "--num-requests", "120"]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [c["class"] for c in doc["classes"]] == ["chat", "rag"]
    assert sum(c["requests"] for c in doc["classes"]) == 120
    assert doc["classes"][1]["ttft_pct"] == 95.0  # rag's own percentile
    bad = CliRunner().invoke(app, [*args, "--prefix-share", "0.2"])
    assert bad.exit_code == 2 and "--prefix-share would conflict" in bad.output
