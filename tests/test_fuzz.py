"""Bounded fuzzing of every boundary a user controls (issue 15): the CLI, the spec, config.json and
profile loaders, the calibration store, workloads and the prediction API.

Properties asserted on every generated case:

* only :class:`~roofline.errors.RooflineError` escapes the API (never ValueError, TypeError,
  RecursionError, OverflowError, UnicodeDecodeError …);
* the CLI exits 0, 1 or 2 (never 3, "internal error"), never prints a traceback, and the process
  stays under ``RSS_BUDGET_BYTES`` of memory (how long each case takes, target 5 s, is measured by
  ``benchmarks/hostile_input.py``, which runs these same cases);
* results that come back are finite and positive where they must be.

Inputs mix valid values with the classes of hostile input the issue lists: huge and non-finite
numbers, fractions, booleans, non-ASCII digits, empty strings, long ranges, alias bombs, deep
nesting, duplicate keys, non-UTF-8 bytes, huge integers, wrong types. Runs are derandomized (the
same cases every run, so CI is reproducible) and take seconds, well under two minutes; raise
``FUZZ_SCALE`` locally to explore more (``FUZZ_SCALE=20`` runs 20× the cases with fresh random
seeds). The serving simulator's inputs are covered too: trace files (arbitrary JSON lines and
bytes) and the simulate command's rates, length distributions, request counts and engines.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import resource
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import roofline
from roofline.cli.app import app
from roofline.errors import RooflineError
from roofline.profile import DEFAULT_PROFILE_PATH
from roofline.specs.library import spec_path

SCALE = max(1, int(os.environ.get("FUZZ_SCALE", "1")))
RSS_BUDGET_BYTES = 3 * 2**30
STATUS, CLEAR_REFS = Path("/proc/self/status"), Path("/proc/self/clear_refs")
FUZZ = settings(
    max_examples=100 * SCALE,
    deadline=None,  # no wall-clock gate: benchmarks/hostile_input.py times every case
    derandomize=SCALE == 1,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
runner = CliRunner()

HOSTILE_NUMBERS = [
    "0", "-1", "1.5", "1e30", "1e999", "-1e999", "nan", "inf", "99999999999999999999", "2**63", "١٢٣", "１２",
    "", " ", "1k", "2M", "1G", "0x10", "1_000", "1e-300", "٣k", "1..1000000000:1", "1,2..1e30", "1..0", "5..5:0",
    "1,,2", "a", "1e308", "-0", "1" * 400,
]  # fmt: skip
VALID_NUMBERS = ["1", "2", "8", "128", "1k", "2048", "1,2,4", "1..64", "256..1024:256"]
NUMBER = st.sampled_from(HOSTILE_NUMBERS + VALID_NUMBERS) | st.text(max_size=12)
NAME = st.sampled_from(
    [
        "llama-2-7b",
        "llama-3.1-70b",
        "h100-sxm",
        "mi300x",
        "",
        "../../etc/passwd",
        "a" * 300,
        "x.yaml",
        "/dev/zero",
        "gb200",
        "deepseek-v3",
    ]
) | st.text(max_size=16)
DTYPE = st.sampled_from(["bf16", "fp8", "int4", "", "fp64", "FLOAT16", "nvfp4"]) | st.text(max_size=6)
DURATION = st.sampled_from(["500ms", "0.5s", "0", "-1s", "nan", "inf", "1e999", "50 ms", "1h", "", "1 fortnight"])


HOSTILE_DIR = Path(__file__).parent / "fixtures" / "hostile_specs"
OUT_DIR = Path(tempfile.mkdtemp(prefix="roofline-fuzz-"))
FILES = st.sampled_from(
    [str(p) for p in sorted(HOSTILE_DIR.glob("*.yaml"))]
    + [str(DEFAULT_PROFILE_PATH), "/dev/zero", "/dev/null", "missing.yaml", str(HOSTILE_DIR), "", "x.json"]
)
OUTPUTS = st.sampled_from(
    [
        str(OUT_DIR / "a.csv"),
        str(OUT_DIR / "b.json"),
        str(OUT_DIR / "new" / "c.csv"),
        str(OUT_DIR),
        "/dev/null",
        "-",
        "",
        str(OUT_DIR / "a.txt"),
        "/proc/version",
    ]
)


LEVEL = st.sampled_from(["0.8", "0.5", "0", "1", "1.5", "-0.1", "nan", "80%", "", "0.999999999", "x"])
ENGINE_SET = st.sampled_from(
    [
        "memory_fraction=0.5",
        "max_num_seqs=1e30",
        "x=1",
        "=",
        "memory_fraction=nan",
        "max_num_batched_tokens=-1",
        "gpu_memory_utilization=2",
        "max_num_seqs=٣",
    ]
)


def reset_peak() -> None:
    """Start a new peak-memory window for one case: on Linux, writing 5 to /proc/self/clear_refs resets the
    process's peak resident set (VmHWM) to its current size, so an earlier test's peak (e.g. calibrate's
    two arrays of 2 × last-level cache) is not charged to a fuzz case."""
    with contextlib.suppress(OSError):
        CLEAR_REFS.write_text("5", encoding="ascii")


def rss_bytes() -> int:
    """Peak resident memory of this process since reset_peak (VmHWM), else since it started (ru_maxrss, KiB)."""
    try:
        hwm = re.search(r"^VmHWM:\s+(\d+) kB", STATUS.read_text(encoding="ascii"), re.M)
    except OSError:
        hwm = None
    return int(hwm.group(1)) * 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def invoke(args: list[str]) -> Any:
    reset_peak()
    res = runner.invoke(app, args)
    assert res.exit_code in (0, 1, 2), (args, res.exit_code, res.output[-2000:])
    assert "Traceback" not in res.output, (args, res.output[-2000:])
    assert res.exception is None or isinstance(res.exception, SystemExit), (args, repr(res.exception))
    assert rss_bytes() < RSS_BUDGET_BYTES, (args, rss_bytes())
    return res


# ---- the CLI -------------------------------------------------------------------------------------
@st.composite
def cli_args(draw: st.DrawFn) -> list[str]:
    cmd = draw(st.sampled_from(["predict", "sweep", "compare", "plan", "show", "schema", "import", "cal-show"]))
    model, hw = draw(NAME), draw(NAME)
    if cmd == "import":
        out = draw(st.sampled_from([[], ["-o"]]))
        out += [draw(OUTPUTS)] if out else []
        return ["model", "import", draw(FILES), *out, *draw(st.sampled_from([[], ["--force"]]))]
    if cmd == "cal-show":
        return ["calibrate", "show", draw(FILES)]
    if cmd == "show":
        return [draw(st.sampled_from(["model", "hardware"])), "show", model, *draw(st.sampled_from([[], ["--json"]]))]
    if cmd == "schema":
        return ["schema", draw(st.sampled_from(["model", "hardware", "profile", "gpu", ""]))]
    opts: dict[str, st.SearchStrategy[str]] = {
        "--batch": NUMBER,
        "--prompt": NUMBER,
        "--output": NUMBER,
        "--tp": NUMBER,
        "--pp": NUMBER,
        "--kv-dtype": DTYPE,
        "--weight-dtype": DTYPE,
        "--memory-utilization": NUMBER,
        "--calibration": FILES,
        "--engine": st.sampled_from(["vllm", "sglang", "trtllm", "ideal", "", "nope"]),
        "--engine-set": ENGINE_SET,
    }
    if cmd == "sweep":
        opts |= {
            "-o": OUTPUTS,
            "--format": st.sampled_from(["csv", "json", "xml", ""]),
            "--force": st.just(""),
            "--interval": LEVEL,
        }
    if cmd == "predict":
        opts |= {"--level": LEVEL, "--ep": NUMBER, "--engine-set": ENGINE_SET}
    if cmd == "plan":
        hws = st.sampled_from(["h100-sxm", "h100-sxm,mi300x", "", "nope"])
        opts = {
            "--prompt": NUMBER,
            "--output": NUMBER,
            "--tp": NUMBER,
            "--precision": DTYPE,
            "--kv-dtype": DTYPE,
            "--max-gpus": NUMBER,
            "--hardware": hws,
            "--confidence": LEVEL,
            "--engine-set": ENGINE_SET,
            "--price": st.sampled_from(
                [
                    "h100-sxm=2.5",
                    "h100-sxm=0",
                    "h100-sxm=nan",
                    "=1",
                    "x",
                    "nope=1",
                    "h100-sxm=$1e999",
                    "mi300x=1,h100-sxm=-2",
                ]
            ),
        }
        head = ["plan", model, "--qps", draw(NUMBER), "--ttft-slo", draw(DURATION), "--tpot-slo", draw(DURATION)]
    elif cmd == "compare":
        opts.pop("--pp")
        head = ["compare", model, "-H", draw(st.sampled_from(["h100-sxm,mi300x", "all", "", ",", "nope"]))]
    else:
        head = [cmd, model, hw, *(["--json"] if cmd == "predict" else [])]
    chosen = draw(st.lists(st.sampled_from(sorted(opts)), max_size=4, unique=True))
    args = list(head)
    for opt in chosen:
        value = draw(opts[opt])
        args += [opt, value] if opt != "--force" else [opt]
    return args


@FUZZ
@given(args=cli_args())
def test_cli_never_fails_internally(args: list[str]) -> None:
    invoke(args)


@settings(FUZZ, max_examples=25 * SCALE)
@given(args=cli_args())
def test_cli_with_a_hostile_spec_folder(args: list[str]) -> None:
    """The same, with ROOFLINE_SPECS_PATH holding an alias bomb, broken YAML and a deep document."""
    folder = HOSTILE_DIR
    old = os.environ.get("ROOFLINE_SPECS_PATH")
    os.environ["ROOFLINE_SPECS_PATH"] = str(folder)
    try:
        invoke(args)
    finally:
        if old is None:
            os.environ.pop("ROOFLINE_SPECS_PATH", None)
        else:
            os.environ["ROOFLINE_SPECS_PATH"] = old


# ---- the loaders ------------------------------------------------------------------------------------
SPEC_TEXTS = {
    "model": spec_path("model", "llama-3.1-8b").read_text(encoding="utf-8"),
    "hardware": spec_path("hardware", "h100-sxm").read_text(encoding="utf-8"),
    "profile": DEFAULT_PROFILE_PATH.read_text(encoding="utf-8"),
}
HOSTILE_SCALARS = [
    "1000000000", str(2**63), "-1", "0", ".nan", ".inf", "1.5", "true", "null", "''", "[]", "{}", "[1, 2, 3]",
    "1e999 GB", "80 GB", "\"\\xff\"", "!!python/object/apply:os.system ['true']", "*undefined", "&a [*a]",
    "'" + "9" * 5001 + "'", "9" * 5001, "[" * 60 + "]" * 60, "10 TFLOPS", "-3 TB/s", "٣", "{a: 1, a: 2}",
]  # fmt: skip


@st.composite
def mutated_yaml(draw: st.DrawFn, kind: str) -> bytes:
    """A real spec or profile with a few lines replaced, duplicated, truncated or corrupted."""
    lines = SPEC_TEXTS[kind].splitlines()
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["value", "dup", "drop", "indent", "garbage"]))
        if op == "value" and ":" in lines[i]:
            key = lines[i].split(":", 1)[0]
            lines[i] = f"{key}: {draw(st.sampled_from(HOSTILE_SCALARS) | st.text(max_size=20))}"
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "drop":
            del lines[i]
        elif op == "indent":
            lines[i] = "  " + lines[i]
        else:
            lines[i] = draw(st.text(max_size=30))
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(data)))
        data = data[:cut] + draw(st.binary(max_size=8)) + data[cut:]
    return data


def load(kind: str, path: Path) -> Any:
    if kind == "model":
        return roofline.model(str(path))
    if kind == "hardware":
        return roofline.hardware(str(path))
    return roofline.load_profile(path)


@FUZZ
@given(kind=st.sampled_from(["model", "hardware", "profile"]), data=st.data())
def test_loaders_raise_only_project_errors(tmp_path_factory: Any, kind: str, data: st.DataObject) -> None:
    raw = data.draw(mutated_yaml(kind))
    path = tmp_path_factory.mktemp("spec") / f"{kind}.yaml"
    path.write_bytes(raw)
    try:
        spec = load(kind, path)
    except RooflineError as exc:
        assert str(path) in str(exc) or path.name in str(exc), str(exc)
    else:
        if kind == "model":  # a spec that loads also predicts (or says why not)
            try:
                r = roofline.predict(spec, "h100-sxm", batch=1, prompt_len=64, output_len=8)
            except RooflineError:
                pass
            else:
                assert all(math.isfinite(x) and x >= 0 for x in (r.kv_bytes_per_token, r.weight_bytes_per_gpu))


JSON_SCALAR = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8)
JSON_VALUE = st.recursive(
    JSON_SCALAR, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4), max_leaves=12
)
CONFIG_KEYS = ["architectures", "num_hidden_layers", "hidden_size", "vocab_size", "intermediate_size",
               "num_attention_heads", "num_key_value_heads", "head_dim", "sliding_window", "text_config",
               "num_local_experts", "num_experts_per_tok", "torch_dtype", "max_position_embeddings"]  # fmt: skip
LLAMA = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 32, "hidden_size": 4096, "vocab_size": 32000,
         "intermediate_size": 11008, "num_attention_heads": 32, "num_key_value_heads": 8}  # fmt: skip


@FUZZ
@given(overrides=st.dictionaries(st.sampled_from(CONFIG_KEYS), JSON_VALUE, max_size=4), raw=st.booleans())
def test_config_json_import_raises_only_project_errors(
    tmp_path_factory: Any, overrides: dict[str, Any], raw: bool
) -> None:
    cfg = {**LLAMA, **overrides}
    path = tmp_path_factory.mktemp("cfg") / "config.json"
    text = json.dumps(cfg)
    path.write_bytes(text.encode("utf-8")[: len(text) // 2] if raw else text.encode("utf-8"))
    try:
        spec = roofline.model_from_hf_config(path)
    except RooflineError:
        return
    assert spec.num_layers >= 1 and spec.param_count() > 0


@FUZZ
@given(
    lines=st.lists(
        st.one_of(JSON_VALUE.map(json.dumps), st.text(max_size=40), st.binary(max_size=20).map(repr)), max_size=8
    )
)
def test_calibration_store_raises_only_project_errors(tmp_path_factory: Any, lines: list[str]) -> None:
    from calibrate.measure.store import Store

    header = {"device": "cpu", "device_name": "x", "threads": 1, "world_size": 1}
    path = tmp_path_factory.mktemp("store") / "cpu.measurements.jsonl"
    path.write_text(json.dumps({"type": "header", "version": 1, **header}) + "\n" + "\n".join(lines), "utf-8")
    try:
        store = Store(path, header, resume=True)
    except RooflineError:
        return
    for rec in store.records():  # every record a resume reuses is well formed
        assert isinstance(rec, dict) and isinstance(rec["key"], str)
        if rec["status"] == "ok":
            assert math.isfinite(rec["median_s"]) and rec["median_s"] > 0


PUBLISHED = (Path(__file__).resolve().parents[1] / "validation" / "published.csv").read_text("utf-8").splitlines()
CELLS = st.sampled_from(["", "0", "-1", "nan", "inf", "1e999", "1.5", "9" * 5000, "x", "tp8", "TP=0", "fp99", '"'])


@settings(FUZZ, max_examples=30 * SCALE)
@given(data=st.data())
def test_published_csv_raises_only_project_errors(tmp_path_factory: Any, data: st.DataObject) -> None:
    """``accuracy --data``: rows of the shipped CSV with cells replaced by hostile values."""
    from roofline.published.accuracy import evaluate_rows

    rows = [line.split(",") for line in PUBLISHED[1:25]]
    for _ in range(data.draw(st.integers(1, 6))):
        row = data.draw(st.sampled_from(rows))
        row[data.draw(st.integers(0, len(row) - 1))] = data.draw(CELLS | st.text(max_size=8))
    path = tmp_path_factory.mktemp("csv") / "rows.csv"
    path.write_text("\n".join([PUBLISHED[0], *(",".join(r) for r in rows)]) + "\n", "utf-8")
    with contextlib.suppress(RooflineError):
        evaluate_rows(path)


# ---- the API -----------------------------------------------------------------------------------------
API_VALUE = st.one_of(
    st.integers(-5, 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=5),
    st.sampled_from([1, 2, 8, 64, 1024]),
    st.lists(st.integers(1, 100), max_size=3),
)


@FUZZ
@given(
    kw=st.fixed_dictionaries(
        {},
        optional={
            "batch": API_VALUE,
            "prompt_len": API_VALUE,
            "output_len": API_VALUE,
            "tp": API_VALUE,
            "pp": API_VALUE,
            "ep": API_VALUE,
            "weight_dtype": DTYPE | API_VALUE,
            "kv_dtype": DTYPE | API_VALUE,
            "engine": st.sampled_from(["vllm", "sglang", "trtllm", "ideal", "", "nope"]) | API_VALUE,
            "engine_overrides": st.dictionaries(
                st.sampled_from(["memory_fraction", "max_num_seqs", "nope", "max_num_batched_tokens"]),
                API_VALUE,
                max_size=2,
            ),
        },
    ),
    model=st.sampled_from(["llama-2-7b", "mixtral-8x7b", "deepseek-v3", "gemma-2-9b"]),
)
def test_predict_api_raises_only_project_errors(kw: dict[str, Any], model: str) -> None:
    try:
        r = roofline.predict(model, "h100-sxm", **kw)
    except RooflineError:
        return
    if r.fits:
        assert r.ttft_s > 0 and r.tpot_s > 0 and math.isfinite(r.throughput_tok_s) and r.throughput_tok_s > 0


@FUZZ
@given(
    axes=st.fixed_dictionaries(
        {},
        optional={k: API_VALUE | st.lists(API_VALUE, max_size=3) for k in ("batch", "prompt_len", "output_len", "tp")},
    )
)
def test_sweep_api_raises_only_project_errors(axes: dict[str, Any]) -> None:
    try:
        df = roofline.sweep("llama-2-7b", "h100-sxm", **axes)
    except RooflineError:
        return
    fit = df[df["fits"]]
    assert (fit["ttft_s"] > 0).all() and (fit["tpot_s"] > 0).all()


@FUZZ
@given(
    name=st.sampled_from(["chat", "rag", "summarize", "custom", "", "CHAT "]) | st.text(max_size=8),
    fields=st.fixed_dictionaries(
        {}, optional={k: API_VALUE for k in ("prompt_len", "output_len", "qps", "ttft_slo_s", "tpot_slo_s")}
    ),
)
def test_workloads_raise_only_project_errors(name: str, fields: dict[str, Any]) -> None:
    from roofline.serving.workload.presets import resolve_workload

    try:
        wl = resolve_workload(name, **fields)
    except RooflineError:
        return
    assert wl.prompt_len >= 1 and wl.qps > 0


@FUZZ
@given(
    path=st.sampled_from(
        [
            "",
            ".",
            "/",
            "/dev/null",
            "/dev/zero",
            "-",
            "/proc/self/mem",
            "a\x00b",
            "x" * 5000,
            "/nonexistent/dir/f.html",
            "~/x.html",
        ]
    )
    | st.text(max_size=20)
)
def test_output_paths_are_checked_without_writing(path: str) -> None:
    from roofline.boundary.outputs import check_output

    with contextlib.suppress(RooflineError):
        check_output(path, force=False)


# ---- the serving simulator's inputs: traces, length distributions, rates ------------------------
TRACE_LINE = st.one_of(
    JSON_VALUE.map(json.dumps),
    st.fixed_dictionaries(
        {"arrival_s": JSON_VALUE, "prompt_tokens": JSON_VALUE, "output_tokens": JSON_VALUE},
        optional={"prefix_hashes": JSON_VALUE, "timestamp": JSON_VALUE},
    ).map(json.dumps),
    st.text(max_size=40),
)


@settings(FUZZ, max_examples=40 * SCALE)
@given(lines=st.lists(TRACE_LINE, max_size=6), raw=st.binary(max_size=30))
def test_trace_loader_raises_only_project_errors(tmp_path_factory: Any, lines: list[str], raw: bytes) -> None:
    """A JSONL trace with arbitrary lines (and a tail of arbitrary bytes) loads or names the line."""
    from roofline.serving.workload.trace import load_trace

    path = tmp_path_factory.mktemp("trace") / "t.jsonl"
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass") + b"\n" + raw)
    with contextlib.suppress(RooflineError):
        tr = load_trace(path)
        assert all(math.isfinite(x) and x >= 0 for x in tr.arrival_s)
        assert all(x >= 1 for x in tr.prompt_tokens) and all(x >= 1 for x in tr.output_tokens)


LENGTHS = st.sampled_from(
    [
        "512",
        "lognormal:1024:0.5",
        "uniform:1:100",
        "normal:300:50",
        "normal:10:1e9",
        "lognormal:0:1",
        "uniform:5:1",
        "lognormal:1e30:0.1",
        "gamma:1:2",
        "file:/dev/zero",
        "file:",
        ":",
        "1e30",
        "-5",
        "nan",
        "lognormal:nan:1",
        "uniform:1",
        "١٢٣",
        "",
    ]
)


@settings(FUZZ, max_examples=30 * SCALE)
@given(
    mode=st.sampled_from(["--qps", "--concurrency"]),
    rate=st.sampled_from(["0.5", "2", "1e12", "0", "-1", "nan", "inf", "1e-300", "4", "x"]),
    prompt=LENGTHS,
    output=LENGTHS,
    n=st.sampled_from(["20", "0", "1e30", "3000000", "50", "-3", "1.5"]),
    extra=st.sampled_from(
        [
            [],
            ["--arrival", "gamma", "--arrival-cv", "0"],
            ["--arrival", "bursty"],
            ["--prefix-share", "1.5"],
            ["--prefix-share", "0.5"],
            ["--engine", "trtllm"],
        ]
    ),
)
def test_simulate_cli_never_fails_internally(
    mode: str, rate: str, prompt: str, output: str, n: str, extra: list[str]
) -> None:
    """The simulate command answers every workload, however hostile, with a result or a usage/infeasible
    error (exit 0, 1 or 2), within the memory budget."""
    args = ["simulate", "llama-3.1-8b", "h100-sxm", mode, rate, "--prompt", prompt, "--output", output, "-N", n]
    invoke([*args, *extra])
