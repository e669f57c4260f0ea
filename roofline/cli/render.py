"""Rich tables for the CLI: thin renderers of PredictionResult, ops frames and comparisons.

Memory sizes are binary (KiB, MiB, GiB = 2^10, 2^20, 2^30 B; ``roofline.units.fmt_bytes``); durations carry
their unit. Nothing here computes physics: values come from ``PredictionResult`` fields.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from roofline.cli.options import as_flags
from roofline.units import fmt_bytes, fmt_rate, fmt_seconds

if TYPE_CHECKING:
    import pandas as pd

    from roofline.result import PredictionResult
    from roofline.serving.plan.result import Candidate, PlanResult


def num(x: float | None, digits: int = 3) -> str:
    """A number with ``digits`` significant figures and thousands separators ('n/a' for NaN/None)."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    decimals = max(0, digits - 1 - mag)
    return f"{x:,.{decimals}f}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def pct(x: float) -> str:
    """A fraction as a percentage ('n/a' for NaN)."""
    return "n/a" if not math.isfinite(x) else f"{100 * x:.0f}%"


def usd(x: float | None) -> str:
    """US dollars with cents ('n/a' when unknown)."""
    return "n/a" if x is None or not math.isfinite(x) else f"${x:,.2f}"


def scenario_title(r: PredictionResult) -> str:
    """One line naming model, hardware and scenario."""
    s = r.summary()
    par = f"tp {s['tp']}" + (f" · pp {s['pp']}" if s["pp"] > 1 else "") + (f" · ep {s['ep']}" if s["ep"] > 1 else "")
    par += f" · attention dp {s['dp']}" if s.get("dp", 1) > 1 else ""
    par += f" · {s['redundant_experts']} redundant experts" if s.get("redundant_experts", 0) else ""
    par += " · two-batch overlap" if s.get("moe_overlap", "none") != "none" else ""
    return (
        f"[bold]{s['model']}[/] on [bold]{s['hardware']}[/] · engine {s['engine']} · profile {s['profile']}\n"
        f"batch {s['batch']} · prompt {s['prompt_len']} · output {s['output_len']} · {par} · "
        f"weights {s['weight_dtype']} · KV {s['kv_dtype']}"
    )


def seconds_range(value: float, low: float, high: float) -> str:
    """``963 ms (670–1,386)``: the value with its unit, the bounds in the same unit (3 significant digits)."""
    text = fmt_seconds(value)
    if not all(math.isfinite(x) for x in (value, low, high)):
        return text
    scale = {"s": 1.0, "ms": 1e3, "µs": 1e6, "ns": 1e9}[text.rsplit(" ", 1)[1]]
    return f"{text} ({num(low * scale)}–{num(high * scale)})"


def count_range(value: float, low: float, high: float, unit: str) -> str:
    """``454 tok/s (366–563)``."""
    bounds = f" ({num(low)}–{num(high)})" if all(math.isfinite(x) for x in (low, high)) else ""
    return f"{num(value)} {unit}{bounds}"


def prediction_table(r: PredictionResult, level: float | None = None) -> Table:
    """Latency, throughput, KV cache and per-GPU memory of one prediction (memory only when it does not fit).

    With ``level`` the headline figures carry their prediction interval ``value (low–high)``
    (:meth:`PredictionResult.interval`) and the caption states the level.
    """
    s = r.summary()
    ctx = s["prompt_len"] + s["output_len"]
    title = scenario_title(r)
    t = Table(title=title, title_justify="left", header_style="bold", min_width=_width(title))

    def sec(name: str) -> str:
        return seconds_range(s[name], *r.interval(name, level)) if level is not None else fmt_seconds(s[name])

    def tok(name: str) -> str:
        return count_range(s[name], *r.interval(name, level), "tok/s") if level is not None else f"{num(s[name])} tok/s"

    t.add_column("metric")
    t.add_column("value" if level is None or not r.fits else f"value ({100 * level:.0f} % interval)", justify="right")
    t.add_column("detail", style="dim")
    if r.fits:
        steps = s["output_len"] - 1
        t.add_row("TTFT", sec("ttft_s"), f"prefill, {s['bound_prefill']}-bound, MFU {pct(s['mfu_prefill'])}")
        t.add_row(
            "TPOT (mean)",
            sec("tpot_s"),
            f"first {fmt_seconds(s['tpot_first_s'])} → last {fmt_seconds(s['tpot_last_s'])}; "
            f"decode {s['bound_decode']}-bound, MBU {pct(s['mbu_decode'])}",
        )
        t.add_row("end-to-end latency", sec("e2e_s"), f"TTFT + {steps} decode steps")
        t.add_section()
        t.add_row(
            "output throughput",
            tok("throughput_tok_s"),
            f"{num(s['throughput_tok_s_per_gpu'])} tok/s per GPU ({_plural(s['num_gpus'], 'GPU')})",
        )
        t.add_row("total throughput", f"{num(s['total_throughput_tok_s'])} tok/s", "prompt + output tokens")
        t.add_section()
    t.add_row("KV per token", fmt_bytes(s["kv_bytes_per_token"]), "whole model")
    t.add_row("KV per sequence", fmt_bytes(s["kv_bytes_per_sequence"]), f"at context {ctx}")
    t.add_row("KV total", fmt_bytes(s["kv_cache_bytes"]), f"batch {s['batch']}, all GPUs")
    t.add_section()
    cap = s["memory_capacity_bytes"]
    t.add_row("memory per GPU", fmt_bytes(cap), "visible to the engine")
    of = {
        "total": "of total memory",
        "static_pool": "of total memory for weights + KV",
        "free_after_load": "of what is free after weights and activations",
    }[s["engine_memory_fraction_of"]]
    t.add_row(
        "  usable", fmt_bytes(s["memory_usable_bytes"]), f"{s['engine']}: {pct(s['engine_memory_fraction'])} {of}"
    )
    t.add_row("  weights", fmt_bytes(s["weight_bytes_per_gpu"]), f"{s['weight_dtype']}, per GPU")
    t.add_row("  KV cache", fmt_bytes(s["kv_bytes_per_gpu"]), "this batch, per GPU")
    t.add_row(
        "  reserve", fmt_bytes(s["reserve_bytes"]), f"activations ({fmt_bytes(s['activation_peak_bytes'])}) + runtime"
    )
    free = s["free_bytes"]
    style = "red" if free < 0 else "green"
    t.add_row("  free", Text(fmt_bytes(free), style=style), "short by this much" if free < 0 else "")
    t.add_row("max batch", Text(str(s["max_batch"]), style="bold"), f"sequences at context {ctx}")
    if level is not None and r.fits:
        t.caption = (
            f"(low–high): {100 * level:.0f} % prediction interval from the model's error on public rows "
            "held out by source, per regime; reproduce its coverage with `roofline accuracy --coverage`"
        )
        t.caption_justify = "left"
    return t


OPS_COLUMNS = (
    ("name", "op"), ("kind", "kind"), ("count", "×"), ("flops", "FLOPs"), ("bytes", "bytes"),
    ("intensity_flops_per_byte", "FLOP/B"), ("time_s", "time"), ("share", "share"), ("bound", "bound"),
)  # fmt: skip


BYTE_COLUMNS = ("weight_bytes", "act_bytes", "kv_read_bytes", "kv_write_bytes", "comm_bytes")


def ops_tables(ops: pd.DataFrame) -> list[Table]:
    """Per-op breakdown, one table per phase: time (count × per-op time) and share of the phase."""
    tables = []
    for phase in ops["phase"].drop_duplicates():
        df = ops[ops["phase"] == phase]
        total = float(df["time_s"].sum())
        what = "TTFT" if phase == "prefill" else "mean TPOT"
        t = Table(title=f"{phase}: ops summed over layers (total {fmt_seconds(total)} = {what})", title_justify="left")
        for _, head in OPS_COLUMNS:
            t.add_column(head, justify="left" if head in ("op", "kind", "bound") else "right")
        for _, row in df.iterrows():
            mem = sum(float(row[k]) for k in BYTE_COLUMNS if k in row and _finite(row[k]))
            count = int(row["count"])
            t.add_row(
                str(row["name"]),
                str(row["kind"]),
                str(count),
                fmt_rate(float(row["flops"]) * count, "FLOP"),
                fmt_bytes(mem * count),
                num(row.get("intensity_flops_per_byte")),
                fmt_seconds(float(row["time_s"])),
                pct(float(row["time_s"]) / total) if total else "n/a",
                str(row["bound"]),
            )
        tables.append(t)
    return tables


def _width(markup: str) -> int:
    """Cells needed by the widest line of a rich-markup title (so tables do not wrap their title)."""
    return max(Text.from_markup(line).cell_len for line in markup.split("\n"))


def _finite(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


# (label, short label, summary key, formatter, best: "min" | "max" | None)
COMPARE_ROWS: tuple[tuple[str, str, str, Callable[[Any], str], str | None], ...] = (
    ("TTFT", "TTFT", "ttft_s", fmt_seconds, "min"),
    ("TPOT (mean)", "TPOT", "tpot_s", fmt_seconds, "min"),
    ("end-to-end", "e2e", "e2e_s", fmt_seconds, "min"),
    ("output tok/s", "tok/s", "throughput_tok_s", num, "max"),
    ("output tok/s per GPU", "tok/s/GPU", "throughput_tok_s_per_gpu", num, "max"),
    ("prefill bound", "prefill", "bound_prefill", str, None),
    ("decode bound", "decode", "bound_decode", str, None),
    ("weights per GPU", "weights", "weight_bytes_per_gpu", fmt_bytes, None),
    ("memory per GPU", "memory", "memory_capacity_bytes", fmt_bytes, "max"),
    ("free per GPU", "free", "free_bytes", fmt_bytes, "max"),
    ("max batch", "max B", "max_batch", str, "max"),
    ("$ per GPU-hour", "$/GPU-h", "usd_per_gpu_hour", usd, "min"),
    ("$ per M output tokens", "$/M tok", "usd_per_million_output_tokens", usd, "min"),
)
MEMORY_KEYS = ("weight_bytes_per_gpu", "memory_capacity_bytes", "max_batch", "free_bytes")


def compare_cells(columns: Sequence[tuple[str, Mapping[str, object] | str]]) -> list[list[Text | str]]:
    """One list of cells per COMPARE_ROWS metric, one cell per hardware; the best of each metric gets ★."""
    grid: list[list[Text | str]] = []
    for _, _, key, fmt, best in COMPARE_ROWS:
        vals = [c.get(key) if isinstance(c, dict) and c.get("fits") else None for _, c in columns]
        finite = [v for v in vals if isinstance(v, int | float) and math.isfinite(v)]
        target = (min if best == "min" else max)(finite) if best and len(finite) > 1 else None
        cells: list[Text | str] = []
        for (_, c), v in zip(columns, vals, strict=True):
            if not isinstance(c, dict):
                cells.append(Text("error (below)", style="red") if key == "ttft_s" else "")
            elif v is None and key not in MEMORY_KEYS:
                cells.append("n/a" if c.get("fits") else Text("does not fit", style="red") if key == "ttft_s" else "-")
            else:
                raw = c.get(key)
                text = fmt(raw) if raw is not None else "n/a"
                cells.append(Text(f"★ {text}", style="bold green") if target is not None and raw == target else text)
        grid.append(cells)
    return grid


def compare_table(title: str, columns: Sequence[tuple[str, Mapping[str, object] | str]], wide_after: int = 5) -> Table:
    """Metrics as rows and one column per hardware (hardware as rows beyond ``wide_after`` devices).

    ``columns`` holds (hardware, summary dict) or (hardware, error text) for a failed one; the
    best value of each metric is marked ★ (bold green); errors are listed in the caption.
    """
    notes = [f"{name}: {c}" for name, c in columns if not isinstance(c, dict)]
    caption = "\n".join(["★ best of each metric", *notes])
    t = Table(title=title, title_justify="left", caption=caption, caption_justify="left", min_width=_width(title))
    grid = compare_cells(columns)
    if len(columns) <= wide_after:
        t.add_column("metric")
        for name, _ in columns:
            t.add_column(name, justify="right")
        for (label, *_), cells in zip(COMPARE_ROWS, grid, strict=True):
            t.add_row(label, *cells)
        return t
    t.add_column("hardware", no_wrap=True)
    for _, short, *_ in COMPARE_ROWS:
        t.add_column(short, justify="right")
    for j, (name, _) in enumerate(columns):
        t.add_row(name, *(row[j] for row in grid))
    return t


def plan_caption(res: PlanResult) -> str:
    """What the plan's latencies and headroom mean: the level, the error margin and saturation marks."""
    lines = ["TTFT/TPOT at the planned load; B = max sequences per replica (limited by memory or an SLO)"]
    if res.confidence is not None:
        lines.append(
            f"sized at the {100 * res.confidence:.0f} % upper bound of the model's error: SLOs hold at the bound, "
            "TTFT/TPOT shown are upper bounds; headroom is against the pessimistic capacity"
        )
    else:
        lines.append(
            "headroom (± model error): ± = the 80 % interval of the model's capacity error; "
            "⚠ = headroom inside it, capacity may fall short: size with --confidence 0.9"
        )
    if any(c.feasible and c.latency_bound == "lower" for c in res.candidates):
        lines.append(
            "≥ = utilisation above 85 %: queueing makes latency a lower bound only; "
            "saturation = load where utilisation is 85 %"
        )
    return "\n".join(lines)


def _latency(c: Candidate, value: float) -> str:
    """A planned latency; ``≥ x`` when the candidate runs past the saturation knee (one-sided bound)."""
    return f"≥ {fmt_seconds(value)}" if c.latency_bound == "lower" else fmt_seconds(value)


def headroom_cell(c: Candidate) -> Text | str:
    """``12% (±24%)``, yellow with ⚠ when the headroom is inside the model's error, knee when saturated."""
    knee = f", saturation {num(c.saturation_rps)} req/s" if c.latency_bound == "lower" else ""
    if not math.isfinite(c.error_margin) or c.confidence is not None:
        return pct(c.headroom) + knee
    text = f"{pct(c.headroom)} (±{pct(c.error_margin)}){knee}"
    return Text(f"⚠ {text}", style="yellow") if c.within_error else text


def plan_tables(res: PlanResult, limit: int | None = 15) -> list[Table]:
    """Ranked feasible candidates, then rejected ones with their reasons (``limit`` rows each; None = all)."""
    ok = [c for c in res.candidates if c.feasible]
    bad = [c for c in res.candidates if not c.feasible]
    title = (
        f"{res.model}: {res.qps:g} req/s · prompt {res.prompt_len} · output {res.output_len} · "
        f"TTFT ≤ {fmt_seconds(res.ttft_slo_s)} · TPOT ≤ {fmt_seconds(res.tpot_slo_s)}"
    )
    t = Table(title=title, title_justify="left", caption=plan_caption(res), caption_justify="left")
    heads = (
        "#",
        "hardware",
        "prec",
        "parallel",
        "B",
        "limit",
        "req/s/replica",
        "replicas",
        "GPUs",
        "TTFT",
        "TPOT",
        "headroom",
        "$/hour",
        "$/M out tok",
        "links",
    )
    for h in heads:
        t.add_column(
            h,
            justify="left" if h in ("hardware", "prec", "limit", "links") else "right",
            no_wrap=h in ("hardware", "parallel"),
        )
    for i, c in enumerate(ok[:limit], 1):
        style = "bold green" if i == 1 else ""
        t.add_row(
            ("★" if i == 1 else str(i)) + (" ⚠" if c.within_error else ""),
            c.hardware,
            c.precision,
            c.parallelism if c.dp > 1 or c.pp > 1 else str(c.tp),
            str(c.batch),
            c.limited_by.replace("_slo", " SLO"),
            num(c.replica_rps),
            str(c.replicas),
            str(c.gpus) if c.rented_gpus(c.replicas) == c.gpus else f"{c.gpus} ({c.rented_gpus(c.replicas)} rented)",
            _latency(c, c.ttft_s),
            _latency(c, c.tpot_s),
            headroom_cell(c),
            usd(c.usd_per_hour),
            usd(c.usd_per_million_output_tokens),
            Text(f"⚠ {c.link_flag}", style="yellow") if c.link_flag else "",
            style=style,
        )
    tables = [t] if ok else []
    groups: dict[tuple[str, str, str], list[str]] = {}
    for c in bad:  # one row per (hardware, precision, reason): e.g. "fp8 unsupported" for every tp
        groups.setdefault((c.hardware, c.precision, c.reason), []).append(c.parallelism if c.dp > 1 else str(c.tp))
    if groups:
        rows = list(groups.items())
        shown = rows[:limit]
        more = f" ({len(rows) - len(shown)} more; --all shows every one)" if len(shown) < len(rows) else ""
        r = Table(title=f"rejected{more}", title_justify="left")
        for h in ("hardware", "prec", "tp", "reason"):
            r.add_column(h, justify="right" if h == "tp" else "left")
        for (hw, prec, reason), tps in shown:
            r.add_row(hw, prec, ",".join(tps), as_flags(reason))
        tables.append(r)
    return tables
