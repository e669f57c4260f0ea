"""What-if levers: re-size the recommended hardware with one input changed, against the recommendation.

Each lever changes exactly one input of the report and runs the same pipeline (planner to prune,
simulator to size at the planned load, :mod:`roofline.report.sizing`) on the recommended hardware only:

* **FP8 weights** — ``precision fp8`` (skipped when the checkpoint already ships in an 8-bit format);
* **FP8 KV cache** — ``kv_dtype fp8``;
* **Prompt reduction** — the prompt cut to a fifth (retrieval that turns a 4,000-token prompt into 800);
* **Larger tp** — tensor parallel twice the recommended one (when it divides the attention heads).

Speculative decoding and prefill/decode disaggregation are not available to the report yet; the table
says so instead of inventing numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from roofline.errors import RooflineError

if TYPE_CHECKING:
    from roofline.report.content import HardwareRow, ReportInputs

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


def _levers(inp: ReportInputs, rec: HardwareRow) -> list[tuple[str, str, ReportInputs | None, str]]:
    """(label, description, modified inputs or None, note when skipped)."""
    from roofline.report.content import checkpoint_note

    c, wl = rec.candidate, inp.workload
    assert c is not None
    hw = (rec.hardware,)
    base = replace(inp, hardware=hw, hardware_args=(rec.hardware.name,), tp_options=None)
    out: list[tuple[str, str, ReportInputs | None, str]] = []
    ships8 = "FP8" in checkpoint_note(inp)
    out.append(("FP8 weights", "all linear layers in fp8", None if ships8 else replace(base, precisions=("fp8",)),
                "the checkpoint already ships in fp8" if ships8 else ""))  # fmt: skip
    out.append(("FP8 KV cache", "KV cache stored in fp8 (half of bf16)", replace(base, kv_dtype="fp8"), ""))
    short = max(1, round(wl.prompt_len / PROMPT_CUT))
    out.append((
        "Prompt reduction", f"retrieval cuts the prompt from {wl.prompt_len:,} to {short:,} tokens",
        replace(base, workload=replace(wl, prompt_len=short)), "",
    ))  # fmt: skip
    tp2 = 2 * c.tp
    ok = inp.model.attention.num_heads % tp2 == 0
    out.append((
        "Larger tp", f"tensor parallel {tp2} instead of {c.tp}",
        replace(base, tp_options=(tp2,)) if ok else None, "" if ok else f"tp {tp2} does not divide the heads",
    ))  # fmt: skip
    out.append(("Speculative decoding / disaggregation", "not modelled by this version of the report", None,
                "not available yet (the simulator does not model them in this release)"))  # fmt: skip
    return out


def what_ifs(inp: ReportInputs, rec: HardwareRow | None) -> tuple[WhatIf, ...]:
    """One row per lever against the recommended deployment (empty without a recommendation)."""
    from roofline.report.content import run_plan
    from roofline.report.sizing import size_hardware

    if rec is None or rec.finalist is None or rec.candidate is None:
        return ()
    f0 = rec.finalist
    base_cost = rec.values["usd_per_hour"]
    nan = math.nan
    rows = []
    for label, desc, mod, note in _levers(inp, rec):
        if mod is None:
            rows.append(WhatIf(label, desc, 0, nan, nan, nan, nan, nan, nan, note))
            continue
        try:
            plan = run_plan(mod)
            f, why = size_hardware(mod, rec.hardware, plan.candidates, curve=False)
        except RooflineError as exc:
            f, why = None, str(exc)
        if f is None:
            rows.append(WhatIf(label, desc, 0, nan, nan, nan, nan, nan, nan, why or "no configuration meets the SLOs"))
            continue
        cost = f.total_usd_per_hour
        cost_f = nan if cost is None else float(cost)
        rows.append(WhatIf(
            label, desc, f.candidate.tp, float(f.gpus), float(f.gpus - f0.gpus), cost_f, cost_f - base_cost,
            f.ttft_s, f.tpot_s,
        ))  # fmt: skip
    return tuple(rows)
