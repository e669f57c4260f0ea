"""Independent simulations fanned out over the machine's cores, with results identical to running them in turn.

Every simulation is deterministic given its seed, so the order in which workers finish cannot change a result:
:func:`map_jobs` returns ``fn(item)`` for each item in input order. ``jobs`` = 1 runs in this process; more runs a
local process pool (fork where the platform has it, so nothing is re-imported; the items and results travel by
pickle). ``jobs`` None uses every core (:func:`default_jobs`).

:class:`Jobs` is one pool shared by several batches (the report's hardware sizing, sensitivity variants and what-ifs):
:meth:`Jobs.start` queues a batch and returns at once, so a later batch's tasks keep the cores busy while an earlier
one's last tasks finish; its :meth:`Pending.results` are ``fn(item)`` in input order, as in turn. With one job a batch
runs in this process when its results are first asked for.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from types import TracebackType
from typing import Generic, TypeVar

from roofline.errors import ScenarioError

T = TypeVar("T")
R = TypeVar("R")

#: Most worker processes one call starts (the machine's cores bound it further).
MAX_JOBS = 64


def default_jobs() -> int:
    """The cores this process may run on (1 when unknown)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # platforms without sched_getaffinity
        return max(1, os.cpu_count() or 1)


def check_jobs(jobs: int | None) -> int:
    """``jobs`` as a worker count: None → :func:`default_jobs`; otherwise a whole number from 1 to MAX_JOBS."""
    if jobs is None:
        return default_jobs()
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= MAX_JOBS:
        raise ScenarioError(f"jobs must be a whole number from 1 to {MAX_JOBS} (got {jobs!r}); 1 runs in turn")
    return jobs


def _pool(n: int) -> ProcessPoolExecutor:
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context(method))


def map_jobs(fn: Callable[[T], R], items: Sequence[T], jobs: int | Jobs | None = 1) -> list[R]:
    """``[fn(x) for x in items]``, on up to ``jobs`` processes or on a shared :class:`Jobs` pool (module
    docstring); ``fn`` must be picklable."""
    if isinstance(jobs, Jobs):
        return jobs.start(fn, items).results()
    n = min(check_jobs(jobs), len(items))
    if n <= 1:
        return [fn(x) for x in items]
    with _pool(n) as pool:
        return list(pool.map(fn, items))


class Pending(Generic[R]):
    """A queued batch: :meth:`results` waits for it (or, with no pool, runs it in turn) and returns its results."""

    def __init__(self, futures: list[Future[R]] | None, run: Callable[[], list[R]] | None = None) -> None:
        self._futures, self._run = futures, run
        self._done: list[R] | None = None

    def results(self) -> list[R]:
        """``fn(item)`` for each item, in input order (computed once)."""
        if self._done is None:
            if self._futures is not None:
                self._done = [f.result() for f in self._futures]
            else:
                assert self._run is not None
                self._done = self._run()
        return self._done


class Jobs:
    """One process pool of ``jobs`` workers for several batches (a context manager; module docstring); ``most``:
    the most tasks that can be queued at once (no more workers are started)."""

    def __init__(self, jobs: int | None = None, most: int | None = None) -> None:
        self.n = check_jobs(jobs) if most is None else min(check_jobs(jobs), max(1, most))
        self._executor: ProcessPoolExecutor | None = None

    def __enter__(self) -> Jobs:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=exc is not None)
            self._executor = None

    def start(self, fn: Callable[[T], R], items: Sequence[T], first: Sequence[int] = ()) -> Pending[R]:
        """Queue ``fn(item)`` for each item (one job: run in turn when the results are first asked for); the items
        at the indices ``first`` (the longest, so that none is left to run alone at the end) are queued before the
        others. The results are in input order either way."""
        if self.n <= 1 or not items:
            return Pending(None, lambda: [fn(x) for x in items])
        if self._executor is None:
            self._executor = _pool(self.n)
        order = [*first, *(i for i in range(len(items)) if i not in first)]
        futures = {i: self._executor.submit(fn, items[i]) for i in order}
        return Pending([futures[i] for i in range(len(items))])
