"""Validation of parsed spec documents into typed specs, with one error per document.

Shared by the YAML library (:mod:`roofline.specs.library`) and the Hugging Face importer
(:mod:`roofline.specs.hf_import`), so both report problems the same way.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from roofline.errors import SpecError
from roofline.specs.hardware import HardwareSpec

S = TypeVar("S", bound=BaseModel)


def validate_spec(cls: type[S], data: Any, origin: str) -> S:
    """Validate ``data`` into ``cls``; any problem becomes one SpecError naming origin and field."""
    if not isinstance(data, dict):
        raise SpecError(
            f"{origin}: a {cls.__name__} must be a mapping of fields (got {type(data).__name__}); "
            f"see `roofline schema {'hardware' if cls is HardwareSpec else 'model'}` for the format"
        )
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        parts = []
        for err in exc.errors()[:4]:
            field = ".".join(str(p) for p in err["loc"]) or "(document)"
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                msg = "unknown field (remove it or check its spelling)"
            elif err["type"] == "missing":
                msg = "required field is missing; add it"
            parts.append(f"field '{field}': {msg}")
        more = f" (and {exc.error_count() - 4} more)" if exc.error_count() > 4 else ""
        raise SpecError(f"{origin} is not a valid {cls.__name__}: " + "; ".join(parts) + more) from None
