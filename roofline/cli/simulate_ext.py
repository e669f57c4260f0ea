"""``roofline simulate-disagg`` and ``roofline plan-disagg``: disaggregated serving runs and P:D sizing.

Heavy libraries are imported inside the commands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from roofline.cli.options import OptionError, console, dumps, parse_count_opt, parse_engine_set, parse_float_opt
from roofline.cli.predict import ModelArg
from roofline.cli.simulate import (
    ArrivalOpt,
    CvOpt,
    EngineOpt,
    EngineSetOpt,
    JsonOpt,
    NumOpt,
    OutputOpt,
    PromptOpt,
    SeedOpt,
    WOpt,
    length_opt,
)
from roofline.errors import InfeasibleError, NoFitError

if TYPE_CHECKING:
    from rich.table import Table

    from roofline.serving.plan.disagg import DisaggPlan
    from roofline.serving.sim.result import SimulationResult

DisaggOpt = Annotated[
    str,
    typer.Option(
        "--disagg",
        metavar="prefill=HW:tpTxN,decode=HW:tpTxN[,...]",
        help="Pools and link: prefill=HW:tpT[epE]xN,decode=HW:tpT[epE]xN[,link=BANDWIDTH][,latency=DURATION]"
        "[,first=prefill|decode]; link defaults to the hardware's scale-out bandwidth, else 50 GB/s per GPU "
        "(400 Gb/s ConnectX-7 per GPU, DGX H100); first = the side that emits the first token (prefill: the KV "
        "transfer lands in the first inter-token gap; decode: in TTFT). E.g. "
        "prefill=h100-sxm:tp4x2,decode=h100-sxm:tp8x1,first=decode",
    ),
]


def _pool_set(pool: str, example: str) -> typer.models.OptionInfo:
    """``--{pool}-set NAME=VALUE``: an engine setting of one pool only, over ``--engine-set``."""
    return typer.Option(
        f"--{pool}-set",
        metavar="NAME=VALUE",
        help=f"Override a setting of the {pool} pool's engine only (repeatable, over --engine-set): e.g. {example}.",
    )


PrefillSetOpt = Annotated[list[str] | None, _pool_set("prefill", "max_num_seqs=1 for one request at a time")]
DecodeSetOpt = Annotated[list[str] | None, _pool_set("decode", "max_num_seqs=64 max_num_batched_tokens=64")]


def simulate_disagg_cmd(
    model: ModelArg,
    disagg: DisaggOpt,
    engine: EngineOpt = "vllm",
    engine_set: EngineSetOpt = None,
    prefill_set: PrefillSetOpt = None,
    decode_set: DecodeSetOpt = None,
    qps: Annotated[str, typer.Option("--qps", metavar="RATE", help="Open loop: requests per second.")] = "1",
    concurrency: Annotated[
        str | None,
        typer.Option(
            "--concurrency", metavar="N", help="Closed loop instead: N clients, each sends when its previous returns."
        ),
    ] = None,
    arrival: ArrivalOpt = "poisson",
    arrival_cv: CvOpt = "1",
    prompt: PromptOpt = "1024",
    output: OutputOpt = "256",
    num_requests: NumOpt = "2000",
    seed: SeedOpt = 0,
    weight_dtype: WOpt = None,
    json: JsonOpt = False,
) -> None:
    """Prefill/decode disaggregated serving: a prefill pool, a decode pool and the KV transfer between them.

    Prints TTFT/TPOT/ITL/E2E percentiles, KV transfer time (queueing on the link included), throughput
    per GPU, and the P:D ratio.
    """
    from roofline.serving.simulate import simulate

    rate = parse_float_opt(qps, "--qps")
    if not rate > 0:
        raise OptionError(f"--qps must be positive, got {qps}")
    loop: dict[str, object] = {"qps": rate, "arrival": arrival}
    if concurrency is not None:  # a closed loop of clients replaces the open-loop rate
        loop = {"concurrency": parse_count_opt(concurrency, "--concurrency")}
    r = simulate(
        model,
        disagg=disagg,
        engine=engine,
        **loop,  # type: ignore[arg-type]
        arrival_cv=parse_float_opt(arrival_cv, "--arrival-cv"),
        prompt_len=length_opt(prompt, "--prompt"),
        output_len=length_opt(output, "--output"),
        num_requests=parse_count_opt(num_requests, "--num-requests"),
        seed=seed,
        weight_dtype=weight_dtype,
        engine_overrides=parse_engine_set(engine_set),
        prefill_overrides=parse_engine_set(prefill_set, "--prefill-set"),
        decode_overrides=parse_engine_set(decode_set, "--decode-set"),
    )
    s = r.summary
    if json:
        cfg = {k: (v.label() if k == "disagg" else v) for k, v in r.config.items()}
        typer.echo(dumps({"config": cfg, "summary": s}))
        return
    _print_disagg(r)


def _print_disagg(r: SimulationResult) -> None:
    """The disaggregated run's table: latency percentiles, the KV transfer, throughput per GPU, the P:D ratio."""
    from rich.table import Table

    from roofline.cli.render import num

    s = r.summary
    con = console()
    con.print(
        f"{r.config['label']}; {r.config['gpus']} GPUs; link {num(r.config['link_bytes_per_s'] / 1e9)} GB/s "
        f"per GPU; {r.config['engine']}"
    )
    t = Table()
    for col in ("metric", "mean", "p50", "p90", "p99"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for key, label in (
        ("ttft", "TTFT (ms)"),
        ("tpot", "TPOT (ms)"),
        ("itl", "ITL (ms)"),
        ("e2e", "E2E (ms)"),
        ("kv_transfer", "KV transfer (ms)"),
    ):
        t.add_row(label, *(num(s[f"{key}_{q}_s"] * 1e3) for q in ("mean", "p50", "p90", "p99")))
    t.add_section()
    t.add_row("P:D ratio", r.config["ratio"], "", "", "")
    t.add_row("requests/s", num(s["request_throughput_rps"]), "", "", "")
    t.add_row("output tokens/s per GPU", num(s["output_throughput_tok_s_per_gpu"]), "", "", "")
    t.add_row("decode mean batch", num(s["decode_mean_batch"]), "", "", "")
    t.add_row("completed", f"{s['completed']:.0f}", "", "", "")
    con.print(t)
    con.print(f"latencies: {r.config['latency_basis']}", style="dim")


def plan_disagg_cmd(
    model: ModelArg,
    hardware: Annotated[str, typer.Argument(help="Hardware of both pools (slug or alias).")],
    qps: Annotated[str, typer.Option("--qps", metavar="RATE", help="Offered requests per second.")],
    ttft: Annotated[
        str, typer.Option("--ttft-slo", "--ttft", metavar="DURATION", help="TTFT SLO, e.g. 500ms (as plan).")
    ] = "1s",
    tpot: Annotated[
        str, typer.Option("--tpot-slo", "--tpot", metavar="DURATION", help="TPOT SLO, e.g. 20ms (as plan).")
    ] = "50ms",
    percentile: Annotated[int, typer.Option("--percentile", help="SLO percentile: 50, 90 or 99.")] = 90,
    tp_prefill: Annotated[int, typer.Option("--tp-prefill", help="tp of a prefill instance.")] = 1,
    tp_decode: Annotated[int, typer.Option("--tp-decode", help="tp of a decode instance.")] = 1,
    tp_colocated: Annotated[int, typer.Option("--tp-colocated", help="tp of a co-located replica.")] = 1,
    dp_prefill: Annotated[int, typer.Option("--dp-prefill", help="MoE: attention-DP ranks of a prefill instance.")] = 1,
    dp_decode: Annotated[int, typer.Option("--dp-decode", help="MoE: attention-DP ranks of a decode instance.")] = 1,
    dp_colocated: Annotated[int, typer.Option("--dp-colocated", help="MoE: attention-DP ranks of a replica.")] = 1,
    p_max: Annotated[int, typer.Option("--p-max", help="Most prefill instances tried.")] = 4,
    d_max: Annotated[int, typer.Option("--d-max", help="Most decode instances tried.")] = 4,
    n_max: Annotated[int, typer.Option("--n-max", help="Most co-located replicas tried.")] = 8,
    first: Annotated[
        str, typer.Option("--first", help="Side that emits the first token: prefill | decode.")
    ] = "prefill",
    engine: EngineOpt = "vllm",
    engine_set: EngineSetOpt = None,
    prompt: PromptOpt = "1024",
    output: OutputOpt = "256",
    num_requests: NumOpt = "1000",
    json: JsonOpt = False,
) -> None:
    """Size the P:D ratio for a load and SLOs and compare with co-located replicas (GPUs, $/h, KV transfer)."""
    from dataclasses import asdict

    if first not in ("prefill", "decode"):
        raise OptionError(f"--first must be prefill or decode, got {first!r}")
    try:
        sizes = (tp_prefill, tp_decode, tp_colocated, dp_prefill, dp_decode, dp_colocated)
        pl = _plan(model, hardware, qps, sizes, (p_max, d_max, n_max), (ttft, tpot),
                   percentile, first, (prompt, output, num_requests), engine, engine_set)  # fmt: skip
    except NoFitError as exc:  # the hint names flags this command has (no --tp, no --weight-dtype)
        raise NoFitError(_disagg_flags(str(exc))) from None
    bd, bc = pl.best_disagg, pl.best_colocated
    if json:  # the deployments tried, and exit 1 below as for the table when none meets the SLOs
        doc = {"best_disagg": bd and asdict(bd), "best_colocated": bc and asdict(bc)}
        typer.echo(
            dumps(doc | {"disagg": [asdict(c) for c in pl.disagg], "colocated": [asdict(c) for c in pl.colocated]})
        )
    else:
        slos = f"p{percentile} TTFT ≤ {ttft}, TPOT ≤ {tpot} at {qps} req/s"
        console().print(_disagg_plan_table(pl, slos, percentile))
    if bd is None and bc is None:
        raise InfeasibleError(
            "no deployment tried meets the SLOs; raise --p-max/--d-max/--n-max or relax --ttft-slo/--tpot-slo"
        )


def _plan(
    model: str,
    hardware: str,
    qps: str,
    tps: tuple[int, int, int, int, int, int],
    maxes: tuple[int, int, int],
    slos: tuple[str, str],
    percentile: int,
    first: str,
    lengths: tuple[str, str, str],
    engine: str,
    engine_set: list[str] | None,
) -> DisaggPlan:
    """plan_disagg with the command's options parsed (durations, counts, lengths, engine options); ``tps``: tp of
    the prefill, decode and co-located instances, then their attention-DP ranks."""
    from roofline.cli.options import parse_duration_opt
    from roofline.serving.plan.disagg import plan_disagg

    return plan_disagg(
        model,
        hardware,
        parse_float_opt(qps, "--qps"),
        tp_prefill=tps[0],
        tp_decode=tps[1],
        tp_colocated=tps[2],
        dp_prefill=tps[3],
        dp_decode=tps[4],
        dp_colocated=tps[5],
        p_max=maxes[0],
        d_max=maxes[1],
        n_max=maxes[2],
        ttft_slo_s=parse_duration_opt(slos[0], "--ttft-slo"),
        tpot_slo_s=parse_duration_opt(slos[1], "--tpot-slo"),
        percentile=percentile,
        first_token=first,
        prompt_len=length_opt(lengths[0], "--prompt"),
        output_len=length_opt(lengths[1], "--output"),
        num_requests=parse_count_opt(lengths[2], "--num-requests"),
        engine=engine,
        engine_overrides=parse_engine_set(engine_set),
    )


def _disagg_flags(message: str) -> str:
    """A "does not fit" message in plan-disagg's own flags: tp=N names the three pools' tp flags; a weight
    precision, which plan-disagg does not take, points to ``plan``."""
    import re

    message = re.sub(
        r"\btp=(\d+)", r"--tp-prefill / --tp-decode / --tp-colocated \1 (the pool that does not fit)", message
    )
    return re.sub(
        r"\bweight_dtype=(\S+?)(?=[,;.)]?(\s|$))",
        r"\1 weights (plan-disagg prices the checkpoint's; `roofline plan --precision \1` sizes others)",
        message,
    )


def _disagg_plan_table(pl: DisaggPlan, slo_text: str, percentile: int) -> Table:
    """Every deployment tried, those meeting the SLOs first, fewest GPUs first; the best of each kind marked."""
    from rich.table import Table

    from roofline.cli.render import num

    bd, bc = pl.best_disagg, pl.best_colocated
    t = Table(title=f"deployments meeting {slo_text}", title_justify="left")
    q = f"p{percentile}"
    for col in ("deployment", "GPUs", "$/h", f"TTFT {q} ms", f"TPOT {q} ms", "KV transfer ms", "meets"):
        t.add_column(col, justify="left" if col == "deployment" else "right")
    for c in sorted(pl.disagg + pl.colocated, key=lambda c: (not c.ok, c.gpus, c.tpot_s)):
        mark = "best" if c in (bd, bc) else ("yes" if c.ok else "no")
        usd = num(c.usd_per_hour) if c.usd_per_hour else ""
        xfer = num(c.kv_transfer_s * 1e3) if c.kv_transfer_s else ""
        t.add_row(c.label, str(c.gpus), usd, num(c.ttft_s * 1e3), num(c.tpot_s * 1e3), xfer, mark)
    return t
