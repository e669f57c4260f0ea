"""Request streams for the simulator: arrival processes and length distributions (deterministic given a seed).

Arrivals (open loop, ``rate`` requests/s): ``poisson`` (exponential gaps, mean 1/rate), ``gamma``
(gaps Gamma(k, 1/(k·rate)) with k = 1/CV², so CV = 1 is Poisson and CV > 1 is burstier; vLLM's
``--burstiness`` is k), ``constant`` (gaps exactly 1/rate). As in the common serving benchmarks,
request i is sent after the first i gaps: the first arrives at t = 0.

Lengths (tokens, each ≥ 1): an int (fixed); a spec string ``uniform:LOW:HIGH``,
``normal:MEAN:STD``, ``lognormal:MEAN:CV`` (σ² = ln(1 + CV²), μ = ln(MEAN) − σ²/2 so the mean
is MEAN), ``file:PATH`` (one length per line, or a .npy array); a dict
``{"dist": "lognormal", "mean": 1024, "cv": 0.5}``; or an array (used in order, repeated
cyclically when shorter than the run). Drawn values are rounded to whole tokens and clipped to ≥ 1.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from roofline.boundary.inputs import read_bytes, read_text
from roofline.boundary.limits import (
    MAX_ARRIVAL_CV,
    MAX_DATA_FILE_BYTES,
    MAX_SEQUENCE_TOKENS,
    MAX_SIM_SPAN_S,
    MIN_ARRIVAL_CV,
)
from roofline.errors import ScenarioError

ARRIVALS = ("poisson", "gamma", "constant")
DISTS = ("fixed", "uniform", "normal", "lognormal")


@dataclass(frozen=True)
class LengthSpec:
    """A parsed length distribution: ``dist`` and its parameters (or ``values`` for arrays)."""

    dist: str
    a: float = 0.0
    b: float = 0.0
    values: tuple[int, ...] = ()

    @property
    def mean(self) -> float:
        """Mean length in tokens."""
        if self.values:
            return float(np.mean(self.values))
        return (self.a + self.b) / 2 if self.dist == "uniform" else self.a

    def describe(self) -> str:
        """``lognormal(mean 1024, CV 0.5)`` style label."""
        if self.values:
            return f"array of {len(self.values)} lengths (mean {self.mean:.0f})"
        return {
            "fixed": f"{self.a:.0f}",
            "uniform": f"uniform[{self.a:.0f}, {self.b:.0f}]",
            "normal": f"normal(mean {self.a:.0f}, std {self.b:.0f})",
            "lognormal": f"lognormal(mean {self.a:.0f}, CV {self.b:g})",
        }[self.dist]

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` lengths as int64, from 1 to MAX_SEQUENCE_TOKENS (a draw of a heavy tail beyond that bound is the
        bound itself, which no model's context holds, so the simulation refuses the request by name)."""
        if self.values:
            v = np.asarray(self.values, dtype=np.int64)
            return np.resize(v, n)
        if self.dist == "fixed":
            x = np.full(n, self.a)
        elif self.dist == "uniform":
            x = rng.uniform(self.a, self.b + 1, n)
            x = np.floor(x)
        elif self.dist == "normal":
            x = rng.normal(self.a, self.b, n)
        else:
            s2 = np.log1p(self.b**2)
            x = rng.lognormal(np.log(self.a) - s2 / 2, np.sqrt(s2), n)
        return np.clip(np.rint(x), 1, MAX_SEQUENCE_TOKENS).astype(np.int64)


#: What a length may be given as (see the module docstring).
LengthArg = int | float | str | dict[str, Any] | list[int] | tuple[int, ...] | np.ndarray | LengthSpec


def parse_length(spec: LengthArg, name: str) -> LengthSpec:
    """A :class:`LengthSpec` from an int, spec string, dict or array; ScenarioError names ``name``."""
    try:
        return _parse(spec, name)
    except (TypeError, ValueError, OverflowError) as exc:  # OverflowError: float() of an int of 400 digits
        if isinstance(exc, ScenarioError):
            raise
        raise ScenarioError(
            f"{name}={_show(spec)} is not a length: give a whole number of tokens, 'uniform:LOW:HIGH', "
            f"'normal:MEAN:STD', 'lognormal:MEAN:CV', 'file:PATH' or an array ({exc})"
        ) from None


def _show(spec: object) -> str:
    """``repr(spec)`` for a message, at most 80 characters (an int of more than 4,300 digits has no repr)."""
    try:
        text = repr(spec)
    except ValueError:
        return f"<an integer of {spec.bit_length():,} bits>" if isinstance(spec, int) else "<unprintable value>"
    return text if len(text) <= 80 else text[:77] + "..."


def _positive(x: float, name: str, what: str) -> float:
    if not (x > 0 and np.isfinite(x)):
        raise ScenarioError(f"{name}: {what} must be a finite number > 0 (got {x})")
    return float(x)


def _tokens(x: float, name: str, what: str) -> float:
    """A length parameter in tokens: > 0 and at most MAX_SEQUENCE_TOKENS (roofline.boundary.limits)."""
    _positive(x, name, what)
    if x > MAX_SEQUENCE_TOKENS:
        raise ScenarioError(
            f"{name}: {what} {x:g} exceeds {MAX_SEQUENCE_TOKENS:,} tokens (roofline.boundary.limits "
            "MAX_SEQUENCE_TOKENS), far beyond any model's context: give a length in tokens"
        )
    return float(x)


def _parse(spec: Any, name: str) -> LengthSpec:
    if isinstance(spec, LengthSpec):
        return spec
    if isinstance(spec, bool):
        raise ValueError("a boolean is not a length")
    if isinstance(spec, int | np.integer):
        if spec > MAX_SEQUENCE_TOKENS:  # before float(), which overflows past 10^308
            raise ScenarioError(
                f"{name}: the length {_show(spec)} exceeds {MAX_SEQUENCE_TOKENS:,} tokens (roofline.boundary.limits "
                "MAX_SEQUENCE_TOKENS), far beyond any model's context: give a length in tokens"
            )
        return LengthSpec("fixed", _tokens(float(spec), name, "the length"))
    if isinstance(spec, float) and float(spec).is_integer():
        return LengthSpec("fixed", _tokens(spec, name, "the length"))
    if isinstance(spec, dict):
        d = dict(spec)
        dist = str(d.pop("dist", "fixed"))
        keys = {
            "fixed": ("value",),
            "uniform": ("low", "high"),
            "normal": ("mean", "std"),
            "lognormal": ("mean", "cv"),
        }.get(dist)
        if keys is None:
            raise ScenarioError(f"{name}: unknown distribution {dist!r}; known: {', '.join(DISTS)}")
        missing, unknown = [k for k in keys if k not in d], sorted(map(str, set(d) - set(keys)))
        if missing or unknown:
            raise ScenarioError(
                f"{name}: a {dist} length dict takes the keys dist, {', '.join(keys)} (missing: "
                f"{', '.join(missing) or 'none'}; unknown: {', '.join(unknown) or 'none'}); "
                "e.g. {'dist': 'lognormal', 'mean': 1024, 'cv': 0.5}"
            )
        return _make(dist, [float(d[k]) for k in keys], name)
    if isinstance(spec, str):
        s = spec.strip()
        if s.isdigit():
            return _parse(int(s), name)
        kind, _, rest = s.partition(":")
        if kind == "file":
            return _from_file(Path(rest), name)
        if kind not in DISTS:
            raise ScenarioError(f"{name}: unknown distribution {kind!r} in {spec!r}; known: {', '.join(DISTS)}, file")
        return _make(kind, [float(x) for x in rest.split(":")], name)
    arr = np.asarray(spec)
    if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.number):
        raise ValueError("expected a non-empty 1-D array of numbers")
    if np.any(arr < 1) or not np.all(np.isfinite(arr)) or np.any(arr > MAX_SEQUENCE_TOKENS):
        raise ScenarioError(
            f"{name}: every length in the array must be a whole number >= 1 and <= {MAX_SEQUENCE_TOKENS:,} tokens"
        )
    return LengthSpec("array", values=tuple(int(x) for x in np.rint(arr)))


def _make(dist: str, params: list[float], name: str) -> LengthSpec:
    need = 1 if dist == "fixed" else 2
    if len(params) != need:
        raise ScenarioError(f"{name}: {dist} takes {need} parameter(s), got {len(params)}")
    if dist == "fixed":
        return LengthSpec("fixed", _tokens(params[0], name, "the length"))
    a, b = params
    if dist == "uniform":
        if not 1 <= a <= b:
            raise ScenarioError(f"{name}: uniform needs 1 <= LOW <= HIGH (got {a:g}, {b:g})")
        _tokens(b, name, "HIGH")
        return LengthSpec("uniform", a, b)
    _tokens(a, name, "the mean")
    if not b <= MAX_SEQUENCE_TOKENS:
        raise ScenarioError(f"{name}: the spread {b:g} exceeds {MAX_SEQUENCE_TOKENS:,} (MAX_SEQUENCE_TOKENS)")
    if dist == "normal" and not b >= 0:
        raise ScenarioError(f"{name}: the standard deviation must be >= 0 (got {b:g})")
    if dist == "lognormal":
        _positive(b, name, "the CV")
    return LengthSpec(dist, a, b)


def _from_file(path: Path, name: str) -> LengthSpec:
    if not path.is_file():
        raise ScenarioError(f"{name}: length file {path} does not exist")
    what = f"{name} length file"
    if path.suffix == ".npy":  # bounded like a text file (MAX_DATA_FILE_BYTES: 8M int64 lengths), never unpickled
        return _parse(np.load(io.BytesIO(read_bytes(path, what, MAX_DATA_FILE_BYTES, ScenarioError))), name)
    vals = []
    text = read_text(path, what, MAX_DATA_FILE_BYTES, ScenarioError)
    for i, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                vals.append(float(line))
            except ValueError:
                raise ScenarioError(f"{name}: {path} line {i}: {line.strip()!r} is not a number") from None
    return _parse(np.asarray(vals), name)


def arrival_times(n: int, rate: float, process: str, cv: float, rng: np.random.Generator) -> np.ndarray:
    """Send times (s) of ``n`` requests at ``rate`` requests/s; the first at 0."""
    if process not in ARRIVALS:
        raise ScenarioError(f"unknown arrival process {process!r}; known: {', '.join(ARRIVALS)}")
    _positive(rate, "qps", "the request rate")
    if process == "gamma":
        _positive(cv, "arrival_cv", "the coefficient of variation")
        if not MIN_ARRIVAL_CV <= cv <= MAX_ARRIVAL_CV:
            raise ScenarioError(
                f"arrival_cv={cv:g} is outside [{MIN_ARRIVAL_CV:g}, {MAX_ARRIVAL_CV:g}] (roofline.boundary.limits "
                "MIN_ARRIVAL_CV, MAX_ARRIVAL_CV): below, the gaps are constant (use arrival=constant); above, "
                "nearly every gap is 0 and the run is not at the rate asked for"
            )
    _check_span((n - 1) / rate, n, rate)  # the mean span, before drawing
    with np.errstate(over="ignore"):
        if process == "constant":
            gaps = np.full(n, 1.0 / rate)
        elif process == "poisson":
            gaps = rng.exponential(1.0 / rate, n)
        else:
            k = 1.0 / cv**2
            gaps = rng.gamma(k, 1.0 / (k * rate), n)
        t = np.empty(n)
        t[0] = 0.0
        np.cumsum(gaps[:-1], out=t[1:])
    _check_span(float(t[-1]), n, rate)  # the drawn span (a heavy gamma tail)
    return t


def _check_span(span: float, n: int, rate: float) -> None:
    """Arrivals spanning at most MAX_SIM_SPAN_S seconds (roofline.boundary.limits): finite, and resolved by float64."""
    if not span <= MAX_SIM_SPAN_S:
        raise ScenarioError(
            f"{n:,} requests at qps {rate:g} req/s arrive over {span:.3g} s, more than the {MAX_SIM_SPAN_S:g} s "
            "(roofline.boundary.limits MAX_SIM_SPAN_S) the simulated clock resolves: raise qps or send fewer requests"
        )
