"""Numeric formats: bytes per element and which compute peak a GEMM in that format uses."""

from __future__ import annotations

from enum import Enum

from roofline.errors import ScenarioError, suggest
from roofline.specs.hardware import ComputeDtype


class Precision(Enum):
    """A storage/compute format. ``value`` is the CLI/YAML name.

    ``bytes_per_element`` is exact storage (int4/fp4 pack two values per byte; block
    scales of MX/NV formats are ignored, < 4%). ``compute`` is the tensor-core peak a
    GEMM uses when *activations* are in this format; weight-only formats (int4) have no
    compute format of their own and run at the activation format's peak.
    """

    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    INT8 = "int8"
    INT4 = "int4"
    FP4 = "fp4"

    @property
    def bytes_per_element(self) -> float:
        """Storage bytes per element."""
        return _BYTES[self]

    @property
    def compute(self) -> ComputeDtype | None:
        """Peak that a GEMM with activations in this format runs at (None: weight-only format)."""
        return _COMPUTE[self]

    @classmethod
    def parse(cls, value: str | Precision, field: str = "precision") -> Precision:
        """Parse a name such as ``bf16``; errors list the known formats."""
        if isinstance(value, Precision):
            return value
        key = str(value).strip().lower().replace("float", "fp").replace("bfloat", "bf")
        aliases = {"fp8_e4m3": "fp8", "e4m3": "fp8", "mxfp4": "fp4", "nvfp4": "fp4", "w4a16": "int4", "half": "fp16"}
        key = aliases.get(key, key)
        for p in cls:
            if p.value == key:
                return p
        names = [p.value for p in cls]
        raise ScenarioError(f"unknown {field} '{value}'{suggest(key, names)} Known formats: {', '.join(names)}.")


_BYTES = {
    Precision.FP32: 4.0,
    Precision.BF16: 2.0,
    Precision.FP16: 2.0,
    Precision.FP8: 1.0,
    Precision.INT8: 1.0,
    Precision.INT4: 0.5,
    Precision.FP4: 0.5,
}
_COMPUTE: dict[Precision, ComputeDtype | None] = {
    Precision.FP32: "fp32",
    Precision.BF16: "bf16",
    Precision.FP16: "fp16",
    Precision.FP8: "fp8",
    Precision.INT8: "int8",
    Precision.INT4: None,
    Precision.FP4: "fp4",
}
