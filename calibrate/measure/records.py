"""What a measurement is: suite cases, benchmark callables, and the JSON record of a result.

A :class:`Case` names one measurement (``key`` is stable across runs, so ``--resume``
can recognise it), carries the work it does (``params``: FLOPs, bytes, kernels, shape)
and a ``build`` function that allocates its tensors and returns a :class:`Bench`.
A record is a plain JSON-serialisable dict; every time in it is seconds per call.

Record fields: ``key``, ``suite``, ``status`` (ok | skipped | rejected | error),
``params``, ``median_s``, ``spread`` (IQR / median of the repeats), ``samples_s``,
``calls_per_round``, ``method`` (perf_counter | cuda_event | cuda_graph), ``note``,
``wall_s`` (seconds the case took, including set-up) and ``time`` (UTC, ISO 8601).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from roofline.specs.jsontypes import JsonValue

Status = Literal["ok", "skipped", "rejected", "error"]
Record = dict[str, Any]
TimingMode = Literal["device", "host"]

SUITES: tuple[str, ...] = ("overhead", "memory", "gemm", "attention", "collective")
# statuses that --resume accepts as final; rejected and error cases are measured again
FINAL_STATUSES: tuple[Status, ...] = ("ok", "skipped")


class Skip(Exception):
    """Raised by a case's build when it cannot run here (unsupported dtype, too big, no torchrun).

    The reason is recorded with status ``skipped`` and the case is not retried on resume.
    """


def _null_context() -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


@dataclass(frozen=True)
class Bench:
    """A ready-to-time workload.

    ``fn(i)`` runs call number ``i`` (benchmarks rotate buffers with ``i``). ``context``
    wraps the whole timing (e.g. enabling TF32). ``timing`` = "device" uses CUDA events or
    graph replays on a GPU; "host" uses perf_counter (launch overheads, synchronisation).
    ``fixed_calls`` forces the calls per round (collectives must agree across ranks);
    ``min_calls`` is the number of rotated buffers: a CUDA graph gets at least that many calls
    so one replay visits every buffer; a host timer visits each once while warming up (set
    it on a CPU only for benchmarks that write, whose first write to an idle page is slow).
    """

    fn: Callable[[int], object]
    timing: TimingMode = "device"
    capturable: bool = True
    fixed_calls: int | None = None
    min_calls: int = 1
    context: Callable[[], contextlib.AbstractContextManager[Any]] = _null_context
    note: str = ""


@dataclass(frozen=True)
class Case:
    """One measurement to make: a stable key, its work (params) and how to build it."""

    suite: str
    key: str
    params: dict[str, Any]
    build: Callable[[], Bench]
    alloc_bytes: int = 0
    rate_key: str | None = None  # e.g. "flops:bf16" or "bytes": which measured rate estimates its time


@dataclass
class RunLog:
    """Counts per suite and status for the provenance block."""

    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    stopped: dict[str, str] = field(default_factory=dict)

    def add(self, suite: str, status: str) -> None:
        """Count one case of ``suite`` with ``status`` (ok, skipped, ..., reused, budget)."""
        by = self.counts.setdefault(suite, {})
        by[status] = by.get(status, 0) + 1


def now_iso() -> str:
    """Current UTC time, ISO 8601 to the second."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


def make_record(case: Case, status: Status, note: str = "", **timing: JsonValue) -> Record:
    """A JSON-ready record of ``case`` with ``status`` and timing fields (seconds per call)."""
    rec: Record = {"key": case.key, "suite": case.suite, "status": status, "params": dict(case.params)}
    rec.update(timing)
    rec["note"] = note
    rec["time"] = now_iso()
    return rec


def ok_records(records: list[Record], suite: str) -> Iterator[Record]:
    """Records of ``suite`` with status ok."""
    return (r for r in records if r.get("suite") == suite and r.get("status") == "ok")
