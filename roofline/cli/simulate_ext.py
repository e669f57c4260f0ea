"""``roofline simulate --spec`` and ``roofline simulate-disagg``: speculative and disaggregated serving runs.

Heavy libraries are imported inside the commands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

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
    _length,
)


def simulate_spec(spec: str) -> Callable[..., Any]:
    """A ``simulate``-compatible callable that runs :func:`simulate_speculative` with ``spec``."""
    from roofline.serving.speculative_sim import simulate_speculative
    from roofline.specs.speculative import SpeculativeConfig

    cfg = SpeculativeConfig.parse(spec)

    def run(model: Any, hardware: Any, **kw: Any) -> Any:
        for k in ("pp", "ep", "prefix_share", "progress"):
            kw.pop(k, None)
        return simulate_speculative(model, hardware, cfg, **kw)

    return run


DisaggOpt = Annotated[
    str,
    typer.Option(
        "--disagg", metavar="prefill=HW:tpTxN,decode=HW:tpTxN[,...]",
        help="Pools and link: prefill=HW:tpT[epE]xN,decode=HW:tpT[epE]xN[,link=BANDWIDTH][,latency=DURATION]"
        "[,first=prefill|decode]; link defaults to the hardware's scale-out bandwidth, else 50 GB/s per GPU "
        "(400 Gb/s ConnectX-7 per GPU, DGX H100); first = the side that emits the first token (prefill: the KV "
        "transfer lands in the first inter-token gap; decode: in TTFT). E.g. "
        "prefill=h100-sxm:tp4x2,decode=h100-sxm:tp8x1,first=decode",
    ),
]  # fmt: skip


def simulate_disagg_cmd(
    model: ModelArg,
    disagg: DisaggOpt,
    engine: EngineOpt = "vllm",
    engine_set: EngineSetOpt = None,
    qps: Annotated[str, typer.Option("--qps", metavar="RATE", help="Open loop: requests per second.")] = "1",
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
    from rich.table import Table

    from roofline.cli.render import num
    from roofline.serving.disagg_sim import simulate_disagg

    rate = parse_float_opt(qps, "--qps")
    if not rate > 0:
        raise OptionError(f"--qps must be positive, got {qps}")
    r = simulate_disagg(
        model, disagg, engine=engine, qps=rate, arrival=arrival, arrival_cv=parse_float_opt(arrival_cv, "--arrival-cv"),
        prompt_len=_length(prompt, "--prompt"), output_len=_length(output, "--output"),
        num_requests=parse_count_opt(num_requests, "--num-requests"), seed=seed, weight_dtype=weight_dtype,
        engine_overrides=parse_engine_set(engine_set),
    )  # fmt: skip
    s = r.summary
    if json:
        cfg = {k: (v.label() if k == "disagg" else v) for k, v in r.config.items()}
        typer.echo(dumps({"config": cfg, "summary": s}))
        return
    con = console()
    con.print(f"{r.config['label']}; {r.config['gpus']} GPUs; link {num(r.config['link_bytes_per_s'] / 1e9)} GB/s "
              f"per GPU; {r.config['engine']}")  # fmt: skip
    t = Table()
    for col in ("metric", "mean", "p50", "p90", "p99"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for key, label in (("ttft", "TTFT (ms)"), ("tpot", "TPOT (ms)"), ("itl", "ITL (ms)"), ("e2e", "E2E (ms)"),
                       ("kv_transfer", "KV transfer (ms)")):  # fmt: skip
        t.add_row(label, *(num(s[f"{key}_{q}_s"] * 1e3) for q in ("mean", "p50", "p90", "p99")))
    t.add_section()
    t.add_row("P:D ratio", r.config["ratio"], "", "", "")
    t.add_row("requests/s", num(s["request_throughput_rps"]), "", "", "")
    t.add_row("output tokens/s per GPU", num(s["output_throughput_tok_s_per_gpu"]), "", "", "")
    t.add_row("decode mean batch", num(s["decode_mean_batch"]), "", "", "")
    t.add_row("completed", f"{s['completed']:.0f}", "", "", "")
    con.print(t)
