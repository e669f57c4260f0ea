"""One rule for every device, stated: each prediction says which measured evidence its op times rest on.

GIVEN the default profile, whose GEMM-K and grouped-GEMM corrections were measured on an H200 and apply to devices
with the same Hopper SM, WHEN DeepSeek-V3 is predicted on H200, B200 and MI300X THEN each says whether the MoE
grouped-GEMM rates apply to it and on which device they were measured, the AMD device names its vendor factor,
and ``simulate`` and the report carry the same sentences.
"""

from __future__ import annotations

import roofline
from roofline.profile import default_profile
from roofline.provenance import device_evidence


def _moe_line(lines: tuple[str, ...]) -> str:
    return next(line for line in lines if line.startswith("MoE grouped GEMM"))


def test_deepseek_v3_states_what_each_devices_moe_numbers_rest_on() -> None:
    ev = {hw: roofline.predict("deepseek-v3", hw, batch=64, tp=8).evidence for hw in ("h200-sxm", "b200", "mi300x")}
    assert _moe_line(ev["h200-sxm"]) == "MoE grouped GEMM: measured on h200-sxm, applied to h200-sxm"
    for hw in ("b200", "mi300x"):
        line = _moe_line(ev[hw])
        assert f"measured on h200-sxm only, not applied to {hw}" in line
        assert "routed experts priced as dense GEMMs" in line
    assert "fitted for AMD devices" in ev["mi300x"][0] and "AMD" not in ev["b200"][0]
    summary = roofline.predict("deepseek-v3", "b200", batch=64, tp=8).summary()
    assert summary["evidence"] == "; ".join(ev["b200"])


def test_same_sm_devices_say_whose_measurement_they_borrow_and_dense_models_skip_moe() -> None:
    lines = device_evidence(default_profile(), roofline.hardware("h100-sxm"), moe=False)
    assert any("applied to h100-sxm (same SM as h200-sxm)" in line for line in lines)
    assert not any(line.startswith("MoE") for line in lines)


def test_simulate_carries_the_same_evidence() -> None:
    s = roofline.simulate("qwen3-30b-a3b", "b200", qps=1.0, num_requests=5, prompt_len=128, output_len=8)
    p = roofline.predict("qwen3-30b-a3b", "b200")
    assert tuple(s.config["evidence"]) == p.evidence


def test_the_report_lists_each_devices_evidence(readme_report: object) -> None:
    html = readme_report.html  # type: ignore[attr-defined]
    for hw in ("h100-sxm", "h200-sxm", "a100-80gb-sxm"):
        assert f'data-key="evidence.device" data-value="{hw}"' in html
    assert "GEMM rate against K: measured on h200-sxm only, not applied to a100-80gb-sxm" in html


def test_every_output_says_whether_its_latencies_are_client_seen_or_physics_only(readme_report: object) -> None:
    plain = roofline.predict("llama-3.1-8b", "h100-sxm").summary()["latency_basis"]
    assert plain.startswith("physics only")
    seen = roofline.predict("llama-3.1-8b", "h100-sxm", engine_overrides={"request_overhead_s": 0.04})
    assert seen.summary()["latency_basis"] == "client-seen: engine time plus request overhead 40 ms"
    s = roofline.simulate("llama-3.1-8b", "h100-sxm", qps=1.0, num_requests=5, engine_overrides={"output_lag_steps": 2})
    assert (
        s.config["latency_basis"] == "client-seen: engine time plus output lag 2 of the request's inter-token intervals"
    )
    d = roofline.simulate(
        "llama-3.1-8b", disagg="prefill=h100-sxm:tp1x1,decode=h100-sxm:tp1x1", qps=1.0, num_requests=5
    )
    assert d.config["latency_basis"].startswith("physics only")
    assert "physics only: engine time from the request" in readme_report.html  # type: ignore[attr-defined]
