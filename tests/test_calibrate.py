"""calibrate on the CPU: a quick run, resume, bad conditions (timing comparisons: benchmarks/calibrate_agreement.py).

Runs on a 2-core CI machine; torch is required (CI installs ``.[calibrate]``).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from calibrate.cli import run_calibration, show_profile
from calibrate.measure.budget import Budget, reserve_s
from calibrate.measure.env import gpu_slug
from calibrate.measure.records import Bench, Case, Record
from calibrate.measure.runner import RunConfig, Runner
from calibrate.measure.store import measurements_path
from calibrate.measure.timing import HOST_METHOD, HostTimer, Timing, check_timing
from roofline.errors import CalibrationError
from roofline.profile import CalibrationProfile, load_profile


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One CPU quick calibration (25 s budget). Whether its fitted ceilings agree with independent timings is a
    timing comparison, so it lives in ``benchmarks/calibrate_agreement.py``, not here."""
    out = tmp_path_factory.mktemp("cal") / "cpu.yaml"
    profile = run_calibration(device="cpu", budget_s=25, output=out, quick=True, progress=False)
    return {"profile": profile, "path": out}


def test_quick_cpu_run_gives_a_valid_profile(quick_run: dict[str, Any]) -> None:
    prof = load_profile(quick_run["path"])
    assert prof.device == "host-cpu" and prof.hardware is not None and prof.hardware.name == "host-cpu"
    assert "measured best" in prof.hardware.sources[0].ref  # the host "peak" is a measured best, and says so
    assert prof.compute["fp32"].value is not None and prof.memory.value is not None
    assert prof.overheads.per_kernel_s > 0
    assert all(0 < y <= 1 for y in prof.gemm_m_efficiency.y)
    assert list(prof.gemm_m_efficiency.y) == sorted(prof.gemm_m_efficiency.y)  # monotone in M
    for suite in ("gemm", "memory", "attention", "overhead"):
        assert prof.residuals[suite]["n"] > 0
    assert prof.provenance["versions"]["torch"] and prof.provenance["threads"]["torch_threads"] == 1
    assert prof.provenance["config"]["budget_s"] == 25  # its wall time: benchmarks/validation.py calibrate
    # the absolute ceilings are what predictions on host-cpu use
    assert prof.compute_ceiling(prof.hardware, "fp32") == prof.compute["fp32"].value
    assert prof.memory_ceiling(prof.hardware) == prof.memory.value


def test_profile_round_trips(quick_run: dict[str, Any], tmp_path: Path) -> None:
    prof: CalibrationProfile = quick_run["profile"]
    again = load_profile(prof.save(tmp_path / "copy.yaml"))
    assert again == prof
    assert load_profile(quick_run["path"]) == prof


def test_show_profile_renders_ceilings_against_peaks(quick_run: dict[str, Any]) -> None:
    text = show_profile(quick_run["path"])
    for needle in ("GEMM fp32", "memory bandwidth", "per-kernel overhead", "measured best peak", "GEMM efficiency"):
        assert needle in text


def test_predictions_follow_the_measured_profile(quick_run: dict[str, Any]) -> None:
    """GIVEN the measured host profile, WHEN one fitted parameter changes, THEN predictions move
    by the physics: half the bandwidth slows memory-bound decode (≤ 2×, less where compute or
    overhead terms share the time), half the compute slows compute-bound prefill by ≈ 2×, and
    1 ms more per kernel adds exactly (kernels per step) ms to TPOT.

    The measured GEMM M-curve is flattened below M = 64 (to its M = 64 value): on a loaded 2-core
    VM the measured efficiency of M = 1 GEMMs swings by 2× or more between runs, which can move
    fp32 GEMV decode (0.5 FLOP/B) across the ridge; the test is about sensitivity to the fitted
    ceilings, not about where that noisy curve lands."""

    import roofline

    measured: CalibrationProfile = quick_run["profile"]

    def flattened(curve: Any) -> Any:
        floor = float(np.interp(64.0, curve.x, curve.y))
        return curve.model_copy(update={"y": tuple(max(float(y), floor) for y in curve.y)})

    prof = measured.model_copy(
        update={
            "gemm_m_efficiency": flattened(measured.gemm_m_efficiency),
            "gemm_m_efficiency_by_dtype": {d: flattened(c) for d, c in measured.gemm_m_efficiency_by_dtype.items()},
        }
    )
    hw = prof.hardware
    assert hw is not None
    model = roofline.model("llama-3.1-8b").model_copy(update={"num_layers": 2, "vocab_size": 32000})
    kw: dict[str, Any] = {"weight_dtype": "fp32", "kv_dtype": "fp32", "output_len": 8}

    def run(p: CalibrationProfile, batch: int, prompt: int) -> Any:
        return roofline.predict(model, hw, batch=batch, prompt_len=prompt, calibration=p, **kw)

    dec, pre = run(prof, 1, 512), run(prof, 4, 2048)
    assert dec.bound_decode == "memory" and pre.bound_prefill == "compute"
    half_bw = prof.model_copy(update={"memory": prof.memory.model_copy(update={"value": prof.memory.value / 2})})
    assert 1.3 < run(half_bw, 1, 512).tpot_s / dec.tpot_s <= 2.0 + 1e-9
    half_c = prof.model_copy(
        update={"compute": {d: c.model_copy(update={"value": c.value / 2}) for d, c in prof.compute.items()}}
    )
    assert 1.7 < run(half_c, 4, 2048).ttft_s / pre.ttft_s <= 2.0 + 1e-9
    o = prof.overheads  # a CPU has no CUDA graphs: the graph cost equals the eager one
    assert o.per_kernel_graph_s == o.per_kernel_s
    bump = {"per_kernel_s": o.per_kernel_s + 1e-3, "per_kernel_graph_s": o.per_kernel_graph_s + 1e-3}
    more_k = prof.model_copy(update={"overheads": o.model_copy(update=bump)})
    kernels = (run(more_k, 1, 512).tpot_s - dec.tpot_s) / 1e-3
    assert kernels > 10 and kernels == pytest.approx(round(kernels), abs=1e-6)


def test_budget_passes_over_cases_that_would_end_after_the_deadline() -> None:
    """The run's time budget on a fake clock (no wall time): fit and save keep min(4 s, 10 %) back, each suite
    gets its weight's share of what is left, a case starts only if it ends before both deadlines, and
    time a suite leaves unused passes to the next."""
    now = [100.0]
    assert reserve_s(25) == 2.5 and reserve_s(60) == 4.0
    b = Budget(25 - reserve_s(25), clock=lambda: now[0])
    assert b.deadline == 122.5 and b.remaining() == 22.5
    weights = {"memory": 0.2, "gemm": 0.45}
    share = b.begin_suite("memory", ["memory", "gemm"], weights)
    assert share == pytest.approx(22.5 * 0.2 / 0.65)
    assert b.fits(share) and not b.fits(share + 1e-6) and not b.suite_over()
    now[0] += share / 2  # the suite ends early: gemm gets all that is left
    assert b.begin_suite("gemm", ["gemm"], weights) == pytest.approx(22.5 - share / 2)
    assert b.fits(b.remaining()) and not b.fits(b.remaining() + 1e-6)
    now[0] = 122.5
    assert b.suite_over() and b.remaining() == 0.0 and not b.fits(1e-9) and b.elapsed() == 22.5


# ---- resume and interruption -----------------------------------------------------------------
class StopAfter:
    """on_record hook that presses Ctrl-C after ``n`` records, or at the first record matching ``key``."""

    def __init__(self, n: int | None = None, key: str | None = None) -> None:
        self.n, self.key, self.seen = n, key, []

    def __call__(self, rec: Record) -> None:
        self.seen.append(rec["key"])
        if (self.n is not None and len(self.seen) >= self.n) or (self.key and self.key in rec["key"]):
            raise KeyboardInterrupt


def test_interrupted_run_resumes_without_remeasuring(tmp_path: Path) -> None:
    out = tmp_path / "r.yaml"
    kw: dict[str, Any] = {
        "device": "cpu",
        "output": out,
        "quick": True,
        "progress": False,
        "suites": ("overhead", "memory", "gemm"),
    }
    # GIVEN a run interrupted after 6 measurements (no GEMM yet, so nothing to fit)
    first = StopAfter(n=6)
    with pytest.raises(CalibrationError, match="interrupted before enough was measured"):
        run_calibration(budget_s=20, on_record=first, **kw)
    jsonl = measurements_path(out)
    kept = [json.loads(line) for line in jsonl.read_text().splitlines()[1:]]
    assert [r["key"] for r in kept] == first.seen
    # WHEN resumed, and interrupted again once GEMMs at the first two M levels exist
    second = StopAfter(key="/m64")
    prof = run_calibration(budget_s=20, resume=True, on_record=second, **kw)
    # THEN the first six were reused, not measured again, and the profile says it was interrupted
    assert not set(first.seen) & set(second.seen)
    assert prof.provenance["reused"] == 6 and prof.provenance["interrupted"] is True
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [r for r in lines if r.get("key") in first.seen] == kept
    assert load_profile(out) == prof


def test_resume_refuses_measurements_from_other_conditions(tmp_path: Path) -> None:
    out = tmp_path / "x.yaml"
    header = {
        "type": "header",
        "version": 1,
        "device": "h100-sxm",
        "device_name": "NVIDIA H100 80GB HBM3",
        "threads": None,
        "world_size": 1,
    }
    measurements_path(out).write_text(json.dumps(header) + "\n")
    with pytest.raises(CalibrationError, match="different conditions"):
        Runner(RunConfig(device="cpu", output=out, resume=True, suites=("overhead",))).run()


def _rank_logs(log_dir: Path) -> str:
    """Every rank's full stdout and stderr as torchrun wrote them under ``--log-dir`` (``-r 3``)."""
    parts = []
    for f in sorted(log_dir.rglob("*.log")):
        text = f.read_text(errors="replace")
        parts.append(f"--- {f.relative_to(log_dir)} ---\n{text}")
    return "\n".join(parts) or "(torchrun wrote no rank logs)"


def test_collectives_under_torchrun_fit_the_comm_block(tmp_path: Path) -> None:
    """GIVEN two gloo ranks under torchrun; WHEN calibrating with a short budget; THEN rank 0 measured
    all-reduce and all-gather and fitted the comm block.

    Each rank's output goes to its own log file (``--log-dir``, ``-r 3``) and a failure shows them all.
    The failure seen once (``rank 1 exited 2``) is reproduced by starving the budget (``--budget 3``):
    rank 0 stops with "no usable GEMM measurement, so no compute ceiling can be fitted" and rank 1,
    waiting for the profile, reports "rank 0 wrote no profile" — torchrun names rank 1, and the last
    2,000 characters of its stderr did not hold rank 0's message. A 14 s budget shared by two ranks,
    the collective suite and the test's own load on a 2-core VM left GEMM too little time; 30 s does not.
    """
    out = tmp_path / "d.yaml"
    logs = tmp_path / "logs"
    torchrun = Path(sys.executable).with_name("torchrun")
    cmd = [
        str(torchrun),
        "--standalone",
        "--nproc_per_node",
        "2",
        "--log-dir",
        str(logs),
        "-r",
        "3",
        "-m",
        "calibrate",
        "--device",
        "cpu",
        "--budget",
        "30",
        "--quick",
        "--no-progress",
        "--suites",
        "collective,overhead,memory,gemm",
        "-o",
        str(out),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, f"torchrun exited {done.returncode}\n{done.stderr}\n{_rank_logs(logs)}"
    recs = [json.loads(line) for line in measurements_path(out).read_text().splitlines()[1:]]
    kinds = {r["params"]["kind"] for r in recs if r["suite"] == "collective" and r["status"] == "ok"}
    assert kinds == {"all_reduce", "all_gather"}
    prof = load_profile(out)
    assert prof.comm.sources[0].startswith("measured: 2 ranks") and 0 < prof.comm.link_efficiency <= 1.5


# ---- bad conditions ---------------------------------------------------------------------------
def test_no_gpu_request_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(CalibrationError, match=r"no CUDA device; use --device cpu"):
        run_calibration(device="cuda:0", output=tmp_path / "g.yaml", progress=False)
    cmd = [sys.executable, "-m", "calibrate", "--device", "cuda", "-o", str(tmp_path / "g.yaml")]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "no CUDA device; use --device cpu" in done.stderr


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1e-3, 0.0])
def test_check_timing_rejects_absurd_samples(bad: float) -> None:
    note = check_timing(Timing((1e-3, bad, 1e-3), 1, HOST_METHOD), 1e6, 1e6, 1e12, 1e11)
    assert note is not None and "absurd timing rejected" in note
    assert check_timing(Timing((1e-3,) * 3, 1, HOST_METHOD), 1e6, 1e6, 1e12, 1e11) is None
    fast = check_timing(Timing((1e-9,) * 3, 1, HOST_METHOD), 1e6, 0, 1e12, 1e11)
    assert fast is not None and "exceeds the plausible limit" in fast


def test_runner_records_rejections_oom_and_unsupported_dtypes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a timer that returns NaN, a tf32 request on a CPU and a case that runs out of memory
    monkeypatch.setattr(HostTimer, "measure", lambda self, bench: Timing((math.nan,) * 5, 1, HOST_METHOD))
    cfg = RunConfig(
        device="cpu", budget_s=20, output=tmp_path / "b.yaml", quick=True, dtypes=("tf32",), suites=("overhead", "gemm")
    )
    runner = Runner(cfg)
    res = runner.run()
    by_key = {r["key"]: r for r in res.records}
    # THEN NaN timings are rejected with a note, tf32 is skipped with the reason, nothing crashed
    assert by_key["overhead/tiny"]["status"] == "rejected"
    assert "absurd timing rejected" in by_key["overhead/tiny"]["note"]
    assert by_key["gemm/tf32/unsupported"]["status"] == "skipped"
    assert "tf32" in by_key["gemm/tf32/unsupported"]["note"]

    def oom() -> Bench:
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1e12 bytes")

    rec = runner._measure(Case("gemm", "gemm/fp32/huge", {"dtype": "fp32"}, oom), runner.ctx, runner.host, runner.dev)
    assert rec["status"] == "skipped" and rec["note"].startswith("out of memory at this size")


def test_gpu_names_map_to_bundled_slugs() -> None:
    import roofline

    assert gpu_slug("NVIDIA H200") == "h200-sxm"
    assert gpu_slug("NVIDIA H100 80GB HBM3") == "h100-sxm"
    assert gpu_slug("NVIDIA A100-SXM4-80GB") == "a100-80gb-sxm"
    assert gpu_slug("Some Future GPU") is None
    for name in ("NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S"):
        slug = gpu_slug(name)
        assert slug is not None and roofline.hardware(slug).name == slug


def test_core_imports_stay_torch_free() -> None:
    code = "import sys, roofline, calibrate.cli, calibrate.fitting.fit; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
