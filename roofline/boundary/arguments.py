"""Checking the type of a Python API argument before any work reads it.

The Python API (``roofline.simulate``, :class:`~roofline.serving.workload.stream.Workload`) is a boundary like the
CLI: a caller may pass a string for a rate, a float or a boolean for a count, None, a dict, bytes or any object.
Each argument is checked here, by name, before it reaches arithmetic, ``float()``, ``Path()`` or a comparison
that would raise TypeError, OverflowError or AttributeError instead of the project's error; the error names the
argument, what it got (its value and type) and what to give instead. Ranges stay with the code that knows them
(and the limits of :mod:`roofline.boundary.limits`).

Standard library only (``numbers`` recognises numpy's scalars, which register as Real / Integral).
"""

from __future__ import annotations

import math
import os
from numbers import Integral, Real
from pathlib import Path

from roofline.errors import RooflineError, ScenarioError


def _got(value: object) -> str:
    text = repr(value)
    return f"{text[:60]}{'…' if len(text) > 60 else ''} of type {type(value).__name__}"


def check_real(
    name: str, value: object, example: str, *, optional: bool = False, error: type[RooflineError] = ScenarioError
) -> float | None:
    """``value`` as a finite float (None when ``optional`` and None); booleans, text and non-finite numbers are
    ``error`` naming ``name`` with ``example`` as the fix."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(float(value)):
        raise error(f"{name} must be a finite number (got {_got(value)}); give e.g. {name}={example}")
    return float(value)


def check_whole(
    name: str, value: object, example: str, *, optional: bool = False, error: type[RooflineError] = ScenarioError
) -> int | None:
    """``value`` as an int (None when ``optional`` and None); a whole float such as 4.0 counts, booleans, text,
    fractions and non-finite numbers are ``error`` naming ``name`` with ``example`` as the fix."""
    if value is None and optional:
        return None
    if isinstance(value, Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value) and float(value).is_integer():
        return int(float(value))
    raise error(f"{name} must be a whole number (got {_got(value)}); give e.g. {name}={example}")


def check_path(
    name: str, value: object, example: str, *, optional: bool = False, error: type[RooflineError] = ScenarioError
) -> Path | None:
    """``value`` as a Path (None when ``optional`` and None): a str or os.PathLike of text without NUL bytes."""
    if value is None and optional:
        return None
    text = os.fspath(value) if isinstance(value, str | os.PathLike) else None
    if not isinstance(text, str) or "\x00" in text:  # a bytes path, or a NUL byte no OS call takes
        raise error(f"{name} must be a file path, a str or pathlib.Path (got {_got(value)}); give e.g. {example}")
    return Path(text)


def check_text(
    name: str, value: object, example: str, *, optional: bool = False, error: type[RooflineError] = ScenarioError
) -> str | None:
    """``value`` as a str (None when ``optional`` and None)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise error(f"{name} must be text (got {_got(value)}); give e.g. {name}={example!r}")
    return value
