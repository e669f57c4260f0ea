"""Fixed latencies of the engines' kernels, fitted from AIConfigurator's tables where latency is what they show.

A kernel's time in a replayed CUDA graph is its work (bytes / memory ceiling or FLOPs / compute ceiling, the
roofline max) plus a fixed cost. Where the work is a small share of the measured time the row measures the fixed
cost, and only those rows are used (:data:`LATENCY_SHARE`: work < 25 % of measured). Each parameter is fitted in
its own regime, one after another, so that each subtracts what the previous ones priced:

1. ``overheads.per_kernel_graph_s`` = median over latency-bound bf16 GEMM rows of (measured − work): the GPU-side
   cost of one kernel in a graph (launch gap, DRAM latency, ramp and tail), applied to every kernel of a graph step.
2. ``attention.decode_fixed_s`` = max(0, median over latency-bound decode attention rows (bf16, full attention,
   beam 1) of (measured − work − per_kernel_graph_s)): the per-call floor of a decode attention kernel
   (split-KV combine, scheduling prologue); 2b. ``attention.prefill_fixed_s``, the same over the latency-bound
   rows of the context-attention table that are one short pass (:func:`tiny_prefill`: ≤ 32 query tiles, ≤ 256 new
   tokens), its prologue, one tile's pass and epilogue.
3. ``comm.custom_allreduce_latency_s[p]`` = max(0, median over latency-bound custom all-reduce rows of p GPUs
   (graph launch, 16-bit) of (measured − wire bytes / link bandwidth − per_kernel_graph_s)): the engine's
   one-/two-shot kernel latency, replacing NCCL's base + per-hop latency for those ops.

Work is priced by the base profile with roofline's own op builders (:mod:`calibrate.aic.compare`), so the fixed
cost is what roofline's op would miss. Each fit returns its rows used and the residual (p10, median, p90 of
predicted / measured over the rows used, re-timed with the fitted value).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from calibrate.aic.compare import KV_FORMATS, allreduce_op, gemm_op, gqa_op, mla_op
from roofline.errors import CalibrationError
from roofline.evaluate import op_time
from roofline.ops.comm import all_reduce_plan
from roofline.ops.records import Op, Phase
from roofline.profile import CalibrationProfile
from roofline.specs.hardware import HardwareSpec

LATENCY_SHARE = 0.25  # a row measures latency where its roofline work is below this share of its measured time
MIN_ROWS = 10  # fewer latency-bound rows: the parameter is not fitted (the base profile's value stays)


@dataclass(frozen=True)
class LatencyFit:
    """One fixed latency: its profile field, value (s), rows used and residual of predicted / measured."""

    field: str
    value_s: float
    rows_used: int
    residual_p10: float
    residual_median: float
    residual_p90: float
    table: str

    def record(self) -> dict[str, float | int | str]:
        """The provenance record of this fit."""
        return {
            "table": self.table,
            "value_s": self.value_s,
            "rows_used": self.rows_used,
            "residual_ratio_p10": self.residual_p10,
            "residual_ratio_median": self.residual_median,
            "residual_ratio_p90": self.residual_p90,
        }


def residual(predicted: np.ndarray, measured: np.ndarray) -> tuple[float, float, float]:
    """(p10, median, p90) of predicted / measured: a fit's residual over the rows it used."""
    q = np.quantile(predicted / measured, [0.1, 0.5, 0.9])
    return float(q[0]), float(q[1]), float(q[2])


def _work_s(op: Op, hw: HardwareSpec, profile: CalibrationProfile) -> np.ndarray:
    t = op_time(op, hw, profile)
    return np.asarray(np.maximum(t.compute_s, t.memory_s) + t.comm_s, dtype=np.float64)


def fit_per_kernel(gemm: pd.DataFrame, hw: HardwareSpec, base: CalibrationProfile, table: str) -> LatencyFit | None:
    """``overheads.per_kernel_graph_s`` from the latency-bound bf16 rows of a normalised GEMM table (step 1)."""
    rows = gemm[gemm["dtype"] == "bfloat16"]
    op = gemm_op(rows, "bfloat16", hw) if len(rows) else None
    if op is None:
        return None
    measured = rows["time_s"].to_numpy(np.float64)
    work = _work_s(op, hw, base)
    used = (work < LATENCY_SHARE * measured) & (measured > 0)
    if int(used.sum()) < MIN_ROWS:
        return None
    value = float(np.median(measured[used] - work[used]))
    res = residual(work[used] + value, measured[used])
    return LatencyFit("overheads.per_kernel_graph_s", value, int(used.sum()), *res, table)


def with_per_kernel(profile: CalibrationProfile, value_s: float, source: str) -> CalibrationProfile:
    """``profile`` with ``overheads.per_kernel_graph_s`` = ``value_s`` and its source appended: a cost per engine
    kernel (one GEMM kernel's excess in the engine's graph replay), so paid on the engine's kernel inventory
    (``graph_kernels`` = "engine")."""
    o = profile.overheads
    update = {"per_kernel_graph_s": value_s, "graph_kernels": "engine", "sources": (*o.sources, source)}
    return profile.model_copy(update={"overheads": o.model_copy(update=update)})


def attention_ops(
    df: pd.DataFrame, hw: HardwareSpec, phase: Phase = "decode", mla: bool = False
) -> list[tuple[pd.DataFrame, Op]]:
    """(rows, roofline op launched in a graph) per ``phase`` shape of a normalised attention table (``mla``: an MLA
    kernel table, each shape priced by :func:`calibrate.aic.compare.mla_op`).

    Unambiguous rows only, as :func:`calibrate.aic.compare.attention_rows`: bf16 math, full attention, beam 1,
    a KV format roofline has."""
    keep = (df["dtype"] == "bfloat16") & ~np.isfinite(df["window"]) & (df["beam_width"] == 1)
    keep &= df["kv_dtype"].isin(list(KV_FORMATS)) & (df["phase"] == phase)
    out = []
    for _, rows in df[keep].groupby(["q_heads", "kv_heads", "head_dim", "kv_dtype"], sort=True):
        out.append((rows, mla_op(rows, hw) if mla else gqa_op(rows, hw)))
    return out


#: A prefill call measures its floor where it is one short pass: at most this many query tiles of 128 rows
#: (batch × heads × ⌈new tokens / 128⌉; fewer than a third of the SMs of any GPU the tables cover, A100 108) ...
FLOOR_TILES = 32
#: ... over at most this many new tokens from an empty cache. Longer rows at few tiles take a tile's whole pass
#: over their context, which the base profile's prefill curve (measured at full occupancy) would book as floor.
FLOOR_TOKENS = 256


#: A decode call measures its floor where it reads at most this many cached tokens in all (batch × context; at most
#: 1024 × 576 latent elements × 2 bytes ≈ 1.2 MB, under 1 µs at any covered GPU's bandwidth), from a 16-bit cache:
#: larger batches add per-sequence work, long single sequences a split-KV pass, fp8 caches their own kernels.
FLOOR_DECODE_TOKENS = 1024


def tiny_decode(rows: pd.DataFrame, kv_dtype: str = "bfloat16") -> np.ndarray:
    """Rows of a generation-attention or -MLA table that measure the per-call floor (:data:`FLOOR_DECODE_TOKENS`,
    a cache of ``kv_dtype``: 16-bit for ``decode_fixed_s``, fp8 for its own floor)."""
    tokens = rows["batch"].to_numpy(np.float64) * (rows["past"].to_numpy(np.float64) + 1.0)
    return np.asarray((tokens <= FLOOR_DECODE_TOKENS) & (rows["kv_dtype"].to_numpy() == kv_dtype))


def tiny_prefill(rows: pd.DataFrame) -> np.ndarray:
    """Rows of a context-attention table that measure the per-call floor (:data:`FLOOR_TILES`,
    :data:`FLOOR_TOKENS`, no cached past)."""
    t = rows["new_tokens"].to_numpy(np.float64)
    tiles = rows["batch"].to_numpy(np.float64) * rows["q_heads"].to_numpy(np.float64) * np.ceil(t / 128.0)
    return np.asarray((tiles <= FLOOR_TILES) & (t <= FLOOR_TOKENS) & (rows["past"].to_numpy(np.float64) == 0))


def fit_attention_floor(
    attn: pd.DataFrame,
    hw: HardwareSpec,
    base: CalibrationProfile,
    table: str,
    phase: Phase = "decode",
    mla: bool = False,
    kv_dtype: str = "bfloat16",
) -> LatencyFit | None:
    """``attention.decode_fixed_s`` (``phase`` decode: a generation-attention table, step 2; its :func:`tiny_decode`
    rows), ``attention.prefill_fixed_s`` (prefill: a context-attention table, step 2b; its :func:`tiny_prefill` rows)
    or, ``mla``, ``attention.mla_decode_fixed_s`` (a generation-MLA table's :func:`tiny_decode` rows) from the
    table's latency-bound rows: max(0, median of measured − work − per_kernel_graph_s). ``kv_dtype`` "fp8" (decode,
    GQA): the floor of the calls from an fp8 cache instead (``attention.decode_fixed_by_kv``, step 2 as well)."""
    per_kernel = base.overheads.per_kernel_graph_s
    excess, fixed_m, fixed_w = [], [], []
    for rows, op in attention_ops(attn, hw, phase, mla):
        measured = rows["time_s"].to_numpy(np.float64)
        work = _work_s(op, hw, base)
        used = (work < LATENCY_SHARE * measured) & (measured > 0)
        used &= tiny_prefill(rows) if phase == "prefill" else tiny_decode(rows, kv_dtype)
        excess.append(measured[used] - work[used] - per_kernel)
        fixed_m.append(measured[used])
        fixed_w.append(work[used] + per_kernel)
    ex = np.concatenate(excess) if excess else np.zeros(0)
    if ex.size < MIN_ROWS:
        return None
    value = max(0.0, float(np.median(ex)))
    res = residual(np.concatenate(fixed_w) + value, np.concatenate(fixed_m))
    return LatencyFit(f"attention.{floor_field(phase, mla, kv_dtype)}", value, int(ex.size), *res, table)


def floor_field(phase: Phase = "decode", mla: bool = False, kv_dtype: str = "bfloat16") -> str:
    """The attention profile field a floor fit sets: ``[mla_]{phase}_fixed_s`` from a 16-bit cache,
    ``decode_fixed_by_kv.<format>`` from another (decode, GQA)."""
    if kv_dtype != "bfloat16":
        return f"decode_fixed_by_kv.{KV_FORMATS[kv_dtype].value}"
    return f"{'mla_' if mla else ''}{phase}_fixed_s"


def with_attention_floor(
    profile: CalibrationProfile,
    value_s: float,
    source: str,
    phase: Phase = "decode",
    mla: bool = False,
    kv_dtype: str = "bfloat16",
) -> CalibrationProfile:
    """``profile`` with the floor field :func:`floor_field` names = ``value_s`` and its source appended."""
    a = profile.attention
    name = floor_field(phase, mla, kv_dtype)
    value: object = value_s
    if kv_dtype != "bfloat16":
        name, value = "decode_fixed_by_kv", {**a.decode_fixed_by_kv, KV_FORMATS[kv_dtype].value: value_s}
    return profile.model_copy(update={"attention": a.model_copy(update={name: value, "sources": (*a.sources, source)})})


def fit_custom_allreduce(
    ar: pd.DataFrame, hw: HardwareSpec, base: CalibrationProfile, table: str
) -> dict[int, LatencyFit]:
    """``comm.custom_allreduce_latency_s`` per GPU count from a normalised custom all-reduce table (step 3).

    Latency-bound rows: wire bytes / link bandwidth < 25 % of measured; graph launch, 2-byte elements."""
    out: dict[int, LatencyFit] = {}
    keep = (ar["collective"] == "all_reduce") & (ar["launch"] == "graph") & (ar["dtype"].isin(["bfloat16", "half"]))
    per_kernel = base.overheads.per_kernel_graph_s
    for _, rows in ar[keep].groupby("gpus", sort=True):
        p = int(rows["gpus"].iloc[0])
        if p < 2:
            continue
        op = allreduce_op(hw, rows["message_bytes"].to_numpy(np.float64), p, "graph")
        if not np.any(all_reduce_plan(hw, rows["message_bytes"].to_numpy(np.float64), p)[2]):
            continue  # roofline runs NCCL's ring at this GPU count on hw (no full scale-up fabric): not applied
        measured = rows["time_s"].to_numpy(np.float64)
        wire_s = op.comm_bytes / base.link_bytes_per_s(hw, p)
        used = (wire_s < LATENCY_SHARE * measured) & (measured > 0)
        if int(used.sum()) < 3:  # a table holds ~7 small sizes per GPU count
            continue
        value = max(0.0, float(np.median(measured[used] - wire_s[used] - per_kernel)))
        res = residual(wire_s[used] + per_kernel + value, measured[used])
        out[p] = LatencyFit(f"comm.custom_allreduce_latency_s[{p}]", value, int(used.sum()), *res, table)
    return out


def with_custom_allreduce(profile: CalibrationProfile, values_s: dict[int, float], source: str) -> CalibrationProfile:
    """``profile`` with ``comm.custom_allreduce_latency_s`` = ``values_s`` and its source appended."""
    if not values_s:
        raise CalibrationError("no custom all-reduce latency to set")
    c = profile.comm
    update = {"custom_allreduce_latency_s": dict(values_s), "sources": (*c.sources, source)}
    return profile.model_copy(update={"comm": c.model_copy(update=update)})


#: The decode kernel the memory ceiling describes (a 16-bit cache streamed by the engine's GQA kernel): rate 1 by
#: definition; the others (an fp8 cache, MLA's latent) are fitted relative to the same ceiling.
REFERENCE_DECODE = "bf16"


def decode_key(op: Op) -> str:
    """The ``attention.decode_rate`` key of a decode kernel: its KV format, ``mla:`` + format for MLA."""
    fmt = "bf16" if op.kv_format in ("", "fp16") else op.kv_format
    return f"{'mla:' if op.mla else ''}{fmt}"


def fit_decode_rates(
    tables: list[tuple[pd.DataFrame, bool]], hw: HardwareSpec, prof: CalibrationProfile
) -> dict[str, LatencyFit]:
    """``attention.decode_rate`` per decode kernel (:func:`decode_key`) from generation-attention / -MLA tables
    (``(table, mla)``): over the rows past the floor (batch × context > :data:`FLOOR_DECODE_TOKENS`) that ``prof``
    prices memory-bound, the median of (bytes / memory ceiling) / (measured − the call's fixed cost): the share of
    the memory ceiling the kernel moves its bytes at; not for :data:`REFERENCE_DECODE`. ``value_s`` of each fit holds
    the rate (dimensionless)."""
    ratios: dict[str, list[np.ndarray]] = {}
    for df, mla in tables:
        for rows, op in attention_ops(df, hw, "decode", mla):
            t = op_time(op, hw, prof)
            measured = rows["time_s"].to_numpy(np.float64)
            kernel = measured - np.asarray(t.overhead_s, dtype=np.float64)
            mem, comp = np.asarray(t.memory_s, dtype=np.float64), np.asarray(t.compute_s, dtype=np.float64)
            big = (rows["batch"].to_numpy(np.float64) * (rows["past"].to_numpy(np.float64) + 1.0)) > FLOOR_DECODE_TOKENS
            used = big & (mem >= comp) & (kernel > 0)
            ratios.setdefault(decode_key(op), []).append(mem[used] / kernel[used])
    out = {}
    for key, parts in sorted(ratios.items()):
        r = np.concatenate(parts)
        if r.size >= MIN_ROWS and key != REFERENCE_DECODE:
            p10, p50, p90 = (float(x) for x in np.quantile(r, [0.1, 0.5, 0.9]))
            out[key] = LatencyFit(f"attention.decode_rate.{key}", p50, int(r.size), p10 / p50, 1.0, p90 / p50, "")
    return out
