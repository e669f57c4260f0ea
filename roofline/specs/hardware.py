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
    """Device memory: capacity in bytes and datasheet bandwidth in bytes/s."""

    capacity_bytes: Bytes = Field(alias="capacity", gt=0)
    bandwidth_bytes_per_s: BytesPerS = Field(alias="bandwidth", gt=0)
    type: str | None = None


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


class Interconnect(Frozen):
    """Scale-up link of one GPU: per-direction bandwidth (bytes/s) and optional latency (s)."""

    kind: str
    bandwidth_per_direction_bytes_per_s: BytesPerS = Field(alias="bandwidth_per_direction", gt=0)
    latency_s: Seconds | None = Field(default=None, alias="latency", ge=0)
    domain_gpus: int | None = Field(
        default=None, gt=0, le=16_384, description="GPUs in one scale-up domain (largest tp); default 8"
    )


class Price(Frozen):
    """Price of one GPU-hour in USD, with the date it was read and where."""

    usd_per_gpu_hour: float = Field(gt=0)
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
