"""Each hole's next and previous interval from ``unions`` against a brute-force search."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceview.aggregate import intervals
from traceview.aggregate.intervals import unions, unions_in_order

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


def _sorted_columns(
    rows: list[tuple[int, int, int, int]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows' segment, start and end in (segment, start, end, rank) order."""
    order = sorted(range(len(rows)), key=lambda i: (rows[i][0], rows[i][1], rows[i][2], rows[i][3]))
    segment, start, length = (
        np.array([rows[i][k] for i in order], dtype=np.int64) for k in (0, 1, 2)
    )
    return segment, start, start + length


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(ROW, min_size=0, max_size=30),
    holes=st.booleans(),
    prev=st.booleans(),
    spans=st.booleans(),
)
def test_starts_taken_where_needed_give_the_same_unions(
    rows: list[tuple[int, int, int, int]], holes: bool, prev: bool, spans: bool
) -> None:
    """unions_in_order with the starts taken through ``starts_of`` (and the ends through
    ``ends_of``), a few rows a pass, is the Unions of the starts given as a column."""
    segment, start, end = _sorted_columns(rows)
    given_columns = unions_in_order(
        [segment, start.copy(), end.copy()], holes, True, prev, spans=spans
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(intervals, "_PASS", 3)  # several passes over a few rows
        taken = unions_in_order(
            [segment, start[:0], end.copy()],
            holes,
            True,
            prev,
            ends_of=lambda at: end[at],
            spans=spans,
            starts_of=lambda at: start[at],
        )
    for name in ("segment", "first", "last", "busy", "hole_segment", "hole_start", "hole_end"):
        assert getattr(taken, name).tolist() == getattr(given_columns, name).tolist(), name
    for name in ("hole_next", "hole_prev"):
        a, b = getattr(taken, name), getattr(given_columns, name)
        assert (a is None and b is None) or a.tolist() == b.tolist(), name


@pytest.mark.parametrize("holes", [True, False])
def test_the_result_holds_no_column_of_the_rows(holes: bool) -> None:
    """Empty hole columns are arrays of their own: a view would hold a row-sized column (the
    ends' running maximum, a copy) as long as the result lives."""
    segment = np.zeros(4, dtype=np.int64)
    start = np.array([0, 2, 10, 20], dtype=np.int64)
    reach = start + 5
    u = unions_in_order([segment, start, reach], holes=holes, spans=False)
    for name in ("hole_segment", "hole_start", "hole_end"):
        assert getattr(u, name).base is None, name  # no view of another array
