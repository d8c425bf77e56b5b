"""Mergeable moments, nearest-rank percentiles and interval unions against brute force."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from traceview.aggregate import moments
from traceview.aggregate.intervals import unions
from traceview.aggregate.percentiles import nearest_rank

GROUPS = 6


@st.composite
def grouped_values(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Values 0..1e9 with group ids, plus random batch cut points."""
    n = draw(st.integers(0, 80))
    values = draw(st.lists(st.integers(0, 10**9), min_size=n, max_size=n))
    groups = draw(st.lists(st.integers(0, GROUPS - 1), min_size=n, max_size=n))
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=5)))
    return np.array(groups, dtype=np.int64), np.array(values, dtype=np.int64), cuts


def _close(got: float, want: float) -> bool:
    return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-6)


def _check(m: moments.Moments, group: np.ndarray, values: np.ndarray, groups: int) -> None:
    std = m.std()
    assert m.groups == groups
    for g in range(groups):
        v = values[group == g]
        assert m.count[g] == len(v)
        assert m.total[g] == sum(int(x) for x in v)
        if len(v) == 0:
            continue
        assert m.minimum[g] == v.min()
        assert m.maximum[g] == v.max()
        assert _close(float(m.mean[g]), float(np.mean(v.astype(np.float64))))
        if len(v) == 1:
            assert std[g] == 0.0
        else:
            assert _close(float(std[g]), float(np.std(v.astype(np.float64), ddof=1)))


@settings(max_examples=60, deadline=None)
@given(data=grouped_values(), batch=st.integers(1, 20))
def test_accumulate_and_merge_match_numpy(
    data: tuple[np.ndarray, np.ndarray, list[int]], batch: int
) -> None:
    group, values, cuts = data
    _check(moments.accumulate(group, values, GROUPS, batch=batch), group, values, GROUPS)
    merged = moments.empty(GROUPS)
    for lo, hi in zip([0, *cuts], [*cuts, len(values)], strict=True):
        merged = moments.merge(merged, moments.of_batch(group[lo:hi], values[lo:hi], GROUPS))
    _check(merged, group, values, GROUPS)
    # merging in the other order, and with a smaller group count, gives the same
    pieces = [
        moments.of_batch(group[lo:hi], values[lo:hi], GROUPS)
        for lo, hi in zip([0, *cuts], [*cuts, len(values)], strict=True)
    ]
    rev = moments.empty(1)
    for piece in reversed(pieces):
        rev = moments.merge(piece, rev)
    _check(rev, group, values, GROUPS)


@settings(max_examples=60, deadline=None)
@given(
    data=grouped_values(),
    mapping=st.lists(st.integers(0, 2), min_size=GROUPS, max_size=GROUPS),
)
def test_regroup_matches_direct(
    data: tuple[np.ndarray, np.ndarray, list[int]], mapping: list[int]
) -> None:
    group, values, _ = data
    new_groups = 3
    to_new = np.array(mapping, dtype=np.int64)
    regrouped = moments.regroup(moments.of_batch(group, values, GROUPS), to_new, new_groups)
    _check(regrouped, to_new[group], values, new_groups)
    direct = moments.of_batch(to_new[group], values, new_groups)
    assert regrouped.count.tolist() == direct.count.tolist()
    assert regrouped.total.tolist() == direct.total.tolist()


@settings(max_examples=60, deadline=None)
@given(data=grouped_values())
def test_nearest_rank_matches_sorted(data: tuple[np.ndarray, np.ndarray, list[int]]) -> None:
    group, values, _ = data
    pcts = (50, 90, 99, 100)
    got = nearest_rank(group, values, GROUPS, pcts)
    for g in range(GROUPS):
        v = sorted(int(x) for x in values[group == g])
        for p in pcts:
            want = v[math.ceil(p * len(v) / 100) - 1] if v else 0
            assert int(got[p][g]) == want, (g, p, v)


def test_nearest_rank_known_values() -> None:
    values = np.arange(1, 101, dtype=np.int64)
    got = nearest_rank(np.zeros(100, dtype=np.int64), values, 1, (50, 90, 99))
    assert [int(got[p][0]) for p in (50, 90, 99)] == [50, 90, 99]


def union_length(start: np.ndarray, end: np.ndarray) -> int:
    """The union of intervals of one segment, as ``unions`` gives it (0 when none)."""
    return int(unions(np.zeros(len(start), dtype=np.int64), start, end).busy.sum())


INTERVAL = st.tuples(st.integers(0, 60), st.integers(0, 15)).map(lambda t: (t[0], t[0] + t[1]))


@settings(max_examples=60, deadline=None)
@given(intervals=st.lists(INTERVAL, max_size=25))
def test_union_length_matches_sweep(intervals: list[tuple[int, int]]) -> None:
    covered = set()
    for s, e in intervals:
        covered.update(range(s, e))  # unit cells [x, x+1)
    start = np.array([s for s, _ in intervals], dtype=np.int64)
    end = np.array([e for _, e in intervals], dtype=np.int64)
    assert union_length(start, end) == len(covered)


def test_union_length_nested_and_touching() -> None:
    start = np.array([0, 2, 10, 20, 20], dtype=np.int64)
    end = np.array([10, 5, 15, 20, 25], dtype=np.int64)
    assert union_length(start, end) == 20
    assert union_length(np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)) == 0


@settings(max_examples=200, deadline=None)
@given(
    data=grouped_values(),
    batch=st.integers(1, 9),
    counted=st.lists(st.booleans(), min_size=80, max_size=80),
)
def test_counted_rows_equal_the_counted_rows_alone(
    data: tuple[np.ndarray, np.ndarray, list[int]], batch: int, counted: list[bool]
) -> None:
    """The rows of a mask among others in a group of their own (``counted``): each group's
    moments, std to the last bit, equal those of the counted rows taken out alone."""
    group, values, _ = data
    mask = np.array(counted[: len(values)], dtype=bool)
    outside = np.where(mask, group, GROUPS)  # the rows left out: one group after the others
    got = moments.accumulate(outside, values, GROUPS + 1, batch=batch, counted=mask)
    alone = moments.accumulate(group[mask], values[mask], GROUPS, batch=batch)
    for name in ("count", "total", "minimum", "maximum", "mean"):
        kept = alone.count > 0
        assert np.array_equal(getattr(got, name)[:GROUPS][kept], getattr(alone, name)[kept])
    assert got.std()[:GROUPS].tobytes() == alone.std().tobytes()


@settings(max_examples=60, deadline=None)
@given(
    data=grouped_values(),
    batch=st.integers(1, 30),
    piece=st.integers(1, 7),
    negative=st.booleans(),
)
def test_m2_in_pieces_is_the_batch_s_bincount_to_the_last_bit(
    data: tuple[np.ndarray, np.ndarray, list[int]], batch: int, piece: int, negative: bool
) -> None:
    """Each batch's squares added a piece at a time (np.add.at) are, to the last bit, what
    one bincount over the batch adds: the sums in the same order."""
    group, values, _ = data
    values = values - 5 * 10**8 if negative else values
    got = moments.accumulate(group, values, GROUPS, batch=batch)
    m2 = np.zeros(GROUPS)
    for lo in range(0, len(values), batch):
        part = group[lo : lo + batch]
        squares = values[lo : lo + batch] - got.mean[part]
        squares *= squares
        m2 += np.bincount(part, weights=squares, minlength=GROUPS)
    assert got.m2.tobytes() == m2.tobytes()
    old = moments._PIECE
    try:
        moments._PIECE = piece
        small = moments.accumulate(group, values, GROUPS, batch=batch)
    finally:
        moments._PIECE = old
    assert small.m2.tobytes() == m2.tobytes()
