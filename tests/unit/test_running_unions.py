"""Unions and group sums fed a pass at a time (``RunningUnions``, ``GroupSums``) against the
same over every row at once (``unions``, ``by_group``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceview.aggregate import sums
from traceview.aggregate.intervals import RunningUnions, unions

ROW = st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(1, 15))  # segment, start, length


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(ROW, max_size=40), cut=st.integers(1, 7))
def test_passes_give_the_unions_of_all_rows(rows: list[tuple[int, int, int]], cut: int) -> None:
    rows = sorted(rows, key=lambda r: r[1])  # start order; segments mixed
    segment, start, length = (np.array([r[i] for r in rows], dtype=np.int64) for i in range(3))
    running = RunningUnions(4)
    for lo in range(0, len(rows), cut):  # each pass grouped by segment, start order kept
        at = slice(lo, lo + cut)
        order = np.argsort(segment[at], kind="stable")
        running.add(segment[at][order], start[at][order], (start + length)[at][order])
    expected = np.zeros(4, dtype=np.int64)
    if rows:
        u = unions(segment, start, start + length, holes=False)
        expected[u.segment] = u.busy
        assert running.first[u.segment].tolist() == u.first.tolist()
        assert running.reach[u.segment].tolist() == u.last.tolist()
    assert running.busy().tolist() == expected.tolist()
    assert running.seen.tolist() == [g in segment.tolist() for g in range(4)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**62), 2**62), max_size=30), st.integers(1, 4), st.booleans())
def test_group_sums_in_parts_are_by_group(values: list[int], cut: int, ordered: bool) -> None:
    array = np.array(values, dtype=np.int64)
    group = np.arange(len(values)) % 3
    if ordered:
        group.sort()
    parts = sums.GroupSums(3)
    if sum(abs(v) for v in values) >= 2**63:
        with pytest.raises(sums.SumOverflow):
            for lo in range(0, len(values), cut):
                parts.add(group[lo : lo + cut], array[lo : lo + cut])
        return
    for lo in range(0, len(values), cut):
        parts.add(group[lo : lo + cut], array[lo : lo + cut])
    assert parts.out.tolist() == sums.by_group(group, array, 3).tolist()
