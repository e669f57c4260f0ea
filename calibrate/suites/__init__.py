"""Measurement suites. Each module's ``cases(ctx)`` yields :class:`calibrate.measure.records.Case` objects,
most informative first, so a run cut short by its budget still covers each suite's range."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from calibrate.measure.context import SuiteContext
from calibrate.measure.records import Case
from calibrate.suites import attention, collective, gemm, memory, overhead

SUITE_CASES: dict[str, Callable[[SuiteContext], Iterator[Case]]] = {
    "overhead": overhead.cases,
    "memory": memory.cases,
    "gemm": gemm.cases,
    "attention": attention.cases,
    "collective": collective.cases,
}
