"""Which CPU operator launched each GPU activity: the link behind the operator view and the
kernel categories.

A GPU activity's launch is the earliest runtime call with its ``args.correlation`` (the first in
the file among equal starts); its ops are the ``cpu_op`` events (2021 traces: ``Operator``; not
``ProfilerStep#N``) on the launch's thread (pid, tid) whose closed window [ts, ts + dur] contains
the launch's start. The **leaf** op is the
innermost of them (largest ts, then smallest dur, then smallest name), the **top** op the
outermost (smallest ts, then largest dur, then smallest name). ``External id`` is not used: in
real traces it links few kernels (0 of 8,568 in one).

One pass over the CPU rows, block by block, keeping per activity only the best op so far, so
memory stays flat whatever the number of CPU ops.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from traceview.aggregate.order import concat_ranges, distinct, first_of_runs, lex_order
from traceview.aggregate.sorted_pairs import SortedPairs
from traceview.analyses.core.devices import NO_LAUNCH, first_calls, first_launch, name_rank
from traceview.analyses.core.opcalls import OP_FIELDS
from traceview.columns.cpu_rows import NO_SHAPE, OP
from traceview.columns.model import TraceEvents

NO_OP = -1


@dataclass(frozen=True)
class OpLinks:
    """Per GPU row: the name id of its leaf and top op (NO_OP when none), the thread id, start
    and end of its launch (−1 / NO_LAUNCH / NO_LAUNCH when none), and the shape id of its
    leaf and top op (NO_SHAPE when none)."""

    leaf: np.ndarray
    top: np.ndarray
    thread: np.ndarray
    launch: np.ndarray
    launch_end: np.ndarray
    leaf_shape: np.ndarray | None = None
    top_shape: np.ndarray | None = None


def link_ops(
    events: TraceEvents,
    rank: np.ndarray | None = None,
    on_block: Callable[[np.ndarray], None] | None = None,
    with_top: bool = True,
) -> OpLinks:
    """The OpLinks of every GPU row (empty links when the trace has no CPU rows); ``rank`` is
    ``name_rank(events.names)`` when the caller has it already. ``on_block``: given every
    block of CPU rows in the pass that finds the launches (a caller's own pass, saved);
    ``with_top=False``: the leaf ops alone, in less memory: the top ops are not looked for
    (``top`` all NO_OP, ``top_shape`` all NO_SHAPE), nor the launches' ends kept
    (``launch_end`` all NO_LAUNCH); ``leaf``, ``leaf_shape`` and ``thread`` int32."""
    n = len(events.gpu.ts)
    launch = first_launch(events)
    thread, launch_end = launch_threads(events, launch, on_block, with_end=with_top)
    rank = name_rank(events.names) if rank is None else rank
    known = np.flatnonzero(thread >= 0)
    by_launch = known[lex_order((launch[known], thread[known]))]
    del known
    if n < 2**31:
        by_launch = by_launch.astype(np.int32)
    keys = _Launches(thread[by_launch], launch[by_launch])
    # the best ops by the launch's place in by_launch (a block's launches are a few runs
    # of it: its offers' scratch is that span, not one value per GPU row)
    leaf = _Best(len(by_launch), True)
    top = _Best(len(by_launch), False) if with_top else None
    for (op_thread, ts, end, name, shape), is_op in _op_chunks(events):
        if len(ts) == 0 or len(by_launch) == 0:
            continue
        lo, hi, holding = keys.inside(op_thread, ts, end, is_op)
        at, which = concat_ranges(lo, hi)  # every (op, launch it contains) pair
        which = holding[which]
        ts, name, shape = ts[which], name[which], shape[which]
        dur = end[which] - ts
        ranked = rank[name]
        leaf.offer(at, ts, dur, ranked, name, shape)
        if top is not None:
            top.offer(at, ts, dur, ranked, name, shape)
    del keys
    dtype = np.int64 if with_top else np.int32
    leaf_name, leaf_shape = _per_row(n, by_launch, leaf, dtype)
    if top is None:
        return OpLinks(
            leaf_name, _all(n, NO_OP), thread, launch, launch_end, leaf_shape, _all(n, NO_SHAPE)
        )
    top_name, top_shape = _per_row(n, by_launch, top, dtype)
    return OpLinks(leaf_name, top_name, thread, launch, launch_end, leaf_shape, top_shape)


def _per_row(
    n: int, places: np.ndarray, best: _Best, dtype: type[np.integer[Any]]
) -> tuple[np.ndarray, np.ndarray]:
    """The name and shape ids of the ``best`` ops, kept by place, per GPU row (``places``:
    each place's row); NO_OP and NO_SHAPE for rows without a place."""
    name, shape = best.taken()
    out_name = np.full(n, NO_OP, dtype=dtype)
    out_name[places] = name
    out_shape = np.full(n, NO_SHAPE, dtype=dtype)
    out_shape[places] = shape
    return out_name, out_shape


def _all(n: int, value: int) -> np.ndarray:
    """``n`` int64 ``value``s, read-only, in no memory of their own."""
    return np.broadcast_to(np.int64(value), (n,))


def ops_around(
    events: TraceEvents, thread: np.ndarray, at: np.ndarray, skip: np.ndarray | None = None
) -> np.ndarray:
    """Per point (a thread id, a time in ns), the name id of the innermost CPU op on that
    thread whose closed window contains the time, chosen as a leaf op is (NO_OP when none, or
    when the thread is unknown: −1); ``skip``: per name id, ops not to choose. One pass over
    the CPU rows."""
    best = _Best(len(at), True)
    known = np.flatnonzero(thread >= 0)
    if len(known) == 0 or len(events.cpu) == 0:
        return best.taken()[0].astype(np.int64)
    by_point = known[lex_order((at[known], thread[known]))]
    keys = SortedPairs(thread[by_point].astype(np.int64), at[by_point].astype(np.int64))
    rank = name_rank(events.names)
    for columns, is_op in _op_chunks(events):
        op_thread, ts, end, name, shape = (c[is_op] for c in columns)
        if skip is not None:
            keep = ~skip[name]
            op_thread, ts, end, name, shape = (c[keep] for c in (op_thread, ts, end, name, shape))
        lo = keys.search(op_thread.astype(np.int64), ts, side="left")
        hi = keys.search(op_thread.astype(np.int64), end, side="right")
        where, which = concat_ranges(lo, hi)  # every (op, point it contains) pair
        name = name[which]
        best.offer(
            by_point[where], ts[which], end[which] - ts[which], rank[name], name, shape[which]
        )
    return best.taken()[0].astype(np.int64)


class _Launches:
    """The (thread, start) of launches, sorted, for finding those each op contains: with a
    few threads, one sorted column of starts per thread, searched as it is (cheaper than
    packed pairs); else the pairs (SortedPairs)."""

    _MAX_THREADS = 8  # a pass over each block per thread: beyond this many, the pairs

    def __init__(self, thread: np.ndarray, launch: np.ndarray) -> None:
        self.launch = launch
        threads = distinct(thread)
        self.threads: list[int] = []
        self.first: list[int] = []
        self.stop: list[int] = []
        self.pairs: SortedPairs | None = None  # only with many threads (8 bytes a launch)
        if len(threads) <= self._MAX_THREADS:
            self.threads = threads.tolist()
            self.first = np.searchsorted(thread, threads, side="left").tolist()
            self.stop = np.searchsorted(thread, threads, side="right").tolist()
        else:
            self.pairs = SortedPairs(thread, launch)

    def inside(
        self, thread: np.ndarray, ts: np.ndarray, end: np.ndarray, is_op: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For the ops (the rows ``is_op`` marks; None: all) that contain a launch
        (``holding``, their positions, in order per thread), the range [lo, hi) of the
        launches they contain: half the ops contain none, known from the first launch at or
        after their start, so only the others are searched for their end."""
        if self.pairs is not None:
            return _launches_inside(self.pairs, thread, ts, end, is_op)
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for t, first, stop in zip(self.threads, self.first, self.stop, strict=True):
            mine = thread == t
            if is_op is not None:
                mine &= is_op
            rows = np.flatnonzero(mine)
            starts = self.launch[first:stop]
            lo = _search_left(starts, ts[rows])
            at = np.minimum(lo, len(starts) - 1)
            ends = end[rows]
            holding = (lo < len(starts)) & (starts[at] <= ends)
            rows, lo, ends = rows[holding], lo[holding], ends[holding]
            # each end's place is at or after its op's first launch and no later than the
            # largest end's: searched among those launches only (a block's ops span a
            # short time: a few launches, not the thread's all)
            a = int(lo.min()) if len(lo) else 0
            b = int(np.searchsorted(starts, ends.max(), side="right")) if len(ends) else 0
            hi = np.searchsorted(starts[a:b], ends, side="right")
            hi += a
            parts.append((lo + first, hi + first, rows))
        lo, hi, rows = (np.concatenate(c) for c in zip(*parts, strict=True))
        return lo, hi, rows


def _search_left(sorted_values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``np.searchsorted(sorted_values, query, side="left")``. A thread's ops come in start
    order (the file's): then the values within the queries' range are searched in the
    queries instead, and counted up, a third of the work of a search per query."""
    if len(query) < 2 or not bool((query[1:] >= query[:-1]).all()):
        found: np.ndarray = np.searchsorted(sorted_values, query, side="left")
        return found
    # below[i] = #values < query[i]: those before the first query's, plus those within
    # [query[0], query[-1]) placed among the queries (value v < query[i] iff i >= #q <= v)
    lo, hi = np.searchsorted(sorted_values, (query[0], query[-1]), side="left").tolist()
    placed = np.searchsorted(query, sorted_values[lo:hi], side="right")
    below = np.cumsum(np.bincount(placed, minlength=len(query)))
    below += lo
    return below


def _launches_inside(
    keys: SortedPairs,
    thread: np.ndarray,
    ts: np.ndarray,
    end: np.ndarray,
    is_op: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the ops (the rows ``is_op`` marks; None: all) that contain a launch (``holding``,
    their positions), the range [lo, hi) of the launches they contain in ``keys`` ((thread,
    launch) pairs, sorted): half the ops contain none, known from the first launch at or
    after their start, so only the others are searched for their end. The rows are searched
    as read, ops or not: cheaper than a copy of the ops first."""
    lo = keys.search(thread, ts, side="left")
    first = np.minimum(lo, len(keys.minor) - 1)
    inside = (lo < len(keys.minor)) & (keys.major[first] == thread) & (keys.minor[first] <= end)
    if is_op is not None:
        inside &= is_op
    holding = np.flatnonzero(inside)
    hi = keys.search(thread[holding], end[holding], side="right")
    return lo[holding], hi, holding


def _op_chunks(
    events: TraceEvents,
) -> Iterator[tuple[tuple[np.ndarray, ...], np.ndarray]]:
    """The CPU rows' OP_FIELDS a block at a time (every row), and which of them are ops."""
    for block in events.cpu.blocks():
        yield tuple(block[field] for field in OP_FIELDS), block["correlation"] == OP


class _Best:
    """Per row (a GPU row, a launch's place, a point), the best op offered so far: the
    innermost (largest ts, smallest dur, smallest name) or the outermost (smallest ts,
    largest dur, smallest name)."""

    def __init__(self, n: int, innermost: bool) -> None:
        self.sign = -1 if innermost else 1  # keys are minimised
        self.ts = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        self.dur = np.zeros(n, dtype=np.int64)
        # name ranks and ids, shape ids: int32 as the CPU rows hold them (int64 when taken)
        self.rank = np.zeros(n, dtype=np.int32)
        self.name = np.full(n, NO_OP, dtype=np.int32)
        self.shape = np.full(n, NO_SHAPE, dtype=np.int32)

    def offer(
        self,
        row: np.ndarray,
        ts: np.ndarray,
        dur: np.ndarray,
        rank: np.ndarray,
        name: np.ndarray,
        shape: np.ndarray,
    ) -> None:
        """Keep, per row, the better of its best so far and the best of these candidates."""
        if len(row) == 0:
            return
        key_ts, key_dur = self.sign * ts, -self.sign * dur
        low = int(row.min())  # first_minimal's per-row minima: over the rows' span only
        scratch = np.empty(int(row.max()) - low + 1, dtype=np.int64)
        first = first_minimal(row - low if low else row, (key_ts, key_dur, rank), scratch)
        del scratch
        row, key_ts, key_dur, rank, name, shape = (
            row[first], key_ts[first], key_dur[first], rank[first], name[first], shape[first]
        )  # fmt: skip
        empty = self.name[row] == NO_OP
        old = (self.ts[row], self.dur[row], self.rank[row])
        better = (
            empty
            | (key_ts < old[0])
            | ((key_ts == old[0]) & ((key_dur < old[1]) | ((key_dur == old[1]) & (rank < old[2]))))
        )
        row = row[better]
        self.ts[row], self.dur[row] = key_ts[better], key_dur[better]
        self.rank[row], self.name[row] = rank[better], name[better]
        self.shape[row] = shape[better]

    def taken(self) -> tuple[np.ndarray, np.ndarray]:
        """The best ops' name and shape ids per row (int32); the keys are dropped first."""
        self.ts = self.dur = self.rank = np.empty(0, dtype=np.int64)
        return self.name, self.shape


def first_minimal(row: np.ndarray, keys: tuple[np.ndarray, ...], scratch: np.ndarray) -> np.ndarray:
    """Per distinct value of ``row``, the position of its entry least by ``keys`` (compared
    in turn: the first key first), the first in position of equal ones; in no given order.

    The first of each row's run in ``lex_order((*reversed(keys), row))``, found without a
    sort: one minimum per row and key by ``np.minimum.at`` over the entries still tied,
    9 ms for 1.4·10^6 entries where the sort of (row, key) pairs took 130 ms. ``scratch``
    holds at least max(row) + 1 int64 values, overwritten.
    """
    at = np.arange(len(row))
    for key in (*keys, at):
        r, k = row[at], key[at]
        scratch[r] = np.iinfo(np.int64).max
        np.minimum.at(scratch, r, k)
        at = at[k == scratch[r]]
    return at


def launch_threads(
    events: TraceEvents,
    launch: np.ndarray,
    on_block: Callable[[np.ndarray], None] | None = None,
    with_end: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Per GPU row, the thread and end of its launching runtime call (the first in the file
    among calls with its correlation starting at its launch), else −1 and NO_LAUNCH; every
    block given to ``on_block`` on the way. ``with_end=False``: the ends are not kept (all
    NO_LAUNCH) and the threads are int32."""
    gpu = events.gpu
    n = len(gpu.ts)
    if len(events.cpu) == 0 or (on_block is None and bool((launch == NO_LAUNCH).all())):
        thread = np.full(n, -1, dtype=np.int64 if with_end else np.int32)
        return thread, (np.full(n, NO_LAUNCH, dtype=np.int64) if with_end else _all(n, NO_LAUNCH))
    found = _calls_in_order(events, launch, on_block, with_end)
    if found is not None:
        return found
    thread = np.full(n, -1, dtype=np.int64)  # the blocks were given: match them again
    end = np.full(n, NO_LAUNCH, dtype=np.int64)
    rows = np.flatnonzero(launch != NO_LAUNCH)
    by_key = rows[lex_order((launch[rows], gpu.correlation[rows]))]
    keys = SortedPairs(gpu.correlation[by_key], launch[by_key])
    for block in events.cpu.blocks():
        calls = block[block["correlation"] >= 0]
        lo, hi = keys.equal_range(calls["correlation"], calls["ts"])
        at, which = concat_ranges(lo, hi)  # the GPU rows this call launched
        target = by_key[at]
        fresh = thread[target] < 0
        target, which = target[fresh], which[fresh]
        order = np.lexsort((which, target))  # of several calls, the first in the file wins
        first = order[first_of_runs(target[order])]
        thread[target[first]] = calls["thread"][which[first]]
        end[target[first]] = calls["end"][which[first]]
    if not with_end:
        return thread.astype(np.int32), _all(n, NO_LAUNCH)
    return thread, end


_ROWS_AT_ONCE = 1 << 16  # GPU rows looked up at once: the look-up's temporaries stay small


def _calls_in_order(
    events: TraceEvents,
    launch: np.ndarray,
    on_block: Callable[[np.ndarray], None] | None,
    with_end: bool,
) -> tuple[np.ndarray, np.ndarray] | None:
    """``launch_threads``, in one pass that also gives every block; None when the CPU rows'
    runtime calls are not ``events.runtime``'s, one for one in order.

    A read keeps every call both ways, in file order, so a row's launching call is the
    one at the index ``first_calls`` gives: each call's thread and end are taken where the
    pass meets it (checked on every call), then looked up per GPU row by that index, with
    no search by (correlation, start).
    """
    runtime = events.runtime
    count = len(runtime.correlation)
    call_thread = np.empty(count, dtype=np.int32)
    call_end = np.empty(count, dtype=np.int64) if with_end else None
    seen = 0  # the calls met so far
    same = True
    for block in events.cpu.blocks():
        if on_block is not None:
            on_block(block)
        if not same:
            continue
        correlation = block["correlation"]
        at = np.flatnonzero(correlation >= 0)
        upto = seen + len(at)
        same = (
            upto <= count
            and bool((correlation[at] == runtime.correlation[seen:upto]).all())
            and bool((block["ts"][at] == runtime.ts[seen:upto]).all())
        )
        if same:
            call_thread[seen:upto] = block["thread"][at]
            if call_end is not None:
                call_end[seen:upto] = block["end"][at]
        seen = upto
    if not (same and seen == count):
        return None
    n = len(launch)
    thread = np.full(n, -1, dtype=np.int64 if with_end else np.int32)
    end = np.full(n, NO_LAUNCH, dtype=np.int64) if with_end else _all(n, NO_LAUNCH)
    ids, first = first_calls(events)
    if len(ids) == 0:
        return thread, end
    correlation = events.gpu.correlation
    for start in range(0, n, _ROWS_AT_ONCE):
        stop = start + _ROWS_AT_ONCE
        rows = np.flatnonzero(launch[start:stop] != NO_LAUNCH)
        call = np.searchsorted(ids, correlation[start:stop][rows])  # found: they have a launch
        if first is not None:
            call = first[call]
        rows += start
        thread[rows] = call_thread[call]
        if call_end is not None:
            end[rows] = call_end[call]
    return thread, end
