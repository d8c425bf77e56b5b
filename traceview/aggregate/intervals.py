"""Unions of time intervals, per segment (a device, a stream, a step on a device)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traceview.aggregate.order import lex_order

_BAND_LIMIT = 1 << 62


@dataclass(frozen=True)
class Unions:
    """The union of the intervals of each segment (a device, a stream, a step on a device).

    Per segment present (ascending ids): ``first`` = earliest start, ``last`` = latest end,
    ``busy`` = length of the union. Per hole, i.e. per uncovered stretch of positive length
    between two consecutive maximal intervals of one segment's union, in (segment, start)
    order: ``hole_segment``, ``hole_start``, ``hole_end``. All int64 ns.
    """

    segment: np.ndarray
    first: np.ndarray
    last: np.ndarray
    busy: np.ndarray
    hole_segment: np.ndarray
    hole_start: np.ndarray
    hole_end: np.ndarray


def unions(
    segment: np.ndarray, start: np.ndarray, end: np.ndarray, ordered: bool = False
) -> Unions:
    """Every segment's union and holes at once: one sort by (segment, start), a running
    maximum of the ends within each segment, a hole wherever a start passes that maximum.

    ``segment`` holds non-negative ids; ``end ≥ start``. Linear after the sort, whatever the
    number of segments (no Python loop per segment). ``ordered``: the rows come in (segment,
    start) order already (ties in any order: the result does not depend on it), so no sort.
    """
    if ordered:
        seg, s, e = segment, start, end
    else:
        order = lex_order((start, segment))
        seg, s, e = segment[order], start[order], end[order]
        del order
    change = np.r_[len(seg) > 0, seg[1:] != seg[:-1]]
    head = np.flatnonzero(change)
    run = np.cumsum(change, dtype=np.int64)
    del change
    run -= 1
    reach = _running_max(run, head, s, e)  # latest end so far within the segment
    inner = np.ones(len(s), dtype=bool)
    inner[head] = False
    at = np.flatnonzero(inner[1:] & (s[1:] > reach[:-1])) + 1  # a start past all before it
    hole_start, hole_end, hole_run = reach[at - 1], s[at], run[at]
    tail = np.r_[head[1:], len(s)][: len(head)] - 1
    first, last = s[head], reach[tail]
    idle = sums_by_run(hole_run, hole_end - hole_start, len(head))
    return Unions(
        segment=seg[head],
        first=first,
        last=last,
        busy=last - first - idle,
        hole_segment=seg[at],
        hole_start=hole_start,
        hole_end=hole_end,
    )


def _running_max(run: np.ndarray, head: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """``max(e[head of i's run] … e[i])`` for every i (rows sorted by run, then start).

    Each run's ends are shifted into a band of its own (run · width + end − run's first
    start), so one cumulative maximum over all rows never carries across runs. When the bands
    would not fit in int64 (many runs over a long span), the ends are replaced by their ranks
    (< n, same order): bands of width n always fit, at the cost of one more sort.
    """
    if len(s) == 0:
        return e.copy()
    base = s[head][run]
    rel: np.ndarray = e - base  # ≥ 0: every end is at or after its run's first start
    width = int(rel.max()) + 1
    if len(head) * width < _BAND_LIMIT:
        _banded_max(rel, run, width)
        rel += base
        return rel
    del rel, base
    by_end = np.argsort(e, kind="stable")
    rank = np.empty(len(e), dtype=np.int64)
    rank[by_end] = np.arange(len(e))
    _banded_max(rank, run, len(e))
    return e[by_end[rank]]


def _banded_max(values: np.ndarray, run: np.ndarray, width: int) -> None:
    """Running maximum of ``values`` (each in [0, width)) within each run, in place."""
    band = run.astype(np.int64, copy=False) * width  # one band array, added and removed
    values += band
    np.maximum.accumulate(values, out=values)
    values -= band


def sums_by_run(run: np.ndarray, values: np.ndarray, runs: int) -> np.ndarray:
    """Exact int64 sums of ``values`` per id in [0, runs), ``run`` (the ids) ascending."""
    total = np.r_[0, np.cumsum(values, dtype=np.int64)]
    bounds = np.searchsorted(run, np.arange(runs + 1))
    sums: np.ndarray = total[bounds[1:]] - total[bounds[:-1]]
    return sums


def min_by_segment(segment: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The smallest value of each segment present, in ascending segment order."""
    if len(segment) == 0:
        return values[:0].copy()
    order = np.argsort(segment, kind="stable")
    seg = segment[order]
    head = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
    return np.minimum.reduceat(values[order], head)
