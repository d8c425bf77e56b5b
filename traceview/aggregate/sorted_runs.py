"""Look-ups in a column that comes as a few strictly increasing runs (the runtime calls'
correlation ids: one run per reading thread or part), searched run by run in the column
itself: no sorted copy of it, and the queries taken a pass at a time, so the temporaries
are a pass's size whatever the trace's."""

from __future__ import annotations

import itertools

import numpy as np

RUNS_MAX = 8  # more runs: a search per run costs more than one sort of the column
_PASS = 1 << 16  # queries a pass


def increasing_runs(keys: np.ndarray, most: int = RUNS_MAX) -> list[tuple[int, int]] | None:
    """The [start, end) bounds of ``keys``' strictly increasing runs (none when it is
    empty), or None when there are more than ``most`` of them."""
    if len(keys) == 0:
        return []
    breaks = np.flatnonzero(keys[1:] <= keys[:-1])
    if len(breaks) >= most:
        return None
    return list(itertools.pairwise([0, *(breaks + 1).tolist(), len(keys)]))


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
        part, into = query[lo : lo + _PASS], out[lo : lo + _PASS]
        for start, end in runs:
            at, hit = _found(keys[start:end], part)
            found = values[start:end][at]
            hit &= (into == missing) | (found < into)
            into[hit] = found[hit]
    return out


def contains(keys: np.ndarray, runs: list[tuple[int, int]], query: np.ndarray) -> np.ndarray:
    """Per query key: whether ``keys`` (in the increasing ``runs``) holds it."""
    out = np.zeros(len(query), dtype=bool)
    for lo in range(0, len(query), _PASS):
        part, into = query[lo : lo + _PASS], out[lo : lo + _PASS]
        for start, end in runs:
            into |= _found(keys[start:end], part)[1]
    return out


def _found(run: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each query would be in ``run`` (clipped into it) and whether it is there."""
    at = np.searchsorted(run, query)
    np.minimum(at, len(run) - 1, out=at)
    return at, run[at] == query
