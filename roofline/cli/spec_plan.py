"""``roofline spec-plan``: the best number of speculated tokens k at each load, and the crossover load.

Heavy libraries are imported inside the command.
"""

from __future__ import annotations

from typing import Annotated

import typer

from roofline.boundary.limits import MAX_SPEC_K
from roofline.cli.options import RANGE_HELP, OptionError, console, dumps, parse_count_opt, parse_int_list
from roofline.cli.predict import Engine, HardwareArg, ModelArg, Tp, WeightDtype

SpecOpt = Annotated[
    str,
    typer.Option(
        "--spec",
        metavar="METHOD:alpha=A[,...]",
        help="Speculative method with a per-token acceptance rate alpha (k is searched), e.g. mtp:alpha=0.8 or "
        "eagle:alpha=0.7; grammar as `roofline predict --spec`.",
    ),
]


def spec_plan_cmd(
    model: ModelArg,
    hardware: HardwareArg,
    spec: SpecOpt,
    batch: Annotated[
        str, typer.Option("--batch", "-b", metavar="LIST", help="Batch sizes (load). " + RANGE_HELP)
    ] = "1,2,4..256",
    k_max: Annotated[int, typer.Option("--k-max", help="Largest k tried (k = 1 … k-max).")] = 8,
    prompt: Annotated[str, typer.Option("--prompt", "-p", metavar="TOKENS", help="Prompt tokens.")] = "1024",
    output: Annotated[str, typer.Option("--output", "-n", metavar="TOKENS", help="Output tokens.")] = "256",
    tp: Tp = 1,
    weight_dtype: WeightDtype = "checkpoint",
    engine: Engine = "vllm",
    json: Annotated[bool, typer.Option("--json", help="Print JSON: every (batch, k) point and the summary.")] = False,
) -> None:
    """Search k at every batch: the best k, its speedup over plain decoding, and the crossover batch above
    which even the best k loses (verify turns compute-bound and rejected tokens waste batch slots)."""
    from dataclasses import asdict

    from rich.table import Table

    from roofline.cli.render import num
    from roofline.serving.plan.speculative import search_k

    if not 1 <= k_max <= MAX_SPEC_K:
        raise OptionError(f"--k-max must be from 1 to {MAX_SPEC_K} (roofline.boundary.limits MAX_SPEC_K), got {k_max}")
    batches = parse_int_list(batch, "--batch")
    p, o = parse_count_opt(prompt, "--prompt"), parse_count_opt(output, "--output")
    plan = search_k(
        model, hardware, spec, batches, k_max, int(p), int(o), tp=tp, weight_dtype=weight_dtype, engine=engine
    )
    best = plan.best()
    if json:
        typer.echo(
            dumps(
                {
                    "spec": plan.config.label(),
                    "crossover_batch": plan.crossover_batch,
                    "best": [asdict(best[b]) for b in sorted(best)],
                    "points": [asdict(x) for x in plan.points],
                }
            )
        )
        return
    title = f"{plan.config.method} (α={plan.config.alpha:g}): best k per batch, k = 1 … {k_max}"
    t = Table(title=title, title_justify="left", min_width=len(title))
    for col in ("batch", "best k", "τ", "TPOT ms", "plain TPOT ms", "verify ms", "draft ms", "speedup"):
        t.add_column(col, justify="right")
    for b in sorted(best):
        x = best[b]
        t.add_row(
            str(b),
            str(x.k),
            num(x.tokens_per_step),
            num(x.tpot_s * 1e3),
            num(x.plain_tpot_s * 1e3),
            num(x.verify_s * 1e3),
            num(x.draft_s * 1e3),
            f"{num(x.speedup)}×",
        )
    con = console()
    con.print(t)
    cross = plan.crossover_batch
    con.print(f"crossover: speculation loses from batch {cross}" if cross else "speculation pays at every batch tried")
