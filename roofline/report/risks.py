"""The report's risk box: only downsides that would break the plan, each with how much.

Sources, most severe first:

1. **Model error.** At a stricter level ℓ' = max(0.95, confidence + 0.1) (capped at 0.99) than the one
   the plan was sized at, the simulated percentiles become value × the engine's upper factor measured on
   public serving rows (:func:`roofline.published.serving_error.serving_upper_factor`) and capacity
   capacity·e^(−q_ℓ') (:func:`roofline.published.uncertainty.upper_factor`). The figure that breaks
   first is named with its excess over the SLO (or its shortfall under the planned load).
2. **Traffic.** Above the SLO capacity (:mod:`roofline.serving.plan.slo_capacity`; without a latency curve,
   the knee: mean TTFT twice its zero-load value) the SLOs break; above capacity requests queue without bound.
   The box says how far above the planned load each is.
3. **Sensitivity downsides**: bandwidth or compute 15 % below the profile needing more GPUs, other hardware
   or no plan (a variant above the profile is an upside, never listed).
4. **Unmeasured profile.** The ceilings were not measured on the target machines.

An upside (a case where fewer GPUs would do) is never a risk and is left to the Sensitivity table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from roofline.units import fmt_seconds

if TYPE_CHECKING:
    from roofline.report.content import HardwareRow, ReportInputs
    from roofline.report.sensitivity import SensitivityRow


def stress_level(confidence: float) -> float:
    """The stricter level the risk box tests the plan at."""
    return min(0.99, max(0.95, confidence + 0.1))


def model_error_risk(rec: HardwareRow, inp: ReportInputs) -> tuple[float, str] | None:
    """How far the plan misses when the model errs to the stress level's bound (None if it holds)."""
    from roofline.published.serving_error import serving_upper_factor
    from roofline.published.uncertainty import upper_factor
    from roofline.report.mixreport import finalist_workload

    f, wl = rec.finalist, finalist_workload(inp.workload, rec.finalist)  # a mix: the binding classes' SLOs
    if f is None:
        return None
    lv = stress_level(inp.confidence)
    ft, fp = (serving_upper_factor(fig, lv, inp.engine, inp.profile) for fig in ("ttft_s", "tpot_s"))
    fc = upper_factor("e2e_s", lv)
    cap = f.capacity_rps / fc
    cases = [
        (
            f.ttft_s * ft / wl.ttft_slo_s - 1,
            f"TTFT P{wl.ttft_pct:g} becomes {fmt_seconds(f.ttft_s * ft)}, "
            f"{{x:.0%}} over its {fmt_seconds(wl.ttft_slo_s)} SLO",
        ),
        (
            f.tpot_s * fp / wl.tpot_slo_s - 1,
            f"TPOT P{wl.tpot_pct:g} becomes {fmt_seconds(f.tpot_s * fp)}, "
            f"{{x:.0%}} over its {fmt_seconds(wl.tpot_slo_s)} SLO",
        ),
        (wl.qps / cap - 1, f"capacity falls to {cap:.3g} requests/s, {{x:.0%}} short of the planned {wl.qps:g}"),
    ]
    k = max(range(3), key=lambda j: cases[j][0])
    worst, text = cases[k]
    if worst <= 0:
        return None
    factor = (ft, fp, fc)[k]
    if k == 2:
        extra = math.ceil(wl.qps * fc / f.sustainable_replica_rps) - f.replicas
        more = extra * f.candidate.gpus_per_replica
        fix = f"{extra} more replica{'s' if extra != 1 else ''} ({more} GPUs) would cover it"
    else:
        fix = "a larger tensor-parallel size or more replicas (lower load per replica) would cover it"
    return (
        3.0 + worst,
        f"If the model errs to its {lv:.0%} bound (×{factor:.2f} its prediction), {text.format(x=worst)}; {fix}.",
    )


def traffic_risk(rec: HardwareRow, inp: ReportInputs) -> tuple[float, str] | None:
    """Sustained traffic above the SLO capacity breaks the SLOs; above capacity requests queue. Without a
    latency curve (no SLO capacity) the knee stands in for it."""
    from roofline.serving.plan.slo_capacity import slo_capacity

    f, wl = rec.finalist, inp.workload
    if f is None:
        return None
    per_replica, bounded = slo_capacity(f)
    cap = f.capacity_rps
    if math.isfinite(per_replica):
        slo_cap = f.replicas * per_replica
        rise = slo_cap / wl.qps - 1
        first = "its SLOs break" if bounded else "the latency curve was not followed further (the SLOs still held)"
        text = (
            f"Sustained traffic above {slo_cap:.3g} requests/s ({rise:+.0%} over the planned {wl.qps:g}) is where "
            f"{first}: the SLO capacity, read off the latency-against-load curve; above {cap:.3g} requests/s "
            "(capacity) requests queue without bound."
        )
        return 2.0 - min(rise, 1.0), text
    knee = f.knee_rps
    rise = knee / wl.qps - 1
    return (
        2.0 - min(rise, 1.0),
        f"Sustained traffic above {knee:.3g} requests/s ({rise:+.0%} over the planned "
        f"{wl.qps:g}) passes the knee, where queueing doubles the mean TTFT and the P{wl.ttft_pct:g} SLO breaks "
        f"first; above {cap:.3g} requests/s (capacity) requests queue without bound.",
    )


def risks(
    data_rows: Sequence[HardwareRow], rec: HardwareRow | None, inp: ReportInputs, sens: Sequence[SensitivityRow]
) -> list[tuple[float, str]]:
    """(severity, sentence) pairs, most severe first; the first is the report's main risk. Downsides only."""
    if rec is None or rec.finalist is None:
        if data_rows and all("does not fit" in r.reason or "KV pool" in r.reason for r in data_rows):
            return [
                (
                    9.0,
                    "The model does not fit in memory on any hardware listed; see the reasons in the "
                    "comparison table (a higher tp, fp8 weights or larger GPUs).",
                )
            ]
        return [(9.0, "No hardware meets the SLOs for this workload; see the reasons in the comparison table.")]
    out = [r for r in (model_error_risk(rec, inp), traffic_risk(rec, inp)) if r is not None]
    for s in sens:
        # a risk is a shortfall (ceilings below the profile) that worsens the answer, never a cheaper outcome
        if not s.changes_choice or not s.downside or "below" not in s.description:
            continue
        if s.hardware is None:
            out.append((1.5, f"If the {s.description}, no configuration meets the SLOs; measure before buying."))
            continue
        cost = f" at {s.usd_per_hour:,.2f} $/h" if math.isfinite(s.usd_per_hour) else ""
        out.append(
            (1.5, f"If the {s.description}, the planner needs {s.gpus:.0f} × {s.display_name}{cost} (see Sensitivity).")
        )
    if inp.profile.device is None:
        out.append(
            (
                0.5,
                "The ceilings come from a profile not measured on the target machines; real kernels, drivers and "
                "serving engines can be 10-30% away from them. Run `roofline calibrate` on the hardware to confirm.",
            )
        )
    return sorted(out, key=lambda x: -x[0])
