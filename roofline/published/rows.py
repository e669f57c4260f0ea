"""Which published rows the project can express, and how: label mappings, sources, metric definitions.

A row of ``validation/published.csv`` becomes a :class:`RowCase` (model, hardware, parallelism,
formats, batch, lengths, and the row's own metric definition) or a :class:`Skip` with the
reason it cannot be expressed. Nothing here evaluates a prediction; see ``roofline.published.accuracy``.

Metric definitions (each named in the ``definition`` column of the accuracy table):

* ``ttft_context_phase``: TensorRT-LLM ``gptSessionBenchmark`` with output_len = 1 times one
  ``GptSession::generate`` call, whose step loop runs step 0 as the context phase and stops after
  maxNewTokens = 1 steps: TTFT = prefill(P) + sampling/host sync of that step, no generation step.
  (An extra decode step cannot fit: on L40S two FP8 weight passes of Llama-2-7B take ≥ 15.6 ms at
  the datasheet 864 GB/s, the row measures 14 ms.)
* ``static_batch_out_tok_s_per_gpu``: out tok/s/GPU = OSL·BS / total_latency / GPUs, where
  total_latency = prefill(BS × ISL) + (OSL − 1) decode steps (static batching, prefill included).
* ``static_batch_out_tok_s``: the same without the division by GPUs (whole system).
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from roofline.errors import SpecError

GRADES = ("A", "A-", "B+", "B")
MetricKind = Literal["latency", "throughput"]

#: csv hardware label -> bundled hardware slug (exact labels of end-to-end rows)
HARDWARE_LABELS: dict[str, str] = {
    "H100-SXM-80GB": "h100-sxm",
    "H200-SXM-141GB": "h200-sxm",
    "A100-SXM-80GB": "a100-80gb-sxm",
    "L40S-48GB": "l40s",
    "B200-180GB": "b200",
    "B200-SXM-180GB": "b200",
    "MI300X-192GB": "mi300x",
}


@dataclass(frozen=True)
class ModelMapping:
    """A csv model label expressed by a bundled spec, and why that spec is exact for it."""

    slug: str
    note: str


#: csv model label -> bundled model spec. Fine-tunes share the base architecture; Llama-3 / 3.3
#: 70B have the exact config.json shapes of Llama-3.1-70B (only weights and RoPE scaling differ).
MODEL_LABELS: dict[str, ModelMapping] = {
    "Llama-2-7B": ModelMapping("llama-2-7b", "same checkpoint"),
    "Llama-2-70B": ModelMapping("llama-2-70b", "same checkpoint"),
    "Llama-2-70B-chat": ModelMapping("llama-2-70b", "chat fine-tune of Llama-2-70B: identical architecture"),
    "Llama-3.1-8B": ModelMapping("llama-3.1-8b", "same checkpoint"),
    "Llama-3.1-8B-Instruct": ModelMapping("llama-3.1-8b", "instruct fine-tune: identical architecture"),
    "Llama-3.1-70B": ModelMapping("llama-3.1-70b", "same checkpoint"),
    "Llama-3-70B": ModelMapping(
        "llama-3.1-70b", "architecturally identical to Llama-3.1-70B (same shapes; 3.1 only adds RoPE scaling)"
    ),
    "Llama-3.3-70B-Instruct": ModelMapping(
        "llama-3.1-70b",
        "architecturally identical to Llama-3.1-70B: same config.json shapes (80 layers, hidden 8192, "
        "64 query / 8 KV heads of 128, FFN 28672, vocab 128256); only the weights differ",
    ),
    "Llama-3.1-405B-Instruct": ModelMapping("llama-3.1-405b", "instruct fine-tune: identical architecture"),
}

MICROBENCH_METRICS = ("gemm_tflops", "hbm_gb_s")
LATENCY_METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")


@dataclass(frozen=True)
class Source:
    """A table of a public source, its short key, and the engine semantics its rows were measured under.

    ``gqa_kv_reuse`` overrides the profile's ``attention.gqa_kv_reuse`` for these rows when the
    engine's decode-attention kernel is documented to differ from the modern default.
    ``cuda_graphs`` overrides the scenario's launch mode of decode steps (default: replayed as
    CUDA graphs) when the benchmark is documented to have launched them otherwise.
    """

    key: str
    title_prefix: str
    table_prefix: str
    engine: str
    gqa_kv_reuse: float | None = None
    cuda_graphs: bool | None = None

    @property
    def has_engine_semantics(self) -> bool:
        """True when the rows of this source are predicted with non-default engine semantics."""
        return self.gqa_kv_reuse is not None or self.cuda_graphs is not None


_TRTLLM_PERF = "TensorRT-LLM docs: Performance of TensorRT-LLM"
_NO_XQA = (
    "TensorRT-LLM < 0.8: GQA decode attention is the masked-MHA kernel, one thread block per "
    "(sequence, query head), so each query head streams its K/V head from HBM; the XQA kernel that "
    "shares K/V loads across a group arrived in v0.8 (nvidia.github.io/TensorRT-LLM/blogs/XQA-kernel.html)"
)
_NO_GRAPHS = (
    "gptSessionBenchmark without CUDA graphs: the reproduction commands of performance.md @138f96d4 "
    "do not pass --enable_cuda_graph, which is opt-in (benchmarks/cpp/gptSessionBenchmark.cpp calls "
    "session.setCudaGraphMode(false) unless it is given), so every decode kernel is launched eagerly"
)
_TRTLLM_OLD = f"{_NO_XQA}; {_NO_GRAPHS}"
SOURCES: tuple[Source, ...] = (
    Source("trtllm-0.6.1-h100-fp8", _TRTLLM_PERF, "Peak Throughput / H100", _TRTLLM_OLD, 0.0, cuda_graphs=False),
    Source("trtllm-0.6.1-a100-fp16", _TRTLLM_PERF, "Peak Throughput / A100", _TRTLLM_OLD, 0.0, cuda_graphs=False),
    Source("trtllm-0.5-ttft-bs1", _TRTLLM_PERF, "Low Latency", _TRTLLM_OLD, 0.0, cuda_graphs=False),
    Source("trtllm-perf-overview-1.0", "TensorRT-LLM docs: Performance Overview", "", "trtllm-bench, in-flight"),
    Source("azure-ai-benchmarking-guide", "Azure AI-benchmarking-guide", "", "not stated"),
    Source("mlperf-inference-4.1", "MLPerf Inference v4.1", "", "submitter harness"),
)


def source_of(title: str, table: str) -> Source:
    """The Source of a (source_title, table_or_figure) pair; unknown titles get a slug of the title."""
    for s in SOURCES:
        if title.startswith(s.title_prefix) and table.startswith(s.table_prefix):
            return s
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower().split(":")[0]).strip("-")[:40]
    return Source(slug or "unknown", title, table, "not stated")


@dataclass(frozen=True)
class RowCase:
    """One expressible measurement: everything needed to predict it under its own definition."""

    id: str
    source: str
    grade: str
    hardware_label: str
    hardware: str
    model_label: str
    model: str
    model_note: str
    tp: int
    batch: int
    prompt_len: int
    output_len: int
    weight_dtype: str
    kv_dtype: str
    metric: str
    kind: MetricKind
    definition: str
    measured: float
    gqa_kv_reuse: float | None
    cuda_graphs: bool | None = None


@dataclass(frozen=True)
class Skip:
    """A row the project cannot express, with every reason; ``model`` is the mapped slug when known."""

    id: str
    source: str
    grade: str
    hardware_label: str
    model_label: str
    metric: str
    model: str
    reason: str


def grade_of(notes: str) -> str:
    """Grade from the notes prefix ``[grade A-]``; '?' when absent."""
    m = re.match(r"\s*\[grade ([AB][+-]?)\]", notes or "")
    return m.group(1) if m else "?"


def _int(text: str) -> int | None:
    """A whole number written in ASCII digits (at most 18 of them), else None."""
    t = text.strip()
    return int(t) if t.isascii() and t.isdigit() and len(t) <= 18 else None


def _measured(text: str) -> float | None:
    """The measured value: a positive finite number, else None."""
    try:
        v = float(text)
    except ValueError:
        return None
    return v if math.isfinite(v) and v > 0 else None


def _tp(parallelism: str, num_gpus: str) -> int | None:
    m = re.fullmatch(r"tp(\d{1,6})", parallelism.strip(), re.ASCII)
    return int(m.group(1)) if m and int(m.group(1)) == _int(num_gpus) else None


def _dtype(text: str) -> str | None:
    t = text.strip().lower()
    return t if t in ("fp8", "fp16", "bf16", "fp4", "nvfp4", "int8", "int4") else None


MICROBENCH_REASON = (
    "microbenchmark, not end-to-end: used by the default profile fit (roofline.published.default_profile)"
)


def express(row: dict[str, str]) -> RowCase | Skip:
    """Turn one csv row into a RowCase, or a Skip listing everything that cannot be expressed."""
    src = source_of(row["source_title"], row["table_or_figure"])
    grade, metric = grade_of(row["notes"]), row["metric"]
    mapping = MODEL_LABELS.get(row["model"])

    def skip(reasons: list[str]) -> Skip:
        slug = mapping.slug if mapping else ""
        return Skip(row["id"], src.key, grade, row["hardware"], row["model"], metric, slug, "; ".join(reasons))

    if metric in MICROBENCH_METRICS:
        return skip([MICROBENCH_REASON])
    why: list[str] = []
    if mapping is None:
        why.append(f"model '{row['model']}' has no bundled spec of the same architecture")
    hw = HARDWARE_LABELS.get(row["hardware"])
    if hw is None:
        why.append(f"unknown hardware label '{row['hardware']}'")
    batch = _int(row["batch_or_concurrency"])
    if batch is None:
        why.append(f"batch not stated ('{row['batch_or_concurrency']}': chosen by the runtime or the load)")
    p, o = _int(row["input_len"]), _int(row["output_len"])
    if p is None or o is None:
        why.append("input/output lengths vary (dataset): no fixed ISL/OSL")
    tp = _tp(row["parallelism"], row["num_gpus"])
    if tp is None:
        why.append(f"parallelism '{row['parallelism']}' over {row['num_gpus']} GPUs is not stated as plain tp")
    w, kv = _dtype(row["weight_dtype"]), _dtype(row["kv_dtype"])
    if w is None or kv is None:
        why.append(f"precision not stated (weights '{row['weight_dtype']}', KV '{row['kv_dtype']}')")
    measured = _measured(row["value"])
    if measured is None:
        why.append(f"measured value '{row['value']}' is not a positive number")
    definition = _definition(metric, row["notes"])
    if definition is None and _undefined(row["notes"]):
        why.append(f"the source does not state what '{metric}' counts (output-only vs total tokens)")
    elif definition is None and not why:
        why.append(f"'{metric}' as measured here (not static batching or a gptSession TTFT) is not modelled")
    if why or mapping is None or hw is None or batch is None or p is None or o is None or tp is None:
        return skip(why)
    assert measured is not None
    assert w is not None and kv is not None and definition is not None
    return RowCase(
        id=row["id"],
        source=src.key,
        grade=grade,
        hardware_label=row["hardware"],
        hardware=hw,
        model_label=row["model"],
        model=mapping.slug,
        model_note=mapping.note,
        tp=tp,
        batch=batch,
        prompt_len=p,
        output_len=o,
        weight_dtype=w,
        kv_dtype=kv,
        metric=metric,
        kind="latency" if metric in LATENCY_METRICS else "throughput",
        definition=definition,
        measured=measured,
        gqa_kv_reuse=src.gqa_kv_reuse,
        cuda_graphs=src.cuda_graphs,
    )


def _undefined(notes: str) -> bool:
    """True when the notes say the metric's definition is not stated."""
    n = notes.lower()
    return "not stated" in n and "definition" in n


def _definition(metric: str, notes: str) -> str | None:
    """The row's metric definition from its metric name and notes; None when not stated/modelled."""
    n = notes.lower()
    if _undefined(notes):
        return None
    if metric == "ttft_ms" and "+ 1 token" in n:
        return "ttft_context_phase"
    if metric.startswith("throughput_tok_s") and "static batching" in n:
        per_gpu = metric == "throughput_tok_s_per_gpu"
        return "static_batch_out_tok_s_per_gpu" if per_gpu else "static_batch_out_tok_s"
    return None


#: Columns a published-measurements CSV must have (``accuracy --data``).
REQUIRED_COLUMNS = (
    "id", "source_title", "table_or_figure", "hardware", "num_gpus", "parallelism", "model", "weight_dtype",
    "kv_dtype", "batch_or_concurrency", "input_len", "output_len", "metric", "value", "notes",
)  # fmt: skip


def read_rows(path: Path) -> list[dict[str, str]]:
    """All csv rows as dicts (column names as in the file); a regular UTF-8 file within MAX_DATA_FILE_BYTES."""
    import io

    from roofline.boundary.inputs import read_text
    from roofline.boundary.limits import MAX_DATA_FILE_BYTES

    text = read_text(path, "published-measurements CSV", MAX_DATA_FILE_BYTES)
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        rows = list(reader)
    except csv.Error as exc:
        raise SpecError(f"{path} is not a readable CSV ({exc}); compare it with validation/published.csv") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
    if rows and missing:
        raise SpecError(f"{path} lacks the column(s) {', '.join(missing)}; see validation/published.csv for the format")
    return [{k: v if isinstance(v, str) else "" for k, v in r.items()} for r in rows]


def at_least(grade: str, minimum: str) -> bool:
    """True when ``grade`` is ``minimum`` or better (A > A- > B+ > B); unknown grades never pass."""
    return grade in GRADES and minimum in GRADES and GRADES.index(grade) <= GRADES.index(minimum)


def published_csv_path() -> Path:
    """The shipped copy of the public validation rows."""
    package = Path(__file__).resolve().parents[1]
    for cand in (
        package / "_bundled" / "validation" / "published.csv",
        package.parent / "validation" / "published.csv",
    ):
        if cand.exists():
            return cand
    raise FileNotFoundError("validation/published.csv is missing from this installation")
