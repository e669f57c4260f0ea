"""The buyer's terms as CLI options (``plan`` and ``report``): spare replicas, peak traffic, ownership.

Parsed into one :class:`roofline.serving.plan.procurement.Procurement`; the terms and their cited defaults are
documented there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, TypedDict

import typer

from roofline.cli.options import OptionError, parse_float_opt

if TYPE_CHECKING:
    from roofline.serving.plan.procurement import Procurement

SpareOpt = Annotated[
    str | None,
    typer.Option("--spare-replicas", metavar="N", help="Whole replicas paid for beyond those the SLOs need (N+1 = 1)."),
]
PeakOpt = Annotated[
    str | None,
    typer.Option(
        "--peak-factor",
        metavar="X",
        help="Peak-to-average traffic: the SLOs must hold at X × the rate; cost per token at the rate (default 1).",
    ),
]
CapexOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--capex",
        metavar="NAME=USD",
        help="Buy instead of rent: purchase price per GPU, e.g. h100-sxm=30000 (amortised; replaces its $/GPU-hour).",
    ),
]
YearsOpt = Annotated[
    str | None,
    typer.Option("--amortisation-years", metavar="Y", help="Years a bought GPU is written off over (default 5)."),
]
HostingOpt = Annotated[
    str | None,
    typer.Option("--hosting", metavar="USD", help="Hosting of bought GPUs, USD per kW of TDP per month (default 0)."),
]
ElectricityPriceOpt = Annotated[
    str | None,
    typer.Option(
        "--electricity-price",
        metavar="USD",
        help="USD per kWh; adds the GPUs' board power (× PUE when bought) to the cost, e.g. 0.12.",
    ),
]
PueOpt = Annotated[
    str | None,
    typer.Option("--pue", metavar="X", help="Facility power / IT power of bought GPUs (default 1.58, Uptime 2023)."),
]


def parse_procurement(
    spare: str | None,
    peak: str | None,
    capex: list[str] | None,
    years: str | None,
    hosting: str | None,
    pue: str | None,
) -> Procurement:
    """The options as a Procurement (defaults where not given); each value checked, errors naming the flag."""
    from roofline.errors import ScenarioError
    from roofline.serving.plan.procurement import AMORTISATION_YEARS, PUE, Procurement

    n = 0 if spare is None else parse_float_opt(spare, "--spare-replicas")
    if not float(n).is_integer():
        raise OptionError(f"--spare-replicas: expected a whole number of replicas such as 1, got {spare!r}")
    try:
        return Procurement(
            spare_replicas=int(n),
            peak_factor=1.0 if peak is None else parse_float_opt(peak, "--peak-factor"),
            capex_usd_per_gpu=_capex(capex or []),
            amortisation_years=AMORTISATION_YEARS if years is None else parse_float_opt(years, "--amortisation-years"),
            hosting_usd_per_kw_month=0.0 if hosting is None else parse_float_opt(hosting, "--hosting"),
            pue=PUE if pue is None else parse_float_opt(pue, "--pue"),
        )
    except ScenarioError as exc:
        flags = {
            "spare_replicas": "--spare-replicas",
            "peak_factor": "--peak-factor",
            "amortisation_years": "--amortisation-years",
            "hosting_usd_per_kw_month": "--hosting",
            "pue": "--pue",
            "capex": "--capex",
        }
        msg = str(exc)
        for field, flag in flags.items():
            if msg.startswith(field):
                msg = flag + msg[len(field) :]
        raise OptionError(msg) from None


def _capex(values: list[str]) -> dict[str, float]:
    """NAME=USD items (also comma-separated) as {name: USD per GPU}."""
    out: dict[str, float] = {}
    for chunk in values:
        for item in filter(None, (x.strip() for x in chunk.split(","))):
            name, sep, usd = item.partition("=")
            if not sep or not name.strip():
                raise OptionError(f"--capex: expected NAME=USD_PER_GPU such as h100-sxm=30000, got {item!r}")
            out[name.strip()] = parse_float_opt(usd.strip().lstrip("$"), f"--capex {name.strip()}")
    return out


class BuyerOptions(TypedDict):
    """The buyer's keyword arguments of :func:`roofline.report.build`."""

    usd_per_kwh: float | None
    procurement: Procurement


def buyer_options(
    electricity_price: str | None,
    spare: str | None,
    peak: str | None,
    capex: list[str] | None,
    years: str | None,
    hosting: str | None,
    pue: str | None,
) -> BuyerOptions:
    """``usd_per_kwh`` and ``procurement`` keyword arguments of the report and plan APIs from the options."""
    kwh = None if electricity_price is None else parse_float_opt(electricity_price, "--electricity-price")
    return BuyerOptions(usd_per_kwh=kwh, procurement=parse_procurement(spare, peak, capex, years, hosting, pue))
