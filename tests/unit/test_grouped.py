"""``reduce_at`` and ``place_counts`` give numpy's own results, whatever the runs."""

from __future__ import annotations

import numpy as np
import pytest

from traceview.aggregate.grouped import place_counts, reduce_at


def _points(rng: np.random.Generator, case: int) -> np.ndarray:
    """Points in order, in a few runs, in many runs, or none."""
    points = rng.integers(-5, 110, int(rng.integers(0, 300)))
    if case % 3 == 0:
        points.sort()
    elif case % 3 == 1:
        parts = np.array_split(points, 4)
        points = np.concatenate([np.sort(p) for p in parts])
    return points


@pytest.mark.parametrize("case", range(60))
@pytest.mark.parametrize("side", ["left", "right"])
def test_place_counts_is_the_bincount_of_the_searches(case: int, side: str) -> None:
    rng = np.random.default_rng(case)
    bounds = np.sort(rng.integers(0, 100, int(rng.integers(0, 12))))
    points = _points(rng, case)
    want = np.bincount(np.searchsorted(bounds, points, side=side), minlength=len(bounds) + 1)  # type: ignore[call-overload]
    assert place_counts(bounds, points, side).tolist() == want.tolist()


@pytest.mark.parametrize("case", range(40))
@pytest.mark.parametrize("ufunc", [np.minimum, np.maximum])
def test_reduce_at_is_ufunc_at(case: int, ufunc: np.ufunc) -> None:
    rng = np.random.default_rng(case)
    n = int(rng.integers(0, 400))
    # long runs of one id (rows of a step), or ids all over
    ids = np.repeat(rng.integers(0, 9, n // 20 + 1), 20)[:n] if case % 2 else rng.integers(0, 9, n)
    values = rng.integers(-1000, 1000, n)
    start = np.full(9, 7, dtype=np.int64)
    want, got = start.copy(), start.copy()
    ufunc.at(want, ids, values)
    reduce_at(ufunc, got, ids, values)
    assert got.tolist() == want.tolist()
