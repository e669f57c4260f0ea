"""The inputs of the serving fuzz (``tests/test_fuzz_serving.py``, ``benchmarks/fuzz_long.py``): one hypothesis
strategy per surface in :data:`SURFACES`, each drawing a CLI argument list or ``roofline.simulate`` keywords that mix
valid values with the hostile classes of issue 31 (huge, negative, NaN and infinite numbers, 2^63 and 10^300 token
counts, fractions and booleans for counts, unknown names, malformed grammars, hostile trace and length files, wrong
argument types, dicts missing keys). Valid values are kept small (tens of requests of llama-3.1-8b on H100), so a
case that runs takes milliseconds to a few seconds. Files the cases read are written under :data:`OUT_DIR`, named
by their content.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

from roofline.serving.workload.stream import Workload

M, HW = "llama-3.1-8b", "h100-sxm"
OUT_DIR = Path(tempfile.mkdtemp(prefix="roofline-fuzz-serving-"))


def data_file(name: str, data: bytes) -> str:
    """Write ``data`` under OUT_DIR (named by its content, so a case is the same file every run); its path."""
    path = OUT_DIR / f"{hashlib.sha1(data).hexdigest()[:12]}-{name}"
    if not path.exists():
        path.write_bytes(data)
    return str(path)


def npy(a: np.ndarray) -> bytes:
    """The bytes of ``a`` saved as .npy."""
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


LENGTH_FILES = [
    "file:" + data_file("ok.txt", b"64\n100\n"),
    "file:" + data_file("huge.txt", b"1e300\n"),
    "file:" + data_file("neg.txt", b"5\n-5\n"),
    "file:" + data_file("nan.txt", b"nan\n"),
    "file:" + data_file("empty.txt", b""),
    "file:" + data_file("bad.txt", b"12\nx\n"),
    "file:" + data_file("ok.npy", npy(np.array([32, 64]))),
    "file:" + data_file("big.npy", npy(np.array([2**62]))),
    "file:" + data_file("f.npy", npy(np.array([1.5, np.inf]))),
]


def words(text: str) -> list[str]:
    """The whitespace-separated values of ``text``."""
    return text.split()


def mix(valid: str | list[str], bad: str | list[str], *more_bad: str) -> st.SearchStrategy[str]:
    """One of ``valid`` four draws in five, else one of ``bad`` and ``more_bad`` (so that many cases, each drawing
    several values, get past the checks and run); a str is its whitespace-separated values."""
    good, wrong = (words(v) if isinstance(v, str) else list(v) for v in (valid, bad))
    return weighted(good, [*wrong, *more_bad])


def weighted(good: list[Any], bad: list[Any]) -> st.SearchStrategy[Any]:
    """One of ``good`` four draws in five, else one of ``bad`` (hypothesis draws a sampled_from's index about
    uniformly, where it does not draw the branches of a one_of so)."""
    return st.sampled_from(good * -(-4 * len(bad) // len(good)) + bad)


def rarely(common: st.SearchStrategy[Any], rare: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A draw of ``rare`` one time in five, else of ``common``."""
    return st.sampled_from([False] * 4 + [True]).flatmap(lambda r: rare if r else common)


LENGTH = rarely(
    mix(
        words("1 16 64 128 256 uniform:1:100 normal:100:50 lognormal:64:0.5 lognormal:64:0.02") + LENGTH_FILES[:1],
        "0 -5 1e30 9.3e18 fixed:9.3e18 fixed:1e300 1e300 2**63 9223372036854775808 nan inf normal:1024:inf "
        "uniform:1:inf uniform:5:1 lognormal:1024:1e300 lognormal:nan:1 lognormal:0:1 normal:10:1e9 gamma:1:2 "
        "uniform:1 16777216 200000 ١٢٣ : file: file:/dev/zero 1.5 1_000 0x10",
        "",
        " 64 ",
        *LENGTH_FILES[1:],
    ),
    st.text(max_size=10),
)
RATE = mix("0.5 2 8 1e3 20", "1e12 0 -1 nan inf 1e-300 1e-308 1e-7 x 2k 1e999 -0 1e9", "")
REQUESTS = mix("5 12 20 40", ["0", "-3", "1.5", "1e30", "2000001", "3e6", "9" * 20, "", "x", "٣", "1e1"])
COUNT = mix("1 2 4 16", ["0", "-1", "1.5", "1e30", "nan", "inf", "", "x", "٣", "9" * 20, "1k", "4.0"])
SMALL_INT = mix("1 2", ["0", "-1", "3", "100000", "1000000", "x", "1.5", "9" * 20, ""])
SEED = mix(["0", "1", "7", str(2**64)], ["-1", "1.5", "x", "9" * 30, "", str(2**63)])
SECONDS = mix("0 0.5 2", "-1 nan inf 1e300 1e-300 x 1s 1e9", "")
ENGINE = mix("vllm sglang trtllm ideal", ["", "nope", "VLLM"])
ENGINE_SET = mix(
    "max_num_seqs=4 max_num_batched_tokens=64 gpu_memory_utilization=0.5 prefix_caching=false async_scheduling=true "
    "enable_mixed_chunk=true step_overhead_s=0.002 request_overhead_s=0.01 request_overhead_cv=1 output_lag_steps=2 "
    "block_size=32 max_num_seqs=1",
    "max_num_seqs=0 max_num_seqs=1e30 max_num_batched_tokens=-1 gpu_memory_utilization=2 gpu_memory_utilization=1e-9 "
    "step_overhead_s=nan request_overhead_s=1e300 request_overhead_cv=10 request_overhead_cv=-1 output_lag_steps=1e300 "
    "kv_block_tokens=0 block_size=1e9 x=1 = max_num_seqs=٣ max_num_batched_tokens=1 request_overhead_s=3600 "
    "step_overhead_s=3600 output_lag_steps=1e9 max_num_seqs=2**63 memory_fraction=1e-300 runtime_reserve_bytes=1e300",
)
SPEC = mix(
    "eagle:k=3,alpha=0.7 mtp:k=2,tau=2.6 ngram:k=4,alpha=0.5 eagle:k=1,alpha=1",
    "eagle:k=1e9,alpha=0.7 eagle:k=3,alpha=nan eagle:k=0 eagle nope:alpha=0.5 eagle:k=3,alpha=0.7,overhead=1e300 "
    "eagle:k=256,alpha=0.7 eagle:k=3,tau=9",
    "",
)
DTYPE = mix("bf16 fp8", ["int4", "", "fp64", "nvfp4", "x"])
JSON_NUMBER = st.sampled_from([0, 1, 5, 64, 1.5, -1, 1e300, 2**63, 2**70, True, None, "8", [8], {"a": 1}, 9.3e18])


def options(draw: st.DrawFn, opts: dict[str, st.SearchStrategy[str]], most: int = 4) -> list[str]:
    """A few of ``opts`` (flag → value strategy; a flag whose strategy draws "" is given alone)."""
    out: list[str] = []
    for flag in draw(st.lists(st.sampled_from(sorted(opts)), max_size=most, unique=True)):
        value = draw(opts[flag])
        out += [flag] if flag in FLAGS else [flag, value]
    return out


FLAGS = {"--json", "--csv", "--force", "--no-warmup-drain", "--simulate", "--all"}


@st.composite
def trace_file(draw: st.DrawFn) -> str:
    """A small JSONL trace: good lines, hostile numbers and shapes (list-valued hashes, deep nesting, junk)."""
    good = st.fixed_dictionaries(
        {
            "arrival_s": st.sampled_from([0, 0.1, 0.5, 1]),
            "prompt_tokens": st.sampled_from([16, 64, 128]),
            "output_tokens": st.sampled_from([1, 4, 16]),
        },
        optional={"hash_ids": st.lists(st.integers(0, 3), max_size=3)},
    )
    bad = st.fixed_dictionaries(
        {"arrival_s": JSON_NUMBER, "prompt_tokens": JSON_NUMBER, "output_tokens": JSON_NUMBER},
        optional={"prefix_hashes": st.sampled_from([[1, 2], [[1]], "x", 5, [2**70]]), "timestamp": JSON_NUMBER},
    )
    lines = [json.dumps(d) for d in draw(st.lists(rarely(good, bad), min_size=0, max_size=12))]
    lines += draw(weighted([[]], [["[" * 100 + "]" * 100], ["{"], ["9" * 5000], ['{"arrival_s": NaN}'], [""]]))
    return data_file("t.jsonl", "\n".join(draw(st.permutations(lines))).encode())


@st.composite
def simulate_args(draw: st.DrawFn, mode: str) -> list[str]:
    """``roofline simulate`` in ``mode`` (closed, trace, open) with a few of its other options."""
    traces = rarely(trace_file(), st.sampled_from(["/dev/zero", str(OUT_DIR), "missing.jsonl", ""]))
    arrival = mix(["poisson", "gamma", "constant"], ["x", "", "Poisson"])
    load = {
        "closed": ["--concurrency", draw(COUNT)],
        "trace": ["--trace", draw(traces)],
        "open": ["--qps", draw(RATE), "--arrival", draw(arrival)],
    }[mode]
    clients = ["vllm-bench", "aiperf", "genai-perf", "ideal", "sglang-bench", "inference-perf"]
    opts = {
        "--seed": SEED,
        "--replicas": mix(["1", "2", "3"], ["0", "65", "x", "-1"]),
        "--engine": ENGINE,
        "--engine-set": ENGINE_SET,
        "--spec": SPEC,
        "--prefix-share": mix(["0", "0.5", "1"], ["1.5", "nan", "-0.1"]),
        "--client": mix(clients, ["", "nope"]),
        "--warmup": mix(["0", "2", "5"], ["-1", "1.5", "2000001", "x"]),
        "--no-warmup-drain": st.just(""),
        "--tp": mix(["1", "2"], ["0", "3", "x"]),
        "--kv-dtype": DTYPE,
        "--csv": st.just(""),
    }
    opts |= {"--ramp": SECONDS} if mode == "closed" else {}
    opts |= {"--arrival-cv": SECONDS, "--max-concurrency": COUNT} if mode == "open" else {}
    n = [] if mode == "trace" else ["-N", draw(REQUESTS), "--prompt", draw(LENGTH), "--output", draw(LENGTH)]
    return ["simulate", M, HW, *load, *n, *options(draw, opts), *draw(st.sampled_from([["--json"], []]))]


@st.composite
def disagg_spec(draw: st.DrawFn) -> str:
    """``--disagg`` text: two pools of hostile hardware, tp and counts, and a link, latency and first side."""
    hw, tp = mix([HW, "mi300x"], ["nope", "", "H100-SXM"]), mix(["1", "2"], ["0", "16385", "x", "1.5"])
    n = mix(["1", "2"], ["0", "1025", "1000000000000", "9" * 30, "-1"])
    pools = [f"{side}={draw(hw)}:tp{draw(tp)}x{draw(n)}" for side in ("prefill", "decode")]
    extra = mix(
        "link=50GB/s latency=1ms first=decode first=prefill link=1MB/s latency=1h",
        "link=1e-300B/s link=1e300B/s latency=1e300s latency=-1s latency=nan first=bogus bogus=1 link= link=nan "
        "latency=inf link=-5GB/s",
    )
    return ",".join([*pools, *draw(st.lists(extra, max_size=2))])


@st.composite
def simulate_disagg_args(draw: st.DrawFn) -> list[str]:
    """``roofline simulate-disagg`` with hostile pools, rates, lengths and pool settings."""
    pool_set = mix(["max_num_seqs=1", "max_num_batched_tokens=64", "max_num_seqs=8"], ["max_num_seqs=0", "x=1", "="])
    opts = {
        "--arrival": mix(["poisson", "gamma", "constant"], ["x"]),
        "--arrival-cv": SECONDS,
        "--seed": SEED,
        "--engine": ENGINE,
        "--engine-set": ENGINE_SET,
        "--prefill-set": pool_set,
        "--decode-set": pool_set,
        "--weight-dtype": DTYPE,
    }
    head = ["simulate-disagg", M, "--disagg", draw(disagg_spec()), "--qps", draw(RATE), "-N", draw(REQUESTS)]
    lengths = ["--prompt", draw(LENGTH), "--output", draw(LENGTH)]
    return [*head, *lengths, *options(draw, opts), *draw(st.sampled_from([["--json"], []]))]


@st.composite
def spec_plan_args(draw: st.DrawFn) -> list[str]:
    """``roofline spec-plan`` with hostile methods, batch lists, k-max and lengths."""
    spec = mix(
        "eagle:alpha=0.7 mtp:alpha=0.8 eagle:alpha=1 medusa:tau=2 ngram:alpha=0.5 draft:model=llama-3.2-1b,alpha=0.6 "
        "eagle:alpha=0.7,overhead=0.001",
        "eagle:alpha=nan eagle:alpha=0 eagle:alpha=1.5 eagle nope:alpha=0.5 eagle:alpha=0.7,k=3 "
        "draft:model=nope,alpha=0.6 eagle:alpha=0.7,overhead=1e300 eagle:tau=1e300 eagle:alpha=-0",
        "",
    )
    batch = mix(["1", "1,8", "1..64", "1,2,4..256"], ["0", "-1", "1..1000000000:1", "1..20000:1", "x", "", "1.5"])
    k = mix(["1", "3", "8", "16"], ["0", "-1", "257", "100000000", "x", "1.5", "9" * 30])
    opts = {
        "--batch": batch,
        "--k-max": k,
        "--prompt": mix(["128", "1024"], ["0", "1e30", "x", "2**63", "16777217"]),
        "--output": mix(["16", "256"], ["0", "1", "1e30", "nan"]),
        "--tp": mix(["1", "2"], ["0", "x", "3"]),
        "--weight-dtype": DTYPE,
        "--engine": ENGINE,
    }
    args = ["spec-plan", M, HW, "--spec", draw(spec), *options(draw, opts, 5)]
    if "--batch" not in args:
        args += ["--batch", "1,8"]
    return [*args, *draw(st.sampled_from([["--json"], []]))]


@st.composite
def plan_disagg_args(draw: st.DrawFn) -> list[str]:
    """``roofline plan-disagg`` with hostile counts, SLOs, percentiles and lengths (a handful of cells)."""
    duration = mix(["500ms", "1s", "50ms", "2s"], ["5", "-5s", "0", "nan", "inf", "1e300s", "", "1 fortnight"])
    opts = {
        "--ttft-slo": duration,
        "--tpot-slo": duration,
        "--percentile": mix(["50", "90", "99"], ["95", "x", "0"]),
        "--tp-prefill": SMALL_INT,
        "--tp-decode": SMALL_INT,
        "--tp-colocated": SMALL_INT,
        "--first": mix(["prefill", "decode"], ["bogus"]),
        "--engine": ENGINE,
        "--engine-set": ENGINE_SET,
        "--prompt": LENGTH,
        "--output": LENGTH,
    }
    counts = [x for flag in ("--p-max", "--d-max", "--n-max") for x in (flag, draw(SMALL_INT))]
    head = ["plan-disagg", draw(mix([M], ["nope", ""])), draw(mix([HW, "mi300x"], ["nope"]))]
    return [*head, "--qps", draw(RATE), "-N", draw(REQUESTS), *counts, *options(draw, opts), "--json"]


@st.composite
def plan_simulate_args(draw: st.DrawFn) -> list[str]:
    """``roofline plan --simulate`` (in turn, ``-j 1``) with hostile loads, SLOs and sizing options."""
    slo = mix("500ms 1s p99=2s p90=50ms 50ms", "p100=1s p0=1s p99= -1s nan 1e300s", "")
    opts = {
        "--prompt": mix(["128", "1024"], ["0", "1e30", "x", "16777217"]),
        "--output": mix(["16", "128"], ["1", "0", "1e30"]),
        "--tp": mix(["1", "1,2"], ["0", "x", "1..100000:1"]),
        "--precision": mix(["checkpoint", "fp8", "all"], ["nope", ""]),
        "--max-gpus": SMALL_INT,
        "--confidence": mix(["0.8", "0.5", "80%"], ["0", "1", "1.5", "nan", "x"]),
        "--min-headroom": mix(["20%", "0.2", "error"], ["-1", "nan", "1e300", "x"]),
        "--seed": SEED,
        "--engine-set": ENGINE_SET,
        "--engine": ENGINE,
        "--kv-dtype": DTYPE,
    }
    qps = mix(["0.5", "2", "20"], ["0", "-1", "nan", "inf", "1e-300", "x", "1e12"])
    head = ["plan", M, "--qps", draw(qps), "--ttft-slo", draw(slo), "--tpot-slo", draw(slo)]
    head += ["-H", draw(mix([HW, "h100-sxm,mi300x"], ["nope", ""]))]
    jobs = draw(mix(["1"], ["0", "-1", "x", "9" * 20]))
    return [*head, "--simulate", "-j", jobs, *options(draw, opts), *draw(st.sampled_from([["--json"], []]))]


@st.composite
def accuracy_coverage_args(draw: st.DrawFn) -> list[str]:
    """``roofline accuracy --coverage`` with hostile levels and the options it refuses."""
    level = mix(["0.8", "0.5", "0.99", "0.1"], ["0", "1", "1.5", "-0.1", "nan", "inf", "80%", "", "x", "1e-300"])
    opts = {
        "--level": level,
        "--grade": mix(["A", "B"], ["x", ""]),
        "--data": st.sampled_from(["/dev/zero", ""]),
        "--csv": st.just(""),
        "--json": st.just(""),
        "--calibration": st.sampled_from(["missing.yaml", "/dev/null"]),
        "-o": st.sampled_from([str(OUT_DIR / "c.json"), "/dev/null", ""]),
        "--force": st.just(""),
    }
    return ["accuracy", "--coverage", *options(draw, opts, 3)]


BAD_NUMBERS = (None, True, False, -1, 0, 1.5, 4.0, math.nan, math.inf, -math.inf, 2**63, 2**70, 1e300)
BAD_OBJECTS = ("", "x", "4", [4], {}, {"dist": "lognormal", "mean": 64}, np.int64(4), np.float64(2.5), b"4", object())


def hostile(*valid: Any) -> st.SearchStrategy[Any]:
    """One of ``valid`` four draws in five, else a value of the wrong type or range."""
    return weighted(list(valid), [*BAD_NUMBERS, *BAD_OBJECTS])


SIMULATE_API: dict[str, st.SearchStrategy[Any]] = {
    "engine": hostile("vllm", "sglang", "trtllm", "ideal", "nope"),
    "tp": hostile(1, 2),
    "pp": hostile(1, 2),
    "ep": hostile(1, 2),
    "prompt_len": hostile(
        *(16, 64, 128, "uniform:1:100", {"dist": "lognormal", "mean": 64, "cv": 0.5}, [16, 64], np.array([32, 64])),
        *({"dist": "uniform", "low": 1}, 9.3e18, 2**63, np.array([1e300]), {"dist": "fixed", "value": 8, "x": 1}),
    ),
    "output_len": hostile(1, 4, 16, "lognormal:16:0.5", {"dist": "fixed", "value": 8}, (4, 8), 2**63, 1e300),
    "num_requests": hostile(5, 20, 40, 3_000_000, 20.0),
    "seed": hostile(0, 1, 2**64, 2**200),
    "arrival": hostile("poisson", "gamma", "constant", "x"),
    "arrival_cv": hostile(0.5, 1.0, 2.0, 1e-300),
    "prefix_share": hostile(0.0, 0.5, 1.0, 1.5),
    "trace_block_tokens": hostile(16, 512),
    "max_concurrency": hostile(None, 2, 8),
    "warmup": hostile(0, 2, 3_000_000),
    "warmup_drained": hostile(True, False),
    "ramp_s": hostile(0.0, 0.5, 1e300),
    "client": hostile(None, "vllm-bench", "aiperf", "nope"),
    "engine_overrides": hostile(
        *(None, {"max_num_seqs": 4}, {"request_overhead_s": 1e300}, {"nope": 1}, {"max_num_seqs": None}),
        *({"step_overhead_s": "x"}, {"output_lag_steps": math.inf}, {"max_num_seqs": 2**70}, {5: 1}),
    ),
    "weight_dtype": hostile(None, "fp8", "nope"),
    "kv_dtype": hostile(None, "fp8", "nope"),
    "calibration": hostile(None, "missing.yaml", "/dev/zero"),
    "speculative": hostile(None, "eagle:k=3,alpha=0.7", "eagle:k=1e9", "nope"),
    "replicas": hostile(1, 2, 65),
    "progress": hostile(None, 5, "x"),
    "workload": hostile(None, Workload(qps=2.0, num_requests=5, prompt_len=64, output_len=4)),
}
LOAD_API: dict[str, st.SearchStrategy[Any]] = {
    "qps": hostile(2.0, 8.0, 1e-308, 1e12),
    "concurrency": hostile(2, 4, 2**20),
    "trace": rarely(trace_file(), hostile(None, "missing.jsonl")),
}
DISAGG_API: dict[str, st.SearchStrategy[Any]] = {
    "disagg": hostile(*(f"prefill={HW}:tp1x{p},decode={HW}:tp1x{d}" for p, d in ((1, 1), (1, 2), (2, 1))))
    | disagg_spec(),
    "prefill_overrides": hostile(None, {"max_num_seqs": 1}, {"nope": 1}),
    "decode_overrides": hostile(None, {"max_num_seqs": 4}, {"max_num_seqs": -1}),
}


@st.composite
def simulate_api_kwargs(draw: st.DrawFn, disagg: bool) -> dict[str, Any]:
    """Keyword arguments of ``roofline.simulate``: a small valid base (or, disaggregated, ``disagg=``) with a few
    arguments replaced by values of the wrong type or range."""
    kw: dict[str, Any] = {"model": M, "num_requests": 20, "prompt_len": 64, "output_len": 8}
    if disagg:
        kw |= {"qps": 2.0, "disagg": draw(DISAGG_API["disagg"])}
        pool = {k: v for k, v in SIMULATE_API.items() if k not in ("tp", "pp", "ep", "progress")} | DISAGG_API
    else:
        load = draw(st.sampled_from(sorted(LOAD_API)))
        kw |= {"hardware": HW, load: draw(LOAD_API[load])}
        pool = SIMULATE_API | LOAD_API | {"hardware": hostile(HW, "nope", "mi300x"), "model": hostile(M, "nope")}
    for key in draw(st.lists(st.sampled_from(sorted(pool)), min_size=1, max_size=4, unique=True)):
        kw[key] = draw(pool[key])
    return kw


# ---- the tests ---------------------------------------------------------------------------------------------------
SURFACES: dict[str, st.SearchStrategy[Any]] = {
    "simulate closed loop": simulate_args("closed"),
    "simulate trace": simulate_args("trace"),
    "simulate open loop": simulate_args("open"),
    "simulate-disagg": simulate_disagg_args(),
    "spec-plan": spec_plan_args(),
    "plan-disagg": plan_disagg_args(),
    "plan --simulate": plan_simulate_args(),
    "accuracy --coverage": accuracy_coverage_args(),
    "API simulate": simulate_api_kwargs(disagg=False),
    "API simulate disagg=": simulate_api_kwargs(disagg=True),
}
#: Cases per surface in CI (× FUZZ_SCALE): the slow surfaces fewer.
EXAMPLES = dict.fromkeys(SURFACES, 50) | {"plan --simulate": 20, "accuracy --coverage": 25}
EXAMPLES |= {"API simulate": 200, "API simulate disagg=": 150}
