"""Why a configuration does not fit in memory, and the smallest change that makes it fit (tp, weight format, pp).

Both read the one memory function, :func:`roofline.memory.memory_budget`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from roofline.errors import ScenarioError
from roofline.memory import memory_budget
from roofline.specs.hardware import HardwareSpec
from roofline.specs.model import ModelSpec
from roofline.specs.scenario import Scenario
from roofline.units import fmt_bytes


def no_fit_reason(m: ModelSpec, hw: HardwareSpec, sc: Scenario) -> str:
    """'does not fit: short by X per GPU (weights W, KV K, reserve R of usable U); fits with …'."""

    mem = memory_budget(m, hw, sc)
    short = float(np.max(mem.missing_bytes))
    detail = (
        f"weights {fmt_bytes(mem.weight_bytes)} + KV {fmt_bytes(float(np.max(mem.kv_bytes)))} + reserve "
        f"{fmt_bytes(float(np.max(mem.reserve_bytes)))} > usable {fmt_bytes(mem.usable_bytes)} per GPU"
    )
    return f"does not fit: short by {fmt_bytes(short)} per GPU ({detail}); {fit_hint(m, hw, sc)}"


def fit_hint(m: ModelSpec, hw: HardwareSpec, sc: Scenario) -> str:
    """The smallest change that makes ``sc`` fit: a higher tp, a lower weight precision, or pp."""
    from roofline.specs.precision import Precision

    def fits(s: Scenario) -> bool:
        try:
            s.validate_for(m, hw)
        except ScenarioError:
            return False
        return bool(np.all(memory_budget(m, hw, s).fits))

    hints = []
    tp = next((t for t in (2, 4, 8, 16, 32, 64) if t > sc.tp and fits(replace(sc, tp=t))), None)
    if tp is not None:
        hints.append(f"tp={tp}")
    lower = [p for p in (Precision.FP8, Precision.INT4) if p.bytes_per_element < sc.weight_dtype.bytes_per_element]
    base = replace(sc, act_dtype=None, use_checkpoint=False, weight_overrides=())  # uniform weights for the hints
    prec = next((p for p in lower if fits(replace(base, weight_dtype=p))), None)
    if prec is not None:
        hints.append(f"weight_dtype={prec.value}")
    if prec is None:  # neither alone may be practical: the smallest tp with lower-precision weights
        combo = next(
            (
                (t, p)
                for t in (2, 4, 8, 16, 32)
                if t > sc.tp and (tp is None or t < tp)
                for p in lower
                if fits(replace(base, tp=t, weight_dtype=p))
            ),
            None,
        )
        if combo is not None:
            hints.append(f"tp={combo[0]} with weight_dtype={combo[1].value}")
    if not hints:  # tp is capped by the scale-up domain: pipeline stages across nodes, fewest GPUs first
        grid = sorted(
            ((t, q) for t in (1, 2, 4, 8, 16, 32, 64) for q in (2, 4, 8, 16, 32) if t >= sc.tp and q > sc.pp),
            key=lambda tq: (tq[0] * tq[1], tq[1]),
        )
        tpp = next((tq for tq in grid if fits(replace(sc, tp=tq[0], pp=tq[1]))), None)
        if tpp is not None:
            hints.append(f"pp={tpp[1]}" if tpp[0] == sc.tp else f"tp={tpp[0]} with pp={tpp[1]}")
    if not hints:
        return (
            "it does not fit with tp up to the scale-up domain, pp up to 32 or fp8/int4 weights: "
            "use larger GPUs or a shorter context"
        )
    return "it fits with " + " or ".join(hints)
