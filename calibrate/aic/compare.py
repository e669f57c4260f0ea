"""Roofline's op time against AIConfigurator's kernel tables, row by row (per-op evidence; changes no prediction).

For every row of a mapped GPU's table the equivalent roofline op is built with roofline's own
builders and timed by :func:`roofline.evaluate.op_time` under a profile (default: the shipped
default profile); ``ratio`` = predicted / measured seconds (below 1: roofline is faster than the
engine's kernel). Every op is launched ``"graph"`` (``per_kernel_graph_s``), as the tables were
collected in CUDA-graph replay, except the custom all-reduce rows stored as eager.

* **GEMM** (``op`` = gemm): :func:`roofline.ops.records.gemm` with the weight / activation formats
  of :data:`GEMM_FORMATS` and the bytes and peak a :class:`~roofline.specs.scenario.Scenario`
  of those formats gives (activations ≥ 2 bytes, outputs 16-bit). Formats the GPU has no peak for
  are skipped. ``regime`` = the op's bound (compute, memory or overhead).
* **All-reduce**: ``allreduce-custom`` (``-eager``) rows are priced as roofline builds an engine's
  all-reduce (:func:`allreduce_op`): the custom kernel :func:`roofline.ops.comm.all_reduce` picks up
  to its 8 MiB cap (one-shot / two-shot), NCCL's ring above it — the collector
  (``collector/collect_all_reduce.py``) calls the engine's own entry point (vLLM
  ``tensor_model_parallel_all_reduce``, TensorRT-LLM ``AllReduce`` with strategy AUTO), which falls back
  past the cap; ``allreduce-nccl`` rows (NCCL ``all_reduce``) as NCCL's ring at every size: wire
  2(p−1)/p·S, 2(p−1) hops.
  The bound of a collective is always communication, so ``regime`` splits it instead into
  ``latency`` (the latency + launch terms exceed wire bytes / link bandwidth) and ``bandwidth``.
* **Attention** (``attention-prefill`` / ``attention-decode``):
  :func:`roofline.ops.attention.attention_kernel` with the row's batch, tokens, cached past,
  heads, head dim and KV format; only 16-bit attention math (``attn_dtype`` bfloat16), full
  attention (no window) and beam width 1, where the mapping is unambiguous. ``dtype`` is
  ``bf16`` or ``bf16/kv-fp8``; ``regime`` = the op's bound.
* **MoE** (``moe_perf`` tables, ``op`` = moe): the routed experts as :func:`roofline.ops.ffn.moe_ops` prices
  them, per :mod:`calibrate.aic.moe` (bf16, fp8, fp8_block, nvfp4; ``regime`` = the gate_up GEMM's bound).

:func:`summarise` reports per (gpu, framework, version, op, dtype, regime) the row count and the
median, p10 and p90 of ``ratio``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import numpy as np
import pandas as pd

from calibrate.aic.tables import AicTable, list_tables, load_table
from roofline.errors import CalibrationError, ScenarioError
from roofline.evaluate import OpTiming, comm_bandwidth_bytes_per_s, op_time
from roofline.ops.attention import attention_kernel
from roofline.ops.comm import all_reduce
from roofline.ops.context import BuildContext
from roofline.ops.records import Launch, Op, arr, gemm, with_fields
from roofline.profile import CalibrationProfile, default_profile
from roofline.profile_moe import format_key
from roofline.specs.hardware import ComputeDtype, HardwareSpec
from roofline.specs.library import hardware
from roofline.specs.model import ModelSpec
from roofline.specs.precision import Precision
from roofline.specs.scenario import Scenario

#: AIC ``gemm_dtype`` → (weight format, activation format) of the equivalent roofline GEMM.
GEMM_FORMATS: dict[str, tuple[Precision, Precision]] = {
    "bfloat16": (Precision.BF16, Precision.BF16),
    "fp8": (Precision.FP8, Precision.FP8),
    "fp8_block": (Precision.FP8_BLOCK, Precision.FP8),
    "nvfp4": (Precision.NVFP4, Precision.NVFP4),
    "int8_wo": (Precision.INT8, Precision.BF16),
    "int4_wo": (Precision.INT4, Precision.BF16),
    "w4a16_mxfp4": (Precision.MXFP4, Precision.BF16),  # MoE tables: MXFP4 weights dequantised to bf16
    "sq": (Precision.INT8, Precision.INT8),
}
KV_FORMATS: dict[str, Precision] = {"bfloat16": Precision.BF16, "fp8": Precision.FP8}
OP_KINDS: dict[str, tuple[str, ...]] = {
    "gemm": ("gemm",),
    "allreduce": ("custom_allreduce", "nccl"),
    "attention": ("context_attention", "generation_attention"),
    "mla": ("context_mla", "generation_mla"),
    "moe": ("moe",),
}
#: DeepSeek-V3's MLA geometry, the one AIConfigurator's MLA collectors time (``collector/sglang/collect_mla.py``
#: L44-47, L384-389 @ 095f58a5: latent 512 + rope 64; prefill q = nope 128 + rope 64, v 128; decode absorbed, q 576,
#: v 512): (prefill d_qk, prefill d_v, decode d_qk, decode d_v, cached elements per token).
MLA_DIMS = (192.0, 128.0, 576.0, 512.0, 576.0)
FRAMEWORKS = ("vllm", "sglang", "trtllm", "nccl")
ROW_COLUMNS = ["gpu", "framework", "version", "op", "dtype", "regime", "kernel", "predicted_s", "measured_s", "ratio"]
GROUP_KEY = ["gpu", "framework", "version", "op", "dtype", "regime"]


def _graph(op: Op) -> Op:
    return replace(op, launch="graph")


def _rows(
    df: pd.DataFrame,
    op_name: str,
    dtype: str | np.ndarray,
    regime: np.ndarray,
    timing: OpTiming,
    extra_s: np.ndarray | float = 0.0,
) -> pd.DataFrame:
    """The per-row frame of :data:`ROW_COLUMNS` for ``df``'s rows and their timing (plus ``extra_s``: measured
    seconds of work in the row that roofline's op does not run, e.g. a dynamic activation-scale pass)."""
    measured = df["time_s"].to_numpy(np.float64)
    predicted = np.broadcast_to(timing.time_s, measured.shape).astype(np.float64) + extra_s
    out = df[["gpu", "framework", "version", "kernel"]].copy()
    out["op"], out["dtype"], out["regime"] = op_name, dtype, np.broadcast_to(regime, measured.shape)
    out["predicted_s"], out["measured_s"] = predicted, measured
    out["ratio"] = predicted / measured
    return out[ROW_COLUMNS]


def gemm_formats(aic_dtype: str, hw: HardwareSpec) -> tuple[ComputeDtype, float, float] | None:
    """(compute format, weight bytes / element, activation bytes / element) of an AIC GEMM or MoE format on ``hw``.

    Formats from :data:`GEMM_FORMATS`; bytes and peak as a Scenario of those formats prices them. None for an
    unknown format or one ``hw`` has no peak for (nvfp4 without an fp4 peak would silently fall back to bf16).
    """
    formats = GEMM_FORMATS.get(aic_dtype)
    if formats is None:
        return None
    sc = Scenario(weight_dtype=formats[0], act_dtype=formats[1])
    try:
        compute = sc.gemm_compute_dtype(hw)
    except ScenarioError:  # no peak for this format on hw
        return None
    if compute != (formats[1].compute or "bf16"):
        return None
    return compute, sc.weight_dtype.bytes_per_element, sc.activation_memory_bytes_per_element


#: Activation formats a GEMM row's forward quantises its 16-bit input to first, in a kernel of its own.
QUANTISED_ACTIVATIONS = frozenset({Precision.FP8, Precision.NVFP4, Precision.INT8})


def gemm_op(rows: pd.DataFrame, aic_dtype: str, hw: HardwareSpec) -> Op | None:
    """The roofline GEMM of ``rows`` (one AIC ``gemm_dtype``), launched in a graph; None where not expressible.

    Formats, bytes and peak from :func:`gemm_formats`. The collectors time a linear layer's forward on a 16-bit
    input (AIConfigurator ``collector/vllm/collect_gemm.py``: ``RowParallelLinear.forward(x)``, x bf16; TensorRT-LLM
    ``Linear.forward``), so a row of a quantised activation format (:data:`QUANTISED_ACTIVATIONS`) is two kernels,
    the activation quantisation and the GEMM, and both launches are priced (the fits and the comparison alike; the
    quantisation's ~3 bytes per input element stay in the fitted rate).
    """
    fmt = gemm_formats(aic_dtype, hw)
    if fmt is None:
        return None
    compute, w_bytes, a_bytes = fmt
    m, n, k = (rows[c].to_numpy(np.float64) for c in ("m", "n", "k"))
    op = gemm("aic.gemm", "aic", "aic", 1, compute, m, n, k, w_bytes, a_bytes)
    weights, activations = GEMM_FORMATS[aic_dtype]
    kernels = 2 if activations in QUANTISED_ACTIVATIONS else 1  # the activation quantisation, then the GEMM
    return _graph(with_fields(op, weight_format=weights.value, kernels=kernels, engine_kernels=kernels))


def gemm_rows(df: pd.DataFrame, hw: HardwareSpec, profile: CalibrationProfile) -> pd.DataFrame:
    """Predicted vs measured for a normalised ``gemm`` table (formats of :data:`GEMM_FORMATS` only). A row's
    dynamic activation-scale pass (``dynamic_scale_s``, the engine's own measurement of it:
    :func:`calibrate.aic.tables.dynamic_scale_s`) is added to roofline's static-scale GEMM; rows the collector
    timed eagerly (``launch`` eager, :data:`calibrate.aic.tables.EAGER_GEMMS`) get the regime ``eager``."""
    parts = []
    for dtype, rows in df.groupby("dtype", sort=True):
        op = gemm_op(rows, str(dtype), hw)
        if op is None:
            continue
        timing = op_time(op, hw, profile)
        extra = rows["dynamic_scale_s"].to_numpy(np.float64) if "dynamic_scale_s" in rows else 0.0
        eager = rows["launch"].to_numpy() == "eager" if "launch" in rows else np.zeros(len(rows), dtype=bool)
        regime = np.where(eager, "eager", timing.bound)  # host-paced rows (tables.EAGER_GEMMS): not kernel times
        parts.append(_rows(rows, "gemm", str(dtype), regime, timing, extra))
    return _concat(parts)


def _comm_regime(op: Op, timing: OpTiming, hw: HardwareSpec, profile: CalibrationProfile) -> np.ndarray:
    """``bandwidth`` where wire bytes / link bandwidth exceed the rest of the time, else ``latency``."""
    wire_s = op.comm_bytes / comm_bandwidth_bytes_per_s(op, hw, profile)
    return np.where(wire_s > timing.time_s - wire_s, "bandwidth", "latency")


def allreduce_op(hw: HardwareSpec, message_bytes: np.ndarray, p: int, launch: Launch) -> Op:
    """The all-reduce of ``message_bytes`` over p GPUs exactly as roofline builds it for an engine
    (:func:`roofline.ops.comm.all_reduce`: its custom kernel up to the cap, NCCL's ring above), launched ``launch``."""
    return with_fields(all_reduce("aic.all_reduce", "aic", "aic", 1, "bf16", message_bytes, p, hw), launch=launch)


def allreduce_rows(df: pd.DataFrame, kind: str, hw: HardwareSpec, profile: CalibrationProfile) -> pd.DataFrame:
    """Predicted vs measured for a normalised ``custom_allreduce`` or ``nccl`` table (all-reduce rows)."""
    parts = []
    rows_ar = df[df["collective"] == "all_reduce"]
    for (_, launch), rows in rows_ar.groupby(["gpus", "launch"], sort=True):
        p = int(rows["gpus"].iloc[0])
        s = rows["message_bytes"].to_numpy(np.float64)
        op = allreduce_op(hw, s, p, "graph" if launch == "graph" else "eager")
        if kind == "nccl":  # NCCL's own all_reduce: its ring at every size
            wire, hops = 2.0 * (p - 1) / p * s, 2.0 * (p - 1) + 0 * s
            op = replace(op, comm_bytes=arr(wire), comm_hops=arr(hops), custom_collective=0 * s)
            name = "allreduce-nccl"
        else:
            name = "allreduce-custom" if launch == "graph" else "allreduce-custom-eager"
        timing = op_time(op, hw, profile)
        dtypes = rows["dtype"].to_numpy()
        parts.append(_rows(rows, name, dtypes, _comm_regime(op, timing, hw, profile), timing))
    return _concat(parts)


def placeholder_model() -> ModelSpec:
    """Any bundled model: :func:`attention_kernel` reads shapes, formats and phase from its context, not the model."""
    from roofline.specs.library import list_models, model

    return model(list_models()[0])


def attention_rows(df: pd.DataFrame, hw: HardwareSpec, profile: CalibrationProfile) -> pd.DataFrame:
    """Predicted vs measured for a normalised attention table (unambiguous rows only, module docstring)."""
    keep = (df["dtype"] == "bfloat16") & ~np.isfinite(df["window"]) & (df["beam_width"] == 1)
    keep &= df["kv_dtype"].isin(list(KV_FORMATS))
    parts = []
    shape = ["phase", "q_heads", "kv_heads", "head_dim", "kv_dtype"]
    for (phase, _, _, _, kv), rows in df[keep].groupby(shape, sort=True):
        op = gqa_op(rows, hw)
        timing = op_time(op, hw, profile)
        label = "bf16" if kv == "bfloat16" else f"bf16/kv-{kv}"
        parts.append(_rows(rows, f"attention-{phase}", label, timing.bound, timing))
    return _concat(parts)


def gqa_op(rows: pd.DataFrame, hw: HardwareSpec) -> Op:
    """The GQA attention kernel roofline builds for a normalised attention table's rows of one phase, head shape and
    KV format (graph launch)."""
    phase, hq, hkv, d, kv = (rows[c].iloc[0] for c in ("phase", "q_heads", "kv_heads", "head_dim", "kv_dtype"))
    sc = Scenario(kv_dtype=KV_FORMATS[str(kv)])
    b, t, past = (rows[c].to_numpy(np.float64) for c in ("batch", "new_tokens", "past"))
    ctx = BuildContext.create(placeholder_model(), sc, hw, "decode" if phase == "decode" else "prefill", b, t, past)
    hq, hkv, d = float(hq), float(hkv), float(d)
    return _graph(
        attention_kernel(ctx, "aic", 1, float("inf"), hq, hkv, d, d, 2 * hkv * d, kv_format=sc.kv_dtype.value)
    )


def mla_op(rows: pd.DataFrame, hw: HardwareSpec) -> Op:
    """The MLA kernel roofline's ``mla_ops`` builds for a normalised MLA table's rows of one phase, head count and KV
    format (graph launch): prefill over expanded per-head K/V, decode absorbed over the one latent head."""
    phase, hq, kv = (rows[c].iloc[0] for c in ("phase", "q_heads", "kv_dtype"))
    sc = Scenario(kv_dtype=KV_FORMATS[str(kv)])
    b, t, past = (rows[c].to_numpy(np.float64) for c in ("batch", "new_tokens", "past"))
    ctx = BuildContext.create(placeholder_model(), sc, hw, "decode" if phase == "decode" else "prefill", b, t, past)
    dqk, dv, gqk, gv, latent = MLA_DIMS
    hkv, d_qk, d_v = (1.0, gqk, gv) if phase == "decode" else (float(hq), dqk, dv)
    fmt = sc.kv_dtype.value  # the cache format picks the kernel variant in both phases
    return _graph(
        attention_kernel(ctx, "aic", 1, float("inf"), float(hq), hkv, d_qk, d_v, latent, kv_format=fmt, mla=True)
    )


def mla_rows(df: pd.DataFrame, hw: HardwareSpec, profile: CalibrationProfile) -> pd.DataFrame:
    """Predicted vs measured for a normalised MLA table (16-bit math, a KV format roofline has)."""
    keep = (df["dtype"] == "bfloat16") & df["kv_dtype"].isin(list(KV_FORMATS))
    parts = []
    for (phase, _, kv), rows in df[keep].groupby(["phase", "q_heads", "kv_dtype"], sort=True):
        timing = op_time(mla_op(rows, hw), hw, profile)
        label = "bf16" if kv == "bfloat16" else f"bf16/kv-{kv}"
        parts.append(_rows(rows, f"mla-{phase}", label, timing.bound, timing))
    return _concat(parts)


def _concat(parts: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=ROW_COLUMNS)


def table_rows(table: AicTable, profile: CalibrationProfile | None = None) -> pd.DataFrame:
    """Per-row comparison of one table of a mapped GPU (:data:`ROW_COLUMNS`; times in seconds)."""
    if table.hardware is None:
        raise CalibrationError(f"{table.gpu} has no roofline hardware spec; mapped GPUs only")
    hw, prof = hardware(table.hardware), profile if profile is not None else default_profile()
    df = load_table(table)
    if table.kind == "gemm":
        return gemm_rows(df, hw, prof)
    if table.kind in OP_KINDS["allreduce"]:
        return allreduce_rows(df, table.kind, hw, prof)
    if table.kind in OP_KINDS["attention"]:
        return attention_rows(df, hw, prof)
    if table.kind in OP_KINDS["mla"]:
        return mla_rows(df, hw, prof)
    if table.kind in OP_KINDS["moe"]:
        from calibrate.aic.moe import moe_rows  # moe builds on this module's formats and rows

        return moe_rows(df, hw, prof)
    raise CalibrationError(f"no roofline comparison for table kind {table.kind!r} ({table.label})")


def comparable_tables(
    tables: Iterable[AicTable], gpu: str | None = None, framework: str | None = None, op: str | None = None
) -> list[AicTable]:
    """The mapped-GPU tables of the kinds :data:`OP_KINDS` compares, filtered by gpu, framework and op kind."""
    kinds = OP_KINDS[op] if op is not None else tuple(k for ks in OP_KINDS.values() for k in ks)
    return [
        t
        for t in tables
        if t.hardware is not None
        and t.kind in kinds
        and (gpu is None or t.gpu == gpu)
        and (framework is None or t.framework == framework)
    ]


def compare(
    tables: Iterable[AicTable] | None = None,
    *,
    gpu: str | None = None,
    framework: str | None = None,
    op: str | None = None,
    profile: CalibrationProfile | None = None,
    engine_profiles: bool = False,
) -> pd.DataFrame:
    """Per-row comparison over the selected tables (default: every installed table); times in seconds.

    ``engine_profiles``: each table priced under the shipped engine-kernel profile of its (GPU, engine)
    (:func:`roofline.engine.profiles.shipped_engine_profile`), the default profile where none ships (NCCL's own
    tables, an engine or GPU without one); ``profile`` is then ignored."""
    chosen = comparable_tables(list_tables() if tables is None else tables, gpu, framework, op)
    return _concat([table_rows(t, _engine_profile(t) if engine_profiles else profile) for t in chosen])


def _engine_profile(table: AicTable) -> CalibrationProfile | None:
    """The shipped engine-kernel profile of the table's (GPU, engine); None (the default profile) where none ships."""
    from roofline.engine.profiles import shipped_engine_profile

    return shipped_engine_profile(table.hardware, table.framework) if table.hardware is not None else None


def summarise(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (gpu, framework, version, op, dtype, regime): rows and the median, p10, p90 of predicted / measured."""
    finite = rows[np.isfinite(rows["ratio"].astype(np.float64)) & (rows["measured_s"] > 0)]
    grouped = finite.groupby(GROUP_KEY, sort=True)["ratio"]
    out = grouped.agg(
        rows="size",
        ratio_median=lambda r: float(np.median(r)),
        ratio_p10=lambda r: float(np.quantile(r, 0.1)),
        ratio_p90=lambda r: float(np.quantile(r, 0.9)),
    )
    return out.reset_index()


def moe_format_key(aic_dtype: str, hw: HardwareSpec) -> str:
    """The profile's kernel-format key (:func:`roofline.profile_moe.format_key`) of AIC ``moe_dtype`` on ``hw``."""
    fmt = gemm_formats(aic_dtype, hw)
    if fmt is None:
        raise CalibrationError(f"{aic_dtype} does not map on {hw.name}")
    return format_key(fmt[0], fmt[1], GEMM_FORMATS[aic_dtype][0].value)
