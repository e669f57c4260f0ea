"""``roofline plan``: capacity planning over hardware × precision × tp (see roofline.serving.plan.planner)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from roofline.cli.buyer import (
    CapexOpt,
    ElectricityPriceOpt,
    HostingOpt,
    PeakOpt,
    PueOpt,
    SpareOpt,
    YearsOpt,
    parse_procurement,
)
from roofline.cli.mix import MixOpt, plan_qps, plan_request_args, sized_in_threes
from roofline.cli.options import (
    JobsOpt,
    OptionError,
    SizingSeedOpt,
    parse_engine_set,
    parse_float_opt,
    parse_int_list,
    parse_names,
    parse_prices,
)
from roofline.cli.options import percentile_slo as percentile_slo  # re-exported: it lived here
from roofline.cli.plan_output import emit_plan
from roofline.cli.predict import Engine, EngineSet

if TYPE_CHECKING:
    from roofline.serving.plan.finalists import Finalist
    from roofline.serving.plan.procurement import Procurement
    from roofline.serving.plan.result import Candidate, PlanResult


ModelOpt = Annotated[str, typer.Argument(help="Model: slug, alias, YAML or config.json path.")]
QpsOpt = Annotated[
    str | None,
    typer.Option("--qps", metavar="RPS", help="Target requests per second (all replicas; a mix file may give it)."),
]
TtftSloOpt = Annotated[
    str | None,
    typer.Option(
        "--ttft-slo",
        metavar="[pNN=]DURATION",
        help="Time-to-first-token SLO, e.g. 500ms, or p99=2s: the percentile --simulate checks (default p99).",
    ),
]
TpotSloOpt = Annotated[
    str | None,
    typer.Option(
        "--tpot-slo",
        metavar="[pNN=]DURATION",
        help="Time-per-output-token SLO, e.g. 50ms, or p90=50ms: the percentile --simulate checks (default p90).",
    ),
]
PromptOpt = Annotated[
    str | None,
    typer.Option("--prompt", "-p", metavar="TOKENS", help="Prompt tokens per request (2k = 2000; default 1024)."),
]
OutputOpt = Annotated[
    str | None, typer.Option("--output", "-n", metavar="TOKENS", help="Output tokens per request (default 128).")
]
HardwareOpt = Annotated[
    str, typer.Option("--hardware", "-H", metavar="LIST|all", help="'all' or comma-separated hardware.")
]
PrecisionOpt = Annotated[
    str,
    typer.Option(
        "--precision",
        metavar="LIST",
        help="Weight formats to try, e.g. checkpoint,fp8 (default: the shipped checkpoint; all = checkpoint,bf16,fp8).",
    ),
]
TpOpt = Annotated[
    str | None, typer.Option("--tp", metavar="LIST", help="tp values to try (default 1,2,4,8 dividing the heads).")
]
DpOpt = Annotated[
    str | None,
    typer.Option(
        "--dp", metavar="LIST", help="MoE: attention-DP sizes to try with wide EP over dp × tp (default 1,2,…,32)."
    ),
]
MaxGpusOpt = Annotated[int | None, typer.Option("--max-gpus", help="Reject plans needing more GPUs.")]
PriceOpt = Annotated[
    list[str] | None,
    typer.Option("--price", metavar="NAME=USD", help="USD per GPU-hour overriding the spec, e.g. h100-sxm=2.49."),
]
KvDtypeOpt = Annotated[str | None, typer.Option("--kv-dtype", help="KV-cache format (default bf16).")]
CalibrationOpt = Annotated[
    str | None, typer.Option("--calibration", "-c", metavar="PROFILE", help="Calibration profile YAML.")
]
ShowAllOpt = Annotated[bool, typer.Option("--all", help="Show every candidate, not the first 15 of each table.")]
ConfidenceOpt = Annotated[
    str | None,
    typer.Option(
        "--confidence",
        metavar="LEVEL",
        help="Size so the SLOs hold at this level's upper bound of the model's error, e.g. 0.9 or 90%.",
    ),
]
MinHeadroomOpt = Annotated[
    str | None,
    typer.Option(
        "--min-headroom",
        metavar="PCT|error",
        help="Spare capacity each candidate keeps, e.g. 20% or 0.2, or 'error' for the model's 80 % error bound.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")]
SimulateOpt = Annotated[
    bool,
    typer.Option(
        "--simulate",
        help="Re-size the 3 cheapest candidates on the serving simulator at the planned load "
        "(TTFT P99, TPOT P90 at the --confidence upper bound, default 0.8; headroom ≥ the model's error).",
    ),
]


def plan_cmd(
    model: ModelOpt,
    qps: QpsOpt = None,
    ttft_slo: TtftSloOpt = None,
    tpot_slo: TpotSloOpt = None,
    prompt: PromptOpt = None,
    output: OutputOpt = None,
    hardware: HardwareOpt = "all",
    precision: PrecisionOpt = "checkpoint",
    tp: TpOpt = None,
    max_gpus: MaxGpusOpt = None,
    price: PriceOpt = None,
    kv_dtype: KvDtypeOpt = None,
    engine: Engine = "vllm",
    engine_set: EngineSet = None,
    calibration: CalibrationOpt = None,
    show_all: ShowAllOpt = False,
    confidence: ConfidenceOpt = None,
    min_headroom: MinHeadroomOpt = None,
    json: JsonOpt = False,
    simulate: SimulateOpt = False,
    jobs: JobsOpt = None,
    seed: SizingSeedOpt = 0,
    spare_replicas: SpareOpt = None,
    peak_factor: PeakOpt = None,
    capex: CapexOpt = None,
    amortisation_years: YearsOpt = None,
    hosting: HostingOpt = None,
    pue: PueOpt = None,
    electricity_price: ElectricityPriceOpt = None,
    mix: MixOpt = None,
    dp: DpOpt = None,
) -> None:
    """How many GPUs of which kind serve --qps requests within the TTFT and TPOT SLOs, cheapest first.

    Per replica: λ_max(B) = B / ((O−1)·t_dec(B) + B·t_pre); B is the largest batch that fits in
    memory and keeps TPOT_eff = t_dec(B)/(1−ρ) and TTFT_eff = t_pre + t_dec(B) within the SLOs;
    replicas = ceil(qps / λ_max). Ranked by $/hour (GPUs when no price). Exit code 1 when no
    candidate is feasible; the error names the closest one.
    """
    from roofline.cli.predict import parse_level
    from roofline.engine.config import honoured_options
    from roofline.serving.plan.planner import plan

    request, pcts = plan_request_args(mix, prompt, output, ttft_slo, tpot_slo)  # --mix: roofline.cli.mix
    overrides = parse_engine_set(engine_set)  # --simulate: the closed form ranks with its share, finalists get all
    terms = parse_procurement(spare_replicas, peak_factor, capex, amortisation_years, hosting, pue)
    kwh = None if electricity_price is None else parse_float_opt(electricity_price, "--electricity-price")
    res = plan(
        model,
        qps=plan_qps(qps, mix),
        **request,
        hardware=parse_names(hardware),
        precisions=parse_names(precision) or ["checkpoint", "bf16", "fp8"],
        tp_options=parse_int_list(tp, "--tp") if tp else None,
        max_gpus=max_gpus,
        prices=parse_prices(price or []),
        calibration=calibration,
        kv_dtype=kv_dtype,
        engine=engine,
        engine_overrides=honoured_options(overrides, "plan") if simulate else overrides,
        confidence=parse_level(confidence, "--confidence") if confidence is not None else None,
        min_headroom=_headroom(min_headroom),
        procurement=terms,
        dp_options=parse_int_list(dp, "--dp") if dp else None,
    )
    sized = (
        _simulated(model, res, engine, overrides, calibration, confidence, pcts, jobs, seed, terms, kwh)
        if simulate and res.recommended
        else []
    )
    emit_plan(res, sized if simulate else None, simulated_pick(sized), as_json=json, show_all=show_all, terms=terms)


def _simulated(
    model: str,
    res: PlanResult,
    engine: str,
    overrides: dict[str, Any],
    calibration: str | None,
    confidence: str | None,
    pcts: tuple[float, float],
    jobs: int | None = None,
    seed: int = 0,
    terms: Procurement | None = None,
    usd_per_kwh: float | None = None,
) -> list[Finalist]:
    """size_finalist for the 3 cheapest feasible candidates (roofline.serving.plan.finalists), every
    ``--engine-set`` option applied, on up to ``jobs`` processes (results as in turn); with a mix, the next three
    while none meets the SLOs (:func:`roofline.cli.mix.sized_in_threes`)."""
    from functools import partial

    from roofline.cli.predict import parse_level
    from roofline.serving.plan.finalists import size_finalist
    from roofline.serving.plan.parallel import map_jobs

    level = parse_level(confidence, "--confidence") if confidence is not None else 0.8
    size = partial(
        size_finalist,
        model,
        qps=res.qps,
        prompt_len=res.prompt_len,
        output_len=res.output_len,
        ttft_slo_s=res.ttft_slo_s,
        tpot_slo_s=res.tpot_slo_s,
        ttft_pct=pcts[0],
        tpot_pct=pcts[1],
        confidence=level,
        engine=engine,
        engine_overrides=overrides,
        calibration=calibration,
        curve=False,
        seed=seed,
        procurement=terms,
        usd_per_kwh=usd_per_kwh,
        mix=res.mix,
    )
    feasible = [c for c in res.candidates if c.feasible]
    if res.mix is not None:  # the mean request can mis-rank what the classes need (roofline.cli.mix)
        return sized_in_threes(partial(_sized_with_tdp, size), feasible, jobs)
    return map_jobs(partial(_sized_with_tdp, size), feasible[:3], jobs)


def _sized_with_tdp(size: Callable[..., Finalist], c: Candidate) -> Finalist:
    """One finalist sized with its hardware's board power (a worker process's task)."""
    from roofline.specs.library import hardware as load_hardware

    return size(c, tdp_watts=load_hardware(c.hardware).tdp_watts)


def _headroom(text: str | None) -> float | str | None:
    """``--min-headroom``: ``error``, ``20%`` or ``0.2`` (a fraction)."""
    if text is None or text.strip().lower() == "error":
        return None if text is None else "error"
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise OptionError(f"--min-headroom: cannot read {text!r}; write 20%, 0.2 or error") from None
    if not 0 <= value <= 10:
        raise OptionError(f"--min-headroom must be between 0 and 1000 %, got {text}")
    return value


def simulated_pick(sized: list[Finalist]) -> Finalist | None:
    """The simulated finalist that meets the SLOs and ranks first by the report's rule
    (:func:`roofline.report.sizing.rank_key`: cost, then GPUs, then TPOT); None when none meets them."""
    from roofline.report.sizing import rank_key

    ok = [f for f in sized if f.meets_slo]
    return min(ok, key=rank_key) if ok else None
