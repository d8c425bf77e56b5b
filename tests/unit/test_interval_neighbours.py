"""Each hole's next and previous interval from ``unions`` against a brute-force search."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceview.aggregate.intervals import unions

ROW = st.tuples(
    st.integers(0, 2),  # segment
    st.integers(0, 40),  # start
    st.integers(1, 12),  # length (> 0, as the busy events unions get)
    st.integers(0, 3),  # rank: the tie key
)


def _brute(rows: list[tuple[int, int, int, int]]) -> tuple[list[int], list[int]]:
    """Per hole in (segment, start) order: the previous interval (ending at the hole's start:
    the latest start, then the lowest rank, then the first row) and the next one (starting
    at its end: the shortest, then the lowest rank, then the first row)."""
    prev, nxt = [], []
    for segment in sorted({r[0] for r in rows}):
        mine = [(s, s + n, rank, i) for i, (g, s, n, rank) in enumerate(rows) if g == segment]
        covered = [False] * 60
        for s, e, _, _ in mine:
            for x in range(s, e):
                covered[x] = True
        first, last = min(s for s, *_ in mine), max(e for _, e, *_ in mine)
        x = first
        while x < last:
            if covered[x]:
                x += 1
                continue
            hole_start = x
            while not covered[x]:
                x += 1
            ending = [(-s, rank, i) for s, e, rank, i in mine if e == hole_start]
            starting = [(e, rank, i) for s, e, rank, i in mine if s == x]
            prev.append(min(ending)[2])
            nxt.append(min(starting)[2])
    return prev, nxt


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(ROW, min_size=1, max_size=30))
def test_hole_neighbours_match_brute_force(rows: list[tuple[int, int, int, int]]) -> None:
    segment, start, length, rank = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    end = start + length
    u = unions(segment, start, end, ties=(rank, end), prev=True)
    prev, nxt = _brute(rows)
    assert u.hole_prev is not None and u.hole_next is not None
    assert u.hole_prev.tolist() == prev
    assert u.hole_next.tolist() == nxt


def test_no_previous_interval_unless_asked() -> None:
    one = np.array([0, 0], dtype=np.int64)
    start, end = np.array([0, 10], dtype=np.int64), np.array([5, 15], dtype=np.int64)
    assert unions(one, start, end, ties=(end,)).hole_prev is None
    found = unions(one, start, end, ties=(end,), prev=True).hole_prev
    assert found is not None and found.tolist() == [0]


def test_previous_interval_needs_the_ends_as_first_tie() -> None:
    """With another first tie key, equal (start, end) rows need not be adjacent: refused."""
    one = np.zeros(3, dtype=np.int64)
    start, end, rank = (np.array(v, dtype=np.int64) for v in ([0, 0, 0], [10, 5, 10], [1, 2, 3]))
    with pytest.raises(ValueError, match="first tie key"):
        unions(one, start, end, ties=(end, rank), prev=True)
