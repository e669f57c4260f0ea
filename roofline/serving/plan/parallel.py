"""Independent simulations fanned out over the machine's cores, with results identical to running them in turn.

Every simulation is deterministic given its seed, so the order in which workers finish cannot change a result:
:func:`map_jobs` returns ``fn(item)`` for each item in input order. ``jobs`` = 1 runs in this process; more runs a
local process pool (fork where the platform has it, so nothing is re-imported; the items and results travel by
pickle). ``jobs`` None uses every core (:func:`default_jobs`).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

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


def map_jobs(fn: Callable[[T], R], items: Sequence[T], jobs: int | None = 1) -> list[R]:
    """``[fn(x) for x in items]``, on up to ``jobs`` processes (module docstring); ``fn`` must be picklable."""
    n = min(check_jobs(jobs), len(items))
    if n <= 1:
        return [fn(x) for x in items]
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context(method)) as pool:
        return list(pool.map(fn, items))
