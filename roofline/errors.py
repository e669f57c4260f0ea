"""The project's own error types.

Every error a user can cause (bad YAML, unknown names, impossible scenarios) is a
:class:`RooflineError`: one paragraph that names the field and suggests a fix.
The CLI prints the message and exits with a documented code; it never shows a
traceback unless ``--debug`` is given.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class RooflineError(ValueError):
    """Base class of every user-facing error. ``exit_code`` is what the CLI returns."""

    exit_code: int = 2


class SpecError(RooflineError):
    """A hardware or model spec (YAML, config.json, dict) is malformed or inconsistent."""


class UnknownNameError(RooflineError):
    """A spec name is not in the bundled library or the user's spec directories."""


class ScenarioError(RooflineError):
    """A scenario (batch, lengths, precision, parallelism) is impossible."""


class NoFitError(ScenarioError):
    """A well-formed deployment whose model does not fit in memory: infeasible, so the CLI exits 1 (as predict's
    and plan's "does not fit" do); a ScenarioError, so callers that catch those still do."""

    exit_code = 1


class InfeasibleError(RooflineError):
    """A well-formed request that has no answer (does not fit, no candidate meets the SLO)."""

    exit_code = 1


class CalibrationError(RooflineError):
    """A calibration profile is malformed or a measurement cannot be made."""


class Interrupted(RooflineError):
    """The user stopped a command with Ctrl-C (SIGINT); exit code 130 = 128 + SIGINT, as shells use."""

    exit_code = 130


def suggest(name: str, choices: Iterable[str], n: int = 3) -> str:
    """Return ``"; did you mean a, b?"`` for the closest ``choices`` or an empty string.

    Suggestions are only hints in an error message; names are never matched fuzzily.
    """
    pool = sorted(set(choices))
    close = difflib.get_close_matches(name.lower(), pool, n=n, cutoff=0.5)
    prefix = [c for c in pool if c.startswith(name.lower()) and c not in close]
    hits = (close + prefix)[:n]
    return f"; did you mean {', '.join(hits)}?" if hits else ""
