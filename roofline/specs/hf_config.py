"""Typed access to a Hugging Face ``config.json`` mapping: every failure is a SpecError naming the key."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from roofline.errors import SpecError

if TYPE_CHECKING:
    from roofline.specs.jsontypes import JsonValue

MISSING = object()
_T = TypeVar("_T")


class HfConfig:
    """A config mapping with typed accessors; every failure is a SpecError naming the key."""

    def __init__(self, data: dict[str, Any], arch: str, origin: str) -> None:
        self.data, self.arch, self.origin = data, arch, origin

    def fail(self, key: str, problem: str) -> SpecError:
        return SpecError(f"{self.origin} ({self.arch}): key '{key}' {problem}")

    # -> Any: a value of whatever JSON type the file holds; callers check it (isinstance) before use, some through
    # a flag mypy cannot follow (layer_list, hf_fields._layer_kinds)
    def raw(self, key: str, default: object = MISSING) -> Any:
        """The value of ``key``; absent (and no default) is an error."""
        if key in self.data:
            return self.data[key]
        if default is MISSING:
            raise self.fail(key, f"is required for {self.arch} but missing; add it to the config")
        return default

    def integer(self, key: str, default: object = MISSING, minimum: int = 1) -> int:
        """An integer >= ``minimum`` (booleans and floats are rejected)."""
        v = self.raw(key, default)
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.fail(key, f"must be an integer, got {v!r}")
        if v < minimum:
            raise self.fail(key, f"must be >= {minimum}, got {v}")
        return v

    def opt_int(self, key: str, minimum: int = 1) -> int | None:
        """An integer, or None when the key is absent or null."""
        return None if self.data.get(key) is None else self.integer(key, minimum=minimum)

    def typed(self, key: str, kind: type[_T], default: _T) -> _T:
        """A value of JSON type ``kind`` (bool or str); absent or null gives ``default``."""
        v = self.data.get(key)
        if v is None:
            return default
        if not isinstance(v, kind):
            raise self.fail(key, f"must be a {'boolean' if kind is bool else 'string'}, got {v!r}")
        return v

    def int_list(self, key: str) -> list[int]:
        """A list of non-negative integers (absent or null -> empty)."""
        v = self.data.get(key) or []
        if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in v):
            raise self.fail(key, f"must be a list of non-negative layer indices, got {v!r}")
        return v

    def number(self, key: str, default: object = MISSING) -> float:
        """A positive int or float (booleans rejected)."""
        v = self.raw(key, default)
        if isinstance(v, bool) or not isinstance(v, int | float) or v <= 0:
            raise self.fail(key, f"must be a positive number, got {v!r}")
        return float(v)

    def require_absent(self, key: str, feature: str, allowed: tuple[JsonValue, ...] = (None, False, 0, [], {})) -> None:
        """Fail naming ``feature`` when ``key`` holds a value that turns on a feature roofline does not model."""
        v = self.data.get(key)
        if not any(v is a or (v == a and type(v) is type(a)) for a in allowed):
            raise self.fail(
                key, f"is {v!r}: {feature} is not modelled by roofline; remove it or write the spec by hand"
            )
