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
