"""Look-ups in a column that comes as a few strictly increasing runs (the runtime calls'
correlation ids: one run per reading thread or part), searched run by run in the column
itself: no sorted copy of it, and the queries taken a pass at a time, so the temporaries
are a pass's size whatever the trace's."""

from __future__ import annotations

import itertools

import numpy as np

RUNS_MAX = 1024  # more runs: one sort of the column is the cheaper look-up
_PASS = 1 << 16  # queries a pass
OVERLAPS = 4  # more: one sort of the column is the faster look-up (H200 trace: 5 runs
# all over one range of ids, 4.6 ms sorted against 7.8 ms searched run by run)


def increasing_runs(
    keys: np.ndarray, most: int = RUNS_MAX, overlaps: int = OVERLAPS
) -> list[tuple[int, int]] | None:
    """The [start, end) bounds of ``keys``' strictly increasing runs (none when it is
    empty), or None when there are more than ``most`` of them or their ranges of keys
    overlap more than ``overlaps`` times a run on average (a query would be searched in
    that many runs)."""
    if len(keys) == 0:
        return []
    breaks = np.flatnonzero(keys[1:] <= keys[:-1])
    if len(breaks) >= most:
        return None
    bounds = [0, *(breaks + 1).tolist(), len(keys)]
    firsts, lasts = keys[bounds[:-1]], keys[np.subtract(bounds[1:], 1)]
    # per run, the runs whose range meets its own: those starting by its last key, less
    # those ending before its first
    meets = np.searchsorted(np.sort(firsts), lasts, side="right")
    meets -= np.searchsorted(np.sort(lasts), firsts, side="left")
    if int(meets.sum()) > overlaps * len(firsts):
        return None
    return list(itertools.pairwise(bounds))


def smallest_match(
    keys: np.ndarray,
    values: np.ndarray,
    runs: list[tuple[int, int]],
    query: np.ndarray,
    missing: int,
) -> np.ndarray:
    """Per query key: the smallest of ``values`` at the positions where ``keys`` (in the
    increasing ``runs``) holds it, else ``missing`` (int64 both)."""
    out = np.full(len(query), missing, dtype=np.int64)
    for lo in range(0, len(query), _PASS):
        order, ordered = _sorted(query[lo : lo + _PASS])
        best = np.full(len(ordered), missing, dtype=np.int64)
        for start, end, a, b in _spans(keys, runs, ordered):
            at, hit = _found(keys[start:end], ordered[a:b])
            found = values[start:end][at]
            into = best[a:b]
            hit &= (into == missing) | (found < into)
            into[hit] = found[hit]
        out[lo : lo + _PASS][order] = best
    return out


def smallest_at(
    keys: np.ndarray, values: np.ndarray, runs: list[tuple[int, int]], query: np.ndarray
) -> np.ndarray:
    """Per query key: the position of the smallest of ``values`` at the positions where
    ``keys`` (in the increasing ``runs``, in order) holds it, the first of equal ones; −1
    where it holds none (int64)."""
    out = np.full(len(query), -1, dtype=np.int64)
    for lo in range(0, len(query), _PASS):
        order, ordered = _sorted(query[lo : lo + _PASS])
        best = np.full(len(ordered), -1, dtype=np.int64)
        for start, end, a, b in _spans(keys, runs, ordered):
            at, hit = _found(keys[start:end], ordered[a:b])
            into = best[a:b]
            held = into >= 0
            # a later run's equal value is not smaller: the first position stays
            hit[held] &= values[start:end][at[held]] < values[into[held]]
            at += start
            into[hit] = at[hit]
        out[lo : lo + _PASS][order] = best
    return out


def in_sorted(sorted_keys: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Per query key: whether the sorted ``sorted_keys`` hold it (a binary search, not
    np.isin's sort; a pass of queries at a time)."""
    out = np.zeros(len(query), dtype=bool)
    if len(sorted_keys) == 0:
        return out
    for lo in range(0, len(query), _PASS):
        part = query[lo : lo + _PASS]
        at = np.searchsorted(sorted_keys, part)
        np.minimum(at, len(sorted_keys) - 1, out=at)
        np.equal(sorted_keys[at], part, out=out[lo : lo + _PASS])
    return out


def contains(keys: np.ndarray, runs: list[tuple[int, int]], query: np.ndarray) -> np.ndarray:
    """Per query key: whether ``keys`` (in the increasing ``runs``) holds it."""
    out = np.zeros(len(query), dtype=bool)
    for lo in range(0, len(query), _PASS):
        order, ordered = _sorted(query[lo : lo + _PASS])
        held = np.zeros(len(ordered), dtype=bool)
        for start, end, a, b in _spans(keys, runs, ordered):
            held[a:b] |= _found(keys[start:end], ordered[a:b])[1]
        out[lo : lo + _PASS][order] = held
    return out


def _sorted(part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A pass's queries sorted (timsort: they come nearly in order), and their order."""
    order = np.argsort(part, kind="stable")
    return order, part[order]


def _spans(
    keys: np.ndarray, runs: list[tuple[int, int]], ordered: np.ndarray
) -> list[tuple[int, int, int, int]]:
    """Per run that can hold some of the sorted queries: the run's [start, end) and the
    [a, b) of the queries within its first and last keys (the runs of a trace's calls
    mostly cover ranges of ids of their own, so each query is searched in about one)."""
    if len(ordered) == 0:
        return []
    firsts = keys[[start for start, _ in runs]]
    lasts = keys[[end - 1 for _, end in runs]]
    a = np.searchsorted(ordered, firsts, side="left")
    b = np.searchsorted(ordered, lasts, side="right")
    return [
        (start, end, int(lo), int(hi))
        for (start, end), lo, hi in zip(runs, a, b, strict=True)
        if hi > lo
    ]


def _found(run: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each query would be in ``run`` (clipped into it) and whether it is there."""
    at = np.searchsorted(run, query)
    np.minimum(at, len(run) - 1, out=at)
    return at, run[at] == query
