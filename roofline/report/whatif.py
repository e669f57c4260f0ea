"""What-if levers: re-size the recommended hardware with one input changed, against the recommendation.

Each lever changes exactly one input of the report and runs the same pipeline (planner to prune,
simulator to size at the planned load, :mod:`roofline.report.sizing`) on the recommended hardware only:

* **FP8 weights** — ``precision fp8`` (skipped when the checkpoint already ships in an 8-bit format);
* **FP8 KV cache** — ``kv_dtype fp8``;
* **Prompt reduction** — the prompt cut to a fifth (retrieval that turns a 4,000-token prompt into 800);
* **Larger tp** — tensor parallel twice the recommended one (when it divides the attention heads);
* **Speculative decoding** — the speculative simulator (:mod:`roofline.serving.sim.speculative`) with
  MTP (k = 2, α = 0.8) where the checkpoint ships MTP layers, else EAGLE (k = 3, α = 0.7). The acceptance
  rates are assumed (typical published chat acceptance); they move the TPOT directly (τ = (1 − α^(k+1))/(1 − α));
* **Disaggregation** — :func:`roofline.serving.plan.disagg.plan_disagg` on the recommended hardware with
  prefill and decode pools of the recommended tp (P, D ≤ 3), SLOs tightened by the same upper-bound
  factors so it is held to the confidence the recommendation is held to; the percentile is the stricter
  of the workload's two, rounded up to 90 or 99 (the disaggregated planner checks one percentile).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from roofline.errors import RooflineError

if TYPE_CHECKING:
    from collections.abc import Callable

    from roofline.report.content import HardwareRow, ReportInputs
    from roofline.serving.plan.parallel import Jobs, Pending
    from roofline.specs.hardware import HardwareSpec

PROMPT_CUT = 5


@dataclass(frozen=True)
class WhatIf:
    """One lever's outcome on the recommended hardware (NaN where nothing meets the SLOs)."""

    label: str
    description: str
    tp: int
    gpus: float
    delta_gpus: float
    usd_per_hour: float
    delta_usd_per_hour: float
    ttft_s: float
    tpot_s: float
    note: str = ""


#: assumed acceptance of the speculative what-if (module docstring)
SPEC_MTP, SPEC_EAGLE = "mtp:k=2,alpha=0.8", "eagle:k=3,alpha=0.7"


def _levers(inp: ReportInputs, rec: HardwareRow) -> list[tuple[str, str, ReportInputs | None, str]]:
    """(label, description, modified inputs or None, note when skipped)."""
    from roofline.report.content import checkpoint_note

    c, wl = rec.candidate, inp.workload
    assert c is not None
    hw = (rec.hardware,)
    base = replace(inp, hardware=hw, hardware_args=(rec.hardware.name,), tp_options=None)
    out: list[tuple[str, str, ReportInputs | None, str]] = []
    ships8 = "FP8" in checkpoint_note(inp)
    out.append(
        (
            "FP8 weights",
            "all linear layers in fp8",
            None if ships8 else replace(base, precisions=("fp8",)),
            "the checkpoint already ships in fp8" if ships8 else "",
        )
    )
    out.append(("FP8 KV cache", "KV cache stored in fp8 (half of bf16)", replace(base, kv_dtype="fp8"), ""))
    short = max(1, round(wl.prompt_len / PROMPT_CUT))
    out.append(
        (
            "Prompt reduction",
            f"retrieval cuts the prompt from {wl.prompt_len:,} to {short:,} tokens"
            + (" (the mean; every class's prompts cut to a fifth)" if inp.mix is not None else ""),
            replace(base, workload=replace(wl, prompt_len=short))
            if inp.mix is None
            else replace(base, workload=replace(wl, prompt_len=short), mix=inp.mix.with_prompts_scaled(1 / PROMPT_CUT)),
            "",
        )
    )
    tp2 = 2 * c.tp
    ok = inp.model.attention.num_heads % tp2 == 0
    out.append(
        (
            "Larger tp",
            f"tensor parallel {tp2} instead of {c.tp}" + _domain_note(rec.hardware, tp2),
            replace(base, tp_options=(tp2,), dp_options=(c.dp,)) if ok else None,
            "" if ok else f"tp {tp2} does not divide the heads",
        )
    )
    return out


def _domain_note(hw: HardwareSpec, tp: int) -> str:
    """'; tp 16 spans 2 nodes of 8: …' when a tp group leaves ``hw``'s scale-up domain (why a larger tp can lose)."""
    from roofline.specs.topology import comm_path

    path = comm_path(hw, tp)
    if path.nodes <= 1:
        return ""
    link = hw.interconnect.kind if hw.interconnect else "PCIe"
    return (
        f"; tp {tp} spans {path.nodes} nodes of {tp // path.nodes} ({link} inside a node, the network between), "
        "so every all-reduce crosses the network"
    )


def _speculative(inp: ReportInputs, rec: HardwareRow) -> WhatIf:
    from roofline.report.content import run_plan
    from roofline.report.sizing import size_hardware

    spec = SPEC_MTP if inp.model.mtp_layers else SPEC_EAGLE
    desc = (
        f"{spec.split(':')[0].upper()} with k = {spec.split('k=')[1].split(',')[0]}, acceptance α = "
        f"{spec.split('alpha=')[1]} (assumed)"
    )
    base = replace(inp, hardware=(rec.hardware,), hardware_args=(rec.hardware.name,))
    try:
        f, why = size_hardware(base, rec.hardware, run_plan(base).candidates, curve=False, speculative=spec)
    except RooflineError as exc:
        f, why = None, str(exc)
    return _row("Speculative decoding", desc, f, why, rec)


def _disaggregated(inp: ReportInputs, rec: HardwareRow) -> WhatIf:

    from roofline.published.serving_error import serving_upper_factor
    from roofline.serving.plan.disagg import plan_disagg

    f0, wl = rec.finalist, inp.workload
    assert f0 is not None
    tp = f0.candidate.tp
    pct = 99 if max(wl.ttft_pct, wl.tpot_pct) > 90 else 90
    ft, fp = (serving_upper_factor(fig, inp.confidence, inp.engine, inp.profile) for fig in ("ttft_s", "tpot_s"))
    desc = f"separate prefill and decode pools of tp {tp} (up to 3 each), P{pct} SLOs at the same bound"
    try:
        p = plan_disagg(
            inp.model,
            rec.hardware.name,
            wl.qps,
            tp_prefill=tp,
            tp_decode=tp,
            tp_colocated=tp,
            p_max=3,
            d_max=3,
            n_max=1,
            ttft_slo_s=wl.ttft_slo_s / ft,
            tpot_slo_s=wl.tpot_slo_s / fp,
            percentile=pct,
            prompt_len=wl.prompt_len,
            output_len=wl.output_len,
            engine=inp.engine,
            engine_overrides=inp.engine_overrides,
        )
    except RooflineError as exc:
        return WhatIf("Disaggregation", desc, 0, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan, str(exc))
    best = p.best_disagg
    if best is None:
        return WhatIf(
            "Disaggregation",
            desc,
            0,
            math.nan,
            math.nan,
            math.nan,
            math.nan,
            math.nan,
            math.nan,
            "no P:D pair up to 3:3 meets the SLOs",
        )
    given = inp.prices.get(rec.hardware.name)  # a given price is per GPU; the spec's is for its whole instances
    if given is not None:
        cost = best.gpus * float(given)
    else:
        cost = math.nan if best.usd_per_hour is None else float(best.usd_per_hour)
    return WhatIf(
        "Disaggregation",
        f"{desc}: {best.label}",
        tp,
        float(best.gpus),
        float(best.gpus - f0.gpus),
        cost,
        cost - rec.values["usd_per_hour"],
        best.ttft_s,
        best.tpot_s,
    )


def _row(label: str, desc: str, f: Any, why: str, rec: HardwareRow) -> WhatIf:
    nan = math.nan
    if f is None:
        return WhatIf(label, desc, 0, nan, nan, nan, nan, nan, nan, why or "no configuration meets the SLOs")
    f0 = rec.finalist
    assert f0 is not None
    cost = f.total_usd_per_hour
    cost_f = nan if cost is None else float(cost)
    return WhatIf(
        label,
        desc,
        f.candidate.tp,
        float(f.gpus),
        float(f.gpus - f0.gpus),
        cost_f,
        cost_f - rec.values["usd_per_hour"],
        f.ttft_s,
        f.tpot_s,
        _more_gpus_note(f, f0),
    )


def _more_gpus_note(f: Any, f0: Any) -> str:
    """Why a lever that should help costs more GPUs (empty when it does not): the replicas and GPUs per replica it
    was sized to, against the recommendation's, and each one's replica capacity."""
    if f.gpus <= f0.gpus:
        return ""
    per, per0 = f.gpus // f.replicas, f0.gpus // f0.replicas
    return (
        f"needs {f.gpus - f0.gpus} more GPUs: {f.replicas} replicas of {per} GPUs ({f.candidate.parallelism}) against "
        f"{f0.replicas} of {per0}; a replica sustains {f.sustainable_replica_rps:.3g} req/s against "
        f"{f0.sustainable_replica_rps:.3g}, and the SLO check at {f.replica_rate:.3g} req/s per replica decided "
        f"over {f.sizing_runs} run(s)"
    )


def what_ifs(
    inp: ReportInputs, rec: HardwareRow | None, jobs: int | Jobs | None = 1, results: Pending[WhatIf] | None = None
) -> tuple[WhatIf, ...]:
    """One row per lever against the recommended deployment (empty without a recommendation); the levers are
    sized on up to ``jobs`` processes (:func:`roofline.serving.plan.parallel.map_jobs`, results as in turn), or
    ``results``: :func:`start_what_ifs`'s."""
    if results is not None:
        return tuple(results.results())
    from roofline.serving.plan.parallel import map_jobs

    batch = _batch(inp, rec)
    return () if batch is None else tuple(map_jobs(*batch, jobs))


def start_what_ifs(inp: ReportInputs, rec: HardwareRow | None, jobs: Jobs) -> Pending[WhatIf]:
    """Queue the levers on ``jobs`` (nothing without a recommendation); :func:`what_ifs` takes the results."""
    from roofline.serving.plan.parallel import Pending

    batch = _batch(inp, rec)
    if batch is None:
        return Pending(None, list)
    fn, tasks = batch
    return jobs.start(fn, tasks, first=[i for i, t in enumerate(tasks) if t[0] == "speculative"])  # the longest


def _batch(
    inp: ReportInputs, rec: HardwareRow | None
) -> tuple[Callable[[WhatIfTask], WhatIf], list[WhatIfTask]] | None:
    """(the task function, the lever tasks) against ``rec``; None without a recommendation."""
    from functools import partial

    if rec is None or rec.finalist is None or rec.candidate is None:
        return None
    tasks: list[WhatIfTask] = [("lever", *lever) for lever in _levers(inp, rec)]
    tasks += [("speculative", "", "", None, ""), ("disaggregation", "", "", None, "")]
    row = replace(rec, prediction=None)  # what the levers compare against; the prediction stays here (not picklable)
    return partial(_what_if, inp, row), tasks


#: (kind, label, description, modified inputs or None, note) of one what-if row.
WhatIfTask = tuple[str, str, str, "ReportInputs | None", str]


def _what_if(inp: ReportInputs, rec: HardwareRow, task: WhatIfTask) -> WhatIf:
    """One what-if row (a module-level function, so a worker process can run it)."""
    from roofline.report.content import run_plan
    from roofline.report.sizing import size_hardware

    kind, label, desc, mod, note = task
    if kind in ("speculative", "disaggregation") and inp.mix is not None:  # one request class only
        label = "Speculative decoding" if kind == "speculative" else "Disaggregation"
        why = f"not sized for a workload mix: the {kind} simulator serves one request class"
        return _row(label, "", None, why, rec)
    if kind == "speculative":
        return _speculative(inp, rec)
    if kind == "disaggregation":
        return _disaggregated(inp, rec)
    if mod is None:
        nan = math.nan
        return WhatIf(label, desc, 0, nan, nan, nan, nan, nan, nan, note)
    try:
        f, why = size_hardware(mod, rec.hardware, run_plan(mod).candidates, curve=False)
    except RooflineError as exc:
        f, why = None, str(exc)
    return _row(label, desc, f, why, rec)
