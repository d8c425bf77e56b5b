"""The lean look-ups and unions the analyses use against brute force: searches in a column's
increasing runs (aggregate.sorted_runs), a union from starts and ends sorted apart
(aggregate.intervals.union_extent), the first launch of GPU rows (analyses.core.devices)."""

from __future__ import annotations

from random import Random
from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from traceview.aggregate import intervals, sorted_runs
from traceview.aggregate.intervals import ordered_union_extent, union_extent, unions
from traceview.aggregate.sorted_runs import (
    contains,
    in_sorted,
    increasing_runs,
    smallest_at,
    smallest_match,
)
from traceview.analyses.core import devices
from traceview.analyses.core.devices import _call_keys, _keyed_launches
from traceview.app.reading import read_trace
from traceview.columns.model import TraceEvents
from traceview.options import ReadOptions

RUN = st.lists(st.integers(-3, 60), max_size=30, unique=True).map(sorted)
CALLS = st.lists(RUN, min_size=1, max_size=6)
QUERIES = st.lists(st.integers(-5, 65), max_size=80)


def _keys(runs: list[list[int]]) -> np.ndarray:
    return np.array([k for run in runs for k in run], dtype=np.int64)


@given(st.lists(st.integers(-5, 65), max_size=40), QUERIES, st.integers(1, 7))
@settings(max_examples=200, deadline=None)
def test_in_sorted(keys: list[int], query: list[int], passes: int) -> None:
    q = np.array(query, dtype=np.int64)
    expected = [x in set(keys) for x in query]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sorted_runs, "_PASS", passes)  # several passes over the queries
        assert in_sorted(np.sort(np.array(keys, dtype=np.int64)), q).tolist() == expected


@given(CALLS, QUERIES, st.randoms(use_true_random=False))
@settings(max_examples=300, deadline=None)
def test_smallest_match_and_contains(runs: list[list[int]], query: list[int], rnd: Random) -> None:
    keys = _keys(runs)
    values = np.array([rnd.randrange(1000) for _ in keys], dtype=np.int64)
    q = np.array(query, dtype=np.int64)
    bounds = increasing_runs(keys)
    if bounds is None:  # ranges overlapping too much: the caller sorts instead
        return
    pairs = list(zip(keys.tolist(), values.tolist(), strict=True))
    expected = [min((v for k, v in pairs if k == x), default=-1) for x in q.tolist()]
    assert smallest_match(keys, values, bounds, q, -1).tolist() == expected
    assert contains(keys, bounds, q).tolist() == [x in set(keys.tolist()) for x in q]
    few = values % 4  # ties: the first position of the smallest
    at = [
        min(
            (i for i, k in enumerate(keys.tolist()) if k == x),
            key=lambda i: (few[i], i),
            default=-1,
        )
        for x in q.tolist()
    ]
    assert smallest_at(keys, few, bounds, q).tolist() == at


@given(
    st.lists(st.tuples(st.integers(-2, 12), st.integers(0, 4)), min_size=1, max_size=40),
    QUERIES,
    st.sampled_from(["runs", "keys", "sorted"]),
)
@settings(max_examples=300, deadline=None)
def test_launch_index_calls_are_the_earliest_first(
    calls: list[tuple[int, int]], query: list[int], path: str
) -> None:
    """Per id, the index of its earliest call (the first of equal starts), by each look-up;
    the start there is ``launches``'."""
    correlation = np.array([c for c, _ in calls], dtype=np.int64)
    ts = np.array([t for _, t in calls], dtype=np.int64)
    events = SimpleNamespace(runtime=SimpleNamespace(correlation=correlation, ts=ts))
    with pytest.MonkeyPatch.context() as patch:
        if path != "runs":
            patch.setattr(devices, "increasing_runs", lambda *_, **__: None)
        if path == "sorted":
            patch.setattr(devices, "_call_keys", lambda _: None)
        index = devices.LaunchIndex(cast(TraceEvents, events))
        if path == "keys" and index.keys is None:
            return  # an id on two calls: no keys
        if path == "runs" and index.runs is None:
            return
        q = np.array(query, dtype=np.int64)
        got = index.calls(q)
        launches = index.launches(q)
    pairs = [(t, i) for i, (c, t) in enumerate(calls)]
    want = [
        min((p for p, (c, _) in zip(pairs, calls, strict=True) if c == x), default=None)
        for x in query
    ]
    assert got.tolist() == [
        -1 if w is None or x < 0 else w[1] for w, x in zip(want, query, strict=True)
    ]
    none = np.iinfo(np.int64).min
    assert launches.tolist() == [
        none if w is None or x < 0 else w[0] for w, x in zip(want, query, strict=True)
    ]


def test_runs_bounds() -> None:
    keys = np.array([1, 4, 9, 2, 3, 3, 7], dtype=np.int64)
    assert increasing_runs(keys) == [(0, 3), (3, 5), (5, 7)]
    assert increasing_runs(keys, most=2) is None
    assert increasing_runs(keys[:0]) == []
    # every run over the whole range of ids: each query would be searched in all of them
    interleaved = np.tile(np.array([0, 100], dtype=np.int64), 2 * sorted_runs.OVERLAPS)
    assert increasing_runs(interleaved) is None


def test_searches_across_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sorted_runs, "_PASS", 4)
    keys = np.array([5, 6, 7, 1, 2, 3], dtype=np.int64)
    values = np.arange(6, dtype=np.int64) * 10
    q = np.array([7, 1, 9, 3, 5, 5, 2, 0, 6], dtype=np.int64)
    bounds = increasing_runs(keys)
    assert bounds is not None
    assert smallest_match(keys, values, bounds, q, -1).tolist() == [
        20, 30, -1, 50, 0, 0, 40, -1, 10,
    ]  # fmt: skip
    held = [True, True, False, True, True, True, True, False, True]
    assert contains(keys, bounds, q).tolist() == held


@given(st.lists(st.integers(-3, 60), min_size=1, max_size=40, unique=True), QUERIES)
@settings(max_examples=200, deadline=None)
def test_call_keys(ids: list[int], query: list[int]) -> None:
    """One sorted key a call: the call's start for an id it carries (negative ids never)."""
    rng = np.random.default_rng(len(ids))
    correlation = np.array(ids, dtype=np.int64)
    ts = rng.integers(0, 10**6, len(ids)).astype(np.int64)
    calls = _call_keys(correlation)
    assert calls is not None
    q = np.array(query, dtype=np.int64)
    start = dict(zip(ids, ts.tolist(), strict=True))
    expected = [start[x] if x in start and x >= 0 else np.iinfo(np.int64).min for x in query]
    assert _keyed_launches(calls, ts, q).tolist() == expected


def test_call_keys_refuse_an_id_on_two_calls() -> None:
    assert _call_keys(np.array([3, 1, 3], dtype=np.int64)) is None


INTERVALS = st.lists(st.tuples(st.integers(0, 80), st.integers(1, 15)), min_size=1, max_size=40)


@given(INTERVALS)
@settings(max_examples=300, deadline=None)
def test_union_extent_is_the_union(rows: list[tuple[int, int]]) -> None:
    start = np.array([s for s, _ in rows], dtype=np.int64)
    end = np.array([s + n for s, n in rows], dtype=np.int64)
    u = unions(np.zeros(len(rows), dtype=np.int64), start, end, holes=False)
    covered = {x for s, n in rows for x in range(s, s + n)}
    expected = (int(u.first[0]), int(u.last[0]), int(u.busy[0]))
    assert expected[2] == len(covered)
    assert union_extent(start.copy(), end.copy()) == expected


SEGMENTED = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(1, 10)), min_size=1, max_size=40
)


@given(SEGMENTED, st.sampled_from([2, 3, 7, 1 << 18]))
@settings(max_examples=300, deadline=None)
def test_unions_holes_in_passes(rows: list[tuple[int, int, int]], rows_a_pass: int) -> None:
    """Each segment's first, last, busy and holes, whatever the rows a pass of the holes."""
    seg = np.array([g for g, _, _ in rows], dtype=np.int64)
    start = np.array([s for _, s, _ in rows], dtype=np.int64)
    end = start + np.array([n for _, _, n in rows], dtype=np.int64)
    expected, holes = [], []
    for g in sorted(set(seg.tolist())):
        mine = sorted((s, s + n) for h, s, n in rows if h == g)
        reach, idle = mine[0][1], 0
        for s, e in mine[1:]:
            if s > reach:
                idle += s - reach
                holes.append((g, reach, s))
            reach = max(reach, e)
        expected.append((g, mine[0][0], reach, reach - mine[0][0] - idle))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(intervals, "_PASS", rows_a_pass)
        u = unions(seg, start, end)
    got = zip(u.segment.tolist(), u.first.tolist(), u.last.tolist(), u.busy.tolist(), strict=True)
    assert list(got) == expected
    hole_columns = (u.hole_segment.tolist(), u.hole_start.tolist(), u.hole_end.tolist())
    assert list(zip(*hole_columns, strict=True)) == holes


def test_usage_by_device_is_the_one_sort() -> None:
    """The lean per-device usage (taken from 2^19 GPU rows) against the one sort of the rows,
    over every row and over a selection, on a trace with two devices."""
    path = ROOT / "fixtures" / "demo.json.gz"
    events = read_trace(path, ReadOptions(quiet=True, cache=False), remember=False, warn=False)
    assert len({s.device for s in events.streams}) == 2
    some = np.flatnonzero(events.gpu.kind == 0)[::3]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(devices, "_LEAN_ROWS", 1 << 62)
        expected = [devices.usage(events), devices.usage(events, some)]
        patch.setattr(devices, "_LEAN_ROWS", 0)
        assert [devices.usage(events), devices.usage(events, some)] == expected


@given(INTERVALS, st.data(), st.sampled_from([1, 2, 3, 7, 1 << 18]))
@settings(max_examples=400, deadline=None)
def test_ordered_union_extent_is_union_extent(
    rows: list[tuple[int, int]], data: st.DataObject, rows_a_pass: int
) -> None:
    """The rows taken (a mask or their positions) in start order: their union a pass at a
    time is union_extent's, whatever the rows a pass; out of order, or none taken: None."""
    if data.draw(st.booleans()):
        rows = sorted(rows)
    ts = np.array([s for s, _ in rows], dtype=np.int64)
    dur = np.array([n for _, n in rows], dtype=np.int64)
    take = np.array(data.draw(st.lists(st.booleans(), min_size=len(rows), max_size=len(rows))))
    given_as = np.flatnonzero(take) if data.draw(st.booleans()) else take
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(intervals, "_PASS", rows_a_pass)
        got = ordered_union_extent(ts, dur, given_as)
    start = ts[take]
    if len(start) == 0 or bool((start[1:] < start[:-1]).any()):
        assert got is None
    else:
        assert got == union_extent(start.copy(), start + dur[take])
