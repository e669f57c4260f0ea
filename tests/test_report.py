"""The HTML report shows exactly the API's numbers, has every section, and is self-contained.

GIVEN the README example (Llama-3.1-70B, chat, H100/H200/A100) WHEN the report is built THEN
each number in the HTML (read from ``data-value`` attributes) equals ``roofline.plan`` /
``roofline.predict`` for the same inputs.
"""

from __future__ import annotations

import hashlib
import math
import re
from html.parser import HTMLParser
from typing import Any

import pytest

import roofline
from roofline.profile import datasheet_profile, default_profile
from roofline.report import build
from roofline.report.curves import replica_curve
from roofline.report.sensitivity import scale_bandwidth, scale_compute
from roofline.serving.plan.procurement import IDLE_POWER_FRACTION
from roofline.specs.library import spec_path

MODEL, HARDWARE, PROMPT, OUT = "llama-3.1-70b", ("h100-sxm", "h200-sxm", "a100-80gb-sxm"), 1024, 256
SECTIONS = ("summary", "inputs", "comparison", "charts", "sensitivity", "evidence", "reproduce")
CHARTS = ("chart-load-h100-sxm", "chart-pareto", "chart-memory", "chart-roofline")
#: Hardware that meets the chat SLOs at the upper bound of the serving simulator's 80 % interval (vLLM TTFT ×2.40):
#: the A100 misses P99 TTFT ≤ 500 ms even at 1 request/s per tp-8 replica (simulated ~224 ms → ~538 ms).
FEASIBLE = ("h100-sxm", "h200-sxm")


class Page(HTMLParser):
    """Collects tags, ids and data-key/data-value pairs with their row context."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.ids: set[str] = set()
        self.values: list[tuple[dict[str, str], str, str]] = []  # (row attrs, key, value)
        self._row: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.tags.append((tag, a))
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "tr":
            self._row = a
        if "data-key" in a:
            self.values.append((self._row if tag == "td" else {}, a["data-key"], a.get("data-value", "")))

    def value(self, key: str, **row: str) -> str:
        hits = [v for r, k, v in self.values if k == key and all(r.get(f"data-{n}") == x for n, x in row.items())]
        assert len(hits) == 1, f"{key} {row}: {hits}"
        return hits[0]


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    return page


def same(text: str, expected: Any) -> None:
    """A data-value equals the API value exactly (repr round-trip), NaN matching None/NaN."""
    if expected is None or (isinstance(expected, float) and math.isnan(expected)):
        assert text == "nan"
    else:
        assert float(text) == float(expected), (text, expected)


@pytest.fixture(scope="module")
def report(readme_report: Any) -> Any:
    """build(MODEL, hardware=",".join(HARDWARE), workload="chat", output_path="reports/llama-3.1-70b-chat.html"),
    built once per session (tests/conftest.py); its build time is measured by benchmarks/report.py."""
    return readme_report


@pytest.fixture(scope="module")
def page(report: Any) -> Page:
    return parse(report.html)


@pytest.fixture(scope="module")
def plan() -> Any:
    return roofline.plan(
        MODEL, qps=10.0, prompt_len=PROMPT, output_len=OUT, ttft_slo_s=0.5, tpot_slo_s=0.05, hardware=list(HARDWARE)
    )


def test_every_section_and_chart_is_present(page: Page, report: Any) -> None:
    assert set(SECTIONS) <= page.ids
    assert set(CHARTS) <= page.ids
    loads = [f"chart-load-{hw}" for hw in FEASIBLE]
    assert set(loads) <= page.ids  # one latency-vs-load chart per hardware that meets the SLOs
    assert "chart-load-a100-80gb-sxm" not in page.ids
    assert sum(1 for tag, a in page.tags if tag == "svg" and "chart" in a.get("class", "")) == len(CHARTS) + 1
    assert report.html.startswith("<!DOCTYPE html>")


def _sized(report: Any, c: Any, ttft_slo_s: float = 0.5) -> Any:
    """size_finalist for planner candidate ``c`` with the report's inputs (no curve)."""
    from roofline.serving.plan.finalists import size_finalist

    inp = report.data.inputs
    return size_finalist(
        MODEL,
        c,
        qps=10.0,
        prompt_len=PROMPT,
        output_len=OUT,
        ttft_slo_s=ttft_slo_s,
        tpot_slo_s=0.05,
        ttft_pct=99.0,
        tpot_pct=90.0,
        confidence=0.8,
        engine="vllm",
        calibration=inp.calibration_for(roofline.hardware(c.hardware)),
        tdp_watts=roofline.hardware(c.hardware).tdp_watts,
        curve=False,
    )


def test_comparison_table_equals_simulator_sizing(page: Page, plan: Any, report: Any) -> None:
    """Each row is a planner candidate re-sized by size_finalist; the table shows its planned-load figures.
    The A100 row says why it is not offered, with the upper bound that misses the SLO."""
    (a100,) = [r for r in report.data.rows if r.hardware.name == "a100-80gb-sxm"]
    assert not a100.feasible and a100.candidate is None and "a100-80gb-sxm tp=8" in a100.reason
    bounds = [float(x) for x in re.findall(r"TTFT P99 is \d+ ms \(upper bound (\d+) ms\)", a100.reason)]
    assert bounds and min(bounds) > 500  # every A100 configuration misses P99 TTFT ≤ 500 ms at the bound
    assert "Does not meet the SLOs" in report.html
    for hw in FEASIBLE:
        cfg = dict(kv.split("=") for kv in page.value("config", hardware=hw).split(","))
        (c,) = [
            c
            for c in plan.candidates
            if c.hardware == hw and c.tp == int(cfg["tp"]) and c.precision == cfg["precision"]
        ]
        assert c.feasible
        f = _sized(report, c)
        assert f.meets_slo and f.replicas == int(cfg["replicas"]) >= c.replicas
        same(page.value("ttft_s", hardware=hw), f.ttft_s)
        same(page.value("tpot_s", hardware=hw), f.tpot_s)
        same(page.value("gpus", hardware=hw), f.gpus)
        same(page.value("usd_per_hour", hardware=hw), f.usd_per_hour)
        same(page.value("usd_per_million_output_tokens", hardware=hw), f.usd_per_million_output_tokens)
        same(page.value("capacity_rps", hardware=hw), f.capacity_rps)
        # at the planned load each GPU produces qps · O / GPUs output tokens/s (not the full-load capacity)
        same(page.value("tok_s_per_gpu", hardware=hw), 10.0 * OUT / f.gpus)
        # energy: the serving GPUs at their mean board power (idle + (TDP − idle) × the simulated busy fraction),
        # the rest of the whole instances rented at idle, over the tokens of an hour, in kWh per million tokens
        tdp = roofline.hardware(hw).tdp_watts
        watts = tdp * (IDLE_POWER_FRACTION + (1 - IDLE_POWER_FRACTION) * min(max(f.busy_fraction, 0.0), 1.0))
        idle = max(f.rented_gpus - f.gpus, 0) * tdp * IDLE_POWER_FRACTION
        kwh = (f.gpus * watts + idle) / 1000 / (10.0 * OUT * 3600) * 1e6
        assert float(page.value("kwh_per_million_output_tokens", hardware=hw)) == pytest.approx(kwh, rel=1e-12)


def test_a_configuration_that_misses_says_by_how_much(plan: Any, report: Any) -> None:
    """Sized against a P99 TTFT SLO of 50 ms, which no replica count meets, an A100 tp-8 candidate is refused with
    its simulated P99 and the upper bound of the 80 % interval that misses: the bound is the simulated P99 times the
    vLLM interval's high TTFT factor, and above the SLO."""
    from roofline.published.serving_error import serving_interval

    (c,) = [c for c in plan.candidates if c.hardware == "a100-80gb-sxm" and c.tp == 8 and c.precision == "checkpoint"]
    f = _sized(report, c, ttft_slo_s=0.05)
    assert not f.meets_slo
    found = re.findall(r"TTFT P99 is (\d+) ms \(upper bound (\d+) ms\)", f.reason)
    assert found, f.reason
    high = serving_interval("ttft_s", 1.0, engine="vllm", level=0.8).high
    for sim_ms, bound_ms in ((float(a), float(b)) for a, b in found):
        assert bound_ms > 50 and bound_ms == pytest.approx(sim_ms * high, abs=1.0)


def test_memory_chart_batch_equals_predict(report: Any) -> None:
    for row in report.data.rows:
        c = row.candidate
        if c is None:  # no configuration meets the SLOs: nothing to chart
            continue
        r = roofline.predict(
            MODEL,
            row.hardware.name,
            batch=c.batch,
            prompt_len=PROMPT,
            output_len=OUT,
            tp=c.tp,
            weight_dtype=c.precision,
            kv_dtype=c.kv_dtype,
        )
        assert row.prediction.max_batch == r.max_batch
        assert f"max batch {r.max_batch} at {PROMPT + OUT} tokens" in report.html


def test_summary_is_the_first_ranked_row(page: Page, report: Any) -> None:
    rec = report.data.recommended
    assert rec.rank == 1 and page.value("recommended.hardware") == rec.hardware.name
    f = rec.finalist
    for key in ("gpus", "headroom", "ttft_s", "tpot_s"):
        same(page.value(f"recommended.{key}"), getattr(f, key))
    same(page.value("recommended.usd_per_hour"), f.usd_per_hour)
    ranked = sorted((r for r in report.data.rows if r.feasible), key=lambda r: r.rank)
    costs = [r.values["usd_per_hour"] for r in ranked]
    assert costs == sorted(costs)  # the stated rule: cheapest per hour first


def test_best_values_are_marked(report: Any) -> None:
    """The best finite value of each ranked column is flagged, on every row that holds it."""
    rows = [r for r in report.data.rows if r.feasible]
    for key, best in (("usd_per_hour", min), ("gpus", min), ("tok_s_per_gpu", max), ("capacity_rps", max)):
        values = [r.values[key] for r in rows if math.isfinite(r.values[key])]
        for r in rows:
            assert (key in r.best) == (math.isfinite(r.values[key]) and r.values[key] == best(values)), (key, r)
    assert re.search(r'class="num best" data-key="usd_per_hour"', report.html)


def test_load_curve_passes_through_every_planned_candidate(report: Any, plan: Any) -> None:
    """The charts' per-batch curve uses the planner's formulas: it must hit the plan exactly."""
    for c in plan.candidates:
        if not c.feasible:
            continue
        df = replica_curve(
            report.data.inputs,
            roofline.hardware(c.hardware),
            tp=c.tp,
            precision=c.precision,
            kv_dtype=c.kv_dtype,
            extra=(c.batch,),
        )
        at = df[df["batch"] == c.batch].iloc[0]
        assert at["ttft_s"] == pytest.approx(c.ttft_s, rel=1e-12)
        assert at["tpot_s"] == pytest.approx(c.tpot_full_load_s, rel=1e-12)
        assert at["replica_rps"] == pytest.approx(c.replica_rps, rel=1e-12)
        assert int(at["max_batch"]) == c.max_batch_memory


def test_sensitivity_rows_equal_resizing(page: Page, report: Any) -> None:
    """Baseline = the report's recommendation; a variant = the same pipeline (planner + simulator) on its profile."""
    from dataclasses import replace
    from functools import partial

    from roofline.report.content import run_plan
    from roofline.report.sensitivity import best_sized

    rec = report.data.recommended.finalist
    same(page.value("gpus", case="baseline"), rec.gpus)
    inp = replace(report.data.inputs, variant=partial(scale_bandwidth, f=0.85))  # each device's own profile
    again = best_sized(inp, run_plan(inp))
    same(page.value("gpus", case="bandwidth -15%"), again.gpus)
    same(page.value("usd_per_hour", case="bandwidth -15%"), again.usd_per_hour)
    same(page.value("tpot_s", case="bandwidth -15%"), again.tpot_s)


def test_profile_variants_move_exactly_one_ceiling() -> None:
    p, hw = default_profile(), roofline.hardware("h100-sxm")
    bw = scale_bandwidth(p, 1.15)
    assert bw.memory_ceiling(hw) == pytest.approx(1.15 * p.memory_ceiling(hw))
    assert bw.compute_ceiling(hw, "bf16") == p.compute_ceiling(hw, "bf16")
    comp = scale_compute(p, 0.85)
    assert comp.compute_ceiling(hw, "fp8") == pytest.approx(0.85 * p.compute_ceiling(hw, "fp8"))
    assert comp.compute_ceiling(roofline.hardware("mi300x"), "bf16") == pytest.approx(
        0.85 * p.compute_ceiling(roofline.hardware("mi300x"), "bf16")
    )
    assert comp.memory_ceiling(hw) == p.memory_ceiling(hw)
    ds = datasheet_profile(p)
    assert ds.compute_ceiling(hw, "bf16") == hw.peak_flops_per_s("bf16")
    assert ds.memory_ceiling(hw) == hw.memory.bandwidth_bytes_per_s
    assert ds.overheads.per_kernel_s == ds.overheads.per_step_s == 0.0
    assert float(ds.gemm_m_efficiency(1)) == 1.0


def test_evidence_states_the_profile_and_ceilings(page: Page, report: Any) -> None:
    assert page.value("evidence.kind") == "default"
    assert "Default profile from public microbenchmarks" in report.html
    fractions = [float(v) for r, k, v in page.values if k == "memory_fraction"]
    hw = roofline.hardware("h100-sxm")
    assert fractions[0] == default_profile().memory_ceiling(hw) / hw.memory.bandwidth_bytes_per_s
    assert 'id="accuracy-table"' in report.html  # roofline.published.accuracy is installed: its summary is shown


def test_reproduce_lists_command_and_hashes(page: Page, report: Any) -> None:
    assert (
        "roofline report llama-3.1-70b --hardware h100-sxm,h200-sxm,a100-80gb-sxm --workload chat "
        "-o reports/llama-3.1-70b-chat.html"
    ) in report.html
    hashes = {v for _, k, v in page.values if k == "sha256"}
    for kind, name in [("model", MODEL), *(("hardware", h) for h in HARDWARE)]:
        assert hashlib.sha256(spec_path(kind, name).read_bytes()).hexdigest() in hashes  # type: ignore[arg-type]
    assert roofline.__version__ in report.html


def test_inputs_state_the_workload_preset_and_model(report: Any) -> None:
    html = report.html
    for text in ("1,024 tokens", "256 tokens", "10 requests/s", "500 ms", "50 ms", "70.55 B", "320 KiB"):
        assert text in html, text
    assert "Why these numbers." in html and "2026-09-20" in html  # rationale and price dates


def test_self_contained_no_scripts_no_network(report: Any, page: Page) -> None:
    html = report.html
    assert not re.search(r"<script|<link|<iframe|<object|<embed|@import|@font-face", html, re.I)
    assert not re.search(r"url\(\s*['\"]?(https?:|//)", html, re.I)
    for tag, attrs in page.tags:
        for name in ("src", "href", "xlink:href", "action", "poster", "srcset"):
            value = attrs.get(name, "")
            assert not re.match(r"\s*(https?:|//|ftp:)", value, re.I), (tag, name, value)
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)


def _evil_specs(tmp_path: Any) -> None:
    src = spec_path("hardware", "h100-sxm").read_text(encoding="utf-8")
    src = re.sub(r"(?m)^name: .*$", "name: evil-gpu", src)
    src = re.sub(r"(?m)^display_name: .*$", 'display_name: "<script>alert(1)</script> & co"', src)
    src = re.sub(r"(?m)^aliases: .*$", "aliases: []", src)
    src = re.sub(r"(?m)^notes: .*$", 'notes: "<img src=x onerror=alert(2)>"', src)
    (tmp_path / "hardware").mkdir()
    (tmp_path / "hardware" / "evil-gpu.yaml").write_text(src, encoding="utf-8")
    m = spec_path("model", "llama-3.1-8b").read_text(encoding="utf-8")
    m = re.sub(r"(?m)^name: .*$", "name: evil-model", m)
    m = re.sub(r"(?m)^display_name: .*$", 'display_name: "<b onmouseover=alert(3)>Evil</b>"', m)
    m = re.sub(r"(?m)^aliases: .*$", "aliases: []", m)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "evil-model.yaml").write_text(m, encoding="utf-8")


def test_user_yaml_strings_are_escaped(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _evil_specs(tmp_path)
    monkeypatch.setenv("ROOFLINE_SPECS_PATH", str(tmp_path))
    html = build("evil-model", hardware="evil-gpu", workload="chat").html
    assert "<script" not in html.lower() and "<img" not in html.lower() and "<b onmouseover" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in html  # table cells (jinja2 autoescape)
    assert "&lt;img src=x onerror=alert(2)&gt;" in html  # YAML notes
    page = parse(html)
    assert {t for t, _ in page.tags}.isdisjoint({"script", "img"})
    assert all(not k.startswith("on") for _, a in page.tags for k in a)


def test_notebook_view_escapes_and_plots() -> None:
    hw = roofline.hardware("h100-sxm").model_copy(update={"display_name": "<script>alert(1)</script>"})
    r = roofline.predict("llama-3.1-8b", hw, batch=4, prompt_len=512, output_len=64)
    html = r._repr_html_()
    assert "<script" not in html and "&lt;script&gt;" in html
    assert 'data-key="ttft_s"' in html and f'data-value="{r.ttft_s!r}"' in html
    from roofline.report.charts import figure_svg

    svg = figure_svg(r.plot_roofline(), "t", "roofline")
    assert "<script" not in svg and "&lt;script&gt;" in svg and svg.startswith("<svg")


def test_infeasible_report_explains(tmp_path: Any) -> None:
    rep = build("llama-3.1-8b", hardware="h100-sxm", workload="chat", ttft_slo_s=1e-4)
    assert rep.data.recommended is None
    assert "No configuration meets the SLOs" in rep.html and "misses the SLO" in rep.html
    assert parse(rep.html).value("recommended.hardware") == ""


def test_evidence_states_the_serving_error_the_slos_are_held_at(report: Any) -> None:
    """The SLO checks multiply simulated latencies by the engine's serving upper factor; the evidence section
    shows that factor (engine marked ●) with its held-out coverage, as the shipped residuals give them."""
    from roofline.published.serving_error import load_serving_error, serving_interval

    rows = {r.engine: r for r in report.data.evidence.serving}
    cov = load_serving_error()["coverage"]["0.8"]
    assert set(rows) == {"sglang", "trtllm", "vllm", "all"} and [e for e, r in rows.items() if r.used] == ["vllm"]
    for eng, r in rows.items():
        iv = serving_interval("ttft_s", 1.0, engine=eng)
        assert r.ttft_factors == (iv.low, iv.high) and r.n == iv.n_rows
        assert r.ttft_coverage == cov[eng]["ttft"][0] / cov[eng]["ttft"][1]
    f = report.data.recommended.finalist
    assert f.ttft_upper_s == pytest.approx(f.ttft_s * rows["vllm"].ttft_factors[1])
    assert 'id="serving-error-table"' in report.html and f"×{rows['vllm'].ttft_factors[1]:.2f}" in report.html
