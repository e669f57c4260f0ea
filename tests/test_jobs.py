"""Independent simulations fanned out over processes give exactly what running them in turn gives.

``map_jobs`` keeps input order whatever finishes first; ``plan --simulate`` and the report's hardware sizing,
sensitivity variants and what-ifs are the same with ``jobs`` 1 and 2 (every simulation is seeded).
"""

from __future__ import annotations

import pytest

from roofline.errors import ScenarioError
from roofline.report.api import report_data
from roofline.report.content import resolve_inputs
from roofline.serving.plan.parallel import check_jobs, default_jobs, map_jobs
from roofline.serving.workload.presets import resolve_workload


def _square(x: int) -> int:
    return x * x


def test_map_jobs_keeps_order_and_refuses_bad_counts() -> None:
    items = list(range(12))
    assert map_jobs(_square, items, 1) == map_jobs(_square, items, 2) == [x * x for x in items]
    assert check_jobs(None) == default_jobs() >= 1
    for bad in (0, -1, 65, 2.0, True):
        with pytest.raises(ScenarioError, match="jobs must be a whole number"):
            check_jobs(bad)  # type: ignore[arg-type]


def test_the_reports_simulations_are_the_same_in_turn_and_on_two_processes() -> None:
    wl = resolve_workload("chat", qps=4.0)
    inp = resolve_inputs("llama-3.1-8b", "h100-sxm,a100-80gb-sxm", wl, tp_options=[1])
    one, two = report_data(inp, None, 1), report_data(inp, None, 2)

    def rows(d: object) -> str:  # a row's prediction holds a closure: compare what it shows; repr: NaN == NaN
        return repr([(r.hardware.name, r.candidate, r.finalist, r.values, r.reason, r.rank) for r in d.rows])  # type: ignore[attr-defined]

    assert rows(one) == rows(two) and "Finalist(" in rows(one)
    assert repr(one.sensitivity) == repr(two.sensitivity)
    assert repr(one.whatifs) == repr(two.whatifs)


def test_plan_simulate_json_is_the_same_with_jobs() -> None:
    from typer.testing import CliRunner

    from roofline.cli.app import app

    args = [
        "plan",
        "llama-3.1-8b",
        "--qps",
        "10",
        "--ttft-slo",
        "p99=500ms",
        "--tpot-slo",
        "p90=50ms",
        "--hardware",
        "h100-sxm,a100-80gb-sxm",
        "--tp",
        "1",
        "--simulate",
        "--json",
    ]
    a, b = (CliRunner().invoke(app, [*args, "--jobs", j]) for j in ("1", "2"))
    assert a.exit_code == b.exit_code == 0, (a.output, b.output)
    assert a.output == b.output
