"""The galloping replica search returns what a scan from the first count returns, with fewer probes."""

from __future__ import annotations

import pytest

from roofline.serving.plan.replica_search import fewest_meeting


def _scan(first: int, last: int, meets_from: int | None, hopeless_at: int | None) -> tuple[int, bool]:
    """The reference: try every count from ``first`` up, as the sizing did before the search."""
    for r in range(first, last + 1):
        if meets_from is not None and r >= meets_from:
            return r, True
        if hopeless_at is not None and r >= hopeless_at:
            return r, False
    return last, False


@pytest.mark.parametrize("first", [1, 2, 5])
@pytest.mark.parametrize("span", [0, 1, 3, 8])
def test_search_matches_a_scan_when_meeting_is_monotone(first: int, span: int) -> None:
    """GIVEN every answer position in first … first + span (and none) WHEN meeting is monotone in the count THEN
    the search returns the scan's count and verdict, probes each count at most once, and the payload is the
    returned count's."""
    last = first + span
    for meets_from in [*range(first, last + 1), None]:
        probed: list[int] = []

        def probe(r: int, m: int | None = meets_from, probed: list[int] = probed) -> tuple[bool, bool, int]:
            probed.append(r)
            return (m is not None and r >= m), False, 10 * r

        got = fewest_meeting(first, last, probe)
        want = _scan(first, last, meets_from, None)
        assert (got[0], got[1]) == want and got[2] == 10 * got[0]
        assert len(probed) == len(set(probed))


def test_a_search_that_never_meets_takes_five_probes_over_nine_counts() -> None:
    """first … first + 8 and nothing meets: probes first, +1, +2, +4, +8 (a scan took 9) and ends at the last."""
    probed: list[int] = []

    def probe(r: int) -> tuple[bool, bool, None]:
        probed.append(r)
        return False, False, None

    assert fewest_meeting(3, 11, probe)[:2] == (11, False)
    assert probed == [3, 4, 5, 7, 11]


def test_the_worst_case_costs_at_most_one_probe_more_than_a_scan() -> None:
    """Over answers first … first + 8: never more than scan + 1 probes, and fewer in total."""
    total_search, total_scan = 0, 0
    for k in range(9):
        probed: list[int] = []

        def probe(r: int, k: int = k, probed: list[int] = probed) -> tuple[bool, bool, None]:
            probed.append(r)
            return r >= 1 + k, False, None

        assert fewest_meeting(1, 9, probe)[:2] == (1 + k, True)
        assert len(probed) <= (k + 1) + 1
        total_search, total_scan = total_search + len(probed), total_scan + k + 1
    assert total_search < total_scan


def test_a_hopeless_probe_ends_the_search() -> None:
    """A probe that says more replicas cannot help stops the search there, not met (the scan's rule)."""
    probed: list[int] = []

    def probe(r: int) -> tuple[bool, bool, str]:
        probed.append(r)
        return False, r >= 4, f"at {r}"

    assert fewest_meeting(2, 10, probe) == (4, False, "at 4")
    assert probed == [2, 3, 4]
