"""The MoE grouped-GEMM rates of a calibration profile: streaming and compute, per device and per kernel format."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from pydantic import Field

from roofline.profile_curve import Curve
from roofline.specs._base import Frozen


def format_key(compute_dtype: str, weight_element_bytes: float) -> str:
    """The key of a grouped GEMM's kernel format: its compute format and weight bytes per element (to 0.5 B),
    e.g. ``bf16:2.0`` (16-bit), ``fp8:1.0`` (fp8 W8A8, per-tensor or block scales), ``bf16:0.5`` (4-bit weight-only:
    int4 / MXFP4 dequantised to bf16), ``fp4:0.5`` (NVFP4 W4A4)."""
    return f"{compute_dtype}:{round(weight_element_bytes * 2.0) / 2.0:.1f}"  # block scales do not change the class


class GroupedRates(Frozen):
    """One kernel format's grouped-GEMM rates: streaming vs one expert matrix's n·k (× the relative rate vs rows
    per expert), and compute (vs rows per expert where measured)."""

    memory_efficiency_by_size: Curve | None = None
    memory_efficiency: Curve | None = None
    compute_efficiency: float = Field(default=1.0, gt=0, le=1.5)
    compute_efficiency_by_rows: Curve | None = None
    sources: tuple[str, ...] = ()


class GroupedGemm(Frozen):
    """Grouped (MoE expert) GEMMs on the devices they were measured for: streaming and compute rates.

    A MoE layer's routed experts run as one grouped GEMM over the touched experts with m rows each
    (m = the GEMM's M). On ``devices`` its weight traffic moves at

        memory factor = memory_efficiency_by_size(n·k) × memory_efficiency(m)        (each 1 where unset)

    × the memory ceiling: the size curve is the streaming rate of one expert matrix of n·k elements at the
    kernel's best-filled tiles, the rows curve the rate against rows per expert (absolute where no size curve
    is set, as the default profile's; relative, 1 at its best, where one is). Its FLOPs run at

        compute factor = compute_efficiency_by_rows(m), or compute_efficiency where no curve is set

    × the dense GEMM ceiling at that m. Other devices get 1 for both: nothing was measured there.
    ``by_format`` holds the rates of each quantised kernel the tables measured (:func:`format_key`).
    """

    devices: tuple[str, ...] = ()
    measured_on: str | None = Field(default=None, description="the device the rates were measured on")
    memory_efficiency: Curve | None = Field(
        default=None, description="fraction of the memory ceiling vs rows per expert"
    )
    memory_efficiency_by_size: Curve | None = Field(
        default=None,
        description="fraction of the memory ceiling vs elements of one expert's matrix (n·k); "
        "replaces memory_efficiency where set (it does not change with the batch)",
    )
    compute_efficiency: float = Field(default=1.0, gt=0, le=1.5)
    compute_efficiency_by_rows: Curve | None = Field(
        default=None,
        description="fraction of the dense GEMM ceiling vs rows per expert; replaces compute_efficiency where set",
    )
    by_format: dict[str, GroupedRates] = Field(
        default_factory=dict,
        description="format key (format_key: compute format and weight bytes, e.g. 'fp8:1.0', 'bf16:0.5') -> the "
        "rates of that format's kernel; formats not listed use the rates above",
    )
    sources: tuple[str, ...] = ()

    def memory_factor(
        self, hardware: str, rows_per_expert: ArrayLike, expert_elements: ArrayLike = 1.0, fmt: str = ""
    ) -> float | np.ndarray:
        """Multiplier on the memory ceiling on ``hardware`` (1 when not measured): the size curve at
        ``expert_elements`` × the rows curve at ``rows_per_expert`` (class docstring), the format's own where
        it has a size curve."""
        if hardware not in self.devices:
            return 1.0
        own = self.by_format.get(fmt)
        src: GroupedRates | GroupedGemm = own if own is not None and own.memory_efficiency_by_size else self
        by_size, by_rows = src.memory_efficiency_by_size, src.memory_efficiency
        size = 1.0 if by_size is None else by_size(expert_elements)
        return size if by_rows is None else size * by_rows(rows_per_expert)

    def compute_factor(self, hardware: str, rows_per_expert: ArrayLike = 1.0, fmt: str = "") -> float | np.ndarray:
        """Multiplier on the GEMM compute ceiling on ``hardware`` (1 when not measured): the rows curve at
        ``rows_per_expert`` where set, else the scalar; the format's own where listed."""
        if hardware not in self.devices:
            return 1.0
        own = self.by_format.get(fmt)
        src: GroupedRates | GroupedGemm = own if own is not None else self
        curve = src.compute_efficiency_by_rows
        return src.compute_efficiency if curve is None else curve(rows_per_expert)
