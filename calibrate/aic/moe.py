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
    streaming factor = (memory_s(gate_up) + memory_s(down)) / kernel_s                  (memory-bound rows)
                     ≈ s(n·k) × g(rows per expert)          (:func:`memory_curves`, separable medians)
    compute factor   = (compute_s(gate_up) + compute_s(down)) / kernel_s                (compute-bound rows)
                     → median per rows-per-expert knot (:func:`compute_curve`) and overall (the scalar)

memory_s / compute_s are the GEMMs' bytes / memory ceiling and FLOPs / compute ceiling at factor 1. A row
is used only where that term is ≥ :data:`DOMINANCE` (4) × the subtracted act + launch terms (those then are
≤ ~20 % of its time): on h100_sxm vllm the rows of a few MiB per GPU (moe_ep_size 16–64) sit near the launch
floor, and without the guard they pull the median at 8 rows per expert from 0.96 to 0.88. Why two streaming
curves: on h100_sxm vllm bf16 the factor of a 4–268 M-element expert matrix is 0.94–1.01 at 4–16 rows per
expert and falls to 0.57–0.81 at 128 rows (the kernel's tiles approach the compute ridge), so one factor per
matrix size put Mixtral's decode (8 rows per expert) at 1.21× its row of the table; the size alone sets the
rate of the small matrices of wide expert parallelism (0.47 at 64 K elements). Medians clamped to [0.05, 1.5].
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from calibrate.aic.compare import ROW_COLUMNS, gemm_formats
from calibrate.aic.knots import knot_medians, knot_of
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
SEPARABLE_PASSES = 4  # alternating-median passes of the separable streaming fit (converged to < 1e-3 by 3)
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


def memory_curves(
    expert_elements: np.ndarray, rows_per_expert: np.ndarray, factor: np.ndarray
) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...], tuple[float, ...], np.ndarray]:
    """(size knots 4^j, streaming factor per size knot, rows knots 2^q, relative factor per rows knot, rows used)
    of the streaming fit: factor ≈ s(n·k) × g(rows per expert), separable, by alternating medians.

    Each row sits at the size knot nearest in log4 of its gate_up matrix's n·k and the rows knot nearest in log2
    of its rows per expert; only rows whose two knots both hold ≥ MIN_ROWS rows are used. Starting from g = 1,
    :data:`SEPARABLE_PASSES` times: s(j) = median of factor / g over the rows at j, then g(q) = median of factor / s
    over the rows at q; finally g is divided by its largest knot (1 at the best-filled tiles) and s multiplied by
    it, so s is the rate of the best tile fill. The rows curve is then made non-increasing: it starts at its best
    knot (1 below it, where the curve clamps) and each later knot is at most the one before. With the touched
    experts non-decreasing in the tokens and the rows per expert too, a step's streaming time then never falls
    as its batch grows (a rise from 1–2 rows to the best knot, 0.80–0.91 → 1 on h100_sxm vllm, let Mixtral's decode
    step get 1.2 % cheaper from batch 9 to 16; those low knots are partly the tables' balanced routing touching
    more experts than uniform routing's expectation, which the fit's bytes assume). The size sets how close a
    matrix gets to the bandwidth; the rows set how well the kernel's tiles are filled (the rate falls towards the
    compute ridge). Where the rows outgrow the memory regime, the compute factor takes over through the roofline
    max."""
    j = knot_of(expert_elements, 4.0, "nearest")
    q = knot_of(rows_per_expert, 2.0, "nearest")
    keep = np.ones(factor.shape, dtype=bool)
    for key in (j, q):
        ks, counts = np.unique(key[keep], return_counts=True)
        keep &= np.isin(key, ks[counts >= MIN_ROWS])
    j, q, f = j[keep], q[keep], factor[keep]
    sj, gq = np.unique(j), np.unique(q)
    g = np.ones(f.shape)
    for _ in range(SEPARABLE_PASSES):
        s_at = {k: float(np.median(f[j == k] / g[j == k])) for k in sj}
        s = np.array([s_at[k] for k in j])
        g_at = {k: float(np.median(f[q == k] / s[q == k])) for k in gq}
        g = np.array([g_at[k] for k in q])
    top = max(g_at.values()) if g_at else 1.0
    s_y = tuple(float(np.clip(s_at[k] * top, *MEMORY_CLAMP)) for k in sj)
    peak = int(np.argmax([g_at[k] >= top * (1 - 1e-9) for k in gq])) if g_at else 0  # the first best knot
    g_x = tuple(float(k) for k in gq[peak:])  # the curve starts at its best knot: 1 below it (clamped)
    g_y = tuple(
        float(v) for v in np.minimum.accumulate([np.clip(g_at[k] / top, MEMORY_CLAMP[0], 1.0) for k in gq[peak:]])
    )
    return tuple(float(k) for k in sj), s_y, g_x, g_y, keep


def compute_curve(rows_per_expert: np.ndarray, factor: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(rows knots 2^q, compute factor per knot) of the compute-bound rows: the median per knot nearest in log2 of
    the rows per expert (≥ MIN_ROWS rows), each knot kept ≥ the previous one × its rows ratio so a grouped GEMM's
    compute time never falls as its rows grow; clamped to (0.05, 1.5]."""
    xs, ys, _ = knot_medians(rows_per_expert, factor, base=2.0, placement="nearest", min_rows=MIN_ROWS)
    out: list[float] = []
    for i, y in enumerate(ys):
        low = out[-1] * xs[i - 1] / xs[i] if out else MEMORY_CLAMP[0]
        out.append(float(np.clip(max(y, low), MEMORY_CLAMP[0], 1.5)))
    return xs, tuple(out)


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
    by_rows = f"{src}: {n_mem} memory-bound {what} balanced rows, separable fit (calibrate.aic.moe.memory_curves)"
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
    ratio = predicted[used] / t.measured_s[used]
    p10, p50, p90 = (float(q) for q in np.quantile(ratio, [0.1, 0.5, 0.9])) if ratio.size else (np.nan,) * 3
    return GroupedFit(grouped, n_mem, n_comp, p10, p50, p90)


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
