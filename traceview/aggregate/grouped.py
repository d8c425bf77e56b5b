"""``ufunc.at`` for ids that come in runs: each run reduced at once first.

``np.maximum.at`` and ``np.minimum.at`` take ~8 ns a value; a trace's rows placed in steps
or devices come in long runs of one id (in time order), so one ``reduceat`` over the runs
and an ``at`` over one value a run give the same result in a fraction of the time.
"""

from __future__ import annotations

import itertools

import numpy as np

# Runs at least this long on average: reduced first (else ``at`` alone is as fast).
_RUN_MIN = 4


def reduce_at(ufunc: np.ufunc, out: np.ndarray, ids: np.ndarray, values: np.ndarray) -> None:
    """``ufunc.at(out, ids, values)`` (``ufunc``: np.minimum or np.maximum, whose result
    does not depend on the order), each run of equal ids reduced first."""
    if len(ids) == 0:
        return
    heads = np.flatnonzero(ids[1:] != ids[:-1])
    if (len(heads) + 1) * _RUN_MIN > len(ids):
        ufunc.at(out, ids, values)
        return
    heads += 1
    heads = np.r_[0, heads]
    ufunc.at(out, ids[heads], ufunc.reduceat(values, heads))


# More runs than this in a query's points: each point searched (the run-by-run counts cost a
# search per bound and run).
_RUNS_MAX = 64


def place_counts(bounds: np.ndarray, points: np.ndarray, side: str) -> np.ndarray:
    """``np.bincount(np.searchsorted(bounds, points, side), minlength=len(bounds) + 1)``
    (``bounds`` ascending; ``side`` "left" or "right"): how many points lie before the
    first bound, between each two, after the last. Points that come in a few increasing
    runs (CPU rows in time order) are counted by searching the bounds in each run, not
    each point among the bounds."""
    breaks = np.flatnonzero(points[1:] < points[:-1])
    if len(breaks) >= _RUNS_MAX:
        at = np.searchsorted(bounds, points, side=side)  # type: ignore[call-overload]
        counts: np.ndarray = np.bincount(at, minlength=len(bounds) + 1)
        return counts
    # a point's place is the bounds before it ("right": at or before it); in a sorted run,
    # the points from where each bound would go on the other side are past it
    other = "left" if side == "right" else "right"
    counts = np.zeros(len(bounds) + 1, dtype=np.int64)
    edges = [0, *(breaks + 1).tolist(), len(points)]
    for lo, hi in itertools.pairwise(edges):
        past = np.searchsorted(points[lo:hi], bounds, side=other)  # type: ignore[call-overload]
        counts += np.diff(past, prepend=0, append=hi - lo)
    return counts
