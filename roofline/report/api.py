"""The report's Python API: ``build`` (data + HTML), ``render`` (HTML string), ``save`` (file)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, TypedDict, Unpack

from roofline.boundary.outputs import OutputTarget, check_output, write_output
from roofline.profile import CalibrationProfile
from roofline.report.content import (
    COLUMNS,
    ReportData,
    ReportInputs,
    checkpoint_note,
    hardware_rows,
    model_facts,
    precision_label,
    recommended_row,
    resolve_inputs,
    run_plan,
    size_on,
    tie_note,
)
from roofline.report.mixreport import binding_text, class_rows, report_workload, shown_workload
from roofline.report.risks import stress_level
from roofline.report.sizing import RANK_RULE
from roofline.serving.plan.procurement import Procurement
from roofline.serving.workload.mix import WorkloadMix
from roofline.specs.model import ModelSpec

DEFAULT_HARDWARE = ("h100-sxm", "h200-sxm", "a100-80gb-sxm")


class BuildOptions(TypedDict, total=False):
    """The arguments of :func:`build` after ``model``, which :func:`render` and :func:`save` pass on."""

    hardware: str | Sequence[str | Path]
    workload: str
    prompt_len: int | None
    output_len: int | None
    qps: float | None
    ttft_slo_s: float | None
    tpot_slo_s: float | None
    precision: str | Sequence[str]
    tp_options: Sequence[int] | None
    max_gpus: int | None
    prices: Mapping[str, float] | None
    calibration: CalibrationProfile | str | Path | None
    kv_dtype: str | None
    engine: str
    engine_overrides: Mapping[str, object] | None
    confidence: float
    min_headroom: float | None
    usd_per_kwh: float | None
    output_path: str | Path | None
    jobs: int | None
    seed: int
    procurement: Procurement | None
    mix: WorkloadMix | str | Path | None


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
    engine_overrides: Mapping[str, object] | None = None,
    confidence: float = 0.8,
    min_headroom: float | None = None,
    usd_per_kwh: float | None = None,
    output_path: str | Path | None = None,
    jobs: int | None = None,
    seed: int = 0,
    procurement: Procurement | None = None,
    mix: WorkloadMix | str | Path | None = None,
    dp_options: Sequence[int] | None = None,
) -> Report:
    """Plan ``model`` for ``workload`` on each ``hardware`` and render the full HTML report.

    ``workload`` is a preset (chat, rag, summarize) whose fields the keyword arguments
    override, or ``custom`` with every field given. SLOs are in seconds; ``prices`` map
    hardware slugs to USD per GPU-hour; ``kv_dtype`` None is the engine default (bf16);
    ``engine`` is the serving-engine preset (vllm, sglang, trtllm, ideal) and ``engine_overrides`` its options
    under their engine names (every option the simulator takes; the planner and the static predictions use the
    ones they can represent, see ``roofline.engine.config.ENGINE_OPTION_SCOPE``). ``confidence`` is the level
    at whose upper error bound the simulated percentile SLOs must hold; ``min_headroom`` the least spare
    capacity (None: the model's 80 % error bound on throughput); ``usd_per_kwh`` adds electricity
    (board power × time, an upper bound) to the cost.
    ``output_path`` only names the file in the report's "Reproduce" command. ``jobs``: processes for the
    independent simulations (hardware, sensitivity variants, what-ifs); None uses every core, 1 runs them in
    turn; the report is the same either way. ``seed``: the first of the seeds each sizing check's replicated
    runs use (seed, seed + 1, …; see :mod:`roofline.serving.plan.sampling`); the answer should not depend on it.
    ``mix``: a workload mix (``"chat:0.7,rag:0.3"``, a mix YAML path or a WorkloadMix) in place of ``workload`` and
    the lengths and SLOs; ``qps`` is then its total rate (default: the mix file's ``qps``). Every class is checked at
    its own percentiles and the report shows the class table (:mod:`roofline.report.mixreport`). ``dp_options``: the
    attention-DP sizes a MoE model is planned with (``roofline.plan``'s; [1]: tensor parallelism alone).
    """
    t0 = time.perf_counter()
    lengths = {"prompt_len": prompt_len, "output_len": output_len, "ttft_slo_s": ttft_slo_s, "tpot_slo_s": tpot_slo_s}
    the_mix, wl = report_workload(workload, mix, qps, lengths)
    inp = resolve_inputs(
        model,
        hardware,
        wl,
        precisions=precision,
        tp_options=tp_options,
        max_gpus=max_gpus,
        prices=prices,
        calibration=calibration,
        kv_dtype=kv_dtype,
        engine=engine,
        engine_overrides=engine_overrides,
        confidence=_level(confidence),
        min_headroom=_headroom(min_headroom),
        usd_per_kwh=_kwh(usd_per_kwh),
        seed=_seed(seed),
        procurement=_terms(procurement),
        mix=the_mix,
    )
    inp = replace(inp, dp_options=tuple(dp_options) if dp_options else None)
    data = report_data(inp, output_path, jobs)
    html = _html(data, t0)
    return Report(replace(data, seconds=time.perf_counter() - t0), html)


def report_data(inp: ReportInputs, output_path: str | Path | None, jobs: int | None) -> ReportData:
    """Everything the report shows: the plan, each hardware's simulator-sized deployment, the recommendation, its
    risks, what-ifs and sensitivity (their simulations on up to ``jobs`` processes), evidence and how to reproduce."""
    from roofline.report.evidence import evidence, reproduce
    from roofline.report.risks import risks
    from roofline.report.sensitivity import sensitivity, start_variants
    from roofline.report.sensitivity import variants as sensitivity_variants
    from roofline.report.whatif import start_what_ifs, what_ifs
    from roofline.serving.plan.parallel import Jobs

    most = len(inp.hardware) + len(sensitivity_variants()) + 6  # the hardware, the variants, at most 6 what-ifs
    with Jobs(jobs, most) as pool:  # one pool: the variants queue behind the hardware sizing, the what-ifs behind them
        plan = run_plan(inp)
        sizing = pool.start(partial(size_on, inp, plan.candidates), inp.hardware)
        variants = start_variants(inp, pool)  # independent of the baseline's answer
        rows = hardware_rows(inp, plan, done=sizing.results())
        rec = recommended_row(rows)
        levers = start_what_ifs(inp, rec, pool)
        sens = sensitivity(inp, plan, rec.finalist if rec is not None else None, sized=variants.results())
        whatifs = what_ifs(inp, rec, results=levers)
    return ReportData(
        inputs=inp,
        plan=plan,
        rows=rows,
        recommended=rec,
        risks=tuple(risks(rows, rec, inp, sens)),
        whatifs=whatifs,
        sensitivity=sens,
        evidence=evidence(inp),
        reproduce=reproduce(inp, output_path),
    )


def _terms(x: object) -> Procurement | None:
    """The buyer's terms as given (a Procurement or None), else a ScenarioError naming the type."""
    from roofline.errors import ScenarioError

    if x is not None and not isinstance(x, Procurement):
        raise ScenarioError(
            "procurement must be a roofline.serving.plan.procurement.Procurement, e.g. Procurement(spare_replicas=1), "
            f"got {type(x).__name__}"
        )
    return x


def _seed(x: object) -> int:
    """A seed as given (a whole number from 0 to 2**31 − 1), else a ScenarioError naming it."""
    from roofline.errors import ScenarioError

    if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < 2**31:
        raise ScenarioError(f"seed must be a whole number from 0 to 2147483647, got {x!r}")
    return x


def _level(x: float) -> float:
    from roofline.published.uncertainty import check_level

    return check_level(x)


def _headroom(x: float | None) -> float | None:
    from roofline.errors import ScenarioError

    if x is not None and (isinstance(x, bool) or not isinstance(x, int | float) or not 0 <= x <= 10):
        raise ScenarioError(f"min_headroom must be a fraction between 0 and 10 (0.25 = 25 % spare), got {x!r}")
    return None if x is None else float(x)


def _kwh(x: float | None) -> float | None:
    from roofline.errors import ScenarioError

    if x is not None and (isinstance(x, bool) or not isinstance(x, int | float) or not 0 <= x < 100):
        raise ScenarioError(f"usd_per_kwh must be an electricity price in USD per kWh, e.g. 0.12, got {x!r}")
    return None if x is None else float(x)


def _html(data: ReportData, t0: float) -> str:
    from roofline.engine.config import latency_basis
    from roofline.report.charts import color, empty_reason, report_charts
    from roofline.report.loadcharts import load_charts
    from roofline.report.templating import render_template

    charts = {**load_charts(data), **report_charts(data)}
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
        "report.html.j2",
        d=data,
        inp=inp,
        wl=shown_workload(data),
        mix_rows=class_rows(data),
        mix_binding=binding_text(data),
        rec=data.recommended,
        columns=COLUMNS,
        colors={r.hardware.name: color(i) for i, r in enumerate(data.rows)},
        charts=charts,
        facts=model_facts(inp, kv_bytes),
        engine_pred=pred,
        latency_basis=latency_basis(pred.memory.engine) if pred is not None else "",
        prices=_prices(inp),
        elapsed=time.perf_counter() - t0,
        tie_note=tie_note(data.rows),
        precision_label=lambda p: precision_label(inp, p),
        rank_rule=RANK_RULE,
        engine_label=_engine_label(inp),
        headroom_floor=_floor(data),
        slo_bounded=_slo_bounded(data),
        x_limits=_x_limits(data),
        pareto_empty=empty_reason(data),
        stress=stress_level(inp.confidence),
        checkpoint=checkpoint_note(inp),
    )


def _x_limits(data: ReportData) -> dict[str, float]:
    """Right end of each latency-vs-load chart's axis (the caption states it)."""
    from roofline.report.loadcharts import x_limit

    q = data.inputs.workload.qps
    return {
        r.hardware.name: x_limit(q, r.finalist.knee_rps, r.finalist.capacity_rps)
        for r in data.rows
        if r.finalist is not None
    }


def _engine_label(inp: Any) -> str:
    """The engine preset and version, e.g. 'vllm 0.11' (per hardware it may differ only in memory settings)."""
    from roofline.engine.presets import resolve_engine

    if not inp.hardware:
        return str(inp.engine)
    label = str(resolve_engine(inp.engine, inp.hardware[0]).label)
    return label + "".join(f", {k}={v}" for k, v in inp.engine_overrides.items())


def _slo_bounded(data: ReportData) -> bool:
    """Whether a point of the recommendation's latency curve bounds its SLO capacity (else it is a lower bound)."""
    from roofline.serving.plan.slo_capacity import slo_capacity

    rec = data.recommended
    return rec is not None and rec.finalist is not None and slo_capacity(rec.finalist)[1]


def _floor(data: ReportData) -> float:
    """The minimum headroom the recommendation was held to (the model's 80 % bound unless given)."""
    rec = data.recommended
    if rec is not None and rec.finalist is not None:
        return rec.finalist.min_headroom
    return float("nan") if data.inputs.min_headroom is None else data.inputs.min_headroom


def _prices(inp: Any) -> list[tuple[Any, float | None, str, str]]:
    """(hardware, USD per GPU-hour, date, source) as the planner sees them."""
    out: list[tuple[Any, float | None, str, str]] = []
    terms = inp.procurement
    for hw in inp.hardware:
        owned = terms.owned_usd_per_gpu_hour(hw)
        if owned is not None:
            source = f"owned: ${terms.capex_usd_per_gpu[hw.name]:,.0f} per GPU over {terms.amortisation_years:g} years"
            source += (
                f" + hosting ${terms.hosting_usd_per_kw_month:g}/kW-month" if terms.hosting_usd_per_kw_month else ""
            )
            out.append((hw, owned, "given", source))
        elif hw.name in inp.prices:
            out.append((hw, float(inp.prices[hw.name]), "given", "user-supplied price"))
        elif hw.price is not None:
            out.append((hw, hw.price.usd_per_gpu_hour, hw.price.date.isoformat(), hw.price.source))
        else:
            out.append((hw, None, "—", "no price in the spec; pass --price to compare cost"))
    return out


def render(model: ModelSpec | str | Path, **kwargs: Unpack[BuildOptions]) -> str:
    """The report's HTML as a string (arguments as :func:`build`)."""
    return build(model, **kwargs).html


def save(path: str | Path, model: ModelSpec | str | Path, **kwargs: Unpack[BuildOptions]) -> Path:
    """Build the report and write it to ``path`` (arguments as :func:`build`)."""
    kwargs.setdefault("output_path", path)
    return build(model, **kwargs).save(path)
