"""Parsing of CLI option values as people type them, and machine-readable output helpers.

Kept free of numpy/pandas/pydantic at import time: ``roofline --help`` imports this module.

Counts accept SI suffixes (``2k`` = 2000, ``32768``); durations accept units (``500ms``,
``0.5s``; a bare number is seconds). Lists and ranges (``--batch``, ``--prompt``,
``--output``, ``--tp`` of ``sweep``) follow :data:`RANGE_HELP`.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import sys
from collections.abc import Hashable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, overload

import typer

from roofline.boundary import limits
from roofline.boundary.outputs import OutputTarget, check_output, write_output
from roofline.errors import RooflineError

if TYPE_CHECKING:
    import pandas as pd
    from rich.console import Console

    from roofline.specs.jsontypes import JsonObject, JsonValue

RANGE_HELP = (
    "Values: 8 | 2k (=2000) | lists 1,8,64 | ranges: 128..32768 doubles from 128 up to 32768; "
    "1,2,4..256 continues the listed progression (geometric when the listed values are, e.g. ×2 here; "
    "else arithmetic: 8,16,24..64 steps by 8); 256..4096:256 is linear with step 256."
)


class OptionError(RooflineError):
    """A malformed or out-of-range command-line value (exit code 2)."""


#: Largest value of each numeric option (roofline.boundary.limits); other options stop at 2^53 (exact in float64).
OPTION_MAXIMA: dict[str, tuple[float, str]] = {
    "--batch": (limits.MAX_BATCH, "MAX_BATCH: concurrent sequences of one replica"),
    "--prompt": (limits.MAX_SEQUENCE_TOKENS, "MAX_SEQUENCE_TOKENS: tokens of one sequence"),
    "--output": (limits.MAX_SEQUENCE_TOKENS, "MAX_SEQUENCE_TOKENS: tokens of one sequence"),
    "--tp": (limits.MAX_PARALLEL, "MAX_PARALLEL: GPUs of one parallelism degree"),
    "--qps": (limits.MAX_QPS, "MAX_QPS: requests per second of one plan"),
    "--arrival-cv": (limits.MAX_ARRIVAL_CV, "MAX_ARRIVAL_CV: coefficient of variation of gamma arrival gaps"),
}
_GENERIC_MAX = 2**53


def _check_max(value: float, option: str) -> None:
    top, why = OPTION_MAXIMA.get(option.split()[0], (_GENERIC_MAX, "2^53, the largest exact integer of float64"))
    if value > top:
        raise OptionError(f"{option} must be <= {_fmt(top)}, got {_fmt(value)} (limit {why}, roofline.boundary.limits)")


def _fmt(x: float) -> str:
    return f"{int(x):,}" if x == int(x) and abs(x) < 1e15 else f"{x:g}"


def parse_count_opt(text: str | int, option: str, minimum: int = 1) -> int:
    """A whole number such as ``2048``, ``2k`` or ``1M``, >= ``minimum`` and <= the option's limit."""
    from roofline.units import UnitError, parse_count

    try:
        value = parse_count(text)
    except (UnitError, ValueError, OverflowError):
        raise OptionError(
            f"{option}: cannot read {str(text)!r} as a whole number; write e.g. 2048, 2k or 32768"
        ) from None
    if value < minimum:
        raise OptionError(f"{option} must be >= {minimum}, got {value}")
    _check_max(value, option)
    return value


def parse_float_opt(text: str | float, option: str) -> float:
    """A positive finite number; ``k``/``M`` suffixes allowed (``1.5k`` = 1500); at most the option's limit."""
    from roofline.units import UnitError, parse_quantity

    try:
        value = parse_quantity(str(text).strip(), "count")
    except (UnitError, ValueError):
        raise OptionError(f"{option}: cannot read {str(text)!r} as a number; write e.g. 20 or 0.5") from None
    if not (value > 0 and math.isfinite(value)):
        raise OptionError(f"{option} must be a positive number, got {text}")
    _check_max(value, option)
    return value


def parse_duration_opt(text: str | float, option: str) -> float:
    """A positive duration in seconds from ``500ms``, ``0.5s`` or ``50 ms``; the unit is required.

    A bare number is an error that suggests the unit (``500`` → "write 500ms or 500s"), never
    silently seconds.
    """
    from roofline.units import UnitError, parse_duration

    bare = str(text).strip()
    try:
        float(bare)
    except ValueError:
        pass
    else:
        raise OptionError(f"{option}: {bare!r} has no unit; write {bare}ms or {bare}s")
    try:
        value = parse_duration(str(text).strip())
    except (UnitError, ValueError):
        raise OptionError(
            f"{option}: cannot read {str(text)!r} as a duration; write e.g. 500ms, 0.5s or 50ms"
        ) from None
    if not (value > 0 and math.isfinite(value)):
        raise OptionError(f"{option} must be a positive duration, got {text}")
    return value


def parse_int_list(text: str, option: str) -> list[int]:
    """Expand ``1,2,4..256``, ``128..32768`` or ``256..4096:256`` into distinct integers (see RANGE_HELP)."""
    out: list[int] = []
    items = str(text).split(",")
    for item in (i.strip() for i in items):
        if not item:
            raise OptionError(f"{option}: empty item in {text!r}; write e.g. 1,2,4..256")
        if ".." not in item:
            out.append(parse_count_opt(item, option))
            continue
        lo_s, hi_s = item.split("..", 1)
        step_s = None
        if ":" in hi_s:
            hi_s, step_s = hi_s.split(":", 1)
        lo, hi = parse_count_opt(lo_s, option), parse_count_opt(hi_s, option)
        if hi < lo:
            raise OptionError(f"{option}: range {item!r} ends below its start; write low..high")
        if step_s is not None:
            step = parse_count_opt(step_s, f"{option} step")
            _check_length(len(out) + (hi - lo) // step + 1, option, text)  # counted before expanding
            out.extend(range(lo, hi + 1, step))
        else:
            out.extend(_progression([*out, lo], hi, option, text))
        _check_length(len(out), option, text)
    seen: dict[int, None] = dict.fromkeys(out)
    return list(seen)


def _check_length(n: int, option: str, text: str) -> None:
    if n > limits.MAX_LIST_VALUES:
        raise OptionError(
            f"{option}: {text!r} expands to {n:,} values, more than the {limits.MAX_LIST_VALUES:,} allowed "
            "(roofline.boundary.limits MAX_LIST_VALUES); use a coarser step or a doubling range such as 1..4096"
        )


def check_grid_size(points: int) -> None:
    """A sweep grid of at most MAX_SWEEP_POINTS points (checked before any is evaluated)."""
    if points > limits.MAX_SWEEP_POINTS:
        raise OptionError(
            f"the sweep grid has {points:,} points (batch × prompt × output × tp), more than the "
            f"{limits.MAX_SWEEP_POINTS:,} allowed (roofline.boundary.limits MAX_SWEEP_POINTS); "
            "split it into several sweeps"
        )


def _progression(prefix: list[int], hi: int, option: str, text: str) -> list[int]:
    """Values from prefix[-1] up to hi continuing prefix: ×r if geometric (or a lone start: ×2), else +d."""
    start = prefix[-1]
    ratio, step = 2, 0
    if len(prefix) >= 2:
        ratios = {b / a for a, b in itertools.pairwise(prefix)}
        diffs = {b - a for a, b in itertools.pairwise(prefix)}
        if len(ratios) == 1 and (r := ratios.pop()) >= 2 and r == int(r):
            ratio = int(r)
        elif len(diffs) == 1 and (d := diffs.pop()) > 0:
            ratio, step = 1, d
        else:
            raise OptionError(
                f"{option}: cannot continue {text!r}: the values before '..' are neither geometric "
                f"(×2, ×4 …) nor arithmetic; list them or use a..b:step"
            )
    if ratio == 1:
        _check_length(len(prefix) + (hi - start) // step, option, text)  # arithmetic: counted before expanding
    values, v = [], start
    while v <= hi:
        values.append(v)
        v = v * ratio + step
    return values


def parse_engine_set(values: Iterable[str] | None, flag: str = "--engine-set") -> dict[str, bool | int | float | str]:
    """``--engine-set NAME=VALUE`` pairs (or ``flag``'s) → engine overrides (numbers, true/false, or text).

    Names are :class:`roofline.engine.EngineConfig` fields or the engines' own option names
    (``gpu_memory_utilization``, ``max_num_batched_tokens``, ``block_size`` …); counts accept
    SI suffixes (``8k`` = 8000).
    """
    from roofline.engine.config import ALIASES, TEXT_OPTIONS
    from roofline.units import UnitError, parse_quantity

    out: dict[str, bool | int | float | str] = {}
    for item in values or []:
        name, sep, raw = item.partition("=")
        name, raw = name.strip().replace("-", "_"), raw.strip()
        if not sep or not name or not raw:
            raise OptionError(f"{flag}: expected NAME=VALUE such as max_num_seqs=256, got {item!r}")
        choices = TEXT_OPTIONS.get(ALIASES.get(name, name))
        if choices is not None:  # a named choice, e.g. dp_load_balance=round_robin
            text = raw.lower().replace("-", "_")
            if text not in choices:
                raise OptionError(f"{flag} {name}: {raw!r} is not one of {', '.join(choices)}")
            out[name] = text
            continue
        if raw.lower() in ("true", "false", "on", "off"):
            out[name] = raw.lower() in ("true", "on")
            continue
        try:
            value = parse_quantity(raw, "count")
        except (UnitError, ValueError):
            raise OptionError(f"{flag} {name}: cannot read {raw!r} as a number or true/false") from None
        out[name] = int(value) if value.is_integer() and "." not in raw and abs(value) <= _GENERIC_MAX else value
    return out


def parse_names(text: str | None) -> list[str] | None:
    """Comma-separated names; None or ``all`` means every one."""
    if text is None or text.strip().lower() == "all":
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise OptionError(f"expected a comma-separated list of names, got {text!r}")
    return names


def parse_prices(values: Iterable[str]) -> dict[str, float]:
    """``h100-sxm=2.49`` items (repeatable or comma-separated) → {slug: USD per GPU-hour}."""
    out: dict[str, float] = {}
    for value in values:
        for item in (i.strip() for i in value.split(",")):
            if not item:
                continue
            name, sep, price = item.partition("=")
            if not sep or not name.strip():
                raise OptionError(f"--price: expected NAME=USD_PER_GPU_HOUR such as h100-sxm=2.49, got {item!r}")
            out[name.strip()] = parse_float_opt(price.strip().lstrip("$"), f"--price {name.strip()}")
    return out


@overload
def clean_json(x: dict[Hashable, object]) -> JsonObject: ...
@overload
def clean_json(x: object) -> JsonValue: ...
def clean_json(x: object) -> JsonValue:
    """Recursively turn NaN/inf into None and numpy scalars/arrays into Python values (exact floats)."""
    if isinstance(x, dict):
        return {str(k): clean_json(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [clean_json(v) for v in x]
    if hasattr(x, "tolist") and not isinstance(x, str | bytes):  # numpy scalar or array
        return clean_json(x.tolist())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x  # type: ignore[return-value]  # str, int, bool and None as they are (anything else json.dumps refuses)


def dumps(x: object) -> str:
    """JSON text of ``x`` with shortest round-trip floats and null for NaN."""
    return json.dumps(clean_json(x), indent=2, allow_nan=False)


def frame_records(df: pd.DataFrame) -> list[JsonObject]:
    """DataFrame rows as JSON-ready dicts (NaN → None, numpy → Python)."""
    return [clean_json(r) for r in df.to_dict(orient="records")]


def frame_format(path: Path | None, fmt: str | None) -> str:
    """csv or json: ``fmt`` when given, else the file suffix, else csv (checked before any work)."""
    fmt = (fmt or (path.suffix.lstrip(".") if path else "") or "csv").lower()
    if fmt not in ("csv", "json"):
        raise OptionError(f"unknown output format {fmt!r}; use --format csv or --format json (or a .csv/.json file)")
    return fmt


def output_target(path: Path | None, force: bool, what: str, option: str = "-o") -> OutputTarget | None:
    """A checked destination (roofline.boundary.outputs.check_output), None for stdout; call before any work."""
    return None if path is None else check_output(path, force=force, what=what, option=option)


def write_frame(df: pd.DataFrame, target: OutputTarget | None, fmt: str | None) -> str:
    """Write ``df`` as CSV or JSON to ``target`` (format from ``fmt`` or the suffix) or stdout; returns the format."""
    fmt = frame_format(target.path if target is not None else None, fmt)
    text = df.to_csv(index=False) if fmt == "csv" else dumps(frame_records(df)) + "\n"
    if target is None:
        sys.stdout.write(text)
    else:
        write_output(target, text)
    return fmt


def console(stderr: bool = False) -> Console:
    """A rich console on stdout/stderr; 160 columns when not a terminal (pipes, tests)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else int(os.environ.get("COLUMNS", "160"))
    return Console(file=stream, width=width, highlight=False, soft_wrap=False)


#: API names in messages, as the command line spells them (messages from the API name the fix in
#: API terms, e.g. "it fits with tp=2"; the CLI shows "it fits with --tp 2"). A name already written as a
#: flag (``--qps``) is left alone: the CLI's own messages pass through here too.
_AS_FLAGS = (
    (re.compile(r"(?<![-\w])(tp|pp|ep|weight_dtype|kv_dtype|max_gpus|replicas|num_requests|arrival|arrival_cv|[pdnk]_max"
                r"|percentile|tp_prefill|tp_decode|tp_colocated)=(\S+?)(?=[,;.)]?(\s|$))"), None),
    (re.compile(r"(?<![-\w])(max_gpus|tp_options|precisions|qps|seed|num_requests|[pdnk]_max)\b"),
     {"max_gpus": "--max-gpus", "tp_options": "--tp", "precisions": "--precision", "qps": "--qps", "seed": "--seed",
      "num_requests": "--num-requests", "p_max": "--p-max", "d_max": "--d-max", "n_max": "--n-max",
      "k_max": "--k-max"}),
)  # fmt: skip
#: A length's own messages begin with its API name (``prompt_len: the spread inf exceeds …``).
_LENGTH_FLAGS = re.compile(r"^(prompt_len|output_len)(?=[:=]| length file)")


def as_flags(message: str) -> str:
    """Rephrase API option names in ``message`` as command-line flags (``tp=2`` → ``--tp 2``)."""
    value_pat, _ = _AS_FLAGS[0]
    message = value_pat.sub(lambda m: f"--{m.group(1).replace('_', '-')} {m.group(2)}", message)
    name_pat, names = _AS_FLAGS[1]
    assert names is not None
    message = _LENGTH_FLAGS.sub(lambda m: "--prompt" if m.group(1) == "prompt_len" else "--output", message)
    return name_pat.sub(lambda m: names[m.group(1)], message)


#: ``--jobs N``: processes for a command's independent simulations (roofline.serving.plan.parallel.map_jobs).
SizingSeedOpt = Annotated[
    int,
    typer.Option(
        "--seed",
        min=0,
        max=2**31 - 1,
        help="First seed of the replicated runs each simulated sizing check uses (the answer should not move).",
    ),
]
JobsOpt = Annotated[
    int | None,
    typer.Option(
        "--jobs", "-j", metavar="N", help="Processes for the independent simulations (default: every core; 1: in turn)."
    ),
]


def percentile_slo(text: str, option: str, default_pct: float) -> tuple[float, str]:
    """``p99=2s`` → (99.0, "2s"); a bare duration keeps ``default_pct``. The percentile applies where
    latencies are simulated (``--simulate``); the planner's closed form checks the mean load curve."""
    head, sep, tail = text.partition("=")
    if not sep:
        return default_pct, text
    key = head.strip().lower()
    try:
        pct = float(key[1:]) if key.startswith("p") else float("nan")
    except ValueError:
        pct = float("nan")
    if not 0 < pct < 100:
        raise OptionError(f"{option}: {head!r} is not a percentile; write e.g. p99=2s or p90=50ms")
    return pct, tail
