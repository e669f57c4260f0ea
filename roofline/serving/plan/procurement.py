"""What a buyer pays: spare replicas, peak-to-average traffic, ownership (capex, hosting, PUE) and energy.

One :class:`Procurement` value carries the buyer's terms; the planner, ``plan --simulate`` and the report price
every candidate by the same rule, on every device:

- **Peak traffic.** A deployment is sized so that the SLOs hold at the peak rate ``qps × peak_factor``; tokens,
  energy and cost per token are at the average rate ``qps`` (what is served over a billing period).
- **Spare replicas.** ``spare_replicas`` whole replicas beyond the fewest that meet the SLOs (N + k
  redundancy): paid for, idle (hot standby), never counted as capacity.
- **Ownership.** With a purchase price per GPU (``capex_usd_per_gpu``), a GPU-hour costs
  capex / (``amortisation_years`` × 8,766 h) + ``hosting_usd_per_kw_month`` × TDP (kW) / 730.5 h; that price
  replaces the rental price of that device everywhere (ranking, $/hour, $/M tokens).
- **Energy** (:func:`board_power_w`): a GPU draws P = P_idle + (P_busy − P_idle) × u, u the fraction of time its
  engine runs forward steps, simulated at the average rate (a second run at qps / replicas when peak_factor > 1;
  under continuous batching u is close to 1 whenever a request is in flight, so the TDP rule is an upper bound
  and a calibration's measured board power is what makes the figure accurate). P_busy and P_idle are the board
  power a calibration recorded (NVML, ``CalibrationProfile.power``) where it exists, else P_busy = TDP (the
  datasheet's upper bound) and
  P_idle = :data:`IDLE_POWER_FRACTION` × TDP. The facility draws PUE × the IT power when the buyer owns the GPUs
  (``pue``); rented capacity's electricity is the renter's unless an electricity price is given, then board
  power only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from roofline.errors import ScenarioError

if TYPE_CHECKING:
    from roofline.profile import BoardPower
    from roofline.serving.plan.result import Candidate
    from roofline.serving.sim.result import SimulationResult
    from roofline.serving.workload.stream import Workload
    from roofline.specs.hardware import HardwareSpec

#: Default useful life of a bought GPU server (years): Amazon's servers and networking equipment from
#: 1 January 2025 (Amazon.com 10-K for 2024, filed 2025-02-07, Note 1: "changing the useful lives of a subset of
#: our servers and networking equipment ... from six years to five years").
AMORTISATION_YEARS = 5.0
#: Default power usage effectiveness (facility / IT power): the industry average of the Uptime Institute Global
#: Data Center Survey 2023 (Uptime Intelligence update 221, 23 Nov 2023: "In 2023, industry average PUE stood at
#: 1.58").
PUE = 1.58
#: Idle board power with an engine loaded, as a fraction of TDP, where no calibration recorded it: 80.3 W idle on
#: an H200 (700 W TDP) with a vLLM engine's CUDA context, nvidia-smi (api.serialalice.pt/alice-benchmark, June 2026:
#: "80.3 W idle vs 592.8 W at load") = 0.115. Measured on one device, borrowed for every device by this one rule.
IDLE_POWER_FRACTION = 80.3 / 700.0
#: Hours per (Julian) year and per month, for amortisation and monthly hosting fees.
HOURS_PER_YEAR = 8766.0
HOURS_PER_MONTH = HOURS_PER_YEAR / 12.0


@dataclass(frozen=True)
class Procurement:
    """A buyer's terms (see the module docstring); the defaults price rented GPUs at average = peak load."""

    spare_replicas: int = 0
    peak_factor: float = 1.0
    capex_usd_per_gpu: Mapping[str, float] = field(default_factory=dict)
    amortisation_years: float = AMORTISATION_YEARS
    hosting_usd_per_kw_month: float = 0.0
    pue: float = PUE

    def __post_init__(self) -> None:
        check_procurement(self)
        if self.capex_usd_per_gpu:  # aliases resolved once, so every lookup by slug finds the price
            object.__setattr__(self, "capex_usd_per_gpu", resolve_capex(self.capex_usd_per_gpu))

    @property
    def owns(self) -> bool:
        """Whether any device is bought (priced by capex) rather than rented."""
        return bool(self.capex_usd_per_gpu)

    def owned_usd_per_gpu_hour(self, hw: HardwareSpec) -> float | None:
        """capex / (years × 8,766 h) + hosting × TDP kW / 730.5 h for ``hw``; None when it is not bought."""
        capex = self.capex_usd_per_gpu.get(hw.name)
        if capex is None:
            return None
        hosting = self.hosting_usd_per_kw_month * (hw.tdp_watts or 0.0) / 1000.0 / HOURS_PER_MONTH
        return capex / (self.amortisation_years * HOURS_PER_YEAR) + hosting

    def describe(self) -> str:
        """The terms in one line (for the report and ``plan``), '' for the defaults."""
        parts = []
        if self.peak_factor != 1.0:
            parts.append(f"sized for peak traffic {self.peak_factor:g}× the average rate")
        if self.spare_replicas:
            parts.append(
                f"{self.spare_replicas} spare replica{'s' * (self.spare_replicas > 1)} (N+{self.spare_replicas})"
            )
        if self.owns:
            owned = ", ".join(f"{k} ${v:,.0f}" for k, v in sorted(self.capex_usd_per_gpu.items()))
            hosting = f", hosting ${self.hosting_usd_per_kw_month:g}/kW-month" if self.hosting_usd_per_kw_month else ""
            parts.append(f"bought ({owned} per GPU) over {self.amortisation_years:g} years{hosting}, PUE {self.pue:g}")
        return "; ".join(parts)


def check_procurement(p: Procurement) -> None:
    """Each term in range, else a ScenarioError naming it and its unit."""
    s = p.spare_replicas
    if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= 64:
        raise ScenarioError(f"spare_replicas must be a whole number of replicas from 0 to 64 (N+1 is 1), got {s!r}")
    _real(p.peak_factor, "peak_factor", 1.0, 100.0, "peak-to-average traffic ratio, e.g. 1.5")
    _real(p.amortisation_years, "amortisation_years", 0.25, 30.0, "years a bought GPU is written off over, e.g. 5")
    _real(p.hosting_usd_per_kw_month, "hosting_usd_per_kw_month", 0.0, 1e5, "USD per kW of IT load per month")
    _real(p.pue, "pue", 1.0, 5.0, "facility power / IT power, e.g. 1.58")
    if not isinstance(p.capex_usd_per_gpu, Mapping):
        raise ScenarioError(
            f"capex_usd_per_gpu must map hardware names to USD per GPU, e.g. {{'h100-sxm': 30000}}, "
            f"got {type(p.capex_usd_per_gpu).__name__}"
        )
    for k, v in p.capex_usd_per_gpu.items():
        _real(v, f"capex of {k}", 1.0, 1e8, "purchase price in USD per GPU, e.g. 30000")


def _real(x: object, name: str, lo: float, hi: float, what: str) -> None:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or not lo <= x <= hi:
        raise ScenarioError(f"{name} must be a number from {lo:g} to {hi:g} ({what}), got {x!r}")


def owned_prices(
    procurement: Procurement | None, hardware: list[HardwareSpec], prices: Mapping[str, float] | None
) -> dict[str, float]:
    """The user's rental ``prices`` with each bought device's owned GPU-hour in its place (names resolved).

    A device given both a rental price and a purchase price is refused: say which one the buyer pays."""
    from roofline.specs.library import hardware as load_hardware

    out = dict(prices or {})
    if procurement is None or not procurement.owns:
        return out
    known = {h.name: h for h in hardware}
    for name in procurement.capex_usd_per_gpu:
        hw = known.get(name) or load_hardware(name)
        if hw.name in out:
            raise ScenarioError(
                f"{hw.name} has both a rental price (--price) and a purchase price (--capex): give one of them"
            )
        rate = procurement.owned_usd_per_gpu_hour(hw)
        if rate is not None:
            out[hw.name] = rate
    return out


def resolve_capex(capex: Mapping[str, float] | None) -> dict[str, float]:
    """``capex`` with every hardware name resolved to its slug (unknown names refused, with a suggestion)."""
    from roofline.specs.library import hardware as load_hardware

    if capex is None:
        return {}
    if not isinstance(capex, Mapping):
        raise ScenarioError(f"capex must map hardware names to USD per GPU, got {type(capex).__name__}")
    return {load_hardware(k).name: v for k, v in capex.items()}


def board_power_w(tdp_w: float, busy_fraction: float, measured: BoardPower | None = None) -> float:
    """Mean board power (W) of a GPU busy ``busy_fraction`` of the time: P_idle + (P_busy − P_idle) × u, with the
    measured P_busy / P_idle where a calibration recorded them, else TDP and :data:`IDLE_POWER_FRACTION` × TDP."""
    busy = measured.busy_watts if measured is not None else tdp_w
    idle = measured.idle_watts if measured is not None else IDLE_POWER_FRACTION * tdp_w
    u = min(max(busy_fraction, 0.0), 1.0) if math.isfinite(busy_fraction) else 1.0
    return idle + (busy - idle) * u


@dataclass(frozen=True)
class EnergyInputs:
    """What energy is priced from: TDP (W), the engine's busy fraction at the average load, the measured board power
    (None: the TDP rule), the electricity price (USD/kWh; None: energy not priced) and whether this device is bought
    (facility power = PUE × IT power)."""

    tdp_w: float | None
    busy_fraction: float = 1.0
    measured: BoardPower | None = None
    usd_per_kwh: float | None = None
    owned: bool = False


def energy_fields(
    serving_gpus: int, idle_gpus: int, tok_s: float, e: EnergyInputs, p: Procurement
) -> dict[str, float | None]:
    """kWh per M output tokens (board power of every paid GPU: ``serving_gpus`` busy ``e.busy_fraction`` of the
    time, ``idle_gpus`` — spares and the unused GPUs of whole instances — at idle) and the electricity $/hour
    (× PUE when owned), at the average rate ``tok_s`` output tokens/s."""
    from roofline.units import usd_per_million_tokens

    if e.tdp_w is None:
        return {"kwh_per_million_output_tokens": None, "energy_usd_per_hour": None, "mean_board_power_w": None}
    busy_w = board_power_w(e.tdp_w, e.busy_fraction, e.measured)
    kw = (serving_gpus * busy_w + idle_gpus * board_power_w(e.tdp_w, 0.0, e.measured)) / 1000.0
    facility_kw = kw * (p.pue if e.owned else 1.0)
    return {
        # kWh per M tokens has the form of $ per M tokens: (kW over an hour of service) / (tokens per hour) × 1e6
        "kwh_per_million_output_tokens": usd_per_million_tokens(kw, tok_s),
        "energy_usd_per_hour": None if e.usd_per_kwh is None else facility_kw * e.usd_per_kwh,
        "mean_board_power_w": busy_w,
    }


def procurement_flags(p: Procurement) -> list[tuple[str, str]]:
    """The CLI flags that give the buyer's terms ``p`` (none for the defaults)."""
    d = Procurement()
    opts: list[tuple[str, str]] = []
    if p.spare_replicas:
        opts.append(("--spare-replicas", str(p.spare_replicas)))
    if p.peak_factor != d.peak_factor:
        opts.append(("--peak-factor", f"{p.peak_factor:g}"))
    opts += [("--capex", f"{k}={v:g}") for k, v in sorted(p.capex_usd_per_gpu.items())]
    for flag, value, default in (
        ("--amortisation-years", p.amortisation_years, d.amortisation_years),
        ("--hosting", p.hosting_usd_per_kw_month, d.hosting_usd_per_kw_month),
        ("--pue", p.pue, d.pue),
    ):
        if value != default:
            opts.append((flag, f"{value:g}"))
    return opts


def cost_fields(c: Candidate, replicas: int, tok_s: float, e: EnergyInputs, terms: Procurement) -> dict[str, Any]:
    """A sized deployment's GPUs, rented GPUs, $/hour of the rented (or owned) GPUs, $/M output tokens incl. energy,
    kWh/M output tokens and energy $/hour: ``replicas`` replicas plus ``terms.spare_replicas`` spares serving
    ``tok_s`` output tokens/s on average (:func:`energy_fields`)."""
    from roofline.units import usd_per_million_tokens

    paid = replicas + terms.spare_replicas
    gpus, rented = paid * c.gpus_per_replica, c.rented_gpus(paid)
    usd_h = None if c.usd_per_gpu_hour is None else rented * c.usd_per_gpu_hour
    serving = replicas * c.gpus_per_replica
    energy = energy_fields(serving, rented - serving, tok_s, e, terms)
    total_h = None if usd_h is None else usd_h + (energy["energy_usd_per_hour"] or 0.0)
    return {
        "gpus": gpus,
        "rented_gpus": rented,
        "usd_per_hour": usd_h,
        "usd_per_million_output_tokens": None if total_h is None else usd_per_million_tokens(total_h, tok_s),
        "spare_replicas": terms.spare_replicas,
        "peak_factor": terms.peak_factor,
        "busy_fraction": e.busy_fraction,
        **energy,
    }


def average_busy(
    run: Callable[..., SimulationResult], wl: Workload, peak_run: SimulationResult, rate: float, peak_factor: float
) -> float:
    """Fraction of time a replica runs steps at the average per-replica ``rate``: the sizing run's own at
    peak_factor 1, else one more run of ``wl`` at that rate."""
    if peak_factor == 1.0:
        return float(peak_run.summary["busy_fraction"])
    return float(run(workload=replace(wl, qps=rate)).summary["busy_fraction"])


def priced(
    run: Callable[..., SimulationResult],
    wl: Workload,
    s: SimulationResult,
    c: Candidate,
    replicas: int,
    tok_s: float,
    e: EnergyInputs,
    terms: Procurement,
) -> dict[str, Any]:
    """The cost fields of ``replicas`` replicas of ``c`` (:func:`cost_fields`) with
    the busy fraction at the average rate (:func:`average_busy`; ``wl.qps`` is
    the peak) and PUE where ``c``'s hardware is bought."""
    busy = average_busy(run, wl, s, float(wl.qps or 0.0) / terms.peak_factor / replicas, terms.peak_factor)
    owned = c.hardware in terms.capex_usd_per_gpu
    return cost_fields(c, replicas, tok_s, replace(e, busy_fraction=busy, owned=owned), terms)
