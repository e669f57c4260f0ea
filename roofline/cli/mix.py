"""``--mix`` of ``roofline plan`` and ``roofline report``: the option, its conflicts, and the per-class lines.

A mix (:mod:`roofline.serving.workload.mix`) is ``chat:0.6,rag:0.3,summarize:0.1`` (presets with shares) or a YAML
file of classes with their own lengths, SLOs at percentiles and prefix shares; it replaces --prompt, --output,
--ttft-slo and --tpot-slo (and a report's --workload).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from roofline.cli.options import OptionError

if TYPE_CHECKING:
    from collections.abc import Callable

    from roofline.serving.plan.finalists import Finalist
    from roofline.serving.plan.planner import Candidate

MixOpt = Annotated[
    str | None,
    typer.Option(
        "--mix",
        metavar="NAME:SHARE,…|FILE.yaml",
        help="Workload mix: presets with shares (chat:0.6,rag:0.3,summarize:0.1) or a YAML file of classes with "
        "their own lengths, SLOs and prefix shares (docs/usage.md); replaces --prompt/--output/--ttft-slo/--tpot-slo.",
    ),
]


def check_mix_flags(mix: str | None, given: dict[str, object]) -> None:
    """Refuse the length and SLO flags beside ``--mix`` (``given``: flag → value, None when not given)."""
    if mix is None:
        return
    clash = [flag for flag, v in given.items() if v is not None]
    if clash:
        raise OptionError(
            f"--mix gives each class its own lengths and SLOs, so {', '.join(clash)} would conflict with it: drop "
            f"{'it' if len(clash) == 1 else 'them'}, or put the values in a mix YAML file's classes"
        )


def plan_qps(qps: str | None, mix: str | None) -> float:
    """``--qps``, else the ``qps:`` of a mix file; one of them is required."""
    from roofline.cli.options import parse_float_opt

    if qps is not None:
        return parse_float_opt(qps, "--qps")
    if mix is not None:
        from roofline.serving.workload.mixparse import parse_mix

        rate = parse_mix(mix).qps
        if rate is not None:
            return rate
    raise OptionError("missing option --qps: give the total request rate, e.g. --qps 10 (or qps: in a mix file)")


def plan_request_args(
    mix: str | None, prompt: str | None, output: str | None, ttft_slo: str | None, tpot_slo: str | None
) -> tuple[dict[str, Any], tuple[float, float]]:
    """``roofline plan``'s request keywords for :func:`roofline.plan` and the (TTFT, TPOT) percentiles --simulate
    checks: ``mix=`` alone with --mix (each class has its own percentiles), else the lengths (defaults 1024 and 128
    tokens) and the two SLOs, both required."""
    from roofline.cli.options import parse_count_opt, parse_duration_opt, percentile_slo

    check_mix_flags(mix, {"--prompt": prompt, "--output": output, "--ttft-slo": ttft_slo, "--tpot-slo": tpot_slo})
    if mix is not None:
        return {"mix": mix}, (99.0, 90.0)
    missing = [flag for flag, v in (("--ttft-slo", ttft_slo), ("--tpot-slo", tpot_slo)) if v is None]
    if missing:
        raise OptionError(
            f"missing option {' and '.join(missing)}: give the SLOs, e.g. --ttft-slo 500ms --tpot-slo 50ms, or a "
            "workload mix whose classes carry them (--mix chat:0.7,rag:0.3)"
        )
    assert ttft_slo is not None and tpot_slo is not None
    ttft_pct, ttft = percentile_slo(ttft_slo, "--ttft-slo", 99.0)
    tpot_pct, tpot = percentile_slo(tpot_slo, "--tpot-slo", 90.0)
    request = {
        "prompt_len": parse_count_opt(prompt or "1024", "--prompt"),
        "output_len": parse_count_opt(output or "128", "--output", minimum=2),
        "ttft_slo_s": parse_duration_opt(ttft, "--ttft-slo"),
        "tpot_slo_s": parse_duration_opt(tpot, "--tpot-slo"),
    }
    return request, (ttft_pct, tpot_pct)


#: Most candidates ``plan --simulate --mix`` sizes, in threes, while none meets the SLOs.
MAX_MIX_FINALISTS = 9


def sized_in_threes(
    size: Callable[[Candidate], Finalist], feasible: list[Candidate], jobs: int | None
) -> list[Finalist]:
    """The closed form sizes a mix's mean request against its strictest SLOs, which can rank first a candidate that
    one class cannot use (a long-prompt class's TTFT needs more tp): the cheapest three feasible candidates are
    simulated, then the next three while none of those sized meets the SLOs, at most MAX_MIX_FINALISTS."""
    from roofline.serving.plan.parallel import map_jobs

    out: list[Finalist] = []
    for start in range(0, min(len(feasible), MAX_MIX_FINALISTS), 3):
        out += map_jobs(size, feasible[start : start + 3], jobs)
        if any(f.meets_slo for f in out):
            break
    return out


def class_lines(f: Finalist) -> list[str]:
    """One line per class of a mix finalist: simulated percentile vs threshold (SLO ÷ model-error factor), margin;
    the binding class marked."""
    from roofline.units import fmt_seconds

    out = []
    for c in f.classes:
        mark = " [bold](binding)[/]" if c.name == f.binding_class else ""
        out.append(
            f"  class {c.name} ({c.share:.0%}, {c.requests:,} requests): TTFT P{c.ttft_pct:g} {fmt_seconds(c.ttft_s)} "
            f"vs ≤ {fmt_seconds(c.ttft_threshold_s)} (SLO {fmt_seconds(c.ttft_slo_s)}), TPOT P{c.tpot_pct:g} "
            f"{fmt_seconds(c.tpot_s)} vs ≤ {fmt_seconds(c.tpot_threshold_s)} (SLO {fmt_seconds(c.tpot_slo_s)}); "
            f"margin {100 * c.margin:.0f}%{mark}"
        )
    return out


def classes_dict(f: Finalist) -> dict[str, Any]:
    """JSON fields of a mix finalist's classes (seconds); empty without a mix."""
    if not f.classes:
        return {}
    rows = [
        {
            "name": c.name,
            "share": c.share,
            "requests": c.requests,
            "ttft_pct": c.ttft_pct,
            "ttft_s": c.ttft_s,
            "ttft_threshold_s": c.ttft_threshold_s,
            "ttft_slo_s": c.ttft_slo_s,
            "tpot_pct": c.tpot_pct,
            "tpot_s": c.tpot_s,
            "tpot_threshold_s": c.tpot_threshold_s,
            "tpot_slo_s": c.tpot_slo_s,
            "margin": c.margin,
        }
        for c in f.classes
    ]
    return {"binding_class": f.binding_class, "classes": rows}
