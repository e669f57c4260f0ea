"""Rich table of a :class:`~roofline.serving.sim.result.SimulationResult` (renders only, computes nothing)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from roofline.cli.render import num

if TYPE_CHECKING:
    from roofline.serving.sim.result import SimulationResult


def simulation_table(s: SimulationResult) -> Table:
    """Latency percentiles (ms) per metric, then throughput, batch, KV use and preemptions."""
    m = s.summary
    t = Table()
    for col in ("metric", "mean", "p50", "p90", "p99"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for key, label in (("ttft", "TTFT (ms)"), ("tpot", "TPOT (ms)"), ("itl", "ITL (ms)"), ("e2e", "E2E (ms)")):
        t.add_row(label, *(num(m[f"{key}_{q}_s"] * 1e3) for q in ("mean", "p50", "p90", "p99")))
    t.add_section()
    t.add_row("requests/s", num(m["request_throughput_rps"]), "", "", "")
    t.add_row("output tokens/s", num(m["output_throughput_tok_s"]), "", "", "")
    t.add_row("total tokens/s", num(m["total_throughput_tok_s"]), "", "", "")
    t.add_row("mean batch (sequences/step)", num(m["mean_batch"]), "", "", "")
    t.add_row("mean KV use", f"{100 * m['mean_kv_utilization']:.1f}%", "", "", "")
    t.add_row("preemptions", f"{m['preemptions']:.0f}", "", "", "")
    return t


def simulation_header(s: SimulationResult) -> str:
    """Two lines naming the configuration, the workload, the KV pool and the simulation speed."""
    c = s.config
    return (
        f"[bold]{c['label']}[/] · weights {c['weight_dtype']} · KV {c['kv_dtype']} · KV pool {c['kv_blocks']:,} "
        f"blocks × {c['kv_block_tokens']} tokens\n{c['workload']}; {s.num_requests} requests simulated in "
        f"{c['wall_s']:.2f} s ({s.num_requests / max(c['wall_s'], 1e-9):,.0f} requests/s)"
    )
