"""``roofline report``: a self-contained HTML capacity report (registered in ``roofline.cli.app``).

Imports only typer, the standard library and the CLI's option definitions at import time, so ``roofline --help``
stays fast; the report machinery (numpy, matplotlib, jinja2) loads when the command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypedDict

import typer

from roofline.cli.buyer import (
    CapexOpt,
    ElectricityPriceOpt,
    HostingOpt,
    PeakOpt,
    PueOpt,
    SpareOpt,
    YearsOpt,
    buyer_options,
)
from roofline.cli.mix import MixOpt, check_mix_flags
from roofline.cli.options import JobsOpt, SizingSeedOpt
from roofline.cli.plan import DpOpt
from roofline.cli.predict import EngineSet

if TYPE_CHECKING:
    from roofline.report.api import Report

DEFAULT_HARDWARE = "h100-sxm,h200-sxm,a100-80gb-sxm"


HardwareOpt = Annotated[str, typer.Option("--hardware", "-H", help="Comma-separated hardware to compare.")]
WorkloadOpt = Annotated[
    str, typer.Option("--workload", "-w", help="Preset chat, rag or summarize; or custom (give every field).")
]
PromptOpt = Annotated[str | None, typer.Option("--prompt", "-p", help="Prompt tokens (overrides the preset).")]
OutputOpt = Annotated[str | None, typer.Option("--output", "-n", help="Output tokens (overrides the preset).")]
QpsOpt = Annotated[str | None, typer.Option("--qps", help="Requests per second (overrides the preset).")]
TtftSloOpt = Annotated[str | None, typer.Option("--ttft-slo", help="TTFT SLO, e.g. 500ms (overrides).")]
TpotSloOpt = Annotated[str | None, typer.Option("--tpot-slo", help="TPOT SLO, e.g. 50ms (overrides).")]
PrecisionOpt = Annotated[
    str,
    typer.Option("--precision", help="Weight formats to try, e.g. checkpoint,fp8 (default: the shipped checkpoint)."),
]
TpOpt = Annotated[str | None, typer.Option("--tp", help="tp values to try (default 1,2,4,8 dividing the heads).")]
MaxGpusOpt = Annotated[int | None, typer.Option("--max-gpus", help="Reject plans needing more GPUs.")]
PriceOpt = Annotated[
    list[str] | None, typer.Option("--price", help="USD per GPU-hour overriding the spec, e.g. h200-sxm=4.5.")
]
KvDtypeOpt = Annotated[str | None, typer.Option("--kv-dtype", help="KV-cache format (default bf16).")]
EngineOpt = Annotated[
    str, typer.Option("--engine", "-e", metavar="NAME", help="Serving engine: vllm (default), sglang, trtllm, ideal.")
]
CalibrationOpt = Annotated[str | None, typer.Option("--calibration", "-c", help="Calibration profile YAML.")]
ConfidenceOpt = Annotated[
    str, typer.Option("--confidence", help="Level at whose upper error bound the SLOs must hold (0.5-0.99).")
]
MinHeadroomOpt = Annotated[
    str | None,
    typer.Option("--min-headroom", help="Least spare capacity, e.g. 0.3 (default: the model's 80% error bound)."),
]
OutOpt = Annotated[
    Path | None, typer.Option("--out", "-o", help="HTML file to write (default reports/MODEL-WORKLOAD.html).")
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite an existing output file.")]


def report_command(
    model: Annotated[str, typer.Argument(help="Model: slug, alias, YAML or config.json path.")],
    hardware: HardwareOpt = DEFAULT_HARDWARE,
    workload: WorkloadOpt = "chat",
    prompt: PromptOpt = None,
    output: OutputOpt = None,
    qps: QpsOpt = None,
    ttft_slo: TtftSloOpt = None,
    tpot_slo: TpotSloOpt = None,
    precision: PrecisionOpt = "checkpoint",
    tp: TpOpt = None,
    max_gpus: MaxGpusOpt = None,
    price: PriceOpt = None,
    kv_dtype: KvDtypeOpt = None,
    engine: EngineOpt = "vllm",
    engine_set: EngineSet = None,
    calibration: CalibrationOpt = None,
    confidence: ConfidenceOpt = "0.8",
    min_headroom: MinHeadroomOpt = None,
    electricity_price: ElectricityPriceOpt = None,
    out: OutOpt = None,
    force: ForceOpt = False,
    jobs: JobsOpt = None,
    seed: SizingSeedOpt = 0,
    spare_replicas: SpareOpt = None,
    peak_factor: PeakOpt = None,
    capex: CapexOpt = None,
    amortisation_years: YearsOpt = None,
    hosting: HostingOpt = None,
    pue: PueOpt = None,
    mix: MixOpt = None,
    dp: DpOpt = None,
) -> None:
    """Write a self-contained HTML capacity report for MODEL on --hardware.

    Sections: recommendation, inputs, comparison, charts, sensitivity, evidence, reproduce. Presets chat, rag and
    summarize set the lengths, load and SLOs; --prompt/--output/--qps/--ttft-slo/--tpot-slo override. The file
    opens from disk with no server or network and prints to PDF; it is written even when nothing meets the SLOs.
    """
    import time

    from roofline.boundary.outputs import check_output
    from roofline.cli.options import parse_engine_set, parse_float_opt, parse_int_list, parse_names, parse_prices
    from roofline.report.api import build
    from roofline.specs.library import list_hardware
    from roofline.specs.library import model as load_model

    t0 = time.perf_counter()
    check_mix_flags(mix, {"--prompt": prompt, "--output": output, "--ttft-slo": ttft_slo, "--tpot-slo": tpot_slo})
    name = "mix" if mix is not None else workload.strip().lower()
    path = out if out is not None else Path("reports") / f"{load_model(model).name}-{name}.html"
    target = check_output(path, force=force, what="HTML report")  # before the minutes of work, not after
    rep = build(
        model,
        hardware=parse_names(hardware) or list_hardware(),
        workload=workload,
        **_workload_overrides(prompt, output, qps, ttft_slo, tpot_slo),
        precision=parse_names(precision) or ["checkpoint"],
        tp_options=parse_int_list(tp, "--tp") if tp else None,
        dp_options=parse_int_list(dp, "--dp") if dp else None,
        max_gpus=max_gpus,
        prices=parse_prices(price or []),
        calibration=calibration,
        kv_dtype=kv_dtype,
        engine=engine,
        engine_overrides=parse_engine_set(engine_set),
        jobs=jobs,
        output_path=path,
        confidence=parse_float_opt(confidence, "--confidence"),
        min_headroom=parse_float_opt(min_headroom, "--min-headroom") if min_headroom is not None else None,
        seed=seed,
        **buyer_options(electricity_price, spare_replicas, peak_factor, capex, amortisation_years, hosting, pue),
        mix=mix,
    )
    rep.save(target)
    size_kb = len(rep.html.encode()) / 1e3
    typer.echo(f"wrote {path} ({size_kb:,.0f} kB in {time.perf_counter() - t0:.1f} s): {_verdict(rep)}")


class WorkloadOverrides(TypedDict):
    """The workload fields ``report`` flags override (None: the preset's)."""

    prompt_len: int | None
    output_len: int | None
    qps: float | None
    ttft_slo_s: float | None
    tpot_slo_s: float | None


def _workload_overrides(
    prompt: str | None, output: str | None, qps: str | None, ttft_slo: str | None, tpot_slo: str | None
) -> WorkloadOverrides:
    """The preset fields the flags override (None: the preset's), each parsed with its flag's name in errors."""
    from roofline.cli.options import parse_count_opt, parse_duration_opt, parse_float_opt

    return WorkloadOverrides(
        prompt_len=parse_count_opt(prompt, "--prompt") if prompt is not None else None,
        output_len=parse_count_opt(output, "--output", minimum=2) if output is not None else None,
        qps=parse_float_opt(qps, "--qps") if qps is not None else None,
        ttft_slo_s=parse_duration_opt(ttft_slo, "--ttft-slo") if ttft_slo is not None else None,
        tpot_slo_s=parse_duration_opt(tpot_slo, "--tpot-slo") if tpot_slo is not None else None,
    )


def _verdict(rep: Report) -> str:
    """``recommends 8 × H100 SXM (tp 8), $31.92/hour`` or why nothing was recommended."""
    rec = rep.data.recommended
    if rec is None or rec.candidate is None:
        return "no configuration meets the SLOs (the report explains why)"
    c, fin = rec.candidate, rec.finalist
    gpus = fin.gpus if fin is not None else c.gpus
    usd = rec.values.get("usd_per_hour")
    cost = f", ${usd:,.2f}/hour" if usd is not None and usd == usd else ""
    return f"recommends {gpus} × {rec.hardware.display_name} ({c.parallelism}){cost}"


def _workload_help() -> str:
    """One paragraph per workload preset: what it contains (appended to the command's help)."""
    from roofline.serving.workload.presets import PRESETS

    lines = [f"{w.contents}." for w in PRESETS.values()]
    lines.append("custom: give --prompt, --output, --qps, --ttft-slo and --tpot-slo.")
    return "Workload presets:\n\n" + "\n\n".join(lines)


report_command.__doc__ = (report_command.__doc__ or "") + "\n\n" + _workload_help()
