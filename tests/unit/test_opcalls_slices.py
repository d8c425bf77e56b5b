"""The op calls' parent walk cut into slices (analyses.core.opcalls.parents) finds exactly the
parents the walk over every call at once finds, for nested and for overlapping calls."""

from __future__ import annotations

import numpy as np
import pytest

from traceview.analyses.core import opcalls


def _calls(seed: int, n: int, threads: int, nested: bool) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    thread = rng.integers(0, threads, n).astype(np.int32)
    if nested:  # a few top-level calls, each holding a run of nested ones
        ts = np.sort(rng.integers(0, 50 * n, n))
        end = ts + rng.integers(0, 200, n)
        ts[:: max(n // 5, 1)] -= 10  # some ends reach past later calls
    else:
        ts = rng.integers(0, 10 * n, n)
        end = ts + rng.integers(0, 30 * n, n)  # many overlap without nesting
    return thread, ts.astype(np.int64), end.astype(np.int64)


@pytest.mark.parametrize("nested", [True, False])
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("size", [1, 2, 3, 7, 64])
def test_sliced_walk_finds_the_whole_walks_parents(
    monkeypatch: pytest.MonkeyPatch, seed: int, size: int, nested: bool
) -> None:
    thread, ts, end = _calls(seed, 300, 1 + seed % 3, nested)
    whole = opcalls.parents(thread, ts, end)  # one slice: 300 < _SLICE
    monkeypatch.setattr(opcalls, "_SLICE", size)
    assert opcalls.parents(thread, ts, end).tolist() == whole.tolist()
    children = opcalls._children_time(thread, ts, end)
    has = whole >= 0
    expected = np.zeros(len(ts), dtype=np.int64)
    np.add.at(expected, whole[has], (end - ts)[has])
    assert children.tolist() == expected.tolist()


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("size", [1, 3, 64, 1 << 17])
def test_calls_in_time_order_skip_the_sort_and_find_the_same_parents(
    monkeypatch: pytest.MonkeyPatch, seed: int, size: int
) -> None:
    thread, ts, end = _calls(seed, 300, 1 + seed % 3, nested=True)
    end[::7] = ts[::7]  # instants
    ts[1::5] = ts[::5][: len(ts[1::5])]  # ties on ts (and on ts and end), kept in file order
    end[1::5] = np.maximum(end[1::5], ts[1::5])
    in_time = np.lexsort((-end, ts))  # threads interleaved, each in (ts, −end) order
    thread, ts, end = thread[in_time], ts[in_time], end[in_time]
    monkeypatch.setattr(opcalls, "_SLICE", size)
    assert opcalls._by_thread(thread, ts, end) is not None  # the sort is skipped
    fast = opcalls.parents(thread, ts, end)
    monkeypatch.setattr(opcalls, "_by_thread", lambda *columns: None)
    assert fast.tolist() == opcalls.parents(thread, ts, end).tolist()


def test_calls_out_of_time_order_are_sorted() -> None:
    thread = np.zeros(4, dtype=np.int32)
    ts, end = np.array([0, 5, 2, 9]), np.array([10, 6, 3, 9])
    assert opcalls._by_thread(thread, ts, end) is None
    assert opcalls.parents(thread, ts, end).tolist() == [-1, 0, 0, 0]


def test_calls_at_one_start_shortest_first_are_sorted() -> None:
    thread, ts, end = np.zeros(2, dtype=np.int32), np.array([0, 0]), np.array([5, 10])
    assert opcalls._by_thread(thread, ts, end) is None  # longest first at a start
    assert opcalls.parents(thread, ts, end).tolist() == [1, -1]
