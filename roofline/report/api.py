"""The report's Python API: ``build`` (data + HTML), ``render`` (HTML string), ``save`` (file)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from roofline.boundary.outputs import OutputTarget, check_output, write_output
from roofline.profile import CalibrationProfile
from roofline.report.content import (
    COLUMNS,
    ReportData,
    hardware_rows,
    model_facts,
    resolve_inputs,
    risks,
    run_plan,
)
from roofline.serving.workloads import resolve_workload
from roofline.specs.model import ModelSpec

DEFAULT_HARDWARE = ("h100-sxm", "h200-sxm", "a100-80gb-sxm")


@dataclass(frozen=True)
class Report:
    """A rendered report: the data behind it and its self-contained HTML."""

    data: ReportData
    html: str

    def save(self, path: str | Path | OutputTarget, *, force: bool = True) -> Path:
        """Write the HTML atomically through :func:`roofline.boundary.outputs.write_output`, creating folders.

        ``force`` False refuses to replace an existing file (the CLI's default without ``--force``);
        devices, FIFOs, links and folders are never replaced. Returns the path.
        """
        target = path if isinstance(path, OutputTarget) else check_output(path, force=force, what="HTML report")
        return write_output(target, self.html)

    def _repr_html_(self) -> str:
        """The whole report in a sandboxed iframe (static HTML, no scripts) for notebooks."""
        from markupsafe import escape

        return (
            f'<iframe srcdoc="{escape(self.html)}" sandbox="" title="roofline report" '
            'style="width: 100%; height: 900px; border: 1px solid #e5e7eb; border-radius: 8px;"></iframe>'
        )


def build(
    model: ModelSpec | str | Path,
    hardware: str | Sequence[str | Path] = DEFAULT_HARDWARE,
    workload: str = "chat",
    *,
    prompt_len: int | None = None,
    output_len: int | None = None,
    qps: float | None = None,
    ttft_slo_s: float | None = None,
    tpot_slo_s: float | None = None,
    precision: str | Sequence[str] = "checkpoint",
    tp_options: Sequence[int] | None = None,
    max_gpus: int | None = None,
    prices: Mapping[str, float] | None = None,
    calibration: CalibrationProfile | str | Path | None = None,
    kv_dtype: str | None = None,
    engine: str = "vllm",
    output_path: str | Path | None = None,
) -> Report:
    """Plan ``model`` for ``workload`` on each ``hardware`` and render the full HTML report.

    ``workload`` is a preset (chat, rag, summarize) whose fields the keyword arguments
    override, or ``custom`` with every field given. SLOs are in seconds; ``prices`` map
    hardware slugs to USD per GPU-hour; ``kv_dtype`` None is the engine default (bf16);
    ``engine`` is the serving-engine preset (vllm, sglang, trtllm, ideal).
    ``output_path`` only names the file in the report's "Reproduce" command.
    """
    t0 = time.perf_counter()
    wl = resolve_workload(
        workload, prompt_len=prompt_len, output_len=output_len, qps=qps, ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s
    )
    inp = resolve_inputs(
        model, hardware, wl, precisions=precision, tp_options=tp_options, max_gpus=max_gpus, prices=prices,
        calibration=calibration, kv_dtype=kv_dtype, engine=engine,
    )  # fmt: skip
    from roofline.report.evidence import evidence, reproduce
    from roofline.report.sensitivity import sensitivity

    plan = run_plan(inp)
    rows = hardware_rows(inp, plan)
    rec = next((r for r in rows if r.feasible and r.candidate is plan.recommended), None)
    sens = sensitivity(inp, plan)
    data = ReportData(
        inputs=inp, plan=plan, rows=rows, recommended=rec, risks=tuple(risks(rows, rec, inp, sens)),
        sensitivity=sens, evidence=evidence(inp), reproduce=reproduce(inp, output_path),
    )  # fmt: skip
    html = _html(data, t0)
    return Report(replace(data, seconds=time.perf_counter() - t0), html)


def _html(data: ReportData, t0: float) -> str:
    from roofline.report.charts import color, report_charts
    from roofline.report.templating import render_template

    charts = report_charts(data)
    inp = data.inputs
    kv_bytes = 2.0
    pred = (
        data.recommended.prediction
        if data.recommended
        else next((r.prediction for r in data.rows if r.prediction), None)
    )
    if pred is not None:
        kv_bytes = pred.scenario.kv_dtype.bytes_per_element
    return render_template(
        "report.html.j2", d=data, inp=inp, wl=inp.workload, rec=data.recommended, columns=COLUMNS,
        colors={r.hardware.name: color(i) for i, r in enumerate(data.rows)}, charts=charts,
        facts=model_facts(inp, kv_bytes), engine_pred=pred, prices=_prices(inp), elapsed=time.perf_counter() - t0,
    )  # fmt: skip


def _prices(inp: Any) -> list[tuple[Any, float | None, str, str]]:
    """(hardware, USD per GPU-hour, date, source) as the planner sees them."""
    out: list[tuple[Any, float | None, str, str]] = []
    for hw in inp.hardware:
        if hw.name in inp.prices:
            out.append((hw, float(inp.prices[hw.name]), "given", "user-supplied price"))
        elif hw.price is not None:
            out.append((hw, hw.price.usd_per_gpu_hour, hw.price.date.isoformat(), hw.price.source))
        else:
            out.append((hw, None, "—", "no price in the spec; pass --price to compare cost"))
    return out


def render(model: ModelSpec | str | Path, **kwargs: Any) -> str:
    """The report's HTML as a string (arguments as :func:`build`)."""
    return build(model, **kwargs).html


def save(path: str | Path, model: ModelSpec | str | Path, **kwargs: Any) -> Path:
    """Build the report and write it to ``path`` (arguments as :func:`build`)."""
    kwargs.setdefault("output_path", path)
    return build(model, **kwargs).save(path)
