"""Measurements saved as they finish: one JSON line per case next to the profile.

``<output stem>.measurements.jsonl`` starts with a header line describing the device;
each finished case appends one record and is flushed and fsync'ed, so an interrupted
run keeps everything it measured. ``--resume`` reloads the file, refuses one taken on
a different device or thread count, and reuses every final record (ok or skipped)
instead of measuring it again. Without ``--resume`` an existing file is moved aside to
``….jsonl.prev`` rather than overwritten.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from calibrate.measure.records import FINAL_STATUSES, Record
from roofline.boundary.inputs import read_bytes
from roofline.boundary.limits import MAX_STORE_FILE_BYTES
from roofline.errors import CalibrationError

STORE_VERSION = 1
MATCH_KEYS = ("device", "device_name", "threads", "world_size")


def measurements_path(output: Path) -> Path:
    """``cpu.yaml`` -> ``cpu.measurements.jsonl`` in the same folder."""
    return output.with_name(output.stem + ".measurements.jsonl")


class Store:
    """Append-only JSONL store of records keyed by ``record["key"]`` (the latest line wins)."""

    def __init__(self, path: Path, header: dict[str, Any], resume: bool, write: bool = True) -> None:
        self.path = path
        self.write = write
        self._records: dict[str, Record] = {}
        self.reused: set[str] = set()
        self.bad_lines = 0
        self.invalid: list[str] = []
        if not write:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        if resume and path.exists():
            self._load(header)
        else:
            if path.exists():
                os.replace(path, path.with_name(path.name + ".prev"))
            self._append({"type": "header", "version": STORE_VERSION, **header})

    def _load(self, header: dict[str, Any]) -> None:
        raw = read_bytes(self.path, "calibration store", MAX_STORE_FILE_BYTES, CalibrationError)
        end = raw.rfind(b"\n") + 1
        if end < len(raw):  # a torn last line (killed mid-write): cut it so the next record starts on its own line
            self.bad_lines += 1
            with self.path.open("r+b") as fh:
                fh.truncate(end)
            raw = raw[:end]
        old: dict[str, Any] | None = None
        invalid: list[str] = []
        for n, line in enumerate(raw.splitlines(), 1):
            try:
                obj = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                self.bad_lines += 1  # a line cut short by a kill, or edited by hand
                continue
            if isinstance(obj, dict) and obj.get("type") == "header":
                old = obj
            elif isinstance(obj, dict) and obj.get("type") == "note":
                continue
            else:
                problem = record_problem(obj)
                if problem is not None:
                    invalid.append(f"line {n}: {problem}")
                    continue
                self._records[obj["key"]] = obj
        if old is not None:
            diff = [
                f"{k}: {old.get(k)!r} then, {header.get(k)!r} now" for k in MATCH_KEYS if old.get(k) != header.get(k)
            ]
            if diff:
                raise CalibrationError(
                    f"cannot resume from {self.path}: it was measured under different conditions ({'; '.join(diff)}). "
                    "Drop --resume to start afresh (the old file is kept as .prev) or choose another -o."
                )
        if self.bad_lines:
            self._append({"type": "note", "note": f"{self.bad_lines} unreadable line(s) skipped on resume"})
        if invalid:
            self.invalid = invalid
            shown = "; ".join(invalid[:5]) + (f"; and {len(invalid) - 5} more" if len(invalid) > 5 else "")
            sys.stderr.write(
                f"warning: {self.path}: {len(invalid)} invalid record(s) ignored and measured again: {shown}\n"
            )
            self._append({"type": "note", "note": f"{len(invalid)} invalid record(s) ignored on resume"})

    def _append(self, obj: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(obj, allow_nan=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def done(self, key: str) -> bool:
        """True when ``key`` has a final record (ok or skipped) that a resume reuses."""
        rec = self._records.get(key)
        return rec is not None and rec.get("status") in FINAL_STATUSES

    def reuse(self, key: str) -> None:
        """Count ``key`` as reused from an earlier run."""
        self.reused.add(key)

    def add(self, rec: Record) -> None:
        """Keep ``rec`` and append it to the file at once."""
        self._records[rec["key"]] = rec
        if self.write:
            self._append(rec)

    def records(self) -> list[Record]:
        """Latest record per key, in first-seen order."""
        return list(self._records.values())


_STATUSES = ("ok", "skipped", "rejected", "error")


def record_problem(obj: object) -> str | None:
    """Why ``obj`` is not a usable record (see calibrate.measure.records), or None.

    A record needs a string ``key`` and ``suite``, a known ``status`` and a ``params`` mapping;
    an ok record also needs a positive finite ``median_s`` and positive finite ``samples_s``.
    """
    if not isinstance(obj, dict):
        return f"not a JSON object ({type(obj).__name__})"
    for name in ("key", "suite"):
        if not isinstance(obj.get(name), str) or not obj[name]:
            return f"field '{name}' must be a non-empty string, got {obj.get(name)!r}"
    if obj.get("status") not in _STATUSES:
        return f"{obj['key']}: field 'status' must be one of {', '.join(_STATUSES)}, got {obj.get('status')!r}"
    if not isinstance(obj.get("params"), dict):
        return f"{obj['key']}: field 'params' must be a mapping"
    if obj["status"] == "ok":
        t = obj.get("median_s")
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t <= 0:
            return f"{obj['key']}: median_s {t!r} is not a positive finite number of seconds"
        samples = obj.get("samples_s") or []
        if not isinstance(samples, list) or any(
            isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x <= 0 for x in samples
        ):
            return f"{obj['key']}: samples_s must be a list of positive finite seconds"
    return None
