"""Shared pydantic machinery: frozen, strict models and unit-carrying field types."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, WithJsonSchema

from roofline.units import Dimension, UnitError, parse_quantity

_EXAMPLES: dict[Dimension, str] = {
    "bytes": "80 GB or 80 GiB (decimal and binary prefixes differ)",
    "bytes_per_s": "3.35 TB/s",
    "flops_per_s": "989.5 TFLOPS (int formats: TOPS)",
    "seconds": "2 us",
    "watts": "700 W",
    "count": "a number",
}


def _unit_field(dim: Dimension) -> Any:
    def check(v: object) -> float:
        try:
            value = parse_quantity(v, dim)
        except UnitError as exc:
            raise ValueError(str(exc)) from None
        if not math.isfinite(value):
            raise ValueError(f"{v!r} is not a finite quantity; write e.g. {_EXAMPLES[dim]}")
        return value

    schema = {"type": "string", "description": f"a quantity with an explicit unit, e.g. {_EXAMPLES[dim]}"}
    return Annotated[float, BeforeValidator(check), WithJsonSchema(schema)]


Bytes = _unit_field("bytes")
BytesPerS = _unit_field("bytes_per_s")
FlopsPerS = _unit_field("flops_per_s")
Seconds = _unit_field("seconds")
Watts = _unit_field("watts")


class Frozen(BaseModel):
    """Base of every spec: immutable, unknown keys rejected, YAML keys by alias."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, strict=False, allow_inf_nan=False)


class Source(Frozen):
    """Where a group of values came from: which fields, and the citation."""

    fields: str
    ref: str
