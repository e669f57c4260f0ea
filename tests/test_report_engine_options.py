"""The report honours every engine option the simulator takes (``--engine-set``): the simulated sizing gets all of
them, the planner's closed form and the static predictions those they can represent, and the reproduce commands
carry them; an unknown option or a bad value is refused before any work, by name."""

from __future__ import annotations

import pytest

from roofline.errors import ScenarioError
from roofline.report.content import candidate_prediction, resolve_inputs, run_plan
from roofline.report.evidence import cli_command, python_call
from roofline.report.sizing import size_hardware
from roofline.serving.workload.presets import resolve_workload

WL = resolve_workload("chat", qps=20.0)


def _sized(**over: object) -> tuple[int, float]:
    inp = resolve_inputs("llama-3.1-8b", "h100-sxm", WL, tp_options=[1], engine_overrides=over or None)
    plan = run_plan(inp)
    f, why = size_hardware(inp, inp.hardware[0], plan.candidates, curve=False)
    assert f is not None, why
    return f.replicas, f.tpot_s


def test_engine_options_change_the_reports_simulated_sizing() -> None:
    """max_num_seqs=8 caps each replica's batch: more replicas, each decoding fewer rows (lower TPOT)."""
    base, capped = _sized(), _sized(max_num_seqs=8)
    assert capped[0] > base[0]
    assert capped[1] < base[1]


def test_static_parts_get_the_options_they_represent_and_the_commands_carry_them() -> None:
    over = {"step_overhead_s": 0.004, "prefix_caching": False}
    inp = resolve_inputs("llama-3.1-8b", "h100-sxm", WL, tp_options=[1], engine_overrides=over)
    plain = resolve_inputs("llama-3.1-8b", "h100-sxm", WL, tp_options=[1])
    cand = next(c for c in run_plan(plain).candidates if c.feasible)
    with_cpu, without = (
        candidate_prediction(inp, inp.hardware[0], cand),
        candidate_prediction(plain, plain.hardware[0], cand),
    )
    assert with_cpu.tpot_s == pytest.approx(without.tpot_s + 0.004, rel=1e-9)  # step_overhead_s priced, not refused
    assert "--engine-set step_overhead_s=0.004 --engine-set prefix_caching=False" in cli_command(inp, None)
    assert "engine_overrides={'step_overhead_s': 0.004, 'prefix_caching': False}" in python_call(inp, None)


@pytest.mark.parametrize(
    ("over", "named"), [({"max_num_sequences": 8}, "max_num_sequences"), ({"max_num_seqs": 0}, "max_num_seqs")]
)
def test_bad_engine_options_are_refused_by_name(over: dict[str, object], named: str) -> None:
    with pytest.raises(ScenarioError, match=named):
        resolve_inputs("llama-3.1-8b", "h100-sxm", WL, engine_overrides=over)
