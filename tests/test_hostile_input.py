"""Regression tests for issue 15 (reliability under hostile input), one group per row of its table.

Every test names its row. The properties: no input makes roofline hang or grow without bound
(limits in roofline.boundary.limits, checked at the boundary); every failure is a RooflineError naming the
file or option and a fix, and the CLI exits 2 (never 3, never a traceback); output paths are
checked before any work and only regular files are ever replaced.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import roofline
from roofline.boundary.outputs import OutputError, check_output, write_output
from roofline.cli.app import app
from roofline.errors import CalibrationError, RooflineError, ScenarioError, SpecError
from roofline.profile import DEFAULT_PROFILE_PATH
from roofline.specs.library import spec_path

runner = CliRunner()
MODEL_TEXT = spec_path("model", "llama-3.1-8b").read_text(encoding="utf-8")
DEFAULT_PROFILE = DEFAULT_PROFILE_PATH


def run(*args: str, env: dict[str, str] | None = None) -> Any:
    res = runner.invoke(app, list(args), env=env)
    assert "Traceback" not in res.output, res.output
    assert res.exit_code != 3, res.output  # 3 = "internal error … a bug in roofline"
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def no_report_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make building a report fail the test: a refusal must come before any work (how fast each refusal
    is answered is measured by benchmarks/hostile_input.py)."""

    def build(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the report was computed before its destination was refused")

    monkeypatch.setattr("roofline.report.api.build", build)


def model_yaml(tmp_path: Path, **replace: str) -> Path:
    """A copy of the llama-3.1-8b spec with top-level lines replaced (key: new text)."""
    lines = []
    for line in MODEL_TEXT.splitlines():
        key = line.split(":", 1)[0]
        lines.append(f"{key}: {replace[key]}" if key in replace and not line.startswith(" ") else line)
    path = tmp_path / "m.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ---- row 1: -o naming a device, FIFO or symlink is never replaced --------------------------------
def fake_report() -> Any:
    from roofline.report.api import Report

    return Report(data=None, html="<html>report</html>")  # type: ignore[arg-type]


def test_row1_symlink_and_fifo_are_not_replaced(tmp_path: Path) -> None:
    target = tmp_path / "real.html"
    target.write_text("keep", encoding="utf-8")
    link = tmp_path / "link.html"
    link.symlink_to(target)
    fifo = tmp_path / "pipe.html"
    os.mkfifo(fifo)
    for path in (link, fifo):
        with pytest.raises(OutputError, match=r"symbolic link|not a regular file"):
            fake_report().save(path, force=True)
    assert link.is_symlink() and target.read_text(encoding="utf-8") == "keep"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.html", "pipe.html", "real.html"]  # no temp left


def test_row1_char_device_refused_and_streams_written_through(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    tty_like = Path("/dev/zero")  # a character device that is not one of the stream names
    with pytest.raises(OutputError, match="not a regular file"):
        check_output(tty_like, force=True)
    for name in ("-", "/dev/stdout", "/dev/null"):
        assert check_output(name).stream
    before = os.lstat("/dev/null")
    write_output(check_output("/dev/null"), "discarded")
    after = os.lstat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino  # written through, not replaced
    write_output(check_output("-"), "to stdout\n")
    assert "to stdout" in capfd.readouterr().out


def test_row1_cli_report_refuses_a_link_before_computing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    link = tmp_path / "r.html"
    link.symlink_to(tmp_path / "elsewhere.html")
    no_report_built(monkeypatch)
    res = run("report", "llama-3.1-8b", "-H", "h100-sxm", "-o", str(link), "--force")
    assert res.exit_code == 2 and "symbolic link" in res.stderr
    assert link.is_symlink()


# ---- row 2: plan with an enormous --qps finishes --------------------------------------------------
def test_row2_plan_huge_qps_is_bounded() -> None:
    res = run("plan", "llama-3.1-70b", "--qps", "1e12", "--ttft-slo", "2s", "--tpot-slo", "100ms")
    assert res.exit_code == 2 and "MAX_QPS" in res.stderr
    r = roofline.plan(
        "llama-3.1-70b",
        qps=1e9,
        prompt_len=2048,
        output_len=256,
        ttft_slo_s=2,
        tpot_slo_s=0.1,
        hardware=["h100-sxm"],
        max_gpus=8,
    )
    assert r.recommended is None  # answered (benchmarks/hostile_input.py times it), not hung


def test_row2_replicas_are_the_fewest_that_satisfy_littles_law() -> None:
    """Sizing by doubling + bisection must give the same replicas as the one-by-one loop it replaced.

    With λ = qps/r, ρ = λ·t_pre, TPOT = t_dec/(1−ρ), requests in flight = λ·(TTFT + (O−1)·TPOT):
    the plan's r satisfies in-flight ≤ B and r − 1 does not (or r = ceil(qps/λ_max)).
    """
    for qps in (0.5, 37.0, 1234.5, 2.5e5):
        res = roofline.plan(
            "llama-3.1-8b",
            qps=qps,
            prompt_len=2048,
            output_len=256,
            ttft_slo_s=2,
            tpot_slo_s=0.05,
            hardware=["h100-sxm"],
        )
        c = res.recommended
        assert c is not None

        def in_flight(r: int, c: Any = c, qps: float = qps) -> float:
            lam = qps / r
            tpot = c.t_decode_s / (1 - lam * c.t_prefill_s)
            return lam * (c.t_prefill_s + c.t_decode_s + 255 * tpot)

        r0 = max(1, -(-qps // c.replica_rps))
        assert in_flight(c.replicas) <= c.batch
        assert c.replicas == r0 or in_flight(c.replicas - 1) > c.batch


# ---- row 3: a model YAML with a billion layers -----------------------------------------------------
def test_row3_layer_count_is_limited(tmp_path: Path) -> None:
    path = model_yaml(tmp_path, num_layers="1000000000")
    with pytest.raises(SpecError, match="num_layers"):
        roofline.model(str(path))


# ---- row 4: an alias bomb in a user spec folder --------------------------------------------------
BOMB = "".join(
    f"{a}: &{a} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['lol'] * 9)}]\n"
    for p, a in zip(["", "a", "b", "c", "d", "e", "f", "g"], "abcdefgh", strict=True)
)


def test_row4_alias_bomb_is_rejected_quickly(tmp_path: Path) -> None:
    (tmp_path / "bomb.yaml").write_text(BOMB + "name: bomb\naliases: *h\n", encoding="utf-8")
    env = {"ROOFLINE_SPECS_PATH": str(tmp_path)}
    res = run("predict", "llama-2-7b", "h100-sxm", "--json", env=env)
    assert res.exit_code == 0
    res = run("model", "show", "bomb", env=env)
    assert res.exit_code == 2 and "bomb.yaml" in res.stderr and "100,000 YAML nodes" in res.stderr


# ---- row 5: --output 1G ----------------------------------------------------------------------------
def test_row5_huge_output_len_is_refused_at_the_boundary() -> None:
    res = run("predict", "llama-2-7b", "h100-sxm", "--output", "1G")
    assert res.exit_code == 2 and "MAX_SEQUENCE_TOKENS" in res.stderr
    with pytest.raises(ScenarioError, match="output_len"):
        roofline.predict("llama-2-7b", "h100-sxm", output_len=10**9)


# ---- row 6: sweep ranges are counted before they are expanded --------------------------------------
def test_row6_sweep_ranges_are_bounded() -> None:
    res = run("sweep", "llama-2-7b", "h100-sxm", "--batch", "1..1000000000:1")
    assert res.exit_code == 2
    res = run("sweep", "llama-2-7b", "h100-sxm", "--prompt", "1..1000000:1")
    assert res.exit_code == 2 and "MAX_LIST_VALUES" in res.stderr
    res = run("sweep", "llama-2-7b", "h100-sxm", "--batch", "1..5000:1", "--prompt", "1..300:1")
    assert res.exit_code == 2 and "MAX_SWEEP_POINTS" in res.stderr


# ---- row 7: model import of a device or a huge file -------------------------------------------------
def test_row7_import_reads_only_bounded_regular_files(tmp_path: Path) -> None:
    res = run("model", "import", "/dev/zero")
    assert res.exit_code == 2 and "not a regular file" in res.stderr
    big = tmp_path / "config.json"
    with big.open("wb") as fh:
        fh.truncate(5 * 2**20)
    res = run("model", "import", str(big))
    assert res.exit_code == 2 and "limit" in res.stderr and "config.json" in res.stderr


# ---- row 8: inputs that used to raise non-project errors ("internal error", exit 3) -----------------
@pytest.mark.parametrize(
    "args",
    [
        ("predict", "llama-2-7b", "h100-sxm", "--prompt", "1e30"),
        ("sweep", "llama-2-7b", "h100-sxm", "--tp", "1e30..1e31"),
        ("predict", "llama-2-7b", "h100-sxm", "--tp", "99999999999999999999"),
        ("predict", "llama-2-7b", "h100-sxm", "--batch", "inf"),
        ("plan", "llama-2-7b", "--qps", "nan", "--ttft-slo", "1s", "--tpot-slo", "50ms"),
        ("plan", "llama-2-7b", "--qps", "1", "--ttft-slo", "1e999", "--tpot-slo", "50ms"),
    ],
)
def test_row8_cli_values_exit_2(args: tuple[str, ...]) -> None:
    res = run(*args)
    assert res.exit_code == 2 and res.stderr.startswith("error: ")


def test_row8_spec_files_that_used_to_crash(tmp_path: Path) -> None:
    path = model_yaml(tmp_path, num_layers=str(2**63))
    with pytest.raises(SpecError, match="num_layers"):
        roofline.model(str(path))
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 1000 + "]" * 1000 + "\n", encoding="utf-8")
    with pytest.raises(SpecError, match="nests more than"):
        roofline.model(str(deep))
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "x.yaml").write_text("name: x\naliases: 5\n", encoding="utf-8")
    res = run("model", "show", "x", env={"ROOFLINE_SPECS_PATH": str(tmp_path / "user")})
    assert res.exit_code == 2 and "x.yaml" in res.stderr and "aliases" in res.stderr


PLAN = {"qps": 1.0, "prompt_len": 128, "output_len": 16, "ttft_slo_s": 1.0, "tpot_slo_s": 0.1, "hardware": ["h100-sxm"]}
API_CASES: list[tuple[str, Any]] = [
    *[(f"hardware({n!r})", lambda n=n: roofline.hardware(n)) for n in (None, 5, "a\x00b", "x" * 5000, "/dev/zero")],
    *[(f"model({n!r})", lambda n=n: roofline.model(n)) for n in (None, ["x"], "a\x00b.yaml", "~nouser/x.yaml", "/")],
    *[(f"load_profile({n!r})", lambda n=n: roofline.load_profile(n)) for n in (5, b"x", ["p"], "a\x00b", "/dev/zero")],
    *[(f"model_from_hf_config({n!r})", lambda n=n: roofline.model_from_hf_config(n)) for n in ("a\x00b", "/", 5)],
    *[
        (f"plan({kw})", lambda kw=kw: roofline.plan("llama-2-7b", **{**PLAN, **kw}))
        for kw in ({"qps": float("nan")}, {"qps": True}, {"qps": "1"}, {"prompt_len": 1.5}, {"max_gpus": 0.5},
                   {"tp_options": [1.5]}, {"tp_options": "abc"}, {"prices": {"h100-sxm": "x"}}, {"prices": [1]},
                   {"calibration": 5}, {"kv_dtype": ""}, {"tp_options": list(range(1, 10_001))})
    ],
    *[
        (f"predict({kw})", lambda kw=kw: roofline.predict("llama-2-7b", "h100-sxm", **kw))
        for kw in ({"tp": 1.0}, {"pp": 10**30}, {"engine_overrides": {"memory_fraction": "x"}},
                   {"engine_overrides": {"memory_fraction": None}}, {"engine_overrides": {"max_num_seqs": 1.5}},
                   {"engine_overrides": [1]}, {"engine": 5}, {"calibration": b"x"}, {"scenario": 5}, {"batch": [1]})
    ],
    *[
        (f"sweep({kw})", lambda kw=kw: roofline.sweep("llama-2-7b", "h100-sxm", **kw))
        for kw in ({"batch": [[1, 2]]}, {"batch": [0, []]}, {"prompt_len": []}, {"tp": [10**30]}, {"tp": 1.5},
                   {"batch": list(range(1, 2001)), "prompt_len": list(range(1, 2001)), "output_len": [2, 3]})
    ],
]  # fmt: skip


@pytest.mark.parametrize(("label", "call"), API_CASES, ids=[c[0][:60] for c in API_CASES])
def test_row8_api_raises_only_project_errors(label: str, call: Any) -> None:
    """Each of these raised ValueError, TypeError, AttributeError, OverflowError or MemoryError before."""
    with pytest.raises(RooflineError):
        call()


# ---- row 9: undecodable files are named --------------------------------------------------------------
def test_row9_non_utf8_and_huge_integers_name_the_file(tmp_path: Path) -> None:
    spec = tmp_path / "latin1.yaml"
    spec.write_bytes(MODEL_TEXT.encode("utf-8").replace(b"display_name: ", b"display_name: \xff"))
    with pytest.raises(SpecError, match=r"latin1\.yaml is not UTF-8.*0xff"):
        roofline.model(str(spec))
    prof = tmp_path / "p.yaml"
    prof.write_bytes(b"name: \xfe\n")
    with pytest.raises(CalibrationError, match=r"p\.yaml is not UTF-8"):
        roofline.load_profile(prof)
    cfg = tmp_path / "config.json"
    cfg.write_text('{"architectures": ["LlamaForCausalLM"], "num_hidden_layers": ' + "9" * 5001 + "}")
    with pytest.raises(SpecError, match=r"config\.json"):
        roofline.model_from_hf_config(cfg)


# ---- row 10: output destinations are checked first, temp files never left, mode kept ----------------
def test_row10_bad_destinations_fail_before_work_and_leave_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "existing-dir"
    folder.mkdir()
    no_report_built(monkeypatch)
    for out, words in ((str(folder), "is a folder"), ("", "is a folder")):  # click reads '' as the path '.'
        res = run("report", "llama-3.1-8b", "-H", "h100-sxm", "-o", out)
        assert res.exit_code == 2 and words in res.stderr
        assert ".tmp" not in res.stderr
    if os.geteuid() != 0:  # root writes into read-only folders
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        res = run("report", "llama-3.1-8b", "-H", "h100-sxm", "-o", str(ro / "r.html"))
        assert res.exit_code == 2 and "not writable" in res.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["existing-dir", "ro"][: 1 + (os.geteuid() != 0)]


def test_row10_force_required_and_mode_kept(tmp_path: Path) -> None:
    out = tmp_path / "sweep.csv"
    out.write_text("old", encoding="utf-8")
    out.chmod(0o600)
    res = run("sweep", "llama-2-7b", "h100-sxm", "-o", str(out))
    assert res.exit_code == 2 and "--force" in res.stderr and out.read_text(encoding="utf-8") == "old"
    assert run("sweep", "llama-2-7b", "h100-sxm", "-o", str(out), "--force").exit_code == 0
    assert out.read_text(encoding="utf-8").startswith("batch") or "batch" in out.read_text(encoding="utf-8")
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    with pytest.raises(OutputError, match="--force"):
        fake_report().save(out, force=False)


def test_row10_failed_write_removes_its_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OutputError, match="No space left"):
        write_output(tmp_path / "x.html", "data")
    assert list(tmp_path.iterdir()) == []


# ---- row 11: one broken user spec breaks only lookups of it -------------------------------------------
def test_row11_broken_user_file_is_isolated(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("name: [unclosed\n", encoding="utf-8")
    env = {"ROOFLINE_SPECS_PATH": str(tmp_path)}
    assert run("predict", "llama-2-7b", "h100-sxm", "--json", env=env).exit_code == 0
    res = run("hardware", "list", env=env)
    assert res.exit_code == 0 and "h100-sxm" in res.stdout and "broken.yaml" in res.stderr
    res = run("model", "show", "broken", env=env)
    assert res.exit_code == 2 and "broken.yaml is not valid YAML" in res.stderr
    res = run("model", "show", "no-such-model", env=env)
    assert res.exit_code == 2 and "broken.yaml" in res.stderr


# ---- row 12: duplicate keys -------------------------------------------------------------------------------
def test_row12_duplicate_keys_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(MODEL_TEXT + "num_layers: 4\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"^\S+dup\.yaml: key 'num_layers' appears twice.*lines \d+ and \d+"):
        roofline.model(str(path))


# ---- row 13: non-counts accepted as counts ----------------------------------------------------------------
@pytest.mark.parametrize("kw", [{"batch": 1.5}, {"batch": True}, {"prompt_len": float("nan")}, {"output_len": "8"}])
def test_row13_api_rejects_non_counts(kw: dict[str, Any]) -> None:
    with pytest.raises(ScenarioError, match="whole number"):
        roofline.predict("llama-2-7b", "h100-sxm", **kw)


def test_row13_cli_rejects_non_ascii_digits_and_empty_formats() -> None:
    res = run("predict", "llama-2-7b", "h100-sxm", "--batch", "١٢٣")
    assert res.exit_code == 2 and "--batch" in res.stderr
    res = run(
        "plan", "llama-2-7b", "--qps", "1", "--ttft-slo", "1s", "--tpot-slo", "50ms", "-H", "h100-sxm", "--kv-dtype", ""
    )
    assert res.exit_code == 2 and "kv_dtype" in res.stderr


# ---- row 14: tp beyond one scale-up domain --------------------------------------------------------------
def test_row14_tp_beyond_the_domain_is_priced_and_flagged_never_silent() -> None:
    """tp beyond one scale-up domain is allowed (issue 11: priced over the scale-out path) but never
    silently treated as one fabric: the CLI prints the slow-link warning and the API result names it."""
    res = run("predict", "llama-3.1-70b", "h100-sxm", "--tp", "64")
    assert res.exit_code == 0 and "slow link" in res.stdout and "scale-out" in res.stdout
    r = roofline.predict("llama-3.1-70b", "h100-sxm", tp=64)
    assert "8-GPU nvlink domain" in r.summary()["link_notes"]
    one = roofline.predict("llama-3.1-70b", "gb200", tp=64)  # NVL72: 72 GPUs on one NVLink fabric
    assert one.scenario.tp == 64 and not one.summary()["link_notes"]


# ---- row 15: calibration interrupts, torn lines, edited records -----------------------------------------
def test_row15_interrupted_calibration_exits_130_and_says_how_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import calibrate.cli as real

    fake = types.ModuleType("calibrate.cli")
    fake.run_calibration = lambda **kw: types.SimpleNamespace(provenance={"interrupted": True})  # type: ignore[attr-defined]
    fake.interrupted_message = real.interrupted_message  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "calibrate.cli", fake)
    out = tmp_path / "cpu.yaml"
    res = run("calibrate", "--device", "cpu", "--budget", "5s", "-o", str(out))
    assert res.exit_code == 130
    assert "--resume" in res.stderr and "cpu.measurements.jsonl" in res.stderr


def store_header() -> dict[str, Any]:
    return {"device": "cpu", "device_name": "x", "threads": 1, "world_size": 1}


def test_row15_resume_after_a_torn_line_starts_a_new_line(tmp_path: Path) -> None:
    from calibrate.measure.store import Store

    path = tmp_path / "cpu.measurements.jsonl"
    ok = {"key": "gemm:a", "suite": "gemm", "status": "ok", "params": {}, "median_s": 1e-3, "samples_s": [1e-3]}
    path.write_text(
        json.dumps({"type": "header", "version": 1, **store_header()}) + "\n" + json.dumps(ok) + "\n" + '{"key": "ge',
        encoding="utf-8",
    )
    store = Store(path, store_header(), resume=True)
    assert store.done("gemm:a") and store.bad_lines == 1
    store.add({**ok, "key": "gemm:b"})
    lines = path.read_text(encoding="utf-8").splitlines()
    assert all(isinstance(json.loads(line), dict) for line in lines)  # nothing appended onto the torn line
    assert Store(path, store_header(), resume=True).done("gemm:b")


@pytest.mark.parametrize("bad", ['"fast"', "NaN", "-1", "0"])
def test_row15_invalid_records_are_rejected_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    from calibrate.measure.store import Store

    path = tmp_path / "cpu.measurements.jsonl"
    head = json.dumps({"type": "header", "version": 1, **store_header()})
    rec = '{"key": "gemm:a", "suite": "gemm", "status": "ok", "params": {}, "median_s": ' + bad + "}"
    path.write_text(f"{head}\n{rec}\n[1, 2, 3]\n", encoding="utf-8")
    store = Store(path, store_header(), resume=True)
    assert not store.done("gemm:a") and store.records() == []
    err = capsys.readouterr().err
    assert "warning:" in err and "2 invalid record(s)" in err and "median_s" in err


def test_row15_unreadable_store_is_a_calibration_error(tmp_path: Path) -> None:
    from calibrate.measure.store import Store

    path = tmp_path / "cpu.measurements.jsonl"
    path.mkdir()
    with pytest.raises(CalibrationError, match="calibration store"):
        Store(path, store_header(), resume=True)


# ---- row 16: profile errors -------------------------------------------------------------------------------
def test_row16_profile_errors_point_at_the_profile_schema(tmp_path: Path) -> None:
    text = DEFAULT_PROFILE.read_text(encoding="utf-8")
    assert "efficiency: " in text
    head, tail = text.split("efficiency: ", 1)
    path = tmp_path / "nan.yaml"
    path.write_text(head + "efficiency: .nan" + tail[tail.index("\n") :], encoding="utf-8")
    with pytest.raises(CalibrationError) as info:
        roofline.load_profile(path)
    msg = str(info.value)
    assert "finite" in msg and "1.5" not in msg and "roofline schema profile" in msg and "schema model" not in msg
    res = run("schema", "profile")
    assert res.exit_code == 0 and "gemm_m_efficiency" in res.stdout


def test_every_error_is_the_project_type() -> None:
    """The error classes added for this issue are RooflineErrors with the documented exit codes."""
    from roofline.errors import Interrupted

    assert issubclass(OutputError, RooflineError) and OutputError.exit_code == 2
    assert issubclass(Interrupted, RooflineError) and Interrupted.exit_code == 130


def test_row15_sigint_during_calibration_exits_130_with_a_resume_command(tmp_path: Path) -> None:
    """A real Ctrl-C: the profile is fitted from what was measured, the exit code is 130 and stderr
    gives the command that continues the run; that command then reuses every finished measurement."""
    out = tmp_path / "cpu.yaml"
    args = ["roofline", "calibrate", "--device", "cpu", "--budget", "60s", "--quick", "-o", str(out)]
    # the Ctrl-C arrives at a fixed point of the run, not after a wait: the process sends itself SIGINT once its
    # third GEMM is measured (a real signal, handled by the same code as a user's Ctrl-C)
    interrupt_after_three_gemms = (
        "import os, signal, sys\n"
        "from calibrate.measure.runner import Runner\n"
        "real, seen = Runner._measure, []\n"
        "def measure(self, case, *a, **k):\n"
        "    rec = real(self, case, *a, **k)\n"
        "    if case.suite == 'gemm' and rec.get('status') == 'ok':\n"
        "        seen.append(case.key)\n"
        "        if len(seen) == 3:\n"
        "            os.kill(os.getpid(), signal.SIGINT)\n"
        "    return rec\n"
        "Runner._measure = measure\n"
        # Python turns SIGINT into KeyboardInterrupt only where it was not ignored at start-up, and a background job
        # of a non-interactive shell starts with it ignored: install the terminal's handler, as a user's shell has
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        f"sys.argv = {args!r}\n"
        "from roofline.cli.app import main\n"
        "main()\n"
    )
    cmd = [sys.executable, "-c", interrupt_after_three_gemms]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    store = tmp_path / "cpu.measurements.jsonl"
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "--resume" in err and str(store) in err and "Traceback" not in err
    if out.is_file():  # fitted from what was measured (else the error said what was missing)
        assert roofline.load_profile(out).provenance["interrupted"] is True


def test_row10_every_writer_needs_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """model import, accuracy and `python -m calibrate` refuse an existing file before any work, like report/sweep."""
    from calibrate.__main__ import main as calibrate_main

    out = tmp_path / "existing"
    out.write_text("keep", encoding="utf-8")
    config = Path(__file__).parent / "fixtures" / "configs" / "Qwen2.5-7B.json"
    for args in (("model", "import", str(config), "-o", str(out)), ("accuracy", "--json", "-o", str(out))):
        res = run(*args)
        assert res.exit_code == 2 and "--force" in res.stderr

    def measure(**kwargs: Any) -> Any:
        raise AssertionError("python -m calibrate measured before refusing its destination")

    monkeypatch.setattr("calibrate.cli.run_calibration", measure)
    assert calibrate_main(["--device", "cpu", "-o", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == "keep"
