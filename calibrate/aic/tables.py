"""AIConfigurator 0.12.0's collected kernel tables: find them, list them, load one with SI columns.

``aiconfigurator-core`` (Apache-2.0, ``pip install -e ".[aic]"``) ships parquet tables under
``aiconfigurator_core/systems/data/<gpu>/<op>/<framework>/<version>/<kind>_perf.parquet``: each
engine's own kernels timed in CUDA-graph replay. Only the data is read. Every stored ``latency`` is
in **milliseconds** (a bf16 32768×65536×12288 GEMM on h100_sxm: 60.3 ms = 880 TFLOP/s); the loader
turns it into ``time_s`` (seconds). ``message_size`` counts **elements**, not bytes: NCCL int8 rows
take ~0.6× the time of half rows of the same ``message_size`` at large sizes; the loader adds
``message_bytes`` = elements × bytes of ``dtype``.

Columns after :func:`load_table`, by table kind (every kind also has ``gpu``, ``framework``,
``version`` from the path, ``kernel`` = ``kernel_source`` and ``time_s``):

=====================  ========================================================================
kind                   columns (units)
=====================  ========================================================================
``gemm``               ``m`` tokens, ``n`` output features, ``k`` input features (elements);
                       ``dtype`` as stored: bfloat16, fp8 (per-tensor W8A8), fp8_block
                       (128×128 block scales), nvfp4, int8_wo / int4_wo (weight-only), sq
                       (SmoothQuant W8A8 int8); ``dynamic_scale_s``: seconds of the dynamic
                       activation-scale pass the row includes (:func:`dynamic_scale_s`);
                       ``launch``: graph, or eager where the collector times without graphs
                       (:data:`EAGER_GEMMS`)
``custom_allreduce``   ``collective`` = all_reduce; ``dtype`` (bfloat16); ``gpus``;
                       ``message_elems``, ``message_bytes`` (B); ``launch``: graph or eager
                       (from ``backend``, e.g. vllm_graph; tables without it: graph)
``nccl``               ``collective`` = all_reduce, all_gather, reduce_scatter, alltoall;
                       ``dtype`` (half, int8); ``gpus``; ``message_elems``, ``message_bytes``
                       (B); ``launch`` = graph
``context_attention``  ``phase`` = prefill; ``batch`` sequences; ``new_tokens`` = isl (prompt
                       tokens); ``past`` = step (cached prefix, 0 in 0.12.0); ``q_heads``,
                       ``kv_heads`` per GPU; ``head_dim``; ``window`` tokens (stored 0 → inf:
                       full attention); ``dtype`` (attn_dtype), ``kv_dtype``
``generation_attention`` ``phase`` = decode; as above with ``new_tokens`` = isl (1) and
                       ``past`` = isl + step − 1, so the attended context isl + step is
                       2, 4, … 131072
``context_mla``,        the attention columns for one MLA layer's kernel (SGLang and TensorRT-LLM tables,
``generation_mla``     DeepSeek-V3's geometry): ``q_heads`` per GPU, ``kv_heads`` 1 (the latent),
                       ``head_dim`` 192 (prefill) / 576 (decode, absorbed); ``dtype`` (mla_dtype)
other kinds            columns as stored (lower case), ``latency`` → ``time_s``
=====================  ========================================================================

AIC GPU folder names map to roofline hardware slugs only where the tables' ``device`` column
names the same part (:data:`AIC_HARDWARE`); the others are reported unmapped, never guessed.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from roofline.errors import CalibrationError

INSTALL_HINT = 'pip install -e ".[aic]"'
PACKAGE = "aiconfigurator_core"
AIC_VERSION = "0.12.0"
#: AIC GPU folder → roofline slug, each checked against the tables' ``device`` column.
AIC_HARDWARE: dict[str, str] = {
    "a100_sxm": "a100-80gb-sxm",  # NVIDIA A100-SXM4-80GB
    "h100_sxm": "h100-sxm",  # NVIDIA H100 80GB HBM3
    "h200_sxm": "h200-sxm",  # NVIDIA H200
    "b200_sxm": "b200",  # NVIDIA B200
    "gb200": "gb200",  # NVIDIA GB200
    "b300_sxm": "b300",  # NVIDIA B300 SXM6 AC
    "gb300": "gb300",  # NVIDIA GB300
    "l40s": "l40s",  # NVIDIA L40S
}
#: Bytes per element of the message dtypes the comm tables use.
ELEMENT_BYTES: dict[str, float] = {"bfloat16": 2.0, "half": 2.0, "float16": 2.0, "int8": 1.0, "fp8": 1.0}
MS = 1e-3  # seconds per millisecond


@dataclass(frozen=True)
class AicTable:
    """One parquet table: where it lies and what it holds (``rows`` from the parquet footer)."""

    gpu: str
    op: str
    framework: str
    version: str
    path: Path
    rows: int

    @property
    def kind(self) -> str:
        """Table kind: the file name less ``_perf.parquet`` (``gemm``, ``nccl``, ``context_attention``, …)."""
        return self.path.name.removesuffix(".parquet").removesuffix("_perf")

    @property
    def hardware(self) -> str | None:
        """The roofline hardware slug of :attr:`gpu`, or None when unmapped."""
        return AIC_HARDWARE.get(self.gpu)

    @property
    def label(self) -> str:
        """``gpu/op/framework/version/file`` as the package stores it."""
        return f"{self.gpu}/{self.op}/{self.framework}/{self.version}/{self.path.name}"


def data_root() -> Path:
    """The installed package's ``systems/data`` folder (found without importing the package)."""
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for loc in locations:
        root = Path(loc) / "systems" / "data"
        if root.is_dir():
            return root
    raise CalibrationError(
        f"AIConfigurator's kernel tables are not installed ({PACKAGE} {AIC_VERSION} not found); "
        f"install them with {INSTALL_HINT}"
    )


def _rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(path).metadata.num_rows)


def version_key(v: str) -> tuple[tuple[int, str], ...]:
    """Sort key of an engine version (``0.5.6.post2``, ``1.3.0rc23``): numeric parts as numbers, rc after its base."""
    return tuple((int(p), "") if p.isdigit() else (-1, p) for p in v.replace("rc", ".rc.").split("."))


def tables_newest_first(gpu: str, framework: str, kind: str, root: Path | None = None) -> list[AicTable]:
    """Every table of ``kind`` (gemm, moe, custom_allreduce, generation_attention, …) of (gpu, framework), newest
    engine version first: the one rule every fit picks its tables by."""
    tables = [t for t in list_tables(root, gpu=gpu, framework=framework) if t.kind == kind]
    return sorted(tables, key=lambda t: version_key(t.version), reverse=True)


def list_tables(
    root: Path | None = None, *, gpu: str | None = None, op: str | None = None, framework: str | None = None
) -> list[AicTable]:
    """Every ``<gpu>/<op>/<framework>/<version>/*.parquet`` under ``root`` (default :func:`data_root`), sorted."""
    base = root if root is not None else data_root()
    out = []
    for path in sorted(base.glob("*/*/*/*/*.parquet")):
        g, o, f, v = path.relative_to(base).parts[:4]
        if (gpu is None or g == gpu) and (op is None or o == op) and (framework is None or f == framework):
            out.append(AicTable(g, o, f, v, path, _rows(path)))
    return out


def unmapped_gpus(tables: list[AicTable]) -> list[str]:
    """GPU folders among ``tables`` with no roofline hardware slug (reported, never guessed)."""
    return sorted({t.gpu for t in tables if t.hardware is None})


def _message(df: pd.DataFrame, dtype_col: str) -> pd.DataFrame:
    dtypes = df[dtype_col].astype(str)
    unknown = sorted(set(dtypes) - set(ELEMENT_BYTES))
    if unknown:
        raise CalibrationError(f"no element size for message dtype(s) {', '.join(unknown)}")
    elems = df["message_size"].astype(np.float64)
    return pd.DataFrame(
        {
            "dtype": dtypes,
            "gpus": df["num_gpus"].astype(np.int64),
            "message_elems": elems,
            "message_bytes": elems * dtypes.map(ELEMENT_BYTES).astype(np.float64),
        }
    )


def _launch(df: pd.DataFrame) -> pd.Series:
    if "backend" not in df:
        return pd.Series("graph", index=df.index)
    return df["backend"].astype(str).map(lambda b: "eager" if b.endswith("eager") else "graph")


def _shape(df: pd.DataFrame, decode: bool) -> dict[str, object]:
    """The columns every attention-kind table shares: phase, batch, new tokens, cached past, query heads per GPU."""
    isl, step = df["isl"].astype(np.float64), df["step"].astype(np.float64)
    return {
        "phase": "decode" if decode else "prefill",
        "batch": df["batch_size"].astype(np.float64),
        "new_tokens": isl,
        "past": isl + step - 1.0 if decode else step,
        "q_heads": df["num_heads"].astype(np.float64),
    }


def _attention(df: pd.DataFrame, decode: bool) -> pd.DataFrame:
    window = df["window_size"].astype(np.float64) if "window_size" in df else pd.Series(0.0, index=df.index)
    return pd.DataFrame(
        {
            **_shape(df, decode),
            "kv_heads": df["num_key_value_heads"].astype(np.float64),
            "head_dim": df["head_dim"].astype(np.float64),
            "window": window.where(window > 0, np.inf),
            "beam_width": df["beam_width"].astype(np.int64),
            "dtype": df["attn_dtype"].astype(str),
            "kv_dtype": df["kv_cache_dtype"].astype(str),
        }
    )


def _mla(df: pd.DataFrame, decode: bool) -> pd.DataFrame:
    """An MLA kernel table (DeepSeek-V3's geometry, :data:`calibrate.aic.compare.MLA_DIMS`) in the attention
    columns: one latent K/V head, the query width the kernel sees (576 absorbed in decode, 192 in prefill)."""
    return pd.DataFrame(
        {
            **_shape(df, decode),
            "kv_heads": 1.0,
            "head_dim": 576.0 if decode else 192.0,
            "window": np.inf,
            "beam_width": 1,
            "dtype": df["mla_dtype"].astype(str),
            "kv_dtype": df["kv_cache_dtype"].astype(str),
        }
    )


def _normalise(kind: str, df: pd.DataFrame) -> pd.DataFrame:
    """The kind's SI / roofline-named columns (module docstring); other kinds keep theirs."""
    if kind == "gemm":
        body = pd.DataFrame({c: df[c].astype(np.float64) for c in ("m", "n", "k")})
        body["dtype"] = df["gemm_dtype"].astype(str)
    elif kind == "custom_allreduce":
        body = _message(df, "allreduce_dtype")
        body.insert(0, "collective", "all_reduce")
        body["launch"] = _launch(df)
    elif kind == "nccl":
        body = _message(df, "nccl_dtype")
        body.insert(0, "collective", df["op_name"].astype(str))
        body["launch"] = "graph"
    elif kind in ("context_attention", "generation_attention"):
        body = _attention(df, decode=kind == "generation_attention")
    elif kind in ("context_mla", "generation_mla"):
        body = _mla(df, decode=kind == "generation_mla")
    else:
        body = df.drop(columns=["latency"]).rename(columns=str.lower)
    return body


#: (framework, AIC ``gemm_dtype``) whose GEMM rows the collector times with eager launches, not in CUDA-graph replay
#: (``collector/vllm/collect_gemm.py``: ``use_cuda_graph=gemm_type != "fp8_block"``): back-to-back eager calls of
#: vLLM's block-FP8 linear (per-token-group quantisation, then DeepGEMM or FlashInfer) run at the host's pace, 60-90
#: µs per call on h100_sxm at any M ≤ 512, 182 µs on b200_sxm. Their ``launch`` is "eager"; no kernel rate is fitted
#: from them and the comparison reports them as their own regime.
EAGER_GEMMS = frozenset({("vllm", "fp8_block")})
#: AIC ``gemm_dtype`` whose collected rows quantise their activations with a dynamic scale: the collectors build
#: those layers without an input scale (``collector/trtllm/collect_gemm.py``: "The fp8 weights carry no
#: input_scale, so TRT-LLM's FP8QDQ method runs its dynamic-quantization path and the collected fp8 GEMM includes
#: the compute-scale overhead"; ``collector/vllm/collect_gemm.py``: ``Fp8Config(activation_scheme="dynamic")``).
DYNAMIC_SCALE_DTYPES = frozenset({"fp8"})
#: The table of that pass beside the GEMM table (``<gpu>/quantize/<framework>/<version>/``): the same engine's
#: dynamic quantisation less its static one at each (m, k) (``collector/<engine>/collect_computescale.py``).
COMPUTE_SCALE_FILE = "computescale_perf.parquet"


def dynamic_scale_s(table: AicTable, body: pd.DataFrame) -> np.ndarray:
    """Per row of a normalised GEMM table: the seconds its dynamic activation-scale pass takes (0 where the row's
    format has none, :data:`DYNAMIC_SCALE_DTYPES`, or where the engine version has no computescale table).

    A static-scale deployment (ModelOpt FP8 checkpoints carry ``input_scale``) runs only the quantisation and the
    GEMM, so the fits take this pass out of the measured time and the comparison adds it to roofline's GEMM. It is
    the engine's own measurement (dynamic − static, floored at 0 by the collector), matched at the row's exact
    (m, k): the collectors share one shape list. SGLang's rows are 0 (its static reference kernel is the slower
    one), so its fp8 rows keep the pass inside the fitted rate."""
    out = np.zeros(len(body))
    dynamic = body["dtype"].isin(DYNAMIC_SCALE_DTYPES).to_numpy()
    path = table.path.parents[3] / "quantize" / table.framework / table.version / COMPUTE_SCALE_FILE
    if not dynamic.any() or not path.is_file():
        return out
    cs = pd.read_parquet(path)
    cs = cs[cs["quant_dtype"].astype(str) == "fp8"]
    per_mk = pd.DataFrame({c: cs[c].astype(np.float64) for c in ("m", "k", "latency")}).drop_duplicates(["m", "k"])
    rows = pd.DataFrame({c: body[c].to_numpy(np.float64) for c in ("m", "k")})
    seconds = rows.merge(per_mk, on=["m", "k"], how="left")["latency"].to_numpy(np.float64) * MS
    if np.isnan(seconds[dynamic]).any():
        missing = int(np.isnan(seconds[dynamic]).sum())
        raise CalibrationError(f"{table.label}: {missing} dynamic-scale rows have no (m, k) in {path.name}")
    out[dynamic] = seconds[dynamic]
    return out


def load_table(table: AicTable) -> pd.DataFrame:
    """One table as a DataFrame with SI columns (module docstring), ``time_s`` from ``latency`` ms."""
    df = pd.read_parquet(table.path)
    if "latency" not in df:
        raise CalibrationError(f"{table.label} has no latency column; columns: {', '.join(map(str, df.columns))}")
    body = _normalise(table.kind, df).reset_index(drop=True)
    src = df.reset_index(drop=True)
    kernel = src["kernel_source"].astype(str) if "kernel_source" in src else pd.Series("", index=src.index)
    head = pd.DataFrame(
        {"gpu": table.gpu, "framework": table.framework, "version": table.version, "kernel": kernel},
        index=src.index,
    )
    out = pd.concat([head, body.drop(columns=[c for c in head if c in body])], axis=1)
    out["time_s"] = src["latency"].astype(np.float64) * MS
    if table.kind == "gemm":
        out["dynamic_scale_s"] = dynamic_scale_s(table, out)
        eager = {d for f, d in EAGER_GEMMS if f == table.framework}
        out["launch"] = np.where(out["dtype"].isin(eager), "eager", "graph")
    return out
