"""The path a collective over ``group`` GPUs takes on one device type, and its bandwidth.

A collective runs at its slowest hop (a ring is only as fast as its slowest link):

* ``switch`` / ``torus`` fabric, group ≤ domain: every GPU sends at the per-GPU fabric bandwidth.
* ``full_mesh`` (xGMI), group ≤ domain: each peer pair has its own link of bandwidth b, so a GPU
  reaches its group − 1 peers at (group − 1)·b in total; a reduce-scatter / all-gather spreads
  its (p − 1)/p·S wire bytes evenly over them. MI300X tp 2: one 64 GB/s link, an all-reduce of
  S bytes takes ≥ S / 64 GB/s.
* ``bridge`` (an NVLink bridge joins a pair): a group of 2 uses the bridge; a larger group's ring
  has a PCIe hop (``HardwareSpec.fallback``), so it runs at the PCIe bandwidth. H100 PCIe tp 4:
  2·(3/4)·S / 64 GB/s at least.
* no fabric: the PCIe fallback for groups up to ``host_size``.
* a group larger than the domain (or the host) crosses to the scale-out network: priced at the
  per-GPU NIC bandwidth ``scale_out_bandwidth_per_direction`` and flagged.

``CommPath.slow`` says a collective over this path leaves the fast fabric (PCIe or network);
the planner and predictions show its ``note``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline.specs.hardware import HardwareSpec, LinkKind

# assumed: one 400 Gb/s NIC per GPU (50 GB/s per direction) when a spec gives no scale-out figure;
# moves the time of every collective whose group is larger than the scale-up domain.
ASSUMED_SCALE_OUT_BYTES_PER_S = 50e9
# assumed: PCIe Gen4 x16 (32 GB/s per direction, PCI-SIG Gen4 16 GT/s x16) when a spec gives no
# fallback path; moves collectives of devices without a fabric and of bridged pairs beyond 2 GPUs.
ASSUMED_PCIE_BYTES_PER_S = 32e9


@dataclass(frozen=True)
class CommPath:
    """Effective per-GPU per-direction bandwidth (bytes/s) of a collective over ``group`` GPUs.

    ``link`` is the kind of the slowest hop (it sets the per-hop latency); ``scale_up`` is True
    when the whole group sits on the fast fabric (custom all-reduce kernels need that);
    ``full_mesh`` marks per-peer links; ``slow`` and ``note`` flag a PCIe or network hop.
    """

    group: int
    link: LinkKind
    bandwidth_bytes_per_s: float
    scale_up: bool
    full_mesh: bool = False
    slow: bool = False
    note: str = ""
    flag: str = ""
    inner_link: LinkKind | None = None
    nodes: int = 1

    def hop_links(self, hops: np.ndarray) -> list[tuple[LinkKind, np.ndarray]]:
        """Split ``hops`` latency hops by link kind: across ``nodes`` domains a ring spends
        (nodes − 1)/(p − 1) of its hops on the network and the rest inside a domain, as NCCL's
        tuning model charges them ((nsteps − nInterSteps)·intraLat + nInterSteps·interLat)."""
        if self.nodes <= 1 or self.inner_link is None or self.group <= 1:
            return [(self.link, hops)]
        inter = hops * (self.nodes - 1) / (self.group - 1)
        return [(self.link, inter), (self.inner_link, hops - inter)]


def _gbs(x: float) -> str:
    return f"{x / 1e9:g} GB/s per direction"


def _fallback(hw: HardwareSpec) -> tuple[LinkKind, float, str]:
    if hw.fallback is not None:
        f = hw.fallback
        return f.link, f.bandwidth_per_direction_bytes_per_s, f.kind
    return "pcie", ASSUMED_PCIE_BYTES_PER_S, "PCIe (assumed Gen4 x16)"


def _scale_out(
    hw: HardwareSpec, group: int, domain: int, what: str, inner_bytes_per_s: float, inner: LinkKind
) -> CommPath:
    """A ring over several hosts: its slowest hop is the NIC or, if slower, the path inside a host."""
    nic = hw.scale_out_bandwidth_per_direction_bytes_per_s or ASSUMED_SCALE_OUT_BYTES_PER_S
    bw = min(nic, inner_bytes_per_s)
    src = "" if hw.scale_out_bandwidth_per_direction_bytes_per_s else " (assumed 400 Gb/s NIC)"
    note = f"{group} GPUs cross the {domain}-GPU {what}: collectives priced at the scale-out network, {_gbs(bw)}{src}"
    nodes = -(-group // domain)
    return CommPath(
        group, "network", bw, scale_up=False, slow=True, note=note, flag="scale-out", inner_link=inner, nodes=nodes
    )


def comm_path(hw: HardwareSpec, group: int) -> CommPath:
    """The path and effective bandwidth of a collective over ``group`` GPUs of ``hw`` (module doc)."""
    ic = hw.interconnect
    if group <= 1:
        bw = ic.bandwidth_per_direction_bytes_per_s if ic else _fallback(hw)[1]
        return CommPath(group, ic.link if ic else "pcie", bw, scale_up=True)
    if ic is None:
        link, bw, kind = _fallback(hw)
        if group > hw.host_size:
            return _scale_out(hw, group, hw.host_size, "host", bw, link)
        note = f"no scale-up fabric: collectives over {kind}, {_gbs(bw)}"
        return CommPath(group, link, bw, scale_up=True, slow=True, note=note, flag="PCIe only")
    if ic.topology == "bridge" and group > ic.domain_size:
        link, bw, kind = _fallback(hw)
        if group > hw.host_size:
            return _scale_out(hw, group, hw.host_size, "host", bw, link)
        note = f"the NVLink bridge joins only a pair: a {group}-GPU ring has a {kind} hop, {_gbs(bw)}"
        bw = min(bw, ic.bandwidth_per_direction_bytes_per_s)
        return CommPath(group, link, bw, scale_up=False, slow=True, note=note, flag="PCIe hop")
    if group > ic.domain_size:
        bw_in = ic.bandwidth_per_direction_bytes_per_s
        return _scale_out(hw, group, ic.domain_size, f"{ic.link} domain", bw_in, ic.link)
    if ic.topology == "full_mesh":
        assert ic.per_peer_bandwidth_per_direction_bytes_per_s is not None
        per_peer = ic.per_peer_bandwidth_per_direction_bytes_per_s
        bw = min((group - 1) * per_peer, ic.bandwidth_per_direction_bytes_per_s)
        return CommPath(group, ic.link, bw, scale_up=True, full_mesh=True)
    return CommPath(group, ic.link, ic.bandwidth_per_direction_bytes_per_s, scale_up=True)


def slow_link_notes(hw: HardwareSpec, groups: dict[str, int]) -> list[tuple[str, str]]:
    """(short flag, note) for the named collective groups (e.g. {"tp": 4, "ep": 8}) whose path
    leaves the fast fabric (a PCIe hop or the scale-out network)."""
    notes = []
    for name, g in groups.items():
        path = comm_path(hw, g)
        if path.slow:
            notes.append((f"{name} {path.flag}", f"{name}={g}: {path.note}"))
    return notes


def parallel_groups(tp: int, pp: int, ep: int) -> dict[str, int]:
    """The collective groups of a replica: tp all-reduces, ep all-to-alls, and the tp·pp span of the
    pipeline hand-offs (only those larger than one GPU)."""
    groups = {"tp": tp, "ep": ep, "pp span": tp * pp if pp > 1 else 1}
    return {k: v for k, v in groups.items() if v > 1}
