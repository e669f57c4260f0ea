"""``roofline simulate``: serve a request stream on one engine replica (wraps :func:`roofline.simulate`).

Heavy libraries are imported inside the command.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from roofline.cli.mix import MixOpt, check_mix_flags
from roofline.cli.options import OptionError, console, dumps, parse_count_opt, parse_engine_set, parse_float_opt
from roofline.cli.predict import Calibration, Dp, Ep, HardwareArg, ModelArg, MoeOverlap, Pp, Redundant, Tp
from roofline.errors import InfeasibleError
from roofline.units import fmt_seconds

if TYPE_CHECKING:
    from roofline.boundary.outputs import OutputTarget
    from roofline.serving.sim.result import SimulationResult
    from roofline.serving.workload.arrivals import LengthArg
    from roofline.serving.workload.stream import Workload

LENGTH_HELP = "a count (1024, 2k), uniform:LOW:HIGH, normal:MEAN:STD, lognormal:MEAN:CV or file:PATH."


#: Simulated figures whose interval --json reports.
INTERVAL_FIGURES = (
    "ttft_mean_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_mean_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s",
    "e2e_mean_s", "e2e_p50_s", "e2e_p90_s", "e2e_p99_s", "request_throughput_rps", "output_throughput_tok_s",
)  # fmt: skip


def length_opt(text: str, option: str) -> LengthArg:
    return text if ":" in text else parse_count_opt(text, option)


EngineOpt = Annotated[str, typer.Option("--engine", "-e", metavar="NAME", help="Engine: vllm, sglang, trtllm, ideal.")]
EngineSetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--engine-set",
        metavar="NAME=VALUE",
        help="Override an engine setting (repeatable): e.g. max_num_batched_tokens=2048, gpu_memory_utilization="
        "0.85, prefix_caching=false, async_scheduling=true, enable_mixed_chunk=true, step_overhead_s=0.002.",
    ),
]
QpsOpt = Annotated[str | None, typer.Option("--qps", metavar="RATE", help="Open loop: requests per second.")]
ConcOpt = Annotated[
    str | None,
    typer.Option(
        "--concurrency", metavar="N", help="Closed loop: N clients, each sends when its previous request finishes."
    ),
]
TraceOpt = Annotated[
    Path | None,
    typer.Option(
        "--trace",
        metavar="FILE",
        help="Replay a JSONL trace (arrival_s, prompt_tokens, output_tokens; Mooncake/aiperf names accepted).",
    ),
]
ArrivalOpt = Annotated[str, typer.Option("--arrival", help="Open-loop process: poisson, gamma, constant.")]
CvOpt = Annotated[str, typer.Option("--arrival-cv", metavar="CV", help="Gamma arrivals: CV of the gaps.")]
PromptOpt = Annotated[str, typer.Option("--prompt", "-p", metavar="LEN", help="Prompt tokens: " + LENGTH_HELP)]
OutputOpt = Annotated[str, typer.Option("--output", "-n", metavar="LEN", help="Output tokens: " + LENGTH_HELP)]
NumOpt = Annotated[str, typer.Option("--num-requests", "-N", metavar="N", help="Requests to send.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed (runs are deterministic given it).")]
ShareOpt = Annotated[
    str,
    typer.Option(
        "--prefix-share",
        metavar="FRACTION",
        help="Share of the mean prompt that is one system prompt common to all requests (prefix caching).",
    ),
]
WOpt = Annotated[str | None, typer.Option("--weight-dtype", "-w", help="Weight format (default: the checkpoint's).")]
KvOpt = Annotated[str | None, typer.Option("--kv-dtype", help="KV-cache format (default: bf16).")]
ReqOut = Annotated[
    Path | None, typer.Option("--requests-out", metavar="FILE", help="Write per-request records (.csv/.json).")
]
TlOut = Annotated[
    Path | None, typer.Option("--timeline-out", metavar="FILE", help="Write the per-event timeline (.csv/.json).")
]
PlotOpt = Annotated[
    Path | None, typer.Option("--plot", metavar="FILE", help="Save latency CDFs and queue/KV time series (PNG).")
]
SpecOpt = Annotated[
    str | None,
    typer.Option(
        "--spec",
        metavar="METHOD[:KEY=VAL,...]",
        help="Speculative decoding with acceptance sampled per request and step (grammar as `roofline predict "
        "--spec`, e.g. eagle:k=4,alpha=0.8); not with --pp/--ep/--prefix-share.",
    ),
]
ClientOpt = Annotated[
    str | None,
    typer.Option(
        "--client",
        metavar="NAME",
        help="Benchmark client whose protocol to follow: vllm-bench, sglang-bench, aiperf, genai-perf, "
        "inference-perf, ideal (`roofline clients` lists them with their sources).",
    ),
]
MaxConcOpt = Annotated[
    str | None,
    typer.Option("--max-concurrency", metavar="N", help="With --qps: at most N requests in flight (a semaphore)."),
]
WarmupOpt = Annotated[str, typer.Option("--warmup", metavar="N", help="Warm-up requests, left out of the statistics.")]
DrainOpt = Annotated[
    bool,
    typer.Option("--warmup-drain/--no-warmup-drain", help="Measured requests wait for the warm-up to finish."),
]
RampOpt = Annotated[str, typer.Option("--ramp", metavar="SECONDS", help="Closed loop: start the clients over this.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON: config, summary, saturation.")]
CsvOpt = Annotated[bool, typer.Option("--csv", help="Print the summary as one CSV row.")]


def simulate_cmd(
    model: ModelArg,
    hardware: HardwareArg,
    engine: EngineOpt = "vllm",
    engine_set: EngineSetOpt = None,
    tp: Tp = 1,
    pp: Pp = 1,
    ep: Ep = 1,
    qps: QpsOpt = None,
    concurrency: ConcOpt = None,
    trace: TraceOpt = None,
    arrival: ArrivalOpt = "poisson",
    arrival_cv: CvOpt = "1",
    prompt: PromptOpt = "1024",
    output: OutputOpt = "256",
    num_requests: NumOpt = "2000",
    seed: SeedOpt = 0,
    prefix_share: ShareOpt = "0",
    client: ClientOpt = None,
    max_concurrency: MaxConcOpt = None,
    warmup: WarmupOpt = "0",
    warmup_drain: DrainOpt = True,
    ramp: RampOpt = "0",
    weight_dtype: WOpt = None,
    kv_dtype: KvOpt = None,
    calibration: Calibration = None,
    requests_out: ReqOut = None,
    timeline_out: TlOut = None,
    plot: PlotOpt = None,
    spec: SpecOpt = None,
    json: JsonOpt = False,
    csv: CsvOpt = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing output files.")] = False,
    replicas: Annotated[
        int, typer.Option("--replicas", metavar="N", help="Seeded replicas whose spread widens the intervals.")
    ] = 1,
    mix: MixOpt = None,
    dp: Dp = 1,
    redundant_experts: Redundant = 0,
    moe_overlap: MoeOverlap = "none",
) -> None:
    """Simulate continuous batching under load: TTFT/TPOT/ITL/E2E percentiles, throughput, KV use.

    Exactly one of --qps, --concurrency or --trace. Exit code 1 (after the results) when the offered
    load saturates the engine: the queue grows without bound; the message gives the sustainable rate.
    """
    if json and csv:
        raise OptionError("--json and --csv are exclusive; pick one")
    targets = _targets(requests_out, timeline_out, plot, force)  # checked before the simulation runs
    wl = _workload(qps, concurrency, trace, prompt, output, num_requests, seed, arrival, arrival_cv, prefix_share)
    wl = _protocol(wl, client, max_concurrency, warmup, warmup_drain, ramp)
    given = {"--prompt": prompt != "1024", "--output": output != "256", "--prefix-share": prefix_share != "0"}
    check_mix_flags(mix, {flag: True if on else None for flag, on in given.items()})
    wl = wl if mix is None else dataclasses.replace(wl, mix=mix)
    if spec is not None and (pp != 1 or ep != 1 or wl.prefix_share != 0):
        raise OptionError("--spec simulates tp-only replicas without prefix sharing; drop --pp/--ep/--prefix-share")
    layout = {"tp": tp, "pp": pp, "ep": ep, "dp": dp, "redundant_experts": redundant_experts}
    s = _run(
        model,
        hardware,
        wl,
        show_bar=sys.stderr.isatty() and not (json or csv),
        engine=engine,
        engine_overrides=parse_engine_set(engine_set),
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        calibration=calibration,
        replicas=replicas,
        speculative=spec,
        moe_overlap=moe_overlap,
        **layout,
    )
    _write(s, *targets)
    _emit(s, "json" if json else "csv" if csv else "text", replicas)
    if s.saturated:
        raise InfeasibleError(s.saturated)


def _run(model: str, hardware: str, wl: Workload, *, show_bar: bool, **kw: Any) -> SimulationResult:
    """``roofline.simulate`` of ``wl`` with ``kw``, under a progress bar when ``show_bar``."""
    from roofline.serving.simulate import simulate

    bar = _progress(wl.num_requests) if show_bar else None
    try:
        return simulate(model, hardware, workload=wl, progress=None if bar is None else bar[1], **kw)
    finally:
        if bar is not None:
            bar[0].stop()


def _targets(
    requests_out: Path | None, timeline_out: Path | None, plot: Path | None, force: bool
) -> tuple[OutputTarget | None, OutputTarget | None, OutputTarget | None]:
    """The output destinations, each checked before the simulation runs (roofline.boundary.outputs)."""
    from roofline.cli.options import output_target

    return (
        output_target(requests_out, force, "per-request table", "--requests-out"),
        output_target(timeline_out, force, "timeline table", "--timeline-out"),
        output_target(plot, force, "plot", "--plot"),
    )


def _write(
    s: SimulationResult, req_target: OutputTarget | None, tl_target: OutputTarget | None, plot: OutputTarget | None
) -> None:
    """Write the per-request table, the timeline and the plot where their options said."""
    from roofline.cli.options import write_frame

    if req_target is not None:  # each table is built only when it is written (a plain run never imports pandas)
        write_frame(s.requests, req_target, None)
    if tl_target is not None:
        write_frame(s.timeline, tl_target, None)
    if plot is not None:
        s.plot(str(plot.path))


def clients_cmd() -> None:
    """The benchmark clients `simulate --client` follows: how each sends and times requests, as its source states."""
    from roofline.serving.workload.clients import client_table

    typer.echo(client_table())


def _protocol(
    wl: Workload, client: str | None, max_concurrency: str | None, warmup: str, drained: bool, ramp: str
) -> Workload:
    """``wl`` with the benchmark client's protocol options (each parsed with its option named in errors)."""
    return dataclasses.replace(
        wl,
        client=client,
        max_concurrency=None if max_concurrency is None else parse_count_opt(max_concurrency, "--max-concurrency"),
        warmup=0 if warmup.strip() == "0" else parse_count_opt(warmup, "--warmup"),
        warmup_drained=drained,
        ramp_s=0.0 if ramp.strip() in ("0", "0.0") else parse_float_opt(ramp, "--ramp"),
    )


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise OptionError(f"--prefix-share: cannot read {text!r} as a fraction between 0 and 1") from None
    if not 0 <= v <= 1:
        raise OptionError(f"--prefix-share must be between 0 and 1, got {text}")
    return v


def _progress(total: int) -> tuple[Any, Any] | None:
    """A rich progress bar on stderr for long runs, and its update callback."""
    if total < 20_000:
        return None
    from rich.progress import Progress

    from roofline.cli.options import console as make_console

    bar = Progress(console=make_console(stderr=True), transient=True)
    task = bar.add_task("simulating", total=total)
    bar.start()
    return bar, lambda done, _n: bar.update(task, completed=done)


def _workload(
    qps: str | None,
    concurrency: str | None,
    trace: Path | None,
    prompt: str,
    output: str,
    num_requests: str,
    seed: int,
    arrival: str,
    arrival_cv: str,
    prefix_share: str,
) -> Workload:
    """The typed workload of the command's options (each parsed with its option named in errors)."""
    from roofline.serving.workload.stream import Workload

    return Workload(
        qps=None if qps is None else parse_float_opt(qps, "--qps"),
        concurrency=None if concurrency is None else parse_count_opt(concurrency, "--concurrency"),
        trace=trace,
        prompt_len=length_opt(prompt, "--prompt"),
        output_len=length_opt(output, "--output"),
        num_requests=parse_count_opt(num_requests, "--num-requests"),
        seed=seed,
        arrival=arrival,
        arrival_cv=parse_float_opt(arrival_cv, "--arrival-cv"),
        prefix_share=_fraction(prefix_share),
    )


def _emit(s: SimulationResult, form: str, replicas: int) -> None:
    """Print the simulation as JSON (config, summary, 80 % intervals, saturation), one CSV row, or text."""
    if form == "json":
        cfg = {k: (v if k != "policy" else v.name) for k, v in s.config.items()}
        cfg.pop("replica_summaries", None)
        ivs = {k: list(s.interval(k)) for k in INTERVAL_FIGURES if k in s.summary}
        doc: dict[str, Any] = {"config": cfg, "summary": s.summary, "intervals_80": ivs, "saturated": s.saturated}
        if s.class_summary is not None:  # a workload mix: its classes and their figures
            from roofline.serving.plan.result import mix_dict

            cfg["mix"] = mix_dict(cfg["mix"])
            doc["classes"] = s.class_summary.to_dict("records")
        typer.echo(dumps(doc))
    elif form == "csv":
        import pandas as pd

        from roofline.cli.options import write_frame

        write_frame(pd.DataFrame([{"label": s.config["label"], **s.summary}]), None, "csv")
    else:
        _print_text(s, replicas)


def _print_text(s: SimulationResult, replicas: int) -> None:
    """The simulation as tables, its 80 % intervals and, for a closed loop in lock-step, the diagnostic."""
    from roofline.cli.render_sim import simulation_header, simulation_table
    from roofline.published.serving_error import POOLED, engine_pool

    con = console()
    con.print(simulation_header(s))
    con.print(simulation_table(s))
    text = "; ".join(
        f"{k.removesuffix('_s').replace('_', ' ')} {fmt_seconds(lo)}–{fmt_seconds(hi)}"
        for k in ("ttft_p99_s", "tpot_mean_s", "e2e_p50_s")
        for lo, hi in [s.interval(k)]
    )
    reps = f" and the spread over {replicas} seeded replicas" if replicas > 1 else ""
    pool = engine_pool(s.config.get("engine"))
    rows = "all engines' public serving rows" if pool == POOLED else f"public {pool} serving rows"
    con.print(f"80 % intervals (the simulator's error on {rows}, held out by model family{reps}): {text}")
    for line in s.config.get("evidence", ()):
        con.print(f"evidence: {line}", style="dim")
    if s.config.get("latency_basis"):
        con.print(f"latencies: {s.config['latency_basis']}", style="dim")
    summary = s.class_summary
    for row in summary.to_dict("records") if summary is not None else ():  # a workload mix: per class
        con.print(
            f"class {row['class']} ({row['share']:.0%}, {row['requests']:,} requests): TTFT P{row['ttft_pct']:g} "
            f"{fmt_seconds(row['ttft_s'])} (SLO {fmt_seconds(row['ttft_slo_s'])}), TPOT P{row['tpot_pct']:g} "
            f"{fmt_seconds(row['tpot_s'])} (SLO {fmt_seconds(row['tpot_slo_s'])})"
        )
    if s.config.get("starvation"):
        con.print(f"[yellow]⚠ starved:[/] {s.config['starvation']}")
    if s.config.get("lockstep"):
        con.print(
            f"[yellow]lock-step:[/] {s.config['lockstep_share']:.0%} of the later requests got their first token "
            "together with at least half of the clients: identical clients prefill, finish and resend together "
            "wave after wave, so TTFT is that of a synchronised burst; a 2 % spread of answer lengths (--output "
            "lognormal:MEAN:0.02) lets them drift apart. Real benchmarks fall in between: run both."
        )
