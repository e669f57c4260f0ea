"""Numeric formats: bytes per element (scales and zeros included) and the compute each runs at.

Plain formats (fp32 … fp4, int4) store exactly their bits. Quantised formats store one scale
(and a zero) per block of ``group`` values, so bytes per element = (bits + (scale bits + zero
bits) / group) / 8:

================  ==========================================  ================  =========================
format            layout                                      bytes / element   source
================  ==========================================  ================  =========================
``mxfp4``         E2M1 + one E8M0 scale per 32                (4 + 8/32)/8      OCP Microscaling (MX)
                                                              = 0.53125         Formats Spec v1.0 §5
``mxfp8``         E4M3 + one E8M0 scale per 32                (8 + 8/32)/8      OCP Microscaling (MX)
                                                              = 1.03125         Formats Spec v1.0 §5
``nvfp4``         E2M1 + one E4M3 scale per 16 (+ one fp32    (4 + 8/16)/8      NVIDIA "Introducing NVFP4"
                  per tensor, negligible)                     = 0.5625          (developer blog, 2025)
``int4-g128``     int4 + fp16 scale + 4-bit zero per 128      (4 + 20/128)/8    AutoGPTQ / AutoAWQ packing
                  (GPTQ / AWQ ``group_size`` 128)             = 0.51953125      (``scales`` fp16, ``qzeros``
                                                                                int4 packed per group)
``int4-g32``      int4 + 16-bit scale per 32, symmetric (no    (4 + 16/32)/8     compressed-tensors
                  zero; ``pack-quantized``, Kimi-K2.5)        = 0.5625          ``strategy: group``, ``symmetric``
``fp8-block``     E4M3 + one fp32 scale per 128×128 block     (8 + 32/16384)/8  DeepSeek-V3 config.json
                  (DeepSeek-V3 ``weight_block_size``)         = 1.000244…       ``quantization_config``
================  ==========================================  ================  =========================

``compute`` is the tensor-core peak a GEMM whose *activations* are in this format uses (None:
weight-only). ``default_activation`` is the activation format each weight format computes at
when the user does not set one: W4A16 for int4/int4-g128/int4-g32/mxfp4 (vLLM's Marlin / Triton MoE
kernels dequantise to bf16), W8A8 FP8 for fp8, fp8-block and mxfp8, NVFP4 (the fp4 peak) for nvfp4
on devices with an fp4 peak (Blackwell) and W4A16 elsewhere (:meth:`Scenario.gemm_compute_dtype`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from roofline.errors import ScenarioError, suggest
from roofline.specs.hardware import ComputeDtype


@dataclass(frozen=True)
class FormatLayout:
    """Storage of one format: value bits, and the scale + zero bits shared by ``group`` values."""

    bits: float
    scale_bits: float = 0.0
    zero_bits: float = 0.0
    group: int = 1

    @property
    def bytes_per_element(self) -> float:
        """(bits + (scale bits + zero bits) / group) / 8."""
        return (self.bits + (self.scale_bits + self.zero_bits) / self.group) / 8.0


class Precision(Enum):
    """A storage/compute format. ``value`` is the CLI/YAML name (module docstring for the table)."""

    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    INT8 = "int8"
    INT4 = "int4"
    FP4 = "fp4"
    MXFP4 = "mxfp4"
    MXFP8 = "mxfp8"
    NVFP4 = "nvfp4"
    INT4_G128 = "int4-g128"
    INT4_G32 = "int4-g32"
    FP8_BLOCK = "fp8-block"

    @property
    def layout(self) -> FormatLayout:
        """Bits, scale/zero bits and group size of the format."""
        return _LAYOUT[self]

    @property
    def bytes_per_element(self) -> float:
        """Storage bytes per element, block scales and zeros included."""
        return self.layout.bytes_per_element

    @property
    def compute(self) -> ComputeDtype | None:
        """Peak that a GEMM with activations in this format runs at (None: weight-only format)."""
        return _COMPUTE[self]

    @property
    def default_activation(self) -> Precision:
        """Activation format GEMMs with weights in this format compute at by default (module doc)."""
        return _ACTIVATION.get(self, Precision.BF16)

    @classmethod
    def parse(cls, value: str | Precision, field: str = "precision") -> Precision:
        """Parse a name such as ``bf16`` or ``mxfp4``; errors list the known formats."""
        if isinstance(value, Precision):
            return value
        key = str(value).strip().lower().replace("float", "fp").replace("bfloat", "bf").replace("_", "-")
        key = _ALIASES.get(key, key)
        for p in cls:
            if p.value == key:
                return p
        names = [p.value for p in cls]
        raise ScenarioError(f"unknown {field} '{value}'{suggest(key, names)} Known formats: {', '.join(names)}.")


_ALIASES = {
    "fp8-e4m3": "fp8", "e4m3": "fp8", "w4a16": "int4", "half": "fp16", "awq": "int4-g128", "gptq": "int4-g128",
    "int4-awq": "int4-g128", "int4-gptq": "int4-g128", "fp8-block-scaled": "fp8-block", "fp8-blockwise": "fp8-block",
}  # fmt: skip
_LAYOUT = {
    Precision.FP32: FormatLayout(32),
    Precision.BF16: FormatLayout(16),
    Precision.FP16: FormatLayout(16),
    Precision.FP8: FormatLayout(8),
    Precision.INT8: FormatLayout(8),
    Precision.INT4: FormatLayout(4),
    Precision.FP4: FormatLayout(4),
    Precision.MXFP4: FormatLayout(4, scale_bits=8, group=32),
    Precision.MXFP8: FormatLayout(8, scale_bits=8, group=32),
    Precision.NVFP4: FormatLayout(4, scale_bits=8, group=16),
    Precision.INT4_G128: FormatLayout(4, scale_bits=16, zero_bits=4, group=128),
    Precision.INT4_G32: FormatLayout(4, scale_bits=16, group=32),
    Precision.FP8_BLOCK: FormatLayout(8, scale_bits=32, group=128 * 128),
}
_COMPUTE: dict[Precision, ComputeDtype | None] = {
    Precision.FP32: "fp32",
    Precision.BF16: "bf16",
    Precision.FP16: "fp16",
    Precision.FP8: "fp8",
    Precision.INT8: "int8",
    Precision.INT4: None,
    Precision.FP4: "fp4",
    Precision.MXFP4: None,
    Precision.MXFP8: "fp8",
    Precision.NVFP4: "fp4",
    Precision.INT4_G128: None,
    Precision.INT4_G32: None,
    Precision.FP8_BLOCK: "fp8",
}
_ACTIVATION = {
    Precision.FP32: Precision.FP32,
    Precision.BF16: Precision.BF16,
    Precision.FP16: Precision.FP16,
    Precision.FP8: Precision.FP8,
    Precision.FP8_BLOCK: Precision.FP8,
    Precision.MXFP8: Precision.FP8,
    Precision.NVFP4: Precision.NVFP4,
}
