"""StepRows (the GPU rows of each step window, by their launch or start) against a plain
Python reading of its definition, on both of its orders: the packed key and, where the
points' span does not fit one, the points sorted apart."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceview.analyses.core import steps as steps_module
from traceview.analyses.core.devices import NO_LAUNCH, LaunchTimes
from traceview.analyses.core.steps import StepRows, Window
from traceview.columns.model import StreamKey, TraceEvents
from traceview.columns.schema import GpuColumns, RuntimeColumns, empty
from traceview.read.reader import ReadStats


def _events(ts: np.ndarray) -> TraceEvents:
    n = len(ts)
    gpu = GpuColumns(
        kind=np.zeros(n, dtype=np.int8),
        name=np.zeros(n, dtype=np.int32),
        stream=np.zeros(n, dtype=np.int32),
        ts=ts,
        dur=np.ones(n, dtype=np.int64),
        correlation=np.full(n, -1, dtype=np.int64),
        launch=np.zeros(n, dtype=np.int32),
    )
    return TraceEvents(
        path="hand-made.json",
        size_bytes=0,
        header={},
        read=ReadStats(events=n),
        names=["k"],
        streams=[StreamKey(0, 7)],
        gpu=gpu,
        runtime=empty(RuntimeColumns),
        steps=[],
        span_ns=None,
        quality=Counter(),
    )


def _inside(points: np.ndarray, rows: list[int], w: Window) -> list[int]:
    """The rows whose point is in [start, end], by point, then by place in ``rows``."""
    found = [
        (int(points[r]), at, r)
        for at, r in enumerate(rows)
        if w.start_ns <= int(points[r]) <= w.end_ns
    ]
    return [r for _, _, r in sorted(found)]


def _reference(
    points: dict[bool, np.ndarray], rows: list[int], windows: list[Window]
) -> tuple[list[int], list[int]]:
    """members' definition: window by window, its rows; where windows overlap (as
    steps._overlapping decides: one starts before another ends), each row in the shortest of
    its windows (then the latest to start, then the first met, launch windows before
    GPU-only ones) and a window's rows in ascending order."""
    each = [_inside(points[w.gpu_only], rows, w) for w in windows]
    overlap = steps_module._overlapping(windows)
    if not overlap:
        return [r for rs in each for r in rs], [i for i, rs in enumerate(each) for _ in rs]
    met = [i for kind in (False, True) for i, w in enumerate(windows) if w.gpu_only == kind]
    chosen: dict[int, int] = {}
    for i in met:
        for r in each[i]:
            w, best = windows[i], chosen.get(r)
            if best is None or (w.end_ns - w.start_ns, -w.start_ns) < (
                windows[best].end_ns - windows[best].start_ns,
                -windows[best].start_ns,
            ):
                chosen[r] = i
    member = [r for i in range(len(windows)) for r in sorted(r for r in chosen if chosen[r] == i)]
    return member, [chosen[r] for r in member]


_SPANS = {"narrow": (0, 5_000), "epoch": (1_700_000_000 * 10**9, 1_700_000_100 * 10**9)}


@st.composite
def _cases(draw: Any, span: str) -> tuple[np.ndarray, np.ndarray, list[int], list[Window]]:
    lo, hi = _SPANS[span]
    n = draw(st.integers(0, 60))
    value = st.integers(lo, hi)
    ts = np.array(draw(st.lists(value, min_size=n, max_size=n)), dtype=np.int64)
    launch = np.array(draw(st.lists(value, min_size=n, max_size=n)), dtype=np.int64)
    if n and draw(st.booleans()):  # ties: a few distinct points
        launch = launch[np.arange(n) % 3]
    rows = draw(st.permutations(range(n)))[: draw(st.integers(0, n))]
    if draw(st.booleans()):
        rows = sorted(rows)
    edge = st.integers(lo - 100, hi + 100) | st.sampled_from([lo, hi, -(2**61), 2**61])
    windows = [
        Window(a, b, gpu_only)
        for a, b, gpu_only in draw(st.lists(st.tuples(edge, edge, st.booleans()), max_size=6))
    ]
    if draw(st.booleans()):  # back to back, as ProfilerSteps are
        edges = sorted({w.start_ns for w in windows})
        windows = [
            Window(a, b, w.gpu_only) for a, b, w in zip(edges, edges[1:], windows, strict=False)
        ]
    if windows and draw(st.booleans()):  # a trace's copies: the same windows again
        windows = windows * draw(st.integers(2, 3))
    return ts, launch, rows, windows


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("span", sorted(_SPANS))
@pytest.mark.parametrize("given_as", ["launch", "first"])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_step_rows_are_each_windows_rows_by_point(
    packed: bool, span: str, given_as: str, data: st.DataObject
) -> None:
    ts, launch, rows, windows = data.draw(_cases(span))
    if given_as == "first":  # LaunchTimes: rows without a launch take their own start
        first = launch.copy()
        first[data.draw(st.lists(st.integers(0, max(len(ts) - 1, 0)), max_size=len(ts)))] = (
            NO_LAUNCH
        )
        launch = np.where(first == NO_LAUNCH, ts, first)
        kept = first.copy()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(steps_module, "_PASS", 7)  # rows cross passes
        if not packed:
            m.setattr(steps_module, "_KEY_BITS", 1)  # no span fits: the points sorted apart
        given = launch if given_as == "launch" else LaunchTimes(ts, first)  # made as asked
        by = StepRows(_events(ts), np.array(rows, dtype=np.int32), given)
        member, owner = by.members(windows)
        within = [by.within(w).tolist() for w in windows]
        inside = by.inside(windows)
        kinds = {w.gpu_only for w in windows}
        if rows and kinds:
            assert all((by._by_point(k).order is None) == packed for k in kinds)
    if given_as == "first":
        assert np.array_equal(first, kept)  # the links' launches are read, never written
    points = {False: launch, True: ts}
    assert (member.tolist(), owner.tolist()) == _reference(points, rows, windows)
    assert within == [_inside(points[w.gpu_only], rows, w) for w in windows]
    assert member.dtype == np.int32
    union = {r for w in windows for r in _inside(points[w.gpu_only], rows, w)}
    assert np.flatnonzero(inside).tolist() == sorted(union)
    assert len(inside) == len(ts)


def test_launch_times_made_as_asked_leave_the_launches_alone() -> None:
    ts = np.arange(10, dtype=np.int64) * 100
    first = np.array([5, NO_LAUNCH, 7, NO_LAUNCH, 9, 1, NO_LAUNCH, 3, 2, NO_LAUNCH], dtype=np.int64)
    kept = first.copy()
    times = LaunchTimes(ts, first)
    whole = np.where(first == NO_LAUNCH, ts, first)
    assert len(times) == 10
    assert times[2:7].tolist() == whole[2:7].tolist()  # a slice: a view of the launches
    assert times[np.array([9, 0, 3])].tolist() == whole[[9, 0, 3]].tolist()
    assert np.array_equal(first, kept)


def test_rows_in_many_windows_are_gathered_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Overlapping windows (here 200 copies of one, and one inside them): each row is taken
    once, not once per window holding it (a trace repeated 1,012 times over the same span
    took 17 GB in summary so)."""
    ts = np.arange(50, dtype=np.int64) * 10
    gathered: list[int] = []
    ranges_of = steps_module._ranges_of

    def spy(*args: Any) -> tuple[np.ndarray, np.ndarray]:
        got, owner = ranges_of(*args)
        gathered.append(len(got))
        return got, owner

    monkeypatch.setattr(steps_module, "_ranges_of", spy)
    windows = [Window(0, 1_000, False)] * 200 + [Window(100, 200, False)]
    by = StepRows(_events(ts), np.arange(50, dtype=np.int32), ts)
    member, owner = by.members(windows)
    assert sum(gathered) == 50
    assert (member.tolist(), owner.tolist()) == _reference({False: ts}, list(range(50)), windows)
    assert set(owner.tolist()) == {0, 200}  # the first of equal windows, and the inner one
