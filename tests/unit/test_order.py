"""The fast sorting and grouping helpers give exactly what np.lexsort and np.unique give."""

from __future__ import annotations

import itertools
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceview.aggregate import intervals as intervals_module
from traceview.aggregate import sorted_pairs as sorted_pairs_module
from traceview.aggregate.intervals import unions
from traceview.aggregate.order import (
    dense_ids,
    distinct,
    groups_in_order,
    lex_order,
    lex_order_of_rows,
    packed,
    packed_order,
    positions_where,
)
from traceview.aggregate.percentiles import nearest_rank
from traceview.aggregate.sorted_pairs import SortedPairs

INT64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def key_columns(draw: st.DrawFn) -> list[np.ndarray]:
    """2 to 4 int64 columns, the last (primary) of small ids; few distinct values, many ties."""
    n = draw(st.integers(0, 60))
    width = draw(st.sampled_from([3, 1000, 2**40, None]))
    minor = INT64 if width is None else st.integers(-width, width)
    columns = [
        np.array(draw(st.lists(minor, min_size=n, max_size=n)), dtype=np.int64)
        for _ in range(draw(st.integers(1, 3)))
    ]
    ids = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    return [*columns, np.array(ids, dtype=np.int32)]


@settings(max_examples=150, deadline=None)
@given(keys=key_columns())
def test_lex_order_is_lexsort(keys: list[np.ndarray]) -> None:
    assert lex_order(keys).tolist() == np.lexsort(keys).tolist()


@settings(max_examples=150, deadline=None)
@given(keys=key_columns())
def test_groups_in_order_is_a_walk_over_the_rows(keys: list[np.ndarray]) -> None:
    """Groups numbered as a loop over the rows first meets them, with their first rows."""
    seen: dict[tuple[int, ...], int] = {}
    rows = zip(*(k.tolist() for k in keys), strict=True)
    group = [seen.setdefault(row, len(seen)) for row in rows]
    first, found = groups_in_order(keys)
    assert found.tolist() == group
    assert first.tolist() == [group.index(g) for g in range(len(seen))]


@settings(max_examples=150, deadline=None)
@given(keys=key_columns(), picks=st.lists(st.integers(0, 10**6), max_size=80))
def test_lex_order_of_rows_is_lexsort_of_the_rows(keys: list[np.ndarray], picks: list[int]) -> None:
    """Of some rows (repeated, in any order) of the columns: the order lexsort gives their
    gathered keys, the ties asked for by position among those rows."""
    major, minor, ties = keys[-1], keys[-2], keys[:-2]
    n = len(minor)
    rows = np.array([p % n for p in picks] if n else [], dtype=np.int32)
    found = lex_order_of_rows(major, minor, rows, lambda at: [t[rows[at]] for t in ties])
    assert found.tolist() == np.lexsort([k[rows] for k in keys]).tolist()


def test_lex_order_of_rows_past_a_pass() -> None:
    rng = np.random.default_rng(11)
    n = 2 * (1 << 16) + 9
    minor = rng.integers(-(1 << 40), 1 << 40, n).astype(np.int64)
    minor[::7] = minor[0]  # ties on (major, minor) across passes
    major = rng.integers(0, 5, n).astype(np.int32)
    tie = rng.integers(0, 3, n).astype(np.int64)
    rows = rng.permutation(n)[: n - 100].astype(np.int32)
    want = np.lexsort((tie[rows], minor[rows], major[rows])).tolist()
    found = lex_order_of_rows(major, minor, rows, lambda at: [tie[rows[at]]])
    assert found.tolist() == want
    packed = packed_order(major, minor, lambda at: [tie[rows[at]]], rows)
    assert packed is not None and packed.tolist() == want


def test_lex_order_with_ties_beyond_the_packed_keys() -> None:
    ts = np.array([5, 5, 5, 1, 5, 1], dtype=np.int64)
    stream = np.array([1, 1, 1, 0, 1, 0], dtype=np.int32)
    end = np.array([9, 7, 9, 3, 7, 2], dtype=np.int64)
    rank = np.array([2, 1, 0, 0, 1, 0], dtype=np.int64)
    keys = (rank, end, ts, stream)
    assert lex_order(keys).tolist() == np.lexsort(keys).tolist() == [5, 3, 1, 4, 2, 0]


@settings(max_examples=150, deadline=None)
@given(keys=key_columns())
def test_packed_order_is_lexsort(keys: list[np.ndarray]) -> None:
    """The tie keys asked for only where (major, minor) tie; int32 positions; None where
    the packed key (with the position) would not fit."""
    major, minor, ties = keys[-1], keys[-2], keys[:-2]
    found = packed_order(major, minor, lambda rows: [t[rows] for t in ties])
    n = len(minor)
    bits = (int(minor.max()) - int(minor.min())).bit_length() + n.bit_length() if n else 0
    fits = n > 0 and (int(major.max()) + 1) << bits <= 2**63
    assert (found is not None) == fits
    if found is None:
        return
    assert found.dtype == np.int32
    assert found.tolist() == np.lexsort(keys).tolist()


@settings(max_examples=150, deadline=None)
@given(keys=key_columns(), picks=st.lists(st.integers(0, 10**6), max_size=80))
def test_packed_order_of_rows_is_lexsort_of_the_rows(
    keys: list[np.ndarray], picks: list[int]
) -> None:
    """``rows``: the order of the gathered rows, ties by position among them; None exactly
    where the gathered columns' packed key would not fit."""
    major, minor, ties = keys[-1], keys[-2], keys[:-2]
    n = len(minor)
    rows = np.array([p % n for p in picks] if n else [], dtype=np.int32)
    found = packed_order(major, minor, lambda at: [t[rows[at]] for t in ties], rows)
    gathered = packed_order(major[rows], minor[rows], lambda at: [t[rows][at] for t in ties])
    assert (found is None) == (gathered is None)
    if found is not None:
        assert found.tolist() == np.lexsort([k[rows] for k in keys]).tolist()


def test_packed_order_past_a_pass() -> None:
    """Runs of ties across pass boundaries, a few shuffled runs of starts."""
    rng = np.random.default_rng(7)
    n = 3 * (1 << 16) + 5
    minor = np.repeat(rng.integers(0, 1 << 30, n // 3 + 1), 3)[:n].astype(np.int64)
    major = rng.integers(0, 3, n).astype(np.int16)
    tie = rng.integers(0, 4, n).astype(np.int64)
    found = packed_order(major, minor, lambda rows: [tie[rows]])
    assert found is not None
    assert found.tolist() == np.lexsort((tie, minor, major)).tolist()
    one = packed_order(None, minor)  # one group: by minor, then position
    assert one is not None and one.tolist() == np.argsort(minor, kind="stable").tolist()
    assert packed_order(major, np.zeros(0, dtype=np.int64)) is None
    assert packed_order(major, minor.astype(np.int32)) is None
    assert packed_order(np.array([0, 1], dtype=np.int8), np.array([0, 2**62])) is None


def test_packed_refuses_keys_beyond_63_bits() -> None:
    ids = np.array([0, 3], dtype=np.int32)
    assert packed(ids, np.array([0, 2**61], dtype=np.int64)) is None
    assert packed(np.array([-1, 0]), np.array([0, 1], dtype=np.int64)) is None
    assert packed(ids, np.array([-(2**62), 2**62 - 1], dtype=np.int64)) is None
    keys, bits, low = packed(ids, np.array([-5, 2], dtype=np.int64))  # type: ignore[misc]
    assert (keys.tolist(), bits, low) == ([0, (3 << 3) | 7], 3, -5)


@settings(max_examples=200, deadline=None)
@given(
    runs=st.lists(st.lists(st.integers(-5, 400), max_size=40), max_size=4),
    dtype=st.sampled_from([np.int8, np.int32, np.int64, np.uint16, np.uint64, np.float64]),
    ascending=st.booleans(),
)
def test_distinct_is_unique(runs: list[list[int]], dtype: type, ascending: bool) -> None:
    # small ids (marked), a few ascending runs (the stable sort), anything else (quicksort)
    parts = [sorted(r) if ascending else r for r in runs]
    values = [abs(v) % 120 if np.dtype(dtype).kind == "u" or dtype is np.int8 else v
              for v in itertools.chain.from_iterable(parts)]  # fmt: skip
    array = np.array(values, dtype=dtype)
    got, want = distinct(array), np.unique(array)
    assert got.dtype == want.dtype
    assert got.tolist() == want.tolist()


@settings(max_examples=100, deadline=None)
@given(
    keys=st.lists(st.integers(0, 300), max_size=50),
    bound=st.sampled_from([301, 10**6]),
    dtype=st.sampled_from([np.int16, np.int32, np.int64]),
    narrow=st.booleans(),
)
def test_dense_ids_is_unique_with_inverse(
    keys: list[int], bound: int, dtype: type, narrow: bool
) -> None:
    array = np.array(keys, dtype=dtype)
    used, inverse = dense_ids(array, bound, narrow=narrow)
    want_used, want_inverse = np.unique(array, return_inverse=True)
    assert used.tolist() == want_used.tolist()
    assert inverse.tolist() == want_inverse.reshape(-1).tolist()
    assert inverse.dtype == (np.int32 if narrow else np.int64)


def test_dense_ids_refuses_keys_outside_the_bound() -> None:
    """As np.bincount did below the bound; a mask would take -1 from its end."""
    with pytest.raises(ValueError, match="negative"):
        dense_ids(np.array([3, -1], dtype=np.int32), 10)
    with pytest.raises(IndexError):
        dense_ids(np.array([3, 10], dtype=np.int32), 10)


def test_nearest_rank_of_values_too_wide_to_pack() -> None:
    values = np.array([2**62, -(2**62), 7, 2**62 - 1, 0], dtype=np.int64)
    group = np.array([1, 1, 0, 1, 1], dtype=np.int64)
    got = nearest_rank(group, values, 2, (50, 100))
    assert got[50].tolist() == [7, 0]
    assert got[100].tolist() == [7, 2**62]


@settings(max_examples=200, deadline=None)
@given(
    intervals=st.lists(
        st.tuples(st.integers(0, 3), st.integers(-(10**12), 10**12), st.integers(0, 10**6)),
        max_size=40,
    ),
    ranked=st.booleans(),
    ordered=st.booleans(),
)
def test_unions_equal_a_walk_per_segment(
    intervals: list[tuple[int, int, int]], ranked: bool, ordered: bool
) -> None:
    """Per segment: first start, last end, union length and every hole, against merging
    sorted intervals by hand; ``ranked``: as when the ends' bands would overflow int64;
    ``ordered``: rows given in (segment, start) order, ties longest first, and not sorted."""
    segment = np.array([g for g, _, _ in intervals], dtype=np.int64)
    start = np.array([s for _, s, _ in intervals], dtype=np.int64)
    end = start + np.array([d for _, _, d in intervals], dtype=np.int64)
    if ordered:
        order = np.lexsort((start - end, start, segment))
        segment, start, end = segment[order], start[order], end[order]
    with mock.patch.object(intervals_module, "_BAND_LIMIT", 0 if ranked else 1 << 62):
        u = unions(segment, start, end, ordered=ordered)
        bare = unions(segment, start, end, holes=False)  # the same without the holes
    for got, want in ((bare.first, u.first), (bare.last, u.last), (bare.busy, u.busy)):
        assert got.tolist() == want.tolist()
    assert len(bare.hole_start) == len(bare.hole_end) == len(bare.hole_segment) == 0
    # with tie keys: each hole's next interval, the first (by end, then row) starting there
    tied = unions(segment, start, end, ties=(np.arange(len(end)), end))
    assert tied.hole_next is not None
    for g, hole_end, row in zip(tied.hole_segment, tied.hole_end, tied.hole_next, strict=True):
        at_end = [i for i in range(len(end)) if segment[i] == g and start[i] == hole_end]
        assert row == min(at_end, key=lambda i: (end[i], i))
    assert u.segment.tolist() == sorted(set(segment.tolist()))
    holes = []
    for i, g in enumerate(u.segment.tolist()):
        merged: list[list[int]] = []
        for s, e in sorted((s, e) for h, s, e in zip(segment, start, end, strict=True) if h == g):
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        assert (u.first[i], u.last[i]) == (merged[0][0], max(e for _, e in merged))
        assert u.busy[i] == sum(e - s for s, e in merged)
        holes += [(g, a[1], b[0]) for a, b in itertools.pairwise(merged)]
    got = list(
        zip(u.hole_segment.tolist(), u.hole_start.tolist(), u.hole_end.tolist(), strict=True)
    )
    assert got == holes


@st.composite
def pair_queries(draw: st.DrawFn) -> tuple[np.ndarray, ...]:
    """Sorted (major, minor) pairs and query pairs, queries also outside the pairs' ranges
    (negative majors, majors past the last, minors below and above), minors of any width."""
    width = draw(st.sampled_from([3, 1000, 2**40, 2**62]))
    n, m = draw(st.integers(0, 40)), draw(st.integers(0, 40))
    major = np.array(draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)), dtype=np.int32)
    minor = np.array(
        draw(st.lists(st.integers(-width, width), min_size=n, max_size=n)), dtype=np.int64
    )
    at_major = np.array(draw(st.lists(st.integers(-2, 7), min_size=m, max_size=m)), np.int64)
    at_minor = np.array(
        draw(st.lists(st.integers(-width - 5, width + 5), min_size=m, max_size=m)),
        np.int32 if width < 2**30 else np.int64,
    )
    order = np.lexsort((minor, major))
    return major[order], minor[order], at_major, at_minor


@settings(max_examples=200, deadline=None)
@given(case=pair_queries())
def test_sorted_pairs_search_is_searchsorted_over_pairs(case: tuple[np.ndarray, ...]) -> None:
    major, minor, at_major, at_minor = case
    pairs = list(zip(major.tolist(), minor.tolist(), strict=True))
    with mock.patch.object(sorted_pairs_module, "_PASS", 3):  # packed a few pairs at a time
        index = SortedPairs(major, minor)
    for side in ("left", "right"):
        found = index.search(at_major, at_minor, side).tolist()
        for a, b, at in zip(at_major.tolist(), at_minor.tolist(), found, strict=True):
            key = (a, b)
            expected = sum(1 for p in pairs if (p < key if side == "left" else p <= key))
            assert at == expected, (key, side)


@settings(max_examples=200, deadline=None)
@given(case=pair_queries())
def test_sorted_pairs_equal_range_is_both_searches(case: tuple[np.ndarray, ...]) -> None:
    major, minor, at_major, at_minor = case
    # the pairs themselves asked for too: found queries, runs of equal pairs
    at_major = np.concatenate([at_major, major.astype(at_major.dtype)])
    at_minor = np.concatenate([at_minor, minor.astype(at_minor.dtype)])
    index = SortedPairs(major, minor)
    lo, hi = index.equal_range(at_major, at_minor)
    assert lo.tolist() == index.search(at_major, at_minor, "left").tolist()
    assert hi.tolist() == index.search(at_major, at_minor, "right").tolist()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), max_size=40), st.integers(1, 9))
def test_positions_where_is_flatnonzero_in_int32(mask: list[bool], size: int) -> None:
    """A pass of ``size`` rows at a time, every pass's positions offset."""
    import traceview.aggregate.order as order

    with mock.patch.object(order, "_PASS", size):
        got = positions_where(np.array(mask, dtype=bool))
    assert got.dtype == np.int32
    assert got.tolist() == np.flatnonzero(mask).tolist()
