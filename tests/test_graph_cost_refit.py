"""Refitting a measured profile's per-kernel CUDA-graph cost from closed-loop decode steps.

GIVEN closed-loop decode rows whose measured time is exactly (prediction with no graph cost) + extras
+ kernels × c, WHEN the profile is refitted (``calibrate.closedloop.graphcost``), THEN
``per_kernel_graph_s`` = c, the residuals are recorded and the CLI writes the profile; rows timed
without CUDA graphs are ignored, and a table without any is a clear error.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

import roofline
from calibrate.closedloop.graphcost import main, refit_graph_cost
from roofline.errors import CalibrationError
from roofline.profile import default_profile
from roofline.published.graph_overhead import decode_step_time

FIELDS = ["model", "hardware", "dtype", "phase", "batch", "prompt_len", "context", "measured_s", "eager_extra_s",
          "method"]  # fmt: skip
C_TRUE = 4.2e-6


def _table(path: Path, method: str = "cuda_graph") -> Path:
    prof = default_profile()
    zero = prof.model_copy(update={"overheads": prof.overheads.model_copy(update={"per_kernel_graph_s": 0.0})})
    rows = []
    for batch, ctx in ((1, 512), (8, 1024), (64, 2048)):
        t0, k, _ = decode_step_time(zero, "llama-3.1-8b", "h100-sxm", "bf16", batch, ctx, True)
        extra = 3e-4
        rows.append(
            {
                "model": "llama-3.1-8b",
                "hardware": "h100-sxm",
                "dtype": "bf16",
                "phase": "decode",
                "batch": batch,
                "prompt_len": ctx,
                "context": ctx,
                "measured_s": t0 + extra + k * C_TRUE,
                "eager_extra_s": extra,
                "method": method,
            }
        )
    rows.append({**rows[0], "phase": "prefill", "measured_s": 1.0})  # prefill rows never enter the fit
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, FIELDS)
        w.writeheader()
        w.writerows(rows)
    return path


def test_refit_recovers_the_per_kernel_cost(tmp_path: Path) -> None:
    fitted = refit_graph_cost(default_profile(), [_table(tmp_path / "steps.csv")])
    assert fitted.overheads.per_kernel_graph_s == pytest.approx(C_TRUE, abs=1e-12)
    rec = fitted.residuals["decode_step_points"]
    assert rec["per_kernel_graph_s"]["steps"] == 3 and rec["points"] == []
    assert all(abs(r["error_pct"]) < 1e-3 for r in rec["measured"])
    assert "graph_cost_refit" in fitted.provenance


def test_eager_rows_are_not_graph_steps(tmp_path: Path) -> None:
    with pytest.raises(CalibrationError, match="no CUDA-graph decode steps"):
        refit_graph_cost(default_profile(), [_table(tmp_path / "eager.csv", method="cuda_event")])


def test_cli_writes_the_refitted_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "p.yaml"
    default_profile().save(src)
    out = tmp_path / "refit.yaml"
    assert main(["--calibration", str(src), str(_table(tmp_path / "s.csv")), "-o", str(out)]) == 0
    assert roofline.load_profile(out).overheads.per_kernel_graph_s == pytest.approx(C_TRUE, abs=1e-12)
    assert "4.20 us" in capsys.readouterr().out
    assert main(["--calibration", str(src), str(tmp_path / "s.csv"), "-o", str(out)]) != 0  # exists: needs --force


def test_committed_h200_profile_predicts_its_closed_loop_decode_steps() -> None:
    """calibrate/profiles/h200-sxm.yaml was refitted on validation/closedloop: every step within 10 %."""
    from roofline.published.graph_overhead import measured_decode_steps

    root = Path(__file__).resolve().parents[1]
    prof = roofline.load_profile(root / "calibrate" / "profiles" / "h200-sxm.yaml")
    assert 2e-6 < prof.overheads.per_kernel_graph_s < 6e-6 and "graph_cost_refit" in prof.provenance
    steps = measured_decode_steps()
    assert len(steps) >= 20
    for s in steps:
        t, _, _ = decode_step_time(prof, s.model, s.hardware, s.weight_dtype, s.batch, s.context, True)
        assert t + s.extra_s == pytest.approx(s.step_s, rel=0.10), s


def test_unreadable_or_malformed_tables_name_the_file_line_and_field(tmp_path: Path) -> None:
    prof = default_profile()
    with pytest.raises(CalibrationError, match="cannot read the closed-loop table"):
        refit_graph_cost(prof, [tmp_path / "missing.csv"])
    bad = tmp_path / "bad.csv"
    bad.write_text("model,phase\nllama-3.1-8b,decode\n", encoding="utf-8")
    with pytest.raises(CalibrationError, match=r"bad\.csv line 2: field 'method'"):
        refit_graph_cost(prof, [bad])
    src = tmp_path / "p.yaml"
    prof.save(src)
    assert main(["--calibration", str(src), str(bad), "-o", str(tmp_path / "o.yaml")]) == 2
