"""What a plan is asked, validated: the load, lengths and SLOs, the hardware and tp to try, prices, options.

Every check names the field and its bound (:mod:`roofline.boundary.limits`); the planner
(:mod:`roofline.serving.plan.planner`) sizes candidates for a :class:`PlanRequest`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from roofline.boundary.limits import MAX_QPS, MAX_SEQUENCE_TOKENS
from roofline.engine.presets import EngineArg
from roofline.errors import ScenarioError
from roofline.specs.hardware import HardwareSpec


def hardware_list(
    hardware: Sequence[HardwareSpec | str | Path] | HardwareSpec | str | Path | None,
) -> list[HardwareSpec]:
    """The hardware to plan over: every known device for None, else the one or several given (names or specs)."""
    from roofline.specs.library import hardware as load_hardware
    from roofline.specs.library import list_hardware

    if hardware is None:
        return [load_hardware(n) for n in list_hardware()]
    items = [hardware] if isinstance(hardware, str | Path) or not isinstance(hardware, Sequence) else hardware
    return [load_hardware(h) for h in items]


def check_tp_options(tp_options: Sequence[int] | None) -> None:
    if tp_options is None:
        return
    opts = [tp_options] if isinstance(tp_options, str | bytes) else tp_options
    if not isinstance(opts, Sequence) or not all(
        isinstance(t, int | np.integer) and not isinstance(t, bool) and t >= 1 for t in opts
    ):
        raise ScenarioError(f"tp_options must be a list of whole numbers >= 1, got {tp_options!r}")


def check_options(kv_dtype: str | None, confidence: float | None, min_headroom: float | str | None) -> float | None:
    """Validate the KV format, the confidence level (returned as a fraction) and the headroom option."""
    if kv_dtype is not None:  # '' is not "the default": it is an unknown format
        from roofline.specs.precision import Precision

        Precision.parse(kv_dtype, "kv_dtype")
    if confidence is not None:
        from roofline.published.uncertainty import check_level

        confidence = check_level(confidence)
    bad_fraction = isinstance(min_headroom, bool) or not isinstance(min_headroom, int | float)
    if min_headroom not in (None, "error") and (bad_fraction or not 0 <= float(min_headroom) <= 10):
        raise ScenarioError(f"min_headroom must be a fraction from 0 to 10 or 'error' (got {min_headroom!r})")
    return confidence


def price_map(prices: Mapping[str, float] | None) -> dict[str, float]:
    """{hardware slug: USD per GPU-hour} from the user's prices (names resolved, each a number > 0)."""
    from roofline.specs.library import hardware as load_hardware

    if prices is not None and not isinstance(prices, Mapping):
        raise ScenarioError(f"prices must map hardware names to USD per GPU-hour, got {type(prices).__name__}")
    out: dict[str, float] = {}
    for k, v in (prices or {}).items():
        if isinstance(v, bool) or not isinstance(v, int | float) or not (math.isfinite(v) and v > 0):
            raise ScenarioError(f"price of {k} must be a number > 0 USD per GPU-hour, got {v!r}")
        out[load_hardware(k).name] = float(v)
    return out


@dataclass(frozen=True)
class PlanRequest:
    """One plan's request: load, lengths (tokens), SLOs (s), limits, engine and sizing options."""

    qps: float
    p: int
    o: int
    ttft_slo: float
    tpot_slo: float
    max_gpus: int | None
    kv_dtype: str | None
    engine: EngineArg = None
    engine_overrides: dict[str, object] = field(default_factory=dict)
    confidence: float | None = None
    min_headroom: float | str | None = None
    spare_replicas: int = 0  # paid for beyond the replicas sized (roofline.serving.plan.procurement)
    peak_factor: float = 1.0  # qps is the peak rate; tokens are served at qps / peak_factor on average


def check_request(qps: float, p: int, o: int, ttft: float, tpot: float, max_gpus: int | None) -> None:
    def whole(x: object) -> bool:
        if isinstance(x, bool | np.bool_):
            return False
        return isinstance(x, int | np.integer) or (isinstance(x, float | np.floating) and float(x).is_integer())

    def real(x: object) -> bool:
        return isinstance(x, int | float | np.number) and not isinstance(x, bool | np.bool_) and math.isfinite(x)

    checks = [
        (real(qps) and 0 < qps <= MAX_QPS, f"qps must be > 0 and <= {MAX_QPS:g} requests/s, got {qps!r}"),
        (whole(p) and 1 <= p <= MAX_SEQUENCE_TOKENS, f"prompt_len must be a whole number of tokens >= 1, got {p!r}"),
        (
            whole(o) and 2 <= o <= MAX_SEQUENCE_TOKENS,
            f"output_len must be a whole number >= 2 tokens for a TPOT to exist, got {o!r}",
        ),
        (real(ttft) and ttft > 0, f"the TTFT SLO must be > 0 s, got {ttft!r}"),
        (real(tpot) and tpot > 0, f"the TPOT SLO must be > 0 s, got {tpot!r}"),
        (max_gpus is None or (whole(max_gpus) and max_gpus >= 1), f"max_gpus must be a count >= 1, got {max_gpus!r}"),
        (
            whole(p) and whole(o) and p + o <= MAX_SEQUENCE_TOKENS,
            f"prompt_len + output_len must be <= {MAX_SEQUENCE_TOKENS:,} tokens (roofline.boundary.limits)",
        ),
    ]
    for ok, msg in checks:
        if not ok:
            raise ScenarioError(msg)
