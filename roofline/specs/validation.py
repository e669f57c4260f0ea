"""Validation of parsed spec documents into typed specs, with one error per document.

Shared by the YAML library (:mod:`roofline.specs.library`) and the Hugging Face importer
(:mod:`roofline.specs.hf_import`), so both report problems the same way.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from roofline.errors import RooflineError, SpecError

S = TypeVar("S", bound=BaseModel)


_SCHEMA_HINT = {
    "HardwareSpec": "see `roofline schema hardware` for the format",
    "ModelSpec": "see `roofline schema model` for the format",
    "CalibrationProfile": "see `roofline schema profile` for the format, or write one with `roofline calibrate`",
}


def validate_spec(cls: type[S], data: object, origin: str, error: type[RooflineError] = SpecError) -> S:
    """Validate ``data`` into ``cls``; any problem becomes one ``error`` naming origin, field and the schema."""
    hint = _SCHEMA_HINT.get(cls.__name__, f"see the {cls.__name__} documentation")
    if not isinstance(data, dict):
        raise error(f"{origin}: a {cls.__name__} must be a mapping of fields (got {type(data).__name__}); {hint}")
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
            elif err["type"] == "finite_number":
                msg = "must be a finite number (NaN and infinity are not values)"
            parts.append(f"field '{field}': {msg}")
        more = f" (and {exc.error_count() - 4} more)" if exc.error_count() > 4 else ""
        raise error(f"{origin} is not a valid {cls.__name__}: " + "; ".join(parts) + more + f"; {hint}") from None
    except RecursionError:  # a YAML anchor that contains itself
        raise error(f"{origin} refers to itself (a recursive YAML anchor); {hint}") from None
