"""The MoE grouped-GEMM rates of a calibration profile: streaming and compute, per device and per kernel format."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from pydantic import Field, field_serializer, field_validator, model_validator

from roofline.profile_curve import Curve
from roofline.specs._base import Frozen

#: Weight formats whose checkpoints the engines route to a MoE kernel family of their own within a format key:
#: format key -> those weight formats (the key gets ``/<weight format>``). MXFP4 checkpoints (gpt-oss,
#: ``quant_method: mxfp4``) run the engine's native MXFP4 kernel (vLLM ``Mxfp4MoEMethod``: OpenAI's Triton
#: ``matmul_ogs`` on Hopper, the tables' ``gptossmxfp4moe_triton_oaitriton*`` rows), not the Marlin kernel integer
#: 4-bit (GPTQ / AWQ / compressed-tensors WNA16) checkpoints run (the tables' ``*marlin*`` rows). The generic
#: ``fp4`` format (a 4-bit float checkpoint of no named scheme) is its own family too: on GPUs with fp4 tensor cores
#: it is not the integer checkpoints' Marlin kernel; elsewhere, with no rates of its own, it takes the format's.
KERNEL_FAMILIES: dict[str, frozenset[str]] = {"bf16:0.5": frozenset({"mxfp4", "fp4"})}


def format_key(compute_dtype: str, weight_element_bytes: float, weight_format: str = "") -> str:
    """The key of a grouped GEMM's kernel format: its compute format and weight bytes per element (to 0.5 B),
    e.g. ``bf16:2.0`` (16-bit), ``fp8:1.0`` (fp8 W8A8, per-tensor or block scales), ``bf16:0.5`` (4-bit weight-only
    integer: Marlin), ``bf16:0.5/mxfp4`` (4-bit weight-only MXFP4 checkpoints: the engine's MXFP4 kernel,
    :data:`KERNEL_FAMILIES`), ``fp4:0.5`` (NVFP4 W4A4); fp16 compute keys as bf16 (same kernels)."""
    dtype = "bf16" if compute_dtype == "fp16" else compute_dtype  # the two 16-bit floats run the same kernels
    key = f"{dtype}:{round(weight_element_bytes * 2.0) / 2.0:.1f}"  # block scales do not change the class
    return f"{key}/{weight_format}" if weight_format in KERNEL_FAMILIES.get(key, ()) else key


def base_format(key: str) -> str:
    """The format key without its kernel family (``bf16:0.5/mxfp4`` -> ``bf16:0.5``): where a profile holds no
    rates of the family, the format's own apply."""
    return key.split("/", 1)[0]


def layer_shape(width: float, inter: float, local_experts: float, top_k: float, gated: bool) -> str:
    """The key of one MoE layer's routed-expert shape on one GPU, e.g. ``h4096.i7168.e8.k2.gated``: the experts'
    width (hidden or latent size), the intermediate size per GPU, the expert slots per GPU and the top-k. The op
    builder (:func:`roofline.ops.ffn.moe_ops`) and the table fit (:mod:`calibrate.aic.moe`) both build it here."""
    return f"h{width:g}.i{inter:g}.e{local_experts:g}.k{top_k:g}.{'gated' if gated else 'plain'}"


class LayerTimes(Frozen):
    """Measured seconds of one MoE layer shape's routed experts in the engine's fused kernel (both grouped GEMMs,
    net of the activation and the launch overheads) against token-expert assignments per GPU, a = M·k / ep:

        T(a) = piecewise-linear in (log2 a, log2 T) between the knots; T(a_1) below the first knot;
               T(a_n) · a / a_n above the last (the work grows with the assignments)

    Knots non-decreasing in T, so T never falls as the tokens grow. Stored as one string ``"a:seconds a:seconds …"``
    (:meth:`text`; one YAML scalar where a list is a node per number)."""

    x: tuple[float, ...] = Field(min_length=1)
    y: tuple[float, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _ok(self) -> LayerTimes:
        if len(self.x) != len(self.y):
            raise ValueError("assignments and seconds must have the same length")
        if min(self.x) <= 0 or any(b <= a for a, b in zip(self.x, self.x[1:], strict=False)):
            raise ValueError("assignments must be positive and strictly increasing")
        if min(self.y) <= 0 or any(b < a for a, b in zip(self.y, self.y[1:], strict=False)):
            raise ValueError("seconds must be positive and non-decreasing (a layer never gets faster with more tokens)")
        return self

    def __call__(self, assignments: ArrayLike) -> np.ndarray:
        """T(a) in seconds (class docstring), array-friendly."""
        a = np.maximum(np.asarray(assignments, dtype=np.float64), 1e-30)
        lx, ly = np.log2(np.asarray(self.x)), np.log2(np.asarray(self.y))
        inside = np.exp2(np.interp(np.log2(a), lx, ly))
        return np.where(a > self.x[-1], self.y[-1] * a / self.x[-1], inside)

    def text(self) -> str:
        """The stored form: ``"a:seconds a:seconds …"``."""
        return " ".join(f"{x:g}:{y:.4g}" for x, y in zip(self.x, self.y, strict=True))

    @classmethod
    def parse(cls, text: str) -> LayerTimes:
        """The LayerTimes of :meth:`text`'s string; a ValueError naming the bad pair otherwise."""
        xs, ys = [], []
        for pair in text.split():
            x, sep, y = pair.partition(":")
            try:
                xs.append(float(x))
                ys.append(float(y))
            except ValueError:
                sep = ""
            if not sep:
                raise ValueError(f"{pair!r} is not a knot 'assignments:seconds' (e.g. '64:0.000493')")
        return cls(x=tuple(xs), y=tuple(ys))


def layer_share(op_name: str, shape: str) -> float:
    """The part of a layer's measured time (:class:`LayerTimes`) one of its two grouped GEMMs takes: its share of
    the two matrices' elements (gated: gate_up 2·i·h of 3·i·h, down i·h; plain: half each)."""
    gated = shape.endswith(".gated")
    if op_name.endswith("gate_up"):
        return 2.0 / 3.0
    return 1.0 / 3.0 if gated else 0.5


class GroupedRates(Frozen):
    """One kernel format's grouped-GEMM rates: streaming vs one expert matrix's n·k (× the relative rate vs rows
    per expert), and compute (vs rows per expert where measured)."""

    memory_efficiency_by_size: Curve | None = None
    memory_efficiency: Curve | None = None
    compute_efficiency: float = Field(default=1.0, gt=0, le=1.5)
    compute_efficiency_by_rows: Curve | None = None
    fixed_s: float = Field(
        default=0.0,
        ge=0,
        description="seconds per MoE call of this kernel beyond its GEMMs' launches and roofline work "
        "(activation quantisation, alignment, the extra launches of the quantised path), paid on its first GEMM",
    )
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
    Where ``layers`` holds the layer's exact shape (measured tables of the engine's own kernel), each of its two
    GEMMs instead takes its share of the measured layer time at its assignments (:meth:`layer_seconds`,
    :func:`layer_share`; the evaluator sets both ceilings so the roofline time equals it, the bound kept): the
    generic curves are the fallback for shapes no table measured.
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
    layers: dict[str, LayerTimes] = Field(
        default_factory=dict,
        description="'<format key>|<layer_shape>' -> the measured seconds of the engine's fused MoE kernel on that "
        "exact layer shape vs token-expert assignments per GPU (LayerTimes); replaces both grouped factors on the "
        "shapes it holds",
    )
    by_format: dict[str, GroupedRates] = Field(
        default_factory=dict,
        description="format key (format_key: compute format and weight bytes, e.g. 'fp8:1.0', 'bf16:0.5') -> the "
        "rates of that format's kernel; formats not listed use the rates above",
    )
    sources: tuple[str, ...] = ()

    @field_validator("layers", mode="before")
    @classmethod
    def _layers_from_text(cls, v: object) -> object:
        """Accept each layer as its :meth:`LayerTimes.text` string (the stored form) or as LayerTimes / a mapping."""
        if isinstance(v, dict):
            return {k: LayerTimes.parse(c) if isinstance(c, str) else c for k, c in v.items()}
        return v

    @field_serializer("layers")
    def _layers_as_text(self, layers: dict[str, LayerTimes]) -> dict[str, str]:
        """Each layer as one string (:meth:`LayerTimes.text`)."""
        return {k: c.text() for k, c in layers.items()}

    def layer_seconds(self, hardware: str, fmt: str, shape: str, assignments: ArrayLike) -> np.ndarray | None:
        """Measured seconds of the layer ``shape`` in kernel format ``fmt`` on ``hardware`` at ``assignments``
        token-expert pairs per GPU (both grouped GEMMs), or None where no table measured that shape there."""
        if not shape or hardware not in self.devices:
            return None
        times = self.layers.get(f"{fmt}|{shape}")  # a layer is one kernel's measurement: no family fallback
        return None if times is None else times(assignments)

    def own_rates(self, sources: tuple[str, ...]) -> GroupedRates:
        """These top-level rates as one kernel format's entry of ``by_format`` (no per-call floor), citing
        ``sources``."""
        return GroupedRates(
            memory_efficiency_by_size=self.memory_efficiency_by_size,
            memory_efficiency=self.memory_efficiency,
            compute_efficiency=self.compute_efficiency,
            compute_efficiency_by_rows=self.compute_efficiency_by_rows,
            sources=sources,
        )

    def rates(self, fmt: str) -> GroupedRates | None:
        """The rates of kernel format ``fmt``: its family's where listed, else its format's (:func:`base_format`),
        else None (the top-level rates apply)."""
        own = self.by_format.get(fmt)
        return own if own is not None else self.by_format.get(base_format(fmt))

    def call_floor_s(self, hardware: str, fmt: str) -> float:
        """Per-call seconds of kernel format ``fmt``'s MoE call beyond its rates (``GroupedRates.fixed_s``) on
        ``hardware``; 0 where not measured."""
        own = self.rates(fmt) if hardware in self.devices else None
        return own.fixed_s if own is not None else 0.0

    def memory_factor(
        self, hardware: str, rows_per_expert: ArrayLike, expert_elements: ArrayLike = 1.0, fmt: str = ""
    ) -> float | np.ndarray:
        """Multiplier on the memory ceiling on ``hardware`` (1 when not measured): the size curve at
        ``expert_elements`` × the rows curve at ``rows_per_expert`` (class docstring), the format's own where
        it has a size curve."""
        if hardware not in self.devices:
            return 1.0
        own = self.rates(fmt)
        src: GroupedRates | GroupedGemm = own if own is not None and own.memory_efficiency_by_size else self
        by_size, by_rows = src.memory_efficiency_by_size, src.memory_efficiency
        size = 1.0 if by_size is None else by_size(expert_elements)
        return size if by_rows is None else size * by_rows(rows_per_expert)

    def compute_factor(self, hardware: str, rows_per_expert: ArrayLike = 1.0, fmt: str = "") -> float | np.ndarray:
        """Multiplier on the GEMM compute ceiling on ``hardware`` (1 when not measured): the rows curve at
        ``rows_per_expert`` where set, else the scalar; the format's own where listed."""
        if hardware not in self.devices:
            return 1.0
        own = self.rates(fmt)
        src: GroupedRates | GroupedGemm = own if own is not None else self
        curve = src.compute_efficiency_by_rows
        return src.compute_efficiency if curve is None else curve(rows_per_expert)
