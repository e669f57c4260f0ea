"""DisaggConfig: prefill/decode disaggregation as a serving option, and its CLI grammar.

Prefill and decode run on separate pools of engine instances; each request's prompt KV cache moves
from its prefill instance to its decode instance over the link between them.

CLI grammar (``--disagg``)::

    prefill=HW:tpTxN,decode=HW:tpTxN[,link=BANDWIDTH][,latency=DURATION][,first=prefill|decode]

``HW`` a hardware name; ``tpTxN``: N instances of T GPUs each (``tp4x2`` = two tp-4 instances);
``tpTepExN`` also spreads the experts of a MoE model over E GPUs (``tp8ep8x1``); ``tpTdpDxN`` makes each instance D
attention data-parallel ranks of T GPUs with the experts wide-EP over all D·T (``tp1dp32x1``: one 32-GPU instance).
``link``: per-GPU bandwidth of the path between the pools, per direction (default: the hardware's
``scale_out_bandwidth_per_direction``, else 50 GB/s — one 400 Gb/s ConnectX-7 port per GPU, NVIDIA
DGX H100 datasheet "8x single-port NVIDIA ConnectX-7 400Gb/s InfiniBand/Ethernet").
``latency``: fixed seconds per transfer (default 0.1 ms, ASSUMED: RDMA registration and block-descriptor
exchange per request; moves TTFT or the first ITL by that much).
``first``: which side emits the first token (default ``prefill``): ``prefill`` puts the KV transfer into
the first inter-token gap, ``decode`` into TTFT.

e.g. ``prefill=h100-sxm:tp4x2,decode=h100-sxm:tp8x1,link=50GB/s,first=decode``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from roofline.boundary.limits import (
    MAX_LINK_BYTES_PER_S,
    MAX_OVERHEAD_S,
    MAX_PARALLEL,
    MAX_POOL_INSTANCES,
    MIN_LINK_BYTES_PER_S,
)
from roofline.errors import ScenarioError
from roofline.specs.moe_layout import wide_ep
from roofline.units import UnitError, parse_duration, parse_quantity

DEFAULT_LINK_BYTES_PER_S = 50e9  # 400 Gb/s per GPU: NVIDIA DGX H100 datasheet, 8x ConnectX-7 400Gb/s
DEFAULT_LATENCY_S = 1e-4  # ASSUMED per-transfer setup (see the module docstring)
GRAMMAR = (
    "prefill=HW:tpT[dpD][epE]xN,decode=HW:tpT[dpD][epE]xN[,link=BANDWIDTH][,latency=DURATION][,first=prefill|decode], "
    "e.g. prefill=h100-sxm:tp4x2,decode=h100-sxm:tp8x1,link=50GB/s"
)
_POOL = re.compile(r"^\s*([A-Za-z0-9.\-]+)\s*:\s*tp(\d+)(?:dp(\d+))?(?:ep(\d+))?(?:x(\d+))?\s*$")


@dataclass(frozen=True)
class Pool:
    """``count`` engine instances of ``tp`` × ``dp`` GPUs of ``hardware`` (experts over ``ep`` of them; ``dp``
    attention data-parallel ranks, ep = dp × tp then)."""

    hardware: str
    tp: int = 1
    count: int = 1
    ep: int = 1
    dp: int = 1

    @property
    def gpus(self) -> int:
        """GPUs of the whole pool."""
        return self.tp * self.dp * self.count

    def label(self) -> str:
        """``h100-sxm:tp4x2`` (``tp8ep8x2`` with expert parallelism, ``tp1dp8ep8x2`` with attention DP)."""
        dp = f"dp{self.dp}" if self.dp > 1 else ""
        ep = f"ep{self.ep}" if self.ep > 1 else ""
        return f"{self.hardware}:tp{self.tp}{dp}{ep}x{self.count}"


@dataclass(frozen=True)
class DisaggConfig:
    """Prefill pool, decode pool, the link between them and the side that emits the first token."""

    prefill: Pool
    decode: Pool
    link_bytes_per_s: float | None = None
    latency_s: float = DEFAULT_LATENCY_S
    first_token: Literal["prefill", "decode"] = "prefill"

    def __post_init__(self) -> None:
        for side, p in (("prefill", self.prefill), ("decode", self.decode)):
            if p.tp < 1 or p.count < 1 or p.ep < 1 or p.dp < 1:
                got = f"tp {p.tp}, dp {p.dp}, ep {p.ep}, {p.count} instances"
                raise ScenarioError(
                    f"--disagg {side}: tp, dp, ep and the instance count must be >= 1, got {got}. {GRAMMAR}"
                )
            if p.count > MAX_POOL_INSTANCES:
                raise ScenarioError(
                    f"--disagg {side}: {p.count:,} instances is more than {MAX_POOL_INSTANCES:,} per pool "
                    f"(roofline.boundary.limits MAX_POOL_INSTANCES); write tpTxN with N <= {MAX_POOL_INSTANCES:,}"
                )
            if max(p.tp * p.dp, p.ep) > MAX_PARALLEL:
                raise ScenarioError(
                    f"--disagg {side}: tp{p.tp} ep{p.ep} is more than {MAX_PARALLEL:,} GPUs per instance "
                    f"(roofline.boundary.limits MAX_PARALLEL); write tpT with T <= {MAX_PARALLEL:,}"
                )
        link = self.link_bytes_per_s
        if link is not None and not MIN_LINK_BYTES_PER_S <= link <= MAX_LINK_BYTES_PER_S:
            raise ScenarioError(
                f"--disagg link must be a bandwidth from {MIN_LINK_BYTES_PER_S / 1e6:g} MB/s to "
                f"{MAX_LINK_BYTES_PER_S / 1e12:g} TB/s per GPU (roofline.boundary.limits MIN_LINK_BYTES_PER_S, "
                f"MAX_LINK_BYTES_PER_S), got {link:g} B/s; e.g. link=50GB/s. {GRAMMAR}"
            )
        if not 0 <= self.latency_s <= MAX_OVERHEAD_S:
            raise ScenarioError(
                f"--disagg latency must be from 0 to {MAX_OVERHEAD_S:g} s (roofline.boundary.limits MAX_OVERHEAD_S), "
                f"got {self.latency_s:g} s; e.g. latency=0.1ms. {GRAMMAR}"
            )
        if self.first_token not in ("prefill", "decode"):
            raise ScenarioError(f"--disagg first must be prefill or decode, got {self.first_token!r}. {GRAMMAR}")

    @property
    def ratio(self) -> str:
        """P:D as instance counts, e.g. ``2P:1D``."""
        return f"{self.prefill.count}P:{self.decode.count}D"

    def label(self) -> str:
        """One-line description."""
        pools = f"prefill {self.prefill.label()}, decode {self.decode.label()}"
        return f"{pools} ({self.ratio}), first token {self.first_token}"

    @classmethod
    def parse(cls, text: str, option: str = "--disagg") -> DisaggConfig:
        """Read the grammar of the module docstring."""
        kw: dict[str, str] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, eq, val = part.partition("=")
            key = key.strip().lower()
            if not eq or key not in ("prefill", "decode", "link", "latency", "first"):
                raise ScenarioError(f"{option}: cannot read {part!r}. {GRAMMAR}")
            kw[key] = val.strip()
        pools = {}
        for side in ("prefill", "decode"):
            if side not in kw:
                raise ScenarioError(f"{option}: the {side} pool is missing. {GRAMMAR}")
            m = _POOL.match(kw[side])
            if not m:
                raise ScenarioError(f"{option}: cannot read the {side} pool {kw[side]!r}; write HW:tpTxN. {GRAMMAR}")
            if any(len(g) > 18 for g in m.groups()[1:] if g):  # int() of a 5,000-digit count is itself slow
                raise ScenarioError(
                    f"{option}: the {side} pool {kw[side][:40]!r}… has a count of more than 18 digits; write "
                    f"tpTxN with N <= {MAX_POOL_INSTANCES:,}. {GRAMMAR}"
                )
            hw, tp, dp, ep, n = m.groups()
            wide = wide_ep(int(tp), int(dp or 1))  # attention DP: the experts over all dp × tp GPUs
            pools[side] = Pool(hw.lower(), int(tp), int(n or 1), int(ep) if ep else wide, int(dp or 1))
        try:
            link = parse_quantity(kw["link"], "bytes_per_s") if "link" in kw else None
            lat = parse_duration(kw["latency"]) if "latency" in kw else DEFAULT_LATENCY_S
        except UnitError as e:
            raise ScenarioError(f"{option}: {e}. {GRAMMAR}") from e
        first = kw.get("first", "prefill").lower()
        return cls(pools["prefill"], pools["decode"], link, lat, first)  # type: ignore[arg-type]
