"""The fewest replicas that meet the SLOs: a galloping search over replica counts.

Each replica of a deployment serves qps / replicas, so a count's latencies fall as replicas are added: a count
that meets its SLO checks stays met with more. The sizing therefore need not try every count from the first
candidate up. :func:`fewest_meeting` tries first, first + 1, first + 2, first + 4, first + 8, … (capped at
``last``) until one meets, then bisects between it and the highest count that missed: a search over k counts takes
about 2·log₂ k probes instead of k (8 more counts: at most 5 probes when none meets, against 9). Where meeting is
monotone in the count it returns what a scan from ``first`` returns (tests/test_replica_search.py); a probe
that says more replicas cannot help ends the search at once, as the scan's did. Every probe is deterministic
(its seeds are the workload's), so the search is too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: (meets, more replicas cannot help, what the caller keeps of the probe) of one replica count.
Probe = tuple[bool, bool, T]


def fewest_meeting(first: int, last: int, probe: Callable[[int], Probe[T]]) -> tuple[int, bool, T]:
    """(replicas, meets, the probe's payload): the fewest replicas in ``first`` … ``last`` whose probe meets, by
    galloping then bisection (module docstring); when none meets, the last count probed (``last``, or the one
    whose probe said more replicas cannot help) and False. Each count is probed at most once."""
    tried: dict[int, Probe[T]] = {}

    def at(r: int) -> Probe[T]:
        if r not in tried:
            tried[r] = probe(r)
        return tried[r]

    below, offset = first - 1, 0  # the highest count known to miss; the next probe's distance from first
    while True:
        r = min(first + offset, last)
        meets, hopeless, value = at(r)
        if meets:
            break
        if hopeless or r >= last:
            return r, False, value
        below, offset = r, max(1, 2 * offset)
    while r - below > 1:  # r meets, below misses (or is first − 1): bisect
        mid = (below + r) // 2
        if at(mid)[0]:
            r = mid
        else:
            below = mid
    return r, True, at(r)[2]
