"""Typed hardware specs: datasheet values only, in SI units, with their sources.

Peaks are *dense* (no 2:4 sparsity) datasheet figures. No derating lives here: every
efficiency is a named, fitted parameter of a :class:`~roofline.profile.CalibrationProfile`.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import Field, model_validator

from roofline.specs._base import Bytes, BytesPerS, FlopsPerS, Frozen, Seconds, Source, Watts

ComputeDtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"]
COMPUTE_DTYPES: tuple[ComputeDtype, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")


class Memory(Frozen):
    """Device memory: datasheet capacity and bandwidth, and the capacity software can allocate.

    ``capacity_bytes`` is the datasheet figure (kept for display). ``visible_capacity_bytes`` is
    what the device reports to software (``nvidia-smi`` memory.total): GDDR parts with ECC on lose
    1/16 of it (L4: 24,576 → 23,034 MiB), HBM parts a firmware reservation (H100: 81,559 of
    81,920 MiB). Every memory decision uses :attr:`usable_capacity_bytes`.
    """

    capacity_bytes: Bytes = Field(alias="capacity", gt=0)
    bandwidth_bytes_per_s: BytesPerS = Field(alias="bandwidth", gt=0)
    type: str | None = None
    visible_capacity_bytes: Bytes | None = Field(
        default=None, alias="visible_capacity", gt=0, description="capacity the device reports to software"
    )

    @model_validator(mode="after")
    def _visible_le_capacity(self) -> Memory:
        if self.visible_capacity_bytes is not None and self.visible_capacity_bytes > self.capacity_bytes:
            raise ValueError(
                f"visible_capacity ({self.visible_capacity_bytes:.0f} B) exceeds capacity "
                f"({self.capacity_bytes:.0f} B); visible memory is what software sees after ECC and "
                "firmware reservations, never more"
            )
        return self

    @property
    def usable_capacity_bytes(self) -> float:
        """Capacity for memory decisions: the visible capacity when known, else the datasheet one."""
        return self.visible_capacity_bytes if self.visible_capacity_bytes is not None else self.capacity_bytes


class PeakDense(Frozen):
    """Dense peak throughput per compute format (FLOP/s; OP/s for int8). Absent = unsupported."""

    fp32: FlopsPerS | None = Field(default=None, gt=0)
    tf32: FlopsPerS | None = Field(default=None, gt=0)
    bf16: FlopsPerS | None = Field(default=None, gt=0)
    fp16: FlopsPerS | None = Field(default=None, gt=0)
    fp8: FlopsPerS | None = Field(default=None, gt=0)
    int8: FlopsPerS | None = Field(default=None, gt=0)
    fp4: FlopsPerS | None = Field(default=None, gt=0)

    def get(self, dtype: ComputeDtype) -> float | None:
        """Peak FLOP/s for ``dtype`` or None when the device does not support it."""
        value: float | None = getattr(self, dtype)
        return value

    def supported(self) -> list[ComputeDtype]:
        """Formats with a published peak, in COMPUTE_DTYPES order."""
        return [d for d in COMPUTE_DTYPES if self.get(d) is not None]


LinkKind = Literal["nvlink", "xgmi", "pcie", "ici", "ethernet", "network"]
Topology = Literal["switch", "bridge", "full_mesh", "torus"]


class Interconnect(Frozen):
    """Scale-up fabric of one GPU and the domain it spans.

    ``bandwidth_per_direction`` is one GPU's total per direction on the fabric. ``topology``:
    ``switch`` (NVSwitch: any peer at the full per-GPU bandwidth), ``bridge`` (an NVLink bridge
    joining ``domain_size`` = 2 GPUs; others are reached over ``HardwareSpec.fallback``),
    ``full_mesh`` (xGMI: one link of ``per_peer_bandwidth_per_direction`` to each peer), ``torus``
    (TPU ICI). ``domain_size`` = GPUs sharing the fabric (8 on an HGX board, 72 in an NVL72
    rack); groups larger than it cross to the scale-out network.
    """

    kind: str
    bandwidth_per_direction_bytes_per_s: BytesPerS = Field(alias="bandwidth_per_direction", gt=0)
    latency_s: Seconds | None = Field(default=None, alias="latency", ge=0)
    link: LinkKind = "nvlink"
    topology: Topology = "switch"
    domain_size: int = Field(default=8, ge=2, description="GPUs sharing the scale-up fabric")
    per_peer_bandwidth_per_direction_bytes_per_s: BytesPerS | None = Field(
        default=None, alias="per_peer_bandwidth_per_direction", gt=0
    )

    @model_validator(mode="after")
    def _mesh_has_peer_links(self) -> Interconnect:
        if self.topology == "full_mesh" and self.per_peer_bandwidth_per_direction_bytes_per_s is None:
            raise ValueError("topology full_mesh needs per_peer_bandwidth_per_direction (one link per peer pair)")
        if self.topology == "bridge" and self.domain_size != 2:
            raise ValueError(f"an NVLink bridge joins 2 GPUs; domain_size is {self.domain_size}")
        return self


class Link(Frozen):
    """A path other than the scale-up fabric: the PCIe fallback inside a host, or the scale-out NIC."""

    kind: str
    link: LinkKind
    bandwidth_per_direction_bytes_per_s: BytesPerS = Field(alias="bandwidth_per_direction", gt=0)


class Price(Frozen):
    """Price of one GPU-hour in USD, with the date it was read and where; ``gpus_per_instance``: the GPUs of the
    smallest instance the source rents at that price (capacity is rented in whole instances; 1 where the source
    rents single GPUs or does not state an instance)."""

    usd_per_gpu_hour: float = Field(gt=0)
    gpus_per_instance: int = Field(default=1, ge=1, le=4096)
    date: dt.date
    source: str


class HardwareSpec(Frozen):
    """One accelerator as its vendor publishes it."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$", description="stable lowercase slug, e.g. h100-sxm")
    display_name: str
    aliases: tuple[str, ...] = ()
    vendor: str
    form_factor: str
    memory: Memory
    peak_dense: PeakDense
    l2_cache_bytes: Bytes | None = Field(default=None, alias="l2_cache", gt=0)
    interconnect: Interconnect | None = None
    fallback: Link | None = Field(default=None, description="GPU-to-GPU path inside a host outside the fabric")
    host_size: int = Field(default=8, ge=1, description="GPUs in one host (the PCIe fallback domain)")
    scale_out_bandwidth_per_direction_bytes_per_s: BytesPerS | None = Field(
        default=None, alias="scale_out_bandwidth_per_direction", gt=0
    )
    tdp_watts: Watts | None = Field(default=None, alias="tdp", gt=0)
    price: Price | None = None
    sources: tuple[Source, ...] = Field(min_length=1)
    notes: str = ""

    @model_validator(mode="after")
    def _has_a_tensor_peak(self) -> HardwareSpec:
        if not [d for d in self.peak_dense.supported() if d != "fp32"]:
            raise ValueError("peak_dense needs at least one tensor-core peak (tf32, bf16, fp16, fp8, int8 or fp4)")
        return self

    def peak_flops_per_s(self, dtype: ComputeDtype) -> float | None:
        """Datasheet dense peak for ``dtype`` (FLOP/s), None if unsupported."""
        return self.peak_dense.get(dtype)
