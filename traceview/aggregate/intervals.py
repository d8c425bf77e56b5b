"""Unions of time intervals, per segment (a device, a stream, a step on a device)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from traceview.aggregate import sums
from traceview.aggregate.order import joined, lex_order

_BAND_LIMIT = 1 << 62
_RUNS_ONE_BY_ONE = 256  # up to this many runs, a running maximum a run (a loop in Python)


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
    # Per hole, the interval that ends it (its index in the input): the first at the hole's
    # end in (segment, start, *ties) order; None unless asked for.
    hole_next: np.ndarray | None = None
    # Per hole, the interval that starts it: of those ending at the hole's start, the latest
    # to start, the first in (*ties) order among those (the end must be the first tie key,
    # ``ties[-1]``); None unless asked for.
    hole_prev: np.ndarray | None = None


def unions(
    segment: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    holes: bool = True,
    ties: tuple[np.ndarray, ...] = (),
    ordered: bool = False,
    prev: bool = False,
) -> Unions:
    """Every segment's union and holes at once: one sort by (segment, start), a running
    maximum of the ends within each segment, a hole wherever a start passes that maximum.

    ``segment`` holds non-negative ids; ``end ≥ start``. Linear after the sort, whatever the
    number of segments (no Python loop per segment). ``holes=False``: no hole arrays (empty),
    for callers that need only each segment's first, last and busy. Row-sized arrays are
    made in place where they can be: at 2.5·10^6 rows each int64 one is 20 MB.

    ``ties``: keys (lexsort's order: the last the first) that order intervals of one segment
    with the same start; with them, each hole's next interval (``hole_next``) is found: the
    first, in that order, of those starting at the hole's end (it is the one right after the
    hole: one starting there before it would end at or after the hole's end, so no hole).
    ``ordered``: the rows come in (segment, start) order already (ties in any order: the
    result does not depend on it; with ``ties``, in their order), so no sort.
    ``prev`` (with ``ties`` whose first, ``ties[-1]``, is ``end`` itself): each hole's
    previous interval (``hole_prev``) is found too, in the same sorted rows, without another
    sort.
    """
    if prev and (not ties or ties[-1] is not end):
        raise ValueError("prev needs the ends as the first tie key: ties=(..., end)")
    order = None
    if ordered:
        columns = [segment, start, end.copy()]
    else:
        order = lex_order((*ties, start, segment))
        columns = [segment[order], start[order], end[order]]
        if not ties:
            order = None
    return unions_in_order(
        columns, holes=holes, neighbours=bool(ties), prev=prev and bool(ties), order=order
    )


def unions_in_order(
    columns: list[np.ndarray],
    holes: bool = True,
    neighbours: bool = False,
    prev: bool = False,
    order: np.ndarray | None = None,
    ends_of: Callable[[slice], np.ndarray] | None = None,
    spans: bool = True,
    starts_of: Callable[[np.ndarray | slice], np.ndarray] | None = None,
) -> Unions:
    """``unions`` of rows already sorted by (segment, start, ties), for a caller that sorted
    them itself and dropped its unsorted columns. ``columns``: [segment, start, end] of the
    sorted rows, a list this call empties, so each array is freed once used (the caller
    keeps no other reference): the holes' columns are made as the rows' go. The ends are
    overwritten with their running maximum. ``neighbours``/``prev``: find
    ``hole_next``/``hole_prev``, as positions in the sorted rows, or through ``order``
    (sorted position → input index); ``prev`` needs the rows sorted by (segment, start, end,
    …): the end the first tie. ``ends_of``: the sorted rows' ends, a slice of them at a time
    (for ``prev``, instead of a copy of the ends: 8 B a row). ``spans=False``: the holes'
    starts and ends are left empty (a caller that derives them from their neighbours).
    ``starts_of``: the sorted rows' starts, taken where needed (at positions or a slice of
    them at a time), instead of the columns' (then unread): 8 B a row not held."""
    seg, s, reach = columns
    columns.clear()
    start = s.__getitem__ if starts_of is None else starts_of
    n = len(seg)
    head = np.flatnonzero(np.r_[n > 0, seg[1:] != seg[:-1]])
    find_prev = prev and holes
    same = _same_as_before(seg, start, reach) if find_prev else None
    ends = reach.copy() if find_prev and ends_of is None else None
    _running_max(reach, head, lambda: start(head))  # reach[i]: latest end so far in i's segment
    prev_at = None
    if same is not None:
        prev_at = _ending_here(same, _reaching(reach, ends, ends_of))
        del ends, same
    idle, at = _holes(start, reach, head, holes)
    first, last = start(head), reach[np.r_[head[1:], n][: len(head)] - 1]
    segment = seg[head]
    hole_next = hole_prev = None
    if holes:
        hole_start = hole_end = _none()
        if not spans:  # the rows' starts and ends go before the holes' columns come
            del s, start, reach
        if prev_at is not None:
            ending = prev_at[at]
            del prev_at
            hole_prev = ending if order is None else order[ending]
            del ending
        if spans:
            hole_start = reach[at]
            del reach
        at += 1  # a start past all before it
        if spans:
            hole_end = start(at)
            del s, start
        hole_segment = seg[at]
        del seg
        if neighbours:
            hole_next = at if order is None else order[at]
    else:
        hole_segment, hole_start, hole_end = seg[:0].copy(), _none(), _none()
    return Unions(
        segment=segment,
        first=first,
        last=last,
        busy=last - first - idle,
        hole_segment=hole_segment,
        hole_start=hole_start,
        hole_end=hole_end,
        hole_next=hole_next,
        hole_prev=hole_prev,
    )


def _none() -> np.ndarray:
    """No holes' starts or ends: an array of its own (a view of the rows' columns would hold
    them as long as the result)."""
    return np.zeros(0, dtype=np.int64)


def _holes(
    start: Callable[[slice], np.ndarray], reach: np.ndarray, head: np.ndarray, holes: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Per segment (``head``: each one's first sorted row), the summed length of its holes;
    and with ``holes`` the last row before each hole (int32 when the rows allow; else
    empty); ``start``: the rows' starts, a slice at a time. A pass of rows at a time: no
    row-sized array of gaps, nor of their positions in int64."""
    n = len(reach)
    idle = np.zeros(len(head), dtype=np.int64)
    kind = np.int32 if n < 2**31 else np.int64
    found = []
    for lo in range(0, n - 1, _PASS):
        hi = min(lo + _PASS, n - 1)
        # gap[i]: how far row i+1 starts past every row before it in its segment (0 if not)
        gap = start(slice(lo + 1, hi + 1)) - reach[lo:hi]
        np.maximum(gap, 0, out=gap)
        inside = head[(head > lo) & (head <= hi)]  # segments starting after a row here
        gap[inside - 1 - lo] = 0  # across two segments: no hole
        owner = int(np.searchsorted(head, lo, side="right")) - 1  # the pass's first row's
        bounds = inside[inside < hi] - lo  # a gap counts for the segment of the row before
        pieces = sums.reduceat(gap, np.r_[0, bounds]) if len(bounds) else [sums.total(gap)]
        idle[owner : owner + len(pieces)] += pieces
        if holes:
            at = np.flatnonzero(gap > 0)
            at += lo
            found.append(at.astype(kind))
    return idle, joined(found, kind)


def _same_as_before(
    seg: np.ndarray, start: Callable[[slice], np.ndarray], ends: np.ndarray
) -> np.ndarray:
    """Per sorted row: whether it has the segment, start and end of the row before
    (``start``: the rows' starts, a slice at a time)."""
    n = len(seg)
    same = np.zeros(n, dtype=bool)
    for lo in range(0, n - 1, _PASS):
        hi = min(lo + _PASS, n - 1)
        part = same[lo + 1 : hi + 1]
        np.equal(seg[lo + 1 : hi + 1], seg[lo:hi], out=part)
        starts = start(slice(lo, hi + 1))
        part &= starts[1:] == starts[:-1]
        part &= ends[lo + 1 : hi + 1] == ends[lo:hi]
    return same


def _reaching(
    reach: np.ndarray, ends: np.ndarray | None, ends_of: Callable[[slice], np.ndarray] | None
) -> np.ndarray:
    """Per sorted row: whether its end is the running maximum ``reach`` (``ends``: the ends,
    or None: ``ends_of`` a pass of them at a time)."""
    if ends is not None:
        reaching: np.ndarray = ends == reach
        return reaching
    assert ends_of is not None
    reaching = np.empty(len(reach), dtype=bool)
    for lo in range(0, len(reach), _PASS):
        at = slice(lo, lo + _PASS)
        np.equal(ends_of(at), reach[at], out=reaching[at])
    return reaching


def _ending_here(same: np.ndarray, reaching: np.ndarray) -> np.ndarray:
    """For each sorted row i: the position of the row that ends at ``reach[i]`` (the running
    maximum end of i's segment), the latest to start, the first in sorted order of those.
    At the last row before a hole, that is the row the hole comes after. ``same``: whether a
    row has the segment, start and end of the row before; ``reaching``: whether its end is
    ``reach``.

    Rows ending at the running maximum "reach" it, and it grows only at reaching rows, so
    the last reaching row ≤ i ends at ``reach[i]`` and starts the latest. Rows of one
    segment with equal start and end are adjacent (sorted by start, then end) and all reach
    if one does: the first of that run is the answer. Linear: no sort, no search, one
    row-sized int array and two masks.
    """
    n = len(same)
    found = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)
    found[same] = 0
    np.maximum.accumulate(found, out=found)  # the first row of each row's run
    np.logical_not(reaching, out=reaching)
    found[reaching] = -1  # rows that do not reach: taken from the reaching row before
    np.maximum.accumulate(found, out=found)  # run starts never decrease: a forward fill
    return found


def running_max(s: np.ndarray, e: np.ndarray, head: np.ndarray) -> None:
    """``e[i] = max(e[head of i's run] … e[i])`` in place (rows sorted by run, then start;
    ``head``: each run's first row).

    Each run's ends are shifted into a band of its own (run · width + end − run's first
    start), so one cumulative maximum over all rows never carries across runs. When the bands
    would not fit in int64 (many runs over a long span), the ends are replaced by their ranks
    (< n, same order): bands of width n always fit, at the cost of one more sort.
    """
    _running_max(e, head, lambda: s[head])


def _running_max(e: np.ndarray, head: np.ndarray, firsts: Callable[[], np.ndarray]) -> None:
    """``running_max`` with each run's first start ``firsts()`` (asked for only when the
    runs are many)."""
    if len(e) == 0:
        return
    if len(head) <= _RUNS_ONE_BY_ONE:  # each run's own maximum: no shift array
        for lo, hi in itertools.pairwise([*head.tolist(), len(e)]):
            np.maximum.accumulate(e[lo:hi], out=e[lo:hi])
        return
    counts = np.diff(np.r_[head, len(e)])
    base = firsts()
    width = int((np.maximum.reduceat(e, head) - base).max()) + 1  # ≥ 1: every end ≥ start
    if len(head) * width < _BAND_LIMIT:
        shift = np.repeat(np.arange(len(head), dtype=np.int64) * width - base, counts)
        e += shift
        np.maximum.accumulate(e, out=e)
        e -= shift
        return
    by_end = np.argsort(e, kind="stable")
    rank = np.empty(len(e), dtype=np.int64)
    rank[by_end] = np.arange(len(e))
    shift = np.repeat(np.arange(len(head), dtype=np.int64) * len(e), counts)
    rank += shift
    np.maximum.accumulate(rank, out=rank)
    rank -= shift
    del shift
    e[:] = e[by_end[rank]]


class UnionPieces:
    """The union of each segment's intervals, given a pass at a time in (segment, start)
    order (and each segment's in start order across passes), as pieces that do not overlap,
    in that order: ``add`` gives a pass's pieces but the last, which the next pass may
    extend; ``finish`` gives that one. A length inside any window adds up over the pieces."""

    def __init__(self) -> None:
        self._open: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def add(
        self, segment: np.ndarray, start: np.ndarray, end: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The pieces (segment, start, end) this pass closes; ``end`` may be overwritten."""
        if self._open is not None:  # the open piece of the passes before: first here
            o_seg, o_start, o_end = self._open
            segment = np.concatenate([o_seg, segment])
            start = np.concatenate([o_start, start])
            end = np.concatenate([o_end, end])
        if len(segment) == 0:
            return segment, start, end
        head = np.flatnonzero(np.r_[True, segment[1:] != segment[:-1]])
        running_max(start, end, head)  # end[i]: the latest end so far in i's segment
        opens = np.zeros(len(segment), dtype=bool)
        opens[head] = True
        opens[1:] |= start[1:] > end[:-1]  # past every end before it: a new piece
        first = np.flatnonzero(opens)
        last = np.r_[first[1:], len(segment)] - 1
        seg, a, b = segment[first], start[first], end[last]
        self._open = seg[-1:], a[-1:], b[-1:]
        return seg[:-1], a[:-1], b[:-1]

    def finish(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The last piece (none when no interval came)."""
        out = self._open
        self._open = None
        if out is None:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty
        return out


class RunningUnions:
    """``unions`` (``holes=False``) of rows given a pass at a time: each pass's rows in
    (segment, start) order, and each segment's rows in start order across passes. Per
    segment id in [0, n) its earliest start, latest end so far and summed holes are carried
    from pass to pass, so no row-sized array is held."""

    def __init__(self, n: int) -> None:
        self.first = np.zeros(n, dtype=np.int64)
        self.reach = np.zeros(n, dtype=np.int64)
        self.idle = np.zeros(n, dtype=np.int64)
        self.seen = np.zeros(n, dtype=bool)

    def add(self, segment: np.ndarray, start: np.ndarray, end: np.ndarray) -> None:
        """A pass of rows; ``end`` is overwritten (the running maximum)."""
        if len(segment) == 0:
            return
        head = np.flatnonzero(np.r_[True, segment[1:] != segment[:-1]])
        at = segment[head]
        old = self.seen[at]
        carried = self.reach[at][old]
        was = head[old]
        end[was] = np.maximum(end[was], carried)  # a segment's reach from earlier passes
        running_max(start, end, head)
        gap = np.empty(len(start), dtype=np.int64)  # past every end before it (0 if not)
        np.subtract(start[1:], end[:-1], out=gap[1:])
        gap[head] = 0
        gap[was] = start[was] - carried
        np.maximum(gap, 0, out=gap)
        self.idle[at] += sums.reduceat(gap, head)
        self.first[at[~old]] = start[head[~old]]
        self.reach[at] = end[np.r_[head[1:], len(start)] - 1]
        self.seen[at] = True

    def add_grouped(
        self,
        segment: np.ndarray,
        ts: np.ndarray,
        dur: np.ndarray,
        summed: sums.GroupSums | None = None,
    ) -> None:
        """A pass of rows in start order within each segment (segments mixed): grouped by
        segment first (a stable sort keeps each one's rows in start order); their durations
        summed per segment into ``summed``."""
        small = segment.astype(np.int16) if len(self.seen) <= 1 << 15 else segment
        order = np.argsort(small, kind="stable")  # a radix sort on 16-bit keys
        segment = segment[order]
        start = ts[order]
        end = dur[order]
        if summed is not None:
            summed.add(segment, end)
        end += start
        self.add(segment, start, end)

    def busy(self) -> np.ndarray:
        """Per segment id: the length of its union (0 where no row came)."""
        out: np.ndarray = self.reach - self.first - self.idle
        return out


def sums_by_run(run: np.ndarray, values: np.ndarray, runs: int) -> np.ndarray:
    """Exact int64 sums of ``values`` per id in [0, runs), ``run`` (the ids) ascending."""
    total = np.r_[0, sums.cumsum(values)]
    bounds = np.searchsorted(run, np.arange(runs + 1))
    per_run: np.ndarray = total[bounds[1:]] - total[bounds[:-1]]
    return per_run


_PASS = 1 << 18  # starts searched a pass


def union_extent(start: np.ndarray, end: np.ndarray) -> tuple[int, int, int]:
    """The earliest start, the latest end and the length of the union of the intervals
    [start[i], end[i]] (at least one, each of positive length), from the starts and the ends
    sorted each on its own (in place: the caller's copies): no permutation, no sorted copy
    of the rows. Start ``i`` (in order) opens a maximal interval of the union exactly when
    the ``i`` smallest ends are all at or before it (an end there can only be an earlier
    start's, every end being past its start); the hole before it runs from the ``i``-th
    smallest end, the latest of those."""
    start.sort(kind="stable")  # timsort: near-linear on the nearly sorted times
    end.sort(kind="stable")
    idle = 0
    for lo in range(1, len(start), _PASS):
        ended = np.searchsorted(end, start[lo : lo + _PASS], side="right")
        ended -= np.arange(lo, lo + len(ended))
        opens = np.flatnonzero(ended == 0)
        del ended
        opens += lo
        idle += sums.total(start[opens] - end[opens - 1])
    first, last = int(start[0]), int(end[-1])
    return first, last, last - first - idle


def ordered_union_extent(
    ts: np.ndarray, dur: np.ndarray, take: np.ndarray
) -> tuple[int, int, int] | None:
    """``union_extent`` of the rows ``take`` (a mask over ``ts``, or their positions, in
    order), of starts ``ts`` and lengths ``dur`` (each positive), when their starts come in
    order: a pass at a time, with no row-sized copy; None as soon as a row starts before the
    row taken ahead of it. In start order, a row opens a maximal interval of the union exactly
    when it starts after the latest end before it, and the hole before it runs from there."""
    mask = take.dtype == np.bool_
    first: int | None = None
    last_start = reach = idle = 0
    for lo in range(0, len(take), _PASS):
        part = take[lo : lo + _PASS]
        start = ts[lo : lo + _PASS][part] if mask else ts[part]
        if len(start) == 0:
            continue
        if (first is not None and start[0] < last_start) or bool((start[1:] < start[:-1]).any()):
            return None
        end = start + (dur[lo : lo + _PASS][part] if mask else dur[part])
        reached = np.maximum.accumulate(end)  # the latest end up to each row
        before = np.empty_like(reached)  # ... before each row
        before[1:] = reached[:-1]
        if first is None:
            first = reach = int(start[0])
        before[0] = reach
        np.maximum(before, reach, out=before)
        hole = start - before
        idle += sums.total(hole[hole > 0])
        reach, last_start = max(reach, int(reached[-1])), int(start[-1])
    if first is None:
        return None
    return first, reach, reach - first - idle
