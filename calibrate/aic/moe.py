"""Roofline's routed-expert MoE time against AIConfigurator's ``moe_perf`` tables, and a grouped-GEMM fit from them.

Each row of a ``moe`` table times one engine's fused MoE kernel (routed experts only, no router, no
all-to-all) for M = ``num_tokens`` tokens, hidden size h, expert intermediate size I, top-k of E
experts, sharded ``moe_tp_size`` × ``moe_ep_size``, in CUDA-graph replay. Its roofline equivalent is
what :func:`roofline.ops.ffn.moe_ops` prices for the routed experts, with the routing arithmetic of
:func:`roofline.ops.ffn.routed_rows` (uniform routing; the ``distribution`` column is not modelled):

    i = I / moe_tp_size,  local experts = E / moe_ep_size,
    (touched, assignments, r) = routed_rows(E, k, moe_ep_size, M)
    gate_up: grouped GEMM, r rows × n = 2i (gated; i for ``*nongated*`` kernels) × k = h, weights × touched
    act:     elementwise over assignments · i elements, 3 passes (gated) or 2
    down:    grouped GEMM, r rows × n = h × k = i, weights × touched

all launched ``"graph"``. Formats map as :func:`calibrate.aic.compare.gemm_formats` maps GEMMs
(:data:`MOE_FORMATS`); the others are skipped (:data:`SKIPPED_FORMATS`). ``predicted_s`` = the sum of the
three ops' times; ``regime`` = the bound of the gate_up GEMM.

:func:`fit_grouped` fits ``profile.grouped_gemm`` from the bf16 ``balanced`` rows, each parameter only in
the regime it describes, with the base profile's grouped factors neutralised (1 on both sides):

    kernel_s = measured_s − act time − launch overheads of the two grouped GEMMs        (s)
    memory factor at a knot  = median(memory_s(gate_up) + memory_s(down)) / kernel_s)   (memory-bound rows)
    compute_efficiency       = median(compute_s(gate_up) + compute_s(down)) / kernel_s) (compute-bound rows)

memory_s / compute_s are the GEMMs' bytes / memory ceiling and FLOPs / compute ceiling at factor 1. A row
is used only where that term is ≥ :data:`DOMINANCE` (4) × the subtracted act + launch terms (those then are
≤ ~20 % of its time): on h100_sxm vllm the rows of a few MiB per GPU (moe_ep_size 16–64) sit near the launch
floor, and without the guard they pull the median at 8 rows per expert from 0.96 to 0.88. Memory
knots are r = 1, 2, 4, … (each row at the knot nearest in log2 r; knots of fewer than :data:`MIN_ROWS`
rows dropped; medians kept as measured, clamped to [0.05, 1.5]).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from calibrate.aic.compare import ROW_COLUMNS, gemm_formats
from calibrate.aic.tables import AIC_VERSION, AicTable, list_tables, load_table, tables_newest_first
from roofline.errors import CalibrationError
from roofline.evaluate import OpTiming, op_time
from roofline.ops.ffn import grouped_rows, routed_rows
from roofline.ops.records import Op, elementwise, gemm
from roofline.profile import CalibrationProfile, Curve, GroupedGemm, default_profile
from roofline.specs.hardware import HardwareSpec
from roofline.specs.library import hardware

#: AIC ``moe_dtype`` priced like the GEMM format of the same name (:data:`calibrate.aic.compare.GEMM_FORMATS`).
MOE_FORMATS = ("bfloat16", "fp8", "fp8_block", "nvfp4", "int4_wo", "w4a16_mxfp4")
#: AIC ``moe_dtype`` with no clean roofline mapping (weight-only int4, MXFP4 with bf16 / fp8 activations).
SKIPPED_FORMATS = ("w4a8_mxfp4_mxfp8",)
MIN_ROWS = 10  # rows a memory knot (or the compute fit) needs
MEMORY_CLAMP = (0.05, 1.5)
#: A row is used only where its grouped-GEMM term (at factor 1) is ≥ this × the subtracted act + launch terms.
DOMINANCE = 4.0
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


def moe_ops_for_rows(rows: pd.DataFrame, hw: HardwareSpec, moe_dtype: str, gated: bool = True) -> MoeOps | None:
    """The routed-expert ops of ``rows`` (one ``moe_dtype``) as roofline prices them (module docstring).

    None for a format of :data:`SKIPPED_FORMATS`, an unknown one, or one ``hw`` has no peak for.
    """
    fmt = gemm_formats(moe_dtype, hw) if moe_dtype in MOE_FORMATS else None
    if fmt is None:
        return None
    dt, wb, ab = fmt
    col = {c: rows[c].to_numpy(np.float64) for c in SHAPE}
    h, i = col["hidden_size"], col["inter_size"] / col["moe_tp_size"]
    touched, assignments, r = routed_rows(col["num_experts"], col["topk"], col["moe_ep_size"], col["num_tokens"])
    up = (2.0 if gated else 1.0) * i

    def g(name: str, n: np.ndarray, k: np.ndarray) -> Op:
        op = gemm(name, "moe", "aic", 1, dt, r, n, k, wb, ab, touched)
        return replace(grouped_rows(op, touched), launch="graph")

    act = elementwise("moe.experts_act", "moe", "aic", 1, dt, assignments * i, 3.0 if gated else 2.0, ab, 4.0)
    return MoeOps(
        g("moe.experts_gate_up" if gated else "moe.experts_up", up, h),
        replace(act, launch="graph"),
        g("moe.experts_down", h, i),
    )


def _groups(df: pd.DataFrame) -> list[tuple[str, bool, pd.DataFrame]]:
    """(moe_dtype, gated, rows) per format and gating (``*nongated*`` kernels run plain experts)."""
    gated = ~df["kernel"].astype(str).str.contains("nongated")
    out = []
    for (dtype, g), rows in df.groupby([df["moe_dtype"].astype(str), gated], sort=True):
        out.append((str(dtype), bool(g), rows))
    return out


def moe_rows(df: pd.DataFrame, hw: HardwareSpec, profile: CalibrationProfile) -> pd.DataFrame:
    """Predicted vs measured (:data:`ROW_COLUMNS`, seconds) for a ``moe`` table; skipped formats left out."""
    parts = []
    for dtype, gated, rows in _groups(df):
        ops = moe_ops_for_rows(rows, hw, dtype, gated)
        if ops is None:
            continue
        t_up, t_act, t_down = ops.timings(hw, profile)
        measured = rows["time_s"].to_numpy(np.float64)
        out = rows[["gpu", "framework", "version", "kernel"]].copy()
        out["op"], out["dtype"], out["regime"] = "moe", dtype, np.broadcast_to(t_up.bound, measured.shape)
        out["predicted_s"] = np.broadcast_to(t_up.time_s + t_act.time_s + t_down.time_s, measured.shape)
        out["measured_s"] = measured
        out["ratio"] = out["predicted_s"] / measured
        parts.append(out[ROW_COLUMNS])
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=ROW_COLUMNS)


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
    )


def memory_knots(expert_elements: np.ndarray, factor: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...], int]:
    """(knots 4^j elements, median factor per knot, rows used) of the streaming fit against one expert matrix's size.

    Each row sits at the knot nearest in log4 of its gate_up matrix's n·k; knots with < MIN_ROWS rows are dropped.
    The factor is read against the matrix size, never the rows per expert: the weights a step streams do not change
    with its batch, so neither may their rate (a decode step never gets cheaper as the batch grows). Where the rows
    outgrow the memory regime, ``compute_efficiency`` takes over through the roofline max."""
    j = np.rint(np.log2(np.maximum(expert_elements, 1.0)) / 2.0).astype(np.int64)
    xs, ys, used = [], [], 0
    for knot in np.unique(j):
        sel = factor[j == knot]
        if sel.size < MIN_ROWS:
            continue
        xs.append(float(4.0**knot))
        ys.append(float(np.clip(np.median(sel), *MEMORY_CLAMP)))
        used += int(sel.size)
    return tuple(xs), tuple(ys), used


def fit_rows(df: pd.DataFrame, formats: tuple[str, ...] = ("bfloat16",)) -> pd.DataFrame:
    """The rows :func:`fit_grouped` fits from: the ``formats`` (AIC ``moe_dtype``), ``balanced`` routing."""
    return df[df["moe_dtype"].isin(list(formats)) & (df["distribution"] == "balanced")]


def _fit_groups(
    df: pd.DataFrame, hw: HardwareSpec, formats: tuple[str, ...] = ("bfloat16",)
) -> list[tuple[pd.DataFrame, MoeOps]]:
    """(rows, ops) per format and gating of the fit rows."""
    out = []
    for dtype, gated, rows in _groups(fit_rows(df, formats)):
        ops = moe_ops_for_rows(rows, hw, dtype, gated)
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
    ok = t.kernel_s > 0
    mem = ok & (t.bound == "memory") & (t.memory_s >= DOMINANCE * rest)
    xs, ys, n_mem = memory_knots(t.expert_elements[mem], t.memory_s[mem] / t.kernel_s[mem])
    comp = ok & (t.bound == "compute") & (t.compute_s >= DOMINANCE * rest)
    if int(comp.sum()) < MIN_ROWS:
        comp = np.zeros_like(comp)
    n_comp = int(comp.sum())
    eff = float(min(np.median(t.compute_s[comp] / t.kernel_s[comp]), 1.5)) if n_comp else 1.0
    what = "/".join(formats)
    note = f"{src}: {n_mem} memory-bound {what} balanced rows, median per expert-matrix size (n·k, log4 knots)"
    curve = Curve(x=xs, y=ys, sources=(note,)) if xs else None
    grouped = GroupedGemm(
        devices=(hw.name,),
        measured_on=hw.name,
        memory_efficiency_by_size=curve,
        compute_efficiency=eff,
        sources=(
            f"{src}: {n_mem} memory-bound and {n_comp} compute-bound {what} balanced rows "
            "(act time and launch overheads subtracted)",
        ),
    )
    used = (mem & _in_knots(t.expert_elements, xs)) | comp
    fitted = base.model_copy(update={"grouped_gemm": grouped})
    predicted = np.concatenate([_predicted(ops, hw, fitted, len(rows)) for rows, ops in groups])
    ratio = predicted[used] / t.measured_s[used]
    p10, p50, p90 = (float(q) for q in np.quantile(ratio, [0.1, 0.5, 0.9])) if ratio.size else (np.nan,) * 3
    return GroupedFit(grouped, n_mem, n_comp, p10, p50, p90)


def _in_knots(expert_elements: np.ndarray, knots: tuple[float, ...]) -> np.ndarray:
    """Rows whose nearest log4 knot (of their expert matrix's n·k) is one of ``knots``."""
    j = np.rint(np.log2(np.maximum(expert_elements, 1.0)) / 2.0)
    return np.isin(4.0**j, np.asarray(knots, dtype=np.float64))


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
