"""Trace replay: one request per JSONL line.

Fields (the first name is ours; the others are what common tools write):

* ``arrival_s`` — seconds from the start; also ``arrival_time``, ``time_s``. ``timestamp`` and
  ``timestamp_ms`` are **milliseconds** (Mooncake traces, NVIDIA genai-perf/aiperf inputs).
* ``prompt_tokens`` — also ``input_length``, ``input_tokens``, ``prompt_len``, ``num_prompt_tokens``,
  ``ContextTokens`` (Azure LLM inference traces), ``Request tokens`` (BurstGPT).
* ``output_tokens`` — also ``output_length``, ``output_len``, ``max_tokens``, ``GeneratedTokens``,
  ``Response tokens``.
* optional prefix identity for prefix caching: ``prefix_hashes`` / ``hash_ids`` (a list of ids,
  one per ``hash_block_tokens`` prompt tokens, 512 in Mooncake traces; equal ids = equal
  token blocks, chained: block i is shared only if blocks 0…i all are), or ``prompt_token_ids``.

A malformed line raises :class:`~roofline.errors.ScenarioError` naming the line and the field.
"""

from __future__ import annotations

import json
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

import numpy as np

from roofline.boundary.arguments import check_path
from roofline.boundary.limits import (
    MAX_SEQUENCE_TOKENS,
    MAX_SIM_REQUESTS,
    MAX_SIM_SPAN_S,
    MAX_TRACE_FILE_BYTES,
    human_bytes,
)
from roofline.errors import ScenarioError

ARRIVAL_S = ("arrival_s", "arrival_time", "time_s")
ARRIVAL_MS = ("timestamp", "timestamp_ms")
PROMPT = ("prompt_tokens", "input_length", "input_tokens", "prompt_len", "num_prompt_tokens", "ContextTokens",
          "Request tokens")  # fmt: skip
OUTPUT = ("output_tokens", "output_length", "output_len", "max_tokens", "GeneratedTokens", "Response tokens")
HASHES = ("prefix_hashes", "hash_ids")

#: One request's prefix identity: a chain of block hashes (or a trace's raw ids / token ids).
HashChain = tuple[object, ...]


@dataclass(frozen=True)
class Trace:
    """Arrival seconds, prompt and output tokens per request (sorted by arrival); hash chains if given."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    hashes: list[tuple[object, ...]] | None
    hash_block_tokens: int


def _pick(row: dict[str, object], names: tuple[str, ...]) -> tuple[str, object] | None:
    for n in names:
        if n in row:
            return n, row[n]
    return None


def _flat(v: object) -> TypeGuard[list[object]]:
    """A list of JSON scalars (ids that hash; a nested list or object does not)."""
    return isinstance(v, list) and not any(isinstance(x, list | dict) for x in v)


def _number(v: object, where: str, field: str, integer: bool) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ScenarioError(f"{where}: field {field!r} must be a number (got {v!r})")
    x = float(v)
    if x != x or x in (float("inf"), float("-inf")) or x < 0 or (integer and (x < 1 or not x.is_integer())):
        need = "a whole number >= 1" if integer else "a finite number >= 0"
        raise ScenarioError(f"{where}: field {field!r} must be {need} (got {v!r})")
    if integer and x > MAX_SEQUENCE_TOKENS:
        raise ScenarioError(
            f"{where}: field {field!r} is {x:g} tokens, more than {MAX_SEQUENCE_TOKENS:,} (roofline.boundary.limits "
            "MAX_SEQUENCE_TOKENS), far beyond any model's context: check the column"
        )
    return x


def _trace_file(path: object) -> Path:
    """``path`` as the Path of a regular file of at most MAX_TRACE_FILE_BYTES; anything else names what it is."""
    p = check_path("trace", path, "trace='requests.jsonl'")
    assert p is not None
    try:
        st = p.stat()
    except OSError as exc:
        raise ScenarioError(f"trace file {p}: {exc.strerror}; give a JSONL file with one request per line") from None
    if not stat.S_ISREG(st.st_mode):  # a FIFO or device is never opened (it would block or never end)
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a FIFO, device or socket)"
        raise ScenarioError(f"trace file {p} is {kind}; give a JSONL file with one request per line")
    if st.st_size > MAX_TRACE_FILE_BYTES:
        raise ScenarioError(
            f"trace file {p} is {st.st_size:,} bytes, more than the {human_bytes(MAX_TRACE_FILE_BYTES)} limit "
            "(roofline.boundary.limits MAX_TRACE_FILE_BYTES); split it or drop its prompt_token_ids"
        )
    return p


def _row(line: str, where: str) -> dict[str, object]:
    """One trace line as a JSON object; anything else is a ScenarioError naming ``where`` (file and line)."""
    if any("\udc80" <= ch <= "\udcff" for ch in line):
        raise ScenarioError(f"{where}: not UTF-8 text; a trace is JSON Lines in UTF-8")
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    except (ValueError, RecursionError):  # an integer of more than 4,300 digits; nesting Python cannot read
        raise ScenarioError(
            f"{where}: a number of more than 4,300 digits or JSON nested too deep to read; a request line holds "
            "arrival_s, prompt_tokens and output_tokens as plain numbers"
        ) from None
    if not isinstance(row, dict):
        raise ScenarioError(f"{where}: expected a JSON object with arrival_s, prompt_tokens, output_tokens")
    return row


def load_trace(path: str | Path, hash_block_tokens: int = 512) -> Trace:
    """Parse a JSONL trace (see the module docstring for the fields)."""
    p = _trace_file(path)
    arr: list[float] = []
    pro: list[float] = []
    out: list[float] = []
    hashes: list[tuple[object, ...]] = []
    any_hash = False
    with p.open(encoding="utf-8", errors="surrogateescape") as fh:
        for i, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{p.name} line {i}"
            if len(arr) >= MAX_SIM_REQUESTS:
                raise ScenarioError(
                    f"{where}: the trace holds more than {MAX_SIM_REQUESTS:,} requests "
                    "(roofline.boundary.limits MAX_SIM_REQUESTS); split it"
                )
            row = _row(line, where)
            a = _pick(row, ARRIVAL_S)
            scale = 1.0
            if a is None:
                a, scale = _pick(row, ARRIVAL_MS), 1e-3
            if a is None:
                raise ScenarioError(f"{where}: missing field 'arrival_s' (seconds from the start, or 'timestamp' ms)")
            arr.append(_number(a[1], where, a[0], False) * scale)
            for names, dest in ((PROMPT, pro), (OUTPUT, out)):
                f = _pick(row, names)
                if f is None:
                    raise ScenarioError(f"{where}: missing field {names[0]!r} (also accepted: {', '.join(names[1:])})")
                dest.append(_number(f[1], where, f[0], True))
            h = _pick(row, HASHES)
            ids = row.get("prompt_token_ids")
            if h is not None:
                if not _flat(h[1]):
                    raise ScenarioError(f"{where}: field {h[0]!r} must be a list of block ids (numbers or strings)")
                hashes.append(tuple(h[1]))
                any_hash = True
            elif ids is not None:
                if not _flat(ids):
                    raise ScenarioError(f"{where}: field 'prompt_token_ids' must be a list of token ids (numbers)")
                hashes.append(("ids", tuple(ids)))
                any_hash = True
            else:
                hashes.append(())
    if not arr:
        raise ScenarioError(f"trace file {p} has no requests")
    order = np.argsort(np.asarray(arr), kind="stable")
    a0 = np.asarray(arr)[order]
    if not a0[-1] - a0[0] <= MAX_SIM_SPAN_S:
        raise ScenarioError(
            f"trace file {p}: its arrivals span {a0[-1] - a0[0]:.3g} s, more than the {MAX_SIM_SPAN_S:g} s "
            "(roofline.boundary.limits MAX_SIM_SPAN_S) the simulated clock resolves: check the arrival unit "
            "(timestamp is milliseconds) or split the trace"
        )
    hs = [hashes[i] for i in order] if any_hash else None
    return Trace(
        a0 - a0[0],
        np.asarray(pro, dtype=np.int64)[order],
        np.asarray(out, dtype=np.int64)[order],
        hs,
        hash_block_tokens,
    )


def block_hashes(entry: HashChain, prompt: int, block_tokens: int, hash_block_tokens: int) -> HashChain:
    """Chained hashes of the engine's full prompt blocks from one trace entry.

    Trace ids cover ``hash_block_tokens`` tokens each; engine block b (tokens b·bs … (b+1)·bs − 1)
    is identified by the chain of trace ids up to the one holding its last token and its offset.
    Token ids hash the actual token chain block by block.
    """
    full = prompt // block_tokens
    if entry and entry[0] == "ids":
        toks = entry[1]
        assert isinstance(toks, tuple)
        out, prev = [], 0
        for b in range(min(full, len(toks) // block_tokens)):
            prev = hash((prev, toks[b * block_tokens : (b + 1) * block_tokens]))
            out.append(prev)
        return tuple(out)
    out, prev, last = [], 0, -1
    for b in range(full):
        end = (b + 1) * block_tokens - 1
        j = end // hash_block_tokens
        if j >= len(entry):
            break
        while last < j:
            last += 1
            prev = hash((prev, entry[last]))
        out.append(hash((prev, end % hash_block_tokens)))
    return tuple(out)
