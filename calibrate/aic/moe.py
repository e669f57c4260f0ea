"""Roofline's routed-expert MoE time against AIConfigurator's ``moe_perf`` tables, and a grouped-GEMM fit from them.

Each row of a ``moe`` table times one engine's fused MoE module from given router logits (routed experts, no router
GEMM, no all-to-all) for M = ``num_tokens`` tokens, hidden size h, expert intermediate size I, top-k of E experts,
sharded ``moe_tp_size`` × ``moe_ep_size``, in CUDA-graph replay. Its roofline equivalent is what
:func:`roofline.ops.ffn.moe_ops` prices for the routed experts, with the routing arithmetic of
:func:`roofline.ops.ffn.routed_rows` (uniform routing; the ``distribution`` column is not modelled, except the
``balanced`` rows vLLM's and SGLang's collectors route through DeepSeek-V3's grouped top-k, replayed by
:func:`calibrate.aic.collector_routing.collector_routing`: half the experts at ep 1, up to 5× the assignments at ep 8):

    i = I / moe_tp_size,  local experts = E / moe_ep_size,
    (touched, assignments, r) = routed_rows(E, k, moe_ep_size, M)   (or the collector's grouped routing)
    gate_up: grouped GEMM, r rows × n = 2i (gated; i for ``*nongated*`` kernels) × k = h, weights × touched
    act:     elementwise over assignments · i elements, 3 passes (gated) or 2
    down:    grouped GEMM, r rows × n = h × k = i, weights × touched

all launched ``"graph"``, each carrying the kernels the engine's timed module launches (routing, alignment, the
top-k sum: :mod:`calibrate.aic.moe_module`). Formats map as :func:`calibrate.aic.compare.gemm_formats` maps GEMMs
(:data:`MOE_FORMATS`); the others are skipped (:data:`SKIPPED_FORMATS`). ``predicted_s`` = the sum of the
three ops' times; ``regime`` = the bound of the gate_up GEMM.

:func:`fit_grouped` fits ``profile.grouped_gemm`` from the bf16 ``balanced`` rows, each parameter only in
the regime it describes, with the base profile's grouped factors neutralised (1 on both sides):

    kernel_s = measured_s − act time − launch overheads of the two grouped GEMMs        (s)
    streaming factor = (memory_s(gate_up) + memory_s(down)) / kernel_s                  (memory-bound rows)
                     ≈ s(n·k) × g(rows per expert)          (:func:`memory_curves`, separable medians)
    compute factor   = (compute_s(gate_up) + compute_s(down)) / kernel_s                (compute-bound rows)
                     → median per rows-per-expert knot (:func:`compute_curve`) and overall (the scalar)

memory_s / compute_s are the GEMMs' bytes / memory ceiling and FLOPs / compute ceiling at factor 1. A row is used
only where it takes at least its weights' bytes at the datasheet bandwidth (a faster one did not stream them from
HBM: L40S keeps small expert sets in its 96 MB L2; DeepSeek-V3's balanced rows at moe_tp 1 / ep 1 read as 5.4 /
7.1–7.6 / 8.5–9.8 TB/s on H100 / H200 / B200 under uniform routing, with half the experts they touch) and that
term is ≥ :data:`DOMINANCE` (4) × the subtracted act + launch terms (≤ ~20 % of its time then): on h100_sxm vllm
the rows of a few MiB per GPU (moe_ep_size 16–64) sit near the launch floor, and without the guard they pull the
median at 8 rows per expert from 0.96 to 0.88. Why two streaming
curves: on h100_sxm vllm bf16 the factor of a 4–268 M-element expert matrix is 0.94–1.01 at 4–16 rows per expert
and falls to 0.57–0.81 at 128 rows (the kernel's tiles approach the compute ridge), so one factor per matrix size
put Mixtral's decode (8 rows per expert) at 1.21× its row of the table; the size alone sets the rate of the small
matrices of wide expert parallelism (0.47 at 64 K elements). Medians clamped to [0.05, 1.5].
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from calibrate.aic.collector_routing import collector_routing, grouped_case
from calibrate.aic.compare import GEMM_FORMATS, ROW_COLUMNS, gemm_formats
from calibrate.aic.moe_curves import MIN_ROWS, compute_curve, memory_curves
from calibrate.aic.moe_module import module_kernels, table_engine
from calibrate.aic.tables import AIC_VERSION, AicTable, list_tables, load_table, tables_newest_first
from roofline.errors import CalibrationError
from roofline.evaluate import OpTiming, op_time
from roofline.ops.ffn import grouped_rows
from roofline.ops.records import Op, elementwise, gemm
from roofline.profile import CalibrationProfile, Curve, GroupedGemm, default_profile
from roofline.profile_moe import LayerTimes, format_key, layer_shape
from roofline.specs.hardware import HardwareSpec
from roofline.specs.library import hardware

#: AIC ``moe_dtype`` priced like the GEMM format of the same name (:data:`calibrate.aic.compare.GEMM_FORMATS`).
MOE_FORMATS = ("bfloat16", "fp8", "fp8_block", "nvfp4", "int4_wo", "w4a16_mxfp4")
#: AIC ``moe_dtype`` with no clean roofline mapping (weight-only int4, MXFP4 with bf16 / fp8 activations).
SKIPPED_FORMATS = ("w4a8_mxfp4_mxfp8",)
#: A row is used only where its grouped-GEMM term (at factor 1) is ≥ this × the subtracted act + launch terms.
DOMINANCE = 4.0
#: Token counts a layer shape needs for its measured curve (:func:`layer_curves`); fewer: the generic curves.
MIN_LAYER_KNOTS = 4
SHAPE = ["num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size"]


@dataclass(frozen=True)
class MoeOps:
    """The three routed-expert ops of a set of rows (arrays over the rows)."""

    gate_up: Op
    act: Op
    down: Op

    def timings(self, hw: HardwareSpec, profile: CalibrationProfile) -> tuple[OpTiming, OpTiming, OpTiming]:
        """op_time of gate_up, act, down under ``profile``."""
        return op_time(self.gate_up, hw, profile), op_time(self.act, hw, profile), op_time(self.down, hw, profile)


@dataclass(frozen=True)
class GroupedFit:
    """A fitted ``GroupedGemm`` with the rows each parameter used and the residual predicted / measured."""

    grouped: GroupedGemm
    rows_used_memory: int
    rows_used_compute: int
    residual_p10: float
    residual_median: float
    residual_p90: float


def moe_table(gpu: str, framework: str, root: Path | None = None) -> AicTable:
    """The newest-version ``moe_perf.parquet`` table of (gpu, framework) (not ``wideep_*``), under ``root``."""
    plain = tables_newest_first(gpu, framework, "moe", root)
    if not plain:
        found = ", ".join(t.label for t in list_tables(root, op="moe") if t.kind == "moe") or "none"
        raise CalibrationError(
            f"no AIConfigurator moe_perf table for gpu {gpu!r} and framework {framework!r}; moe_perf tables: {found}"
        )
    return plain[0]


def moe_ops_for_rows(
    rows: pd.DataFrame | dict[str, np.ndarray],
    hw: HardwareSpec,
    moe_dtype: str,
    gated: bool = True,
    shape: str = "",
    engine: str = "",
) -> MoeOps | None:
    """The routed-expert ops of ``rows`` (one ``moe_dtype``; a frame or its :data:`SHAPE` columns as arrays) as
    roofline prices them (module docstring); ``shape``: the rows' one :func:`row_shapes` key, so a profile's
    measured layer time applies as in predict; ``engine``: the table's, whose timed module's kernels the ops carry
    (:func:`calibrate.aic.moe_module.module_kernels`; "" or one without an inventory: one kernel per op).

    None for a format of :data:`SKIPPED_FORMATS`, an unknown one, or one ``hw`` has no peak for.
    """
    fmt = gemm_formats(moe_dtype, hw) if moe_dtype in MOE_FORMATS else None
    if fmt is None:
        return None
    dt, wb, ab = fmt
    col = {c: np.asarray(rows[c], dtype=np.float64) for c in SHAPE}
    h, i = col["hidden_size"], col["inter_size"] / col["moe_tp_size"]
    routing = np.asarray(rows["distribution"]).astype(str) if "distribution" in rows else None
    touched, assignments, r = collector_routing(engine, col, routing)  # uniform, or the collector's grouped top-k
    up = (2.0 if gated else 1.0) * i

    weights = GEMM_FORMATS[moe_dtype][0].value  # the checkpoint format whose kernel family prices it (format_key)

    def g(name: str, n: np.ndarray, k: np.ndarray) -> Op:
        op = gemm(name, "moe", "aic", 1, dt, r, n, k, wb, ab, touched)
        return replace(grouped_rows(op, touched, shape), launch="graph", weight_format=weights)

    act = elementwise("moe.experts_act", "moe", "aic", 1, dt, assignments * i, 3.0 if gated else 2.0, ab, 4.0)
    first = g("moe.experts_gate_up" if gated else "moe.experts_up", up, h)
    ops = (first, replace(act, launch="graph"), g("moe.experts_down", h, i))
    counts = (module_kernels(engine, weights, gated, int(h.flat[0])) if engine else None) or (-1, -1, -1)  # -1: per op
    up_op, act_op, down_op = (replace(o, engine_kernels=n) for o, n in zip(ops, counts, strict=True))
    return MoeOps(up_op, act_op, down_op)


def _groups(df: pd.DataFrame) -> list[tuple[str, bool, pd.DataFrame]]:
    """(moe_dtype, gated, rows) per format and gating (``*nongated*`` kernels run plain experts)."""
    gated = ~df["kernel"].astype(str).str.contains("nongated")
    out = []
    for (dtype, g), rows in df.groupby([df["moe_dtype"].astype(str), gated], sort=True):
        out.append((str(dtype), bool(g), rows))
    return out


def row_shapes(rows: pd.DataFrame, gated: bool) -> np.ndarray:
    """:func:`roofline.profile_moe.layer_shape` of each row: hidden size, inter_size / moe_tp_size,
    num_experts / moe_ep_size, topk (the shape roofline's op builder gives the same layer on one GPU)."""
    cols = ("hidden_size", "inter_size", "moe_tp_size", "num_experts", "moe_ep_size", "topk")
    h, inter, tp, e, ep, k = (rows[c].to_numpy(np.float64) for c in cols)
    return np.array([layer_shape(*v, gated) for v in zip(h, inter / tp, e / ep, k, strict=True)], dtype=object)


def moe_rows(df: pd.DataFrame, hw: HardwareSpec, profile: CalibrationProfile) -> pd.DataFrame:
    """Predicted vs measured (:data:`ROW_COLUMNS`, seconds) for a ``moe`` table; skipped formats left out. Each
    layer shape is priced on its own (its ops carry the shape), so a measured layer fraction applies as in predict."""
    parts = []
    for dtype, gated, rows in _groups(df):
        priced = _priced_by_shape(rows, hw, profile, dtype, gated)
        if priced is None:
            continue
        predicted, regime = priced
        measured = rows["time_s"].to_numpy(np.float64)
        out = rows[["gpu", "framework", "version", "kernel"]].copy()
        out["op"], out["dtype"], out["regime"] = "moe", dtype, regime
        out["predicted_s"], out["measured_s"], out["ratio"] = predicted, measured, predicted / measured
        parts.append(out[ROW_COLUMNS])
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=ROW_COLUMNS)


def _priced_by_shape(
    rows: pd.DataFrame, hw: HardwareSpec, profile: CalibrationProfile, dtype: str, gated: bool
) -> tuple[np.ndarray, np.ndarray] | None:
    """(predicted seconds, regime) of ``rows`` (one format and gating), each layer shape priced with its ops
    carrying the shape; None for a format roofline does not price (:func:`moe_ops_for_rows`)."""
    cols, engine = {c: rows[c].to_numpy(np.float64) for c in SHAPE}, table_engine(rows)
    cols["distribution"] = rows["distribution"].astype(str).to_numpy()
    shapes, predicted, regime = row_shapes(rows, gated), np.zeros(len(rows)), np.empty(len(rows), dtype=object)
    for shape in sorted(set(shapes)):
        sel = shapes == shape
        ops = moe_ops_for_rows({c: v[sel] for c, v in cols.items()}, hw, dtype, gated, str(shape), engine)
        if ops is None:  # the format, not the shape: every shape of the group is unpriced
            return None
        t_up, t_act, t_down = ops.timings(hw, profile)
        n = int(sel.sum())
        predicted[sel] = np.broadcast_to(t_up.time_s + t_act.time_s + t_down.time_s, (n,))
        regime[sel] = np.broadcast_to(t_up.bound, (n,))
    return predicted, regime


@dataclass(frozen=True)
class _Terms:
    """Per-row terms of the fit at grouped factors 1 (seconds; arrays over the rows)."""

    measured_s: np.ndarray
    kernel_s: np.ndarray  # measured − act − the grouped GEMMs' launch overheads
    memory_s: np.ndarray  # bytes / memory ceiling of gate_up + down
    compute_s: np.ndarray  # FLOPs / compute ceiling of gate_up + down
    bound: np.ndarray  # the gate_up GEMM's bound
    rows_per_expert: np.ndarray
    expert_elements: np.ndarray  # n·k of one expert's gate_up matrix
    streaming_s: np.ndarray  # bytes of gate_up + down / the datasheet bandwidth: no row can take less


def _terms(rows: pd.DataFrame, ops: MoeOps, hw: HardwareSpec, neutral: CalibrationProfile) -> _Terms:
    """The fit's terms of ``rows`` under the neutralised profile (module docstring)."""
    t_up, t_act, t_down = ops.timings(hw, neutral)
    measured = rows["time_s"].to_numpy(np.float64)
    shape = measured.shape
    rest = t_act.time_s + t_up.overhead_s + t_down.overhead_s
    return _Terms(
        measured,
        measured - np.broadcast_to(rest, shape),
        np.broadcast_to(t_up.memory_s + t_down.memory_s, shape),
        np.broadcast_to(t_up.compute_s + t_down.compute_s, shape),
        np.broadcast_to(t_up.bound, shape),
        np.broadcast_to(ops.gate_up.m, shape),
        np.broadcast_to(ops.gate_up.n * ops.gate_up.k, shape),
        np.broadcast_to((ops.gate_up.memory_bytes + ops.down.memory_bytes) / hw.memory.bandwidth_bytes_per_s, shape),
    )


def layer_curves(
    groups: list[tuple[pd.DataFrame, MoeOps]], hw: HardwareSpec, neutral: CalibrationProfile
) -> dict[str, LayerTimes]:
    """``'<format key>|<layer shape>'`` → the measured seconds of the engine's kernel on that exact layer shape
    against token-expert assignments per GPU (``GroupedGemm.layers``), for every shape with at least
    :data:`MIN_LAYER_KNOTS` token counts:

        kernel_s(M) = measured − act time − the grouped GEMMs' launch overheads                  (s)
        T(a)        = max over M' ≤ M of kernel_s(M'),  a = M·k / ep      (never falls as the tokens grow)

    floored at 0.1 µs. ``neutral`` prices the subtracted terms (the profile the fit builds on). The table's
    routing is ``balanced`` (every expert its even share); predict applies T to uniformly routed tokens, which
    touch fewer experts at a few tokens (Mixtral, 4 tokens: 5.5 of 8 expected where balanced routing feeds all 8),
    so a small decode batch there is priced at the table's, not fewer, experts."""
    out: dict[str, LayerTimes] = {}
    for rows, ops in groups:
        gated = ops.gate_up.name == "moe.experts_gate_up"
        fmt = format_key(ops.gate_up.dtype, ops.gate_up.weight_element_bytes, ops.gate_up.weight_format)
        t = _terms(rows, ops, hw, neutral)
        shapes = row_shapes(rows, gated)
        tokens, k, ep = (rows[c].to_numpy(np.float64) for c in ("num_tokens", "topk", "moe_ep_size"))
        uneven = grouped_case(rows)
        for shape in sorted(set(shapes[~uneven])):  # unevenly routed rows do not time uniform routing
            sel = np.flatnonzero((shapes == shape) & ~uneven)
            sel = sel[np.argsort(tokens[sel], kind="stable")]
            if len(np.unique(tokens[sel])) < MIN_LAYER_KNOTS:
                continue
            a = tokens[sel] * k[sel] / ep[sel]
            xs = np.unique(a)
            per_a = np.array([np.median(np.maximum(t.kernel_s[sel][a == x], 1e-7)) for x in xs])
            ys = np.maximum.accumulate([float(f"{v:.4g}") for v in per_a])
            out[f"{fmt}|{shape}"] = LayerTimes(x=tuple(float(x) for x in xs), y=tuple(float(y) for y in ys))
    return out


def fit_rows(df: pd.DataFrame, formats: tuple[str, ...] = ("bfloat16",)) -> pd.DataFrame:
    """The rows :func:`fit_grouped` fits from: the ``formats`` (AIC ``moe_dtype``), ``balanced`` routing."""
    return df[df["moe_dtype"].isin(list(formats)) & (df["distribution"] == "balanced")]


def _fit_groups(
    df: pd.DataFrame, hw: HardwareSpec, formats: tuple[str, ...] = ("bfloat16",)
) -> list[tuple[pd.DataFrame, MoeOps]]:
    """(rows, ops) per format and gating of the fit rows."""
    out = []
    for dtype, gated, rows in _groups(fit_rows(df, formats)):
        ops = moe_ops_for_rows(rows, hw, dtype, gated, engine=table_engine(rows))
        if ops is not None:
            out.append((rows, ops))
    if not out:
        raise CalibrationError(f"no {'/'.join(formats)} balanced MoE rows to fit")
    return out


def _concat_terms(groups: list[tuple[pd.DataFrame, MoeOps]], hw: HardwareSpec, neutral: CalibrationProfile) -> _Terms:
    """:func:`_terms` of every group, concatenated in group order."""
    parts = [_terms(rows, ops, hw, neutral) for rows, ops in groups]
    return _Terms(*(np.concatenate([getattr(p, f) for p in parts]) for f in _Terms.__dataclass_fields__))


def _label(df: pd.DataFrame) -> str:
    """``gpu/moe/framework/version/moe_perf.parquet`` of the rows' first row."""
    gpu, fw, version = (str(df[c].iloc[0]) for c in ("gpu", "framework", "version"))
    return f"{gpu}/moe/{fw}/{version}/moe_perf.parquet"


def fit_grouped(
    df: pd.DataFrame,
    hw: HardwareSpec,
    base: CalibrationProfile,
    label: str | None = None,
    formats: tuple[str, ...] = ("bfloat16",),
) -> GroupedFit:
    """``profile.grouped_gemm`` fitted from a ``moe`` table's balanced rows of ``formats`` (module docstring).

    ``label`` names the table in the sources (default: built from the rows' gpu / framework / version).
    Compute efficiency stays 1 with fewer than :data:`MIN_ROWS` compute-bound rows; no memory curve
    without a knot of :data:`MIN_ROWS` rows.
    """
    groups = _fit_groups(df, hw, formats)
    src = f"aiconfigurator-core {AIC_VERSION} {label or _label(df)}"
    t = _concat_terms(groups, hw, base.model_copy(update={"grouped_gemm": GroupedGemm()}))
    rest = t.measured_s - t.kernel_s
    ok = (t.kernel_s > 0) & (t.measured_s >= t.streaming_s)  # module docstring: physical rows only
    mem = ok & (t.bound == "memory") & (t.memory_s >= DOMINANCE * rest)
    sx, sy, rx, ry, kept = memory_curves(
        t.expert_elements[mem], t.rows_per_expert[mem], t.memory_s[mem] / t.kernel_s[mem]
    )
    used_mem = np.zeros_like(mem)
    used_mem[np.flatnonzero(mem)[kept]] = True
    n_mem = int(used_mem.sum())
    comp = ok & (t.bound == "compute") & (t.compute_s >= DOMINANCE * rest)
    if int(comp.sum()) < MIN_ROWS:
        comp = np.zeros_like(comp)
    n_comp = int(comp.sum())
    c_factor = t.compute_s[comp] / t.kernel_s[comp]
    eff = float(min(np.median(c_factor), 1.5)) if n_comp else 1.0
    cx, cy = compute_curve(t.rows_per_expert[comp], c_factor) if n_comp else ((), ())
    what = "/".join(formats)
    fit_name = "calibrate.aic.moe_curves.memory_curves"
    by_rows = f"{src}: {n_mem} memory-bound {what} balanced rows, separable fit ({fit_name})"
    grouped = GroupedGemm(
        devices=(hw.name,),
        measured_on=hw.name,
        memory_efficiency_by_size=Curve(
            x=sx, y=sy, sources=(f"{by_rows}: rate per expert-matrix size (n·k, log4 knots)",)
        )
        if sx
        else None,
        memory_efficiency=Curve(x=rx, y=ry, sources=(f"{by_rows}: relative rate per rows per expert (log2 knots)",))
        if rx
        else None,
        compute_efficiency=eff,
        compute_efficiency_by_rows=Curve(
            x=cx, y=cy, sources=(f"{src}: {n_comp} compute-bound {what} balanced rows, median per rows per expert",)
        )
        if cx
        else None,
        sources=(
            f"{src}: {n_mem} memory-bound and {n_comp} compute-bound {what} balanced rows "
            "(act time and launch overheads subtracted)",
        ),
    )
    used = used_mem | comp
    fitted = base.model_copy(update={"grouped_gemm": grouped})
    predicted = np.concatenate([_predicted(ops, hw, fitted, len(rows)) for rows, ops in groups])
    ratio = predicted[used] / t.measured_s[used]  # the generic curves (the ops carry no layer shape)
    p10, p50, p90 = (float(q) for q in np.quantile(ratio, [0.1, 0.5, 0.9])) if ratio.size else (np.nan,) * 3
    layers = layer_curves(groups, hw, base.model_copy(update={"grouped_gemm": GroupedGemm()}))
    grouped = grouped.model_copy(update={"layers": layers, "sources": (*grouped.sources, _layers_source(src, layers))})
    return GroupedFit(grouped, n_mem, n_comp, p10, p50, p90)


def _layers_source(src: str, layers: dict[str, LayerTimes]) -> str:
    """The provenance line of the measured layer fractions."""
    return (
        f"{src}: layers: {len(layers)} measured layer shapes (calibrate.aic.moe.layer_curves), each its kernel's "
        "seconds vs token-expert assignments per GPU, from its balanced rows"
    )


def _predicted(ops: MoeOps, hw: HardwareSpec, profile: CalibrationProfile, n: int) -> np.ndarray:
    """Sum of the three ops' times (s) under ``profile``, over ``n`` rows."""
    t_up, t_act, t_down = ops.timings(hw, profile)
    return np.broadcast_to(t_up.time_s + t_act.time_s + t_down.time_s, (n,)).astype(np.float64)


def with_grouped(base: CalibrationProfile, fit: GroupedFit) -> CalibrationProfile:
    """``base`` with ``grouped_gemm`` replaced by the fit's."""
    return base.model_copy(update={"grouped_gemm": fit.grouped})


def fit_table(
    gpu: str, framework: str, *, root: Path | None = None, base: CalibrationProfile | None = None
) -> tuple[AicTable, pd.DataFrame, GroupedFit]:
    """(table, loaded rows, fit) of (gpu, framework)'s newest ``moe_perf`` table under ``base`` (default profile)."""
    table = moe_table(gpu, framework, root)
    if table.hardware is None:
        raise CalibrationError(f"{gpu} has no roofline hardware spec; a fit needs a mapped GPU")
    df = load_table(table)
    prof = base if base is not None else default_profile()
    return table, df, fit_grouped(df, hardware(table.hardware), prof, table.label)
