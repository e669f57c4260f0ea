"""What a buyer pays (roofline.serving.plan.procurement): hand-derived ownership, power and energy figures; spare
replicas and peak traffic in the planner and on the simulator; the CLI's options and errors; NVML power samples."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from roofline.cli.app import app
from roofline.errors import ScenarioError
from roofline.profile import BoardPower, default_profile
from roofline.serving.plan.finalists import size_finalist
from roofline.serving.plan.planner import plan
from roofline.serving.plan.procurement import (
    IDLE_POWER_FRACTION,
    EnergyInputs,
    Procurement,
    board_power_w,
    energy_fields,
    procurement_flags,
)
from roofline.specs.library import hardware

REQ = {"qps": 8.0, "prompt_len": 1024, "output_len": 128, "ttft_slo_s": 0.5, "tpot_slo_s": 0.05}


def test_owned_gpu_hour_by_hand() -> None:
    """$30,000 over 5 years + $150 per kW-month on a 700 W H100: 30000 / (5 × 8766) + 150 × 0.7 / 730.5."""
    p = Procurement(capex_usd_per_gpu={"h100-sxm": 30000.0}, hosting_usd_per_kw_month=150.0)
    want = 30000.0 / (5 * 8766.0) + 150.0 * 0.7 / 730.5
    assert p.owned_usd_per_gpu_hour(hardware("h100-sxm")) == pytest.approx(want, rel=1e-12)
    assert p.owned_usd_per_gpu_hour(hardware("h200-sxm")) is None  # not bought: rented at its price
    alias = Procurement(capex_usd_per_gpu={"h100-sxm5": 30000.0}, hosting_usd_per_kw_month=150.0)
    assert alias.owned_usd_per_gpu_hour(hardware("h100-sxm")) == pytest.approx(want, rel=1e-12)  # alias resolved


def test_board_power_rule() -> None:
    """P = P_idle + (P_busy − P_idle)·u: the TDP rule's ends and midpoint; measured power replaces both ends."""
    assert board_power_w(700.0, 0.0) == pytest.approx(IDLE_POWER_FRACTION * 700.0)
    assert board_power_w(700.0, 1.0) == pytest.approx(700.0)
    assert board_power_w(700.0, 0.5) == pytest.approx((IDLE_POWER_FRACTION * 700.0 + 700.0) / 2)
    assert board_power_w(700.0, 3.0) == pytest.approx(700.0)  # clamped to [0, 1]
    m = BoardPower(idle_watts=90.0, busy_watts=610.0)
    assert board_power_w(700.0, 0.25, m) == pytest.approx(90.0 + 520.0 * 0.25)


def test_energy_fields_by_hand() -> None:
    """2 serving GPUs at u = 0.5 and 6 idle GPUs (spares, unused instance slots), 1,000 tokens/s: kWh per M
    tokens = kW / (tokens/s × 3600) × 1e6; the electricity bill × PUE only when the GPUs are owned."""
    tdp, idle = 700.0, IDLE_POWER_FRACTION * 700.0
    kw = (2 * (idle + (tdp - idle) * 0.5) + 6 * idle) / 1000.0
    rented = energy_fields(2, 6, 1000.0, EnergyInputs(tdp, 0.5, None, 0.1, False), Procurement())
    assert rented["kwh_per_million_output_tokens"] == pytest.approx(kw / 3600.0 * 1e3)
    assert rented["energy_usd_per_hour"] == pytest.approx(kw * 0.1)
    owned = energy_fields(2, 6, 1000.0, EnergyInputs(tdp, 0.5, None, 0.1, True), Procurement(pue=1.5))
    assert owned["energy_usd_per_hour"] == pytest.approx(kw * 1.5 * 0.1)
    assert owned["kwh_per_million_output_tokens"] == rented["kwh_per_million_output_tokens"]  # board energy
    assert energy_fields(2, 6, 1000.0, EnergyInputs(None), Procurement())["kwh_per_million_output_tokens"] is None


def test_planner_spares_and_peak() -> None:
    """A spare replica adds tp GPUs and their price to the same sizing; peak factor 2 at 4 req/s sizes as 8 req/s
    and serves (so prices per token) 4 req/s: the same $/hour over half the tokens."""
    kw = {"hardware": ["h100-sxm"], "tp_options": [1, 2]}
    base = plan("llama-3.1-8b", **REQ, **kw)
    spare = plan("llama-3.1-8b", **REQ, **kw, procurement=Procurement(spare_replicas=1))
    for a, b in zip(base.candidates, spare.candidates, strict=False):
        if a.feasible and (a.tp, a.precision) == (b.tp, b.precision):
            assert b.replicas == a.replicas and b.gpus == a.gpus + a.tp and b.spare_replicas == 1
    peak = plan("llama-3.1-8b", **{**REQ, "qps": 4.0}, **kw, procurement=Procurement(peak_factor=2.0))
    a, b = base.recommended, peak.recommended
    assert a is not None and b is not None
    assert (b.replicas, b.gpus, b.usd_per_hour) == (a.replicas, a.gpus, a.usd_per_hour)
    assert b.usd_per_million_output_tokens == pytest.approx(2 * a.usd_per_million_output_tokens)
    assert peak.qps == 4.0  # the plan answers for the rate asked; the peak is what it was sized at


def test_capex_replaces_the_rental_price() -> None:
    terms = Procurement(capex_usd_per_gpu={"h100-sxm": 25000.0})
    res = plan("llama-3.1-8b", **REQ, hardware=["h100-sxm"], tp_options=[1], procurement=terms)
    c = res.candidates[0]
    assert c.usd_per_gpu_hour == pytest.approx(25000.0 / (5 * 8766.0))
    assert c.gpus_per_instance == 1  # bought per GPU, not in the rental source's instances
    with pytest.raises(ScenarioError, match="both a rental price"):
        plan("llama-3.1-8b", **REQ, hardware=["h100-sxm"], prices={"h100-sxm": 2.0}, procurement=terms)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"spare_replicas": -1}, "spare_replicas"),
        ({"spare_replicas": 1.5}, "spare_replicas"),
        ({"peak_factor": 0.5}, "peak_factor"),
        ({"pue": 0.9}, "pue"),
        ({"amortisation_years": 0}, "amortisation_years"),
        ({"capex_usd_per_gpu": {"h100-sxm": -5}}, "capex of h100-sxm"),
        ({"capex_usd_per_gpu": [1]}, "capex_usd_per_gpu must map"),
    ],
)
def test_terms_refused(kw: dict[str, object], match: str) -> None:
    with pytest.raises(ScenarioError, match=match):
        Procurement(**kw)  # type: ignore[arg-type]


def test_simulated_spares_and_peak() -> None:
    """On the simulator: a spare replica is paid for and idle (same replicas meet the SLOs, energy of one more
    idle GPU); peak factor 2 checks the SLOs at twice the rate (the per-replica load doubles)."""
    c = plan("llama-3.1-8b", **REQ, hardware=["h100-sxm"], tp_options=[1]).recommended
    assert c is not None
    kw = {**REQ, "tdp_watts": 700.0, "usd_per_kwh": 0.1, "curve": False, "num_requests": 200}
    plain = size_finalist("llama-3.1-8b", c, **kw)
    spare = size_finalist("llama-3.1-8b", c, **kw, procurement=Procurement(spare_replicas=1))
    assert spare.replicas == plain.replicas and spare.gpus == plain.gpus + 1 and spare.spare_replicas == 1
    assert 0.0 < plain.busy_fraction <= 1.0
    tok_s = REQ["qps"] * REQ["output_len"]
    idle_kw = IDLE_POWER_FRACTION * 0.7
    if spare.rented_gpus == plain.rented_gpus:  # the spare sits in an already-rented instance: same bill
        assert spare.kwh_per_million_output_tokens == pytest.approx(plain.kwh_per_million_output_tokens)
    else:
        extra = (spare.rented_gpus - plain.rented_gpus) * idle_kw / (tok_s * 3600.0) * 1e6
        assert spare.kwh_per_million_output_tokens == pytest.approx(plain.kwh_per_million_output_tokens + extra)
    peak = size_finalist("llama-3.1-8b", c, **{**kw, "qps": 4.0}, procurement=Procurement(peak_factor=2.0))
    assert peak.replicas == plain.replicas
    assert peak.replica_rate == pytest.approx(plain.replica_rate)
    assert peak.busy_fraction <= plain.busy_fraction + 1e-12  # half the average load: never busier


def test_busy_fraction_golden() -> None:
    """Requests sent 10 s apart, each served alone: the engine is busy exactly while a request is in flight, so
    busy seconds = Σ (E2E) and busy_fraction = Σ E2E / (last token time)."""
    import roofline
    from roofline.serving.workload.stream import Workload

    wl = Workload(qps=0.1, prompt_len=256, output_len=32, num_requests=5, arrival="constant", seed=1)
    s = roofline.simulate("llama-3.1-8b", "h100-sxm", workload=wl, engine="ideal")
    r = s.requests
    span = float(r["finish_s"].max())
    assert math.isclose(span, 40.0 + float(r["e2e_s"].iloc[-1]), rel_tol=1e-12)
    assert s.summary["busy_fraction"] == pytest.approx(float(r["e2e_s"].sum()) / span, rel=1e-6)


def test_profile_power_feeds_energy() -> None:
    """A profile carrying measured board power replaces the TDP rule (the YAML round-trips the field)."""
    prof = default_profile().model_copy(update={"power": BoardPower(idle_watts=100.0, busy_watts=500.0)})
    again = type(prof).model_validate(json.loads(prof.model_dump_json(by_alias=True)))
    assert again.power == prof.power
    e = energy_fields(1, 0, 3600.0, EnergyInputs(700.0, 1.0, again.power, None, False), Procurement())
    assert e["mean_board_power_w"] == pytest.approx(500.0)
    assert e["kwh_per_million_output_tokens"] == pytest.approx(0.5 / (3600.0 * 3600.0) * 1e6)


def test_power_sampler_and_profile_power() -> None:
    """calibrate's NVML sampler keeps what the reader returns; idle from the pre-suite snapshot, busy the mean."""
    from calibrate.measure.power import PowerSampler, board_power

    readings = [300.0, 320.0, 340.0]

    def read() -> float:  # the third read asks the sampler to stop: no clock involved
        if len(readings) == 1:
            s.request_stop()
        return readings.pop(0)

    s = PowerSampler(read, period_s=0.0)
    s.run()  # synchronous: returns after the read that requested the stop
    assert s.stop() == [300.0, 320.0, 340.0]
    bp = board_power({"power_w": 80.0}, [300.0, 320.0, 340.0])
    assert bp is not None and (bp.idle_watts, bp.busy_watts, bp.samples) == (80.0, 320.0, 3)
    assert board_power({"available": False}, [300.0]) is None
    assert board_power({"power_w": 400.0}, [300.0]) is None  # busy below idle: not a draw


def test_flags_round_trip() -> None:
    p = Procurement(spare_replicas=2, peak_factor=1.5, capex_usd_per_gpu={"h100-sxm": 30000.0}, pue=1.2)
    assert procurement_flags(p) == [
        ("--spare-replicas", "2"),
        ("--peak-factor", "1.5"),
        ("--capex", "h100-sxm=30000"),
        ("--pue", "1.2"),
    ]
    assert procurement_flags(Procurement()) == []
    assert replace(p, spare_replicas=0).spare_replicas == 0


ARGS = ["plan", "llama-3.1-8b", "--qps", "8", "--ttft-slo", "500ms", "--tpot-slo", "50ms", "-H", "h100-sxm"]


def test_cli_terms() -> None:
    r = CliRunner().invoke(app, [*ARGS, "--tp", "1", "--spare-replicas", "1", "--capex", "h100-sxm=25000", "--json"])
    assert r.exit_code == 0, r.output
    rec = json.loads(r.output)["recommended"]
    assert rec["spare_replicas"] == 1 and rec["usd_per_gpu_hour"] == pytest.approx(25000.0 / (5 * 8766.0))


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--spare-replicas", "1.5"], "--spare-replicas"),
        (["--peak-factor", "0.5"], "--peak-factor"),
        (["--capex", "h100-sxm"], "--capex: expected NAME=USD"),
        (["--capex", "h100-sxm=25000", "--price", "h100-sxm=2"], "both a rental price"),
    ],
)
def test_cli_terms_refused(extra: list[str], match: str) -> None:
    r = CliRunner().invoke(app, [*ARGS, *extra])
    assert r.exit_code != 0 and match in r.output and "Traceback" not in r.output, r.output
