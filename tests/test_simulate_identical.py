"""``simulate`` gives bit-identical results across the simulator speed work of issue #28.

The reference values in ``tests/fixtures/simulate_bits.json`` were recorded from the code before that work, for
runs that between them take every path of the event loop and the compiled step model: open loop (Poisson, gamma,
a JSONL trace, a burst that puts more than :data:`~roofline.serving.sim.steptime.SCALAR_ROWS` prefill chunks in one
step), closed loop (spread request overhead, output lag, warm-up), chunked prefill under a small token budget,
prefix caching, asynchronous scheduling, preemption under memory pressure (vLLM and SGLang's retraction), the
SGLang and TensorRT-LLM schedulers, a MoE model, a sliding-window model, a hybrid (recurrent-state) model, an MLA
model, a workload mix, speculative decoding, a disaggregated pair of pools and a saturated run. Each record holds
every summary value (floats as ``float.hex``), the saturation statement, the token counters of ``config`` and the
SHA-256 of the exact text (``float.hex`` of every value) of each per-request column and of the timeline. Re-record
only when the physics changes on purpose: ``python tests/test_simulate_identical.py``.
"""

from __future__ import annotations

import hashlib
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from roofline.serving.simulate import simulate

FIXTURE = Path(__file__).with_name("fixtures") / "simulate_bits.json"
M, HW = "llama-3.1-8b", "h100-sxm"
LOGN = {"prompt_len": "lognormal:1024:0.5", "output_len": "lognormal:256:0.5"}
SMALL_POOL = {"capacity_bytes": 18.1e9, "gpu_memory_utilization": 1.0, "reserve_bytes": 1e9}

#: (label, model, hardware, simulate keyword arguments); ``trace=KIND`` is replaced by the path of :func:`_trace`.
CASES: list[tuple[str, str, str | None, dict[str, Any]]] = [
    ("poisson", M, HW, {"qps": 15.0, "num_requests": 1500, **LOGN}),
    (
        "gamma-async",
        M,
        HW,
        {
            "qps": 12.0,
            "arrival": "gamma",
            "arrival_cv": 2.0,
            "num_requests": 800,
            **LOGN,
            "engine_overrides": {"async_scheduling": True},
        },
    ),
    ("trace", M, HW, {"trace": "shared"}),
    ("trace-lru", M, HW, {"trace": "groups", "engine_overrides": SMALL_POOL}),
    ("trace-lru-trtllm", M, HW, {"trace": "groups", "engine": "trtllm"}),
    ("max-seqs", M, HW, {"qps": 15.0, "num_requests": 500, **LOGN, "engine_overrides": {"max_num_seqs": 12}}),
    (
        "tiny-budget",
        M,
        HW,
        {
            "qps": 40.0,
            "num_requests": 400,
            "prompt_len": "uniform:20:200",
            "output_len": 100,
            "engine_overrides": {"max_num_batched_tokens": 32, "max_partial_prefills": 4},
        },
    ),
    (
        "no-chunking",
        M,
        HW,
        {
            "qps": 8.0,
            "num_requests": 300,
            "prompt_len": "uniform:500:4000",
            "output_len": 64,
            "engine_overrides": {"chunked_prefill": False, "max_num_batched_tokens": 4096},
        },
    ),
    (
        "partial-prefills",
        M,
        HW,
        {
            "qps": 8.0,
            "num_requests": 300,
            "prompt_len": "lognormal:3000:0.8",
            "output_len": 64,
            "engine_overrides": {"max_num_batched_tokens": 1024, "max_partial_prefills": 3},
        },
    ),
    (
        "async-cpu-bound",
        M,
        HW,
        {
            "qps": 15.0,
            "num_requests": 500,
            **LOGN,
            "engine_overrides": {"async_scheduling": True, "step_overhead_s": 0.011},
        },
    ),
    (
        "async-gpu-overtakes-cpu",
        M,
        HW,
        {
            "concurrency": 32,
            "num_requests": 96,
            "prompt_len": 100,
            "output_len": "uniform:2000:4000",
            "engine_overrides": {"async_scheduling": True, "step_overhead_s": 0.01},
        },
    ),
    (
        "async-all-cpu",
        M,
        HW,
        {
            "qps": 5.0,
            "num_requests": 200,
            **LOGN,
            "engine_overrides": {"async_scheduling": True, "step_overhead_s": 0.05},
        },
    ),
    (
        "sync-cpu",
        M,
        HW,
        {"concurrency": 24, "num_requests": 300, **LOGN, "engine_overrides": {"step_overhead_s": 0.004}},
    ),
    ("burst", M, HW, {"qps": 1e9, "prompt_len": "uniform:50:300", "output_len": "uniform:2:40", "num_requests": 300}),
    (
        "closed",
        M,
        HW,
        {
            "concurrency": 16,
            "num_requests": 400,
            "prompt_len": 1024,
            "output_len": "uniform:200:300",
            "engine_overrides": {"request_overhead_s": 0.01, "request_overhead_cv": 1.0},
        },
    ),
    (
        "closed-lag-warmup",
        M,
        HW,
        {
            "concurrency": 8,
            "num_requests": 200,
            "prompt_len": 512,
            "output_len": 128,
            "warmup": 16,
            "engine_overrides": {"output_lag_steps": 2.0},
        },
    ),
    (
        "chunked",
        M,
        HW,
        {
            "qps": 3.0,
            "num_requests": 300,
            "prompt_len": "lognormal:6000:0.6",
            "output_len": 128,
            "engine_overrides": {"max_num_batched_tokens": 512},
        },
    ),
    ("prefix", M, HW, {"qps": 15.0, "num_requests": 800, "prefix_share": 0.5, **LOGN}),
    ("moe", "qwen3-30b-a3b", HW, {"qps": 20.0, "num_requests": 600, **LOGN}),
    (
        "window",
        "gemma-2-9b",
        HW,
        {"qps": 6.0, "num_requests": 300, "prompt_len": "uniform:2000:7500", "output_len": 200},
    ),
    ("hybrid", "nemotron-3-super-120b-a12b", HW, {"tp": 4, "qps": 4.0, "num_requests": 200, **LOGN}),
    ("mla", "deepseek-v3", "h200-sxm", {"tp": 8, "qps": 4.0, "num_requests": 200, **LOGN}),
    ("sglang", M, HW, {"engine": "sglang", "qps": 15.0, "num_requests": 800, **LOGN}),
    ("trtllm", M, HW, {"engine": "trtllm", "qps": 15.0, "num_requests": 800, **LOGN}),
    ("mix", M, HW, {"qps": 6.0, "num_requests": 600, "mix": "chat:0.7,rag:0.3"}),
    (
        "preempt",
        M,
        HW,
        {"concurrency": 64, "prompt_len": 600, "output_len": 400, "num_requests": 300, "engine_overrides": SMALL_POOL},
    ),
    (
        "sglang-retract",
        M,
        HW,
        {
            "engine": "sglang",
            "concurrency": 32,
            "prompt_len": 1024,
            "output_len": 2048,
            "num_requests": 96,
            "engine_overrides": {"max_num_batched_tokens": 600, "memory_fraction": 0.3},
        },
    ),
    (
        "trtllm-small-pool",
        M,
        HW,
        {
            "engine": "trtllm",
            "concurrency": 64,
            "prompt_len": 600,
            "output_len": 400,
            "num_requests": 200,
            "engine_overrides": {
                "capacity_bytes": 18.1e9,
                "free_gpu_memory_fraction": 1.0,
                "reserve_bytes": 1e9,
                "max_num_tokens": 2048,
            },
        },
    ),
    (
        "speculative",
        M,
        HW,
        {
            "qps": 5.0,
            "num_requests": 300,
            "prompt_len": 512,
            "output_len": "uniform:32:128",
            "speculative": "eagle:k=3,alpha=0.7",
        },
    ),
    (
        "disagg",
        "llama-3.1-70b",
        None,
        {"disagg": "prefill=h100-sxm:tp4x1,decode=h100-sxm:tp4x1", "qps": 2.0, "num_requests": 200, **LOGN},
    ),
    ("saturated", M, HW, {"qps": 200.0, "num_requests": 6000, **LOGN}),
]

REQUEST_COLUMNS = (
    "arrival_s",
    "first_token_s",
    "finish_s",
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "cached_tokens",
    "preemptions",
)
COUNTERS = ("decode_tokens", "prefill_tokens", "prefill_completions", "kv_blocks_used_at_end", "generated_tokens")


def _trace(folder: Path, kind: str) -> Path:
    """A JSONL trace of 400 requests with bursts and long and short prompts. ``"shared"``: every third request
    starts with one of three prefixes of a common root (block hashes); ``"groups"``: each request starts with one
    of 40 distinct 3-block prefixes, at a rate where the blocks of a group go idle (the LRU) between its hits."""
    rng = np.random.default_rng(11)
    t, rows = 0.0, []
    for i in range(400):
        t += float(rng.exponential(0.08 if i % 50 < 40 else 0.005) if kind == "shared" else rng.exponential(0.4))
        row: dict[str, Any] = {
            "arrival_s": t,
            "prompt_tokens": int(rng.integers(16, 5000) if kind == "shared" else rng.integers(1600, 5000)),
            "output_tokens": int(rng.integers(1, 400)),
        }
        if kind == "groups":
            g = int(rng.integers(0, 40))
            row["hash_ids"] = [3 * g, 3 * g + 1, 3 * g + 2]
        elif i % 3 == 0:
            row["hash_ids"] = [0, 1, 2, int(rng.integers(3, 6))]
        rows.append(row)
    path = folder / f"trace-{kind}.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _bits(value: object) -> object:
    """An exact, JSON-safe form of one value: floats as ``float.hex`` (NaN as ``"nan"``)."""
    if isinstance(value, float | np.floating):
        return "nan" if math.isnan(value) else float(value).hex()
    if isinstance(value, np.integer):
        return int(value)
    return value


def _digest(values: np.ndarray) -> str:
    """SHA-256 of the exact text of an array: ``float.hex`` of every value, comma-separated."""
    text = ",".join(str(_bits(float(x))) for x in np.asarray(values, dtype=np.float64).ravel())
    return hashlib.sha256(text.encode()).hexdigest()


def snapshot(model: str, hardware: str | None, kw: dict[str, Any], folder: Path) -> dict[str, object]:
    """Every summary value, the saturation text, the token counters and digests of the per-request columns and
    of the timeline of one run."""
    kw = {**kw, "trace": _trace(folder, kw["trace"])} if isinstance(kw.get("trace"), str) else kw
    s = simulate(model, hardware, **kw)
    out: dict[str, object] = {k: _bits(v) for k, v in s.summary.items()}
    out["saturated"] = s.saturated
    for name in COUNTERS:
        if name in s.config:
            out[name] = _bits(s.config[name])
    out["requests"] = len(s.requests)
    for col in (c for c in REQUEST_COLUMNS if c in s.requests):
        out[f"requests.{col}"] = _digest(s.requests[col].to_numpy())
    out["timeline"] = _digest(s.timeline.to_numpy())
    out["timeline_rows"] = len(s.timeline)
    return out


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return dict(json.loads(FIXTURE.read_text()))


@pytest.mark.parametrize(("label", "model", "hardware", "kw"), CASES, ids=[c[0] for c in CASES])
def test_simulate_is_bit_identical(
    label: str, model: str, hardware: str | None, kw: dict[str, Any], reference: dict[str, Any], tmp_path: Path
) -> None:
    got, want = snapshot(model, hardware, kw, tmp_path), reference[label]
    assert list(got) == list(want)
    for name, value in want.items():
        assert got[name] == value, name


def _timeline(timeline_rows: int) -> np.ndarray:
    """The timeline (one row per event) of a 600-request run kept under a cap of ``timeline_rows`` rows."""
    from roofline.serving.replica import Deployment
    from roofline.serving.workload.stream import Workload

    req = Workload(qps=15.0, num_requests=600, **LOGN).draw()
    rep = Deployment(M, HW, "vllm", 1, 1, 1, None, None, None, None).replica(req.prompt_mean, req.output_mean)
    sim = rep.engine_sim(req.prompt, req.output, req.send_s, timeline_rows=timeline_rows)
    sim.run()
    return np.column_stack(sim.tl)


def test_timeline_cap_drops_every_other_row_and_halves_the_rate() -> None:
    """GIVEN a cap of 64 rows THEN the timeline is the full one's rows replayed through the rule of
    :mod:`roofline.serving.sim.runstats` (keep one event in ``stride``; at the cap drop every other row and double
    ``stride``), value for value: the flat row-major store keeps what the per-column arrays kept."""
    full, capped = _timeline(10**9), _timeline(64)
    kept: list[np.ndarray] = []
    stride, skip = 1, 0
    for row in full:
        skip += 1
        if skip < stride:
            continue
        skip = 0
        kept.append(row)
        if len(kept) >= 64:
            kept, stride = kept[::2], stride * 2
    assert len(full) > 8 * 64 and stride >= 8
    assert np.array_equal(np.asarray(kept), capped)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        record = {label: snapshot(m, hw, kw, Path(tmp)) for label, m, hw, kw in CASES}
    FIXTURE.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {FIXTURE}")
