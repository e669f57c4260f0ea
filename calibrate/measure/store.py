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
import os
from pathlib import Path
from typing import Any

from calibrate.measure.records import FINAL_STATUSES, Record
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
        lines = self.path.read_text(encoding="utf-8").splitlines()
        old: dict[str, Any] | None = None
        for line in lines:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                self.bad_lines += 1  # a line cut short by a kill
                continue
            if obj.get("type") == "header":
                old = obj
            elif isinstance(obj, dict) and "key" in obj:
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
