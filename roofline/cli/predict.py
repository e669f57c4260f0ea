"""``roofline predict``, ``sweep`` and ``compare``: thin wrappers over roofline.predict / sweep.

Heavy libraries (numpy, pandas, pydantic) are imported inside the commands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from roofline.cli.options import (
    OptionError,
    console,
    dumps,
    parse_count_opt,
    parse_engine_set,
    parse_names,
    write_frame,
)
from roofline.errors import InfeasibleError

if TYPE_CHECKING:
    from roofline.result import PredictionResult

ModelArg = Annotated[
    str, typer.Argument(help="Model: slug or alias (see `roofline model list`), YAML or config.json path.")
]
HardwareArg = Annotated[
    str, typer.Argument(help="Hardware: slug or alias (see `roofline hardware list`) or YAML path.")
]
Batch = Annotated[str, typer.Option("--batch", "-b", metavar="N", help="Concurrent sequences.")]
Prompt = Annotated[str, typer.Option("--prompt", "-p", metavar="TOKENS", help="Prompt tokens (2k = 2000).")]
Output = Annotated[str, typer.Option("--output", "-n", metavar="TOKENS", help="Output tokens per sequence.")]
Tp = Annotated[int, typer.Option("--tp", help="Tensor-parallel GPUs per replica.")]
Pp = Annotated[int, typer.Option("--pp", help="Pipeline-parallel stages.")]
Ep = Annotated[int, typer.Option("--ep", help="Expert-parallel GPUs (MoE models).")]
Dp = Annotated[
    int,
    typer.Option(
        "--dp", help="Attention data-parallel ranks of --tp GPUs each (MoE models; then --ep = dp × tp, wide EP)."
    ),
]
Redundant = Annotated[
    int, typer.Option("--redundant-experts", metavar="N", help="Extra expert slots per MoE layer (EPLB copies).")
]
MoeOverlap = Annotated[
    str,
    typer.Option("--moe-overlap", help="none, or two-batch: hide min(compute, expert all-to-all) per MoE layer."),
]
WeightDtype = Annotated[
    str,
    typer.Option(
        "--weight-dtype",
        "-w",
        help="Weight format: checkpoint (default: the shipped checkpoint's per-module formats), bf16, fp16, "
        "fp8, fp8-block, int8, int4, int4-g128 (AWQ/GPTQ), fp4, mxfp4, nvfp4.",
    ),
]
KvDtype = Annotated[str, typer.Option("--kv-dtype", help="KV-cache format: bf16, fp16, fp8.")]
Calibration = Annotated[
    str | None,
    typer.Option(
        "--calibration",
        "-c",
        metavar="PROFILE",
        help="Calibration profile YAML (default: the bundled profile fitted to public microbenchmarks).",
    ),
]
Engine = Annotated[
    str,
    typer.Option(
        "--engine",
        "-e",
        metavar="NAME",
        help="Serving engine whose memory and batching semantics apply: vllm (default), sglang, trtllm, ideal.",
    ),
]
EngineSet = Annotated[
    list[str] | None,
    typer.Option(
        "--engine-set",
        metavar="NAME=VALUE",
        help="Override an engine setting (repeatable), e.g. gpu_memory_utilization=0.85, max_num_seqs=256.",
    ),
]
MemUtil = Annotated[
    float | None,
    typer.Option(
        "--memory-utilization",
        metavar="FRACTION",
        help="Shorthand for --engine-set memory_fraction=FRACTION (default: the engine's).",
    ),
]
Graphs = Annotated[
    bool | None,
    typer.Option(
        "--cuda-graphs/--eager",
        help="Decode steps replayed as CUDA graphs or launched eagerly (default: the engine's, graphs on).",
        show_default=False,
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Print JSON (fields with units in their names).")]
Level = Annotated[
    str,
    typer.Option(
        "--level",
        metavar="FRACTION",
        help="Prediction-interval level for the headline figures, e.g. 0.8 or 90% (model error on held-out "
        "public rows; see `roofline accuracy --coverage`).",
    ),
]


def parse_level(text: str | float, option: str) -> float:
    """An interval level in (0, 1) from ``0.8``, ``80%`` or ``80 %``."""
    raw = str(text).strip()
    pct = raw.endswith("%")
    try:
        value = float(raw.rstrip("%").strip()) / (100.0 if pct else 1.0)
    except ValueError:
        raise OptionError(f"{option}: cannot read {raw!r} as a level; write e.g. 0.8 or 80%") from None
    if not 0.0 < value < 1.0:
        raise OptionError(f"{option} must be a fraction in (0, 1) such as 0.8 (or a percentage such as 80%), got {raw}")
    return value


def interval_fields(r: PredictionResult, level: float) -> dict[str, float]:
    """``<figure>_low`` / ``<figure>_high`` for every headline figure, and the level (JSON/CSV)."""
    from roofline.published.uncertainty import FIGURES

    out: dict[str, float] = {"interval_level": level}
    for name in FIGURES:
        out[f"{name}_low"], out[f"{name}_high"] = r.interval(name, level)
    return out


Csv = Annotated[bool, typer.Option("--csv", help="Print CSV (same fields as --json).")]
Spec = Annotated[
    str | None,
    typer.Option(
        "--spec",
        metavar="METHOD[:KEY=VAL,...]",
        help="Speculative decoding. METHOD: draft | eagle | mtp | medusa | ngram; "
        "keys: k (speculated tokens, default 4), "
        "alpha (per-token acceptance) or tau (mean tokens per step, 1..k+1), verify (tree size, default k+1), "
        "layers (head/MTP layers per draft step), model (draft model, draft only), overhead (seconds per step). "
        "E.g. eagle:k=4,alpha=0.8 or draft:model=llama-3.1-8b,k=5,tau=3.",
    ),
]


def scenario_kwargs(
    tp: int,
    pp: int,
    ep: int,
    weight_dtype: str,
    kv_dtype: str,
    engine: str,
    engine_set: list[str] | None,
    mem_util: float | None = None,
    graphs: bool | None = None,
) -> dict[str, Any]:
    """Keyword options of :func:`roofline.predict` / :func:`roofline.sweep` from the shared CLI options."""
    overrides = parse_engine_set(engine_set)
    if mem_util is not None:
        overrides["memory_fraction"] = mem_util
    return {
        "tp": tp,
        "pp": pp,
        "ep": ep,
        "weight_dtype": weight_dtype,
        "kv_dtype": kv_dtype,
        "engine": engine,
        "engine_overrides": overrides,
        "cuda_graphs": graphs,
    }


def predict_cmd(
    model: ModelArg,
    hardware: HardwareArg,
    batch: Batch = "1",
    prompt: Prompt = "1024",
    output: Output = "128",
    tp: Tp = 1,
    pp: Pp = 1,
    ep: Ep = 1,
    weight_dtype: WeightDtype = "checkpoint",
    kv_dtype: KvDtype = "bf16",
    calibration: Calibration = None,
    engine: Engine = "vllm",
    engine_set: EngineSet = None,
    memory_utilization: MemUtil = None,
    cuda_graphs: Graphs = None,
    ops: Annotated[bool, typer.Option("--ops", help="Add the per-op breakdown.")] = False,
    spec: Spec = None,
    level: Level = "0.8",
    json: Json = False,
    csv: Csv = False,
    dp: Dp = 1,
    redundant_experts: Redundant = 0,
    moe_overlap: MoeOverlap = "none",
) -> None:
    """TTFT, TPOT, throughput, KV cache and memory of one scenario, headline figures with their interval.

    Exit code 1 (after printing the memory table) when the scenario does not fit in memory.
    With --csv --ops the CSV holds the per-op rows instead of the summary.
    """
    from roofline.prediction import predict

    if json and csv:
        raise OptionError("--json and --csv are exclusive; pick one")
    b, p, o = (parse_count_opt(v, n) for v, n in ((batch, "--batch"), (prompt, "--prompt"), (output, "--output")))
    kw = scenario_kwargs(tp, pp, ep, weight_dtype, kv_dtype, engine, engine_set, memory_utilization, cuda_graphs)
    kw.update(dp=dp, redundant_experts=redundant_experts, moe_overlap=moe_overlap)
    lv = parse_level(level, "--level")
    r = predict(model, hardware, b, p, o, calibration=calibration, speculative=spec, **kw)
    if json:
        doc: dict[str, Any] = {**r.summary(), **interval_fields(r, lv)}
        if ops:
            from roofline.cli.options import frame_records

            doc["ops"] = frame_records(r.ops)
        typer.echo(dumps(doc))
    elif csv:
        import pandas as pd

        df = r.ops if ops else pd.DataFrame([{**r.summary(), **interval_fields(r, lv)}])
        write_frame(df, None, "csv")
    else:
        from roofline.cli.render import ops_tables, prediction_table

        con = console()
        con.print(prediction_table(r, lv))
        for note in r.link_notes:
            con.print(f"[yellow]⚠ slow link:[/] {note}")
        for line in r.evidence:
            con.print(f"evidence: {line}", style="dim")
        con.print(f"latencies: {r.summary()['latency_basis']}", style="dim")
        if r.speculative is not None:
            from roofline.cli.render_spec import speculative_table

            con.print(speculative_table(r.speculative))
        if ops and r.fits:
            for table in ops_tables(r.ops):
                con.print(table)
    if not r.fits:
        raise InfeasibleError(_no_fit_message(r))


def _no_fit_message(r: PredictionResult) -> str:
    from roofline.advice import no_fit_reason

    s = r.summary()
    ctx = s["prompt_len"] + s["output_len"]
    where = f"{s['model']} at batch {s['batch']}, context {ctx} on {s['hardware']} (tp={s['tp']}, {s['weight_dtype']})"
    more = f"; at most {r.max_batch} sequences of {ctx} tokens fit, try --batch {r.max_batch}" if r.max_batch else ""
    if r.speculative is not None and bool(r.memory.fits):
        from roofline.units import fmt_bytes

        return (
            f"{where}: the drafter ({r.speculative.config.label()}) needs "
            f"{fmt_bytes(r.speculative.draft_bytes_per_gpu)} per GPU but the batch leaves "
            f"{fmt_bytes(float(r.memory.free_bytes))} of the KV budget free; use a smaller draft model, a "
            "smaller --batch or more --tp"
        )
    return f"{where} {no_fit_reason(r.model, r.hardware, r.scenario)}{more}"


def compare_cmd(
    model: ModelArg,
    hardware: Annotated[
        str, typer.Option("--hardware", "-H", metavar="LIST|all", help="Comma-separated hardware, or 'all'.")
    ] = "h100-sxm,h200-sxm,mi300x",
    batch: Batch = "1",
    prompt: Prompt = "1024",
    output: Output = "128",
    tp: Tp = 1,
    pp: Pp = 1,
    ep: Ep = 1,
    weight_dtype: WeightDtype = "checkpoint",
    kv_dtype: KvDtype = "bf16",
    calibration: Calibration = None,
    engine: Engine = "vllm",
    engine_set: EngineSet = None,
    memory_utilization: MemUtil = None,
    cuda_graphs: Graphs = None,
    json: Json = False,
) -> None:
    """The same scenario on several devices side by side; the best value of each row is marked ★.

    Cost per million output tokens uses the spec's price per GPU-hour. Exit code 1 when it fits nowhere.
    """
    from roofline.cli.render import compare_table
    from roofline.errors import RooflineError, ScenarioError
    from roofline.prediction import predict
    from roofline.specs.library import list_hardware

    b, p, o = (parse_count_opt(v, n) for v, n in ((batch, "--batch"), (prompt, "--prompt"), (output, "--output")))
    names = parse_names(hardware) or list_hardware()
    kw = scenario_kwargs(tp, pp, ep, weight_dtype, kv_dtype, engine, engine_set, memory_utilization, cuda_graphs)
    columns: list[tuple[str, dict[str, Any] | str]] = []
    errors: list[RooflineError] = []
    for name in names:
        try:
            r = predict(model, name, b, p, o, calibration=calibration, **kw)
        except ScenarioError as exc:  # e.g. a format this device lacks: one column says why
            errors.append(exc)
            columns.append((name, str(exc)))
            continue
        columns.append((r.hardware.name, _with_cost(r)))
    if len(errors) == len(columns):
        raise errors[0]
    if json:
        typer.echo(dumps([c if isinstance(c, dict) else {"hardware": n, "error": c} for n, c in columns]))
    else:
        first = next((c for _, c in columns if isinstance(c, dict)), None)
        title = f"{first['model'] if first else model} · batch {b} · prompt {p} · output {o} · tp {tp} · {weight_dtype}"
        console().print(compare_table(title, columns))
    if not any(isinstance(c, dict) and c["fits"] for _, c in columns):
        raise InfeasibleError(
            f"{model} at batch {b}, context {p + o} fits on none of {', '.join(names)} with tp={tp} {weight_dtype}; "
            "try a higher --tp, a lower --weight-dtype (fp8, int4) or a smaller batch"
        )


def _with_cost(r: PredictionResult) -> dict[str, Any]:
    """summary() plus the spec price and $ per million output tokens (:func:`roofline.units.usd_per_million_tokens`)."""
    from roofline.units import usd_per_million_tokens

    s = r.summary()
    price = r.hardware.price.usd_per_gpu_hour if r.hardware.price else None
    s["usd_per_gpu_hour"] = price
    tps = s["throughput_tok_s"]
    s["usd_per_million_output_tokens"] = (
        usd_per_million_tokens(price * s["num_gpus"], tps) if price and tps > 0 else None
    )
    return s
