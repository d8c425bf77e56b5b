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

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from traceview.aggregate.order import concat_ranges, distinct, first_of_runs, lex_order
from traceview.aggregate.sorted_pairs import SortedPairs
from traceview.analyses.core.devices import NO_LAUNCH, first_calls, first_launch, name_rank
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
    with_end: bool | None = None,
) -> OpLinks:
    """The OpLinks of every GPU row (empty links when the trace has no CPU rows); ``rank`` is
    ``name_rank(events.names)`` when the caller has it already. ``on_block``: given every
    block of CPU rows in the pass that finds the launches (a caller's own pass, saved);
    ``with_top=False``: the leaf ops alone, in less memory: the top ops are not looked for
    (``top`` all NO_OP, ``top_shape`` all NO_SHAPE); ``leaf``, ``leaf_shape`` and ``thread``
    int32. ``with_end``: the launches' ends kept (else all NO_LAUNCH); ``with_top`` if None."""
    n = len(events.gpu.ts)
    with_end = with_top if with_end is None else with_end
    launch, thread, launch_end = _launches(
        events, on_block, with_end, np.int32 if not with_top else np.int64
    )
    rank = name_rank(events.names) if rank is None else rank
    known = np.flatnonzero(thread >= 0)
    by_launch = known[lex_order((launch[known], thread[known]))]
    del known
    if n < 2**31:
        by_launch = by_launch.astype(np.int32)
    points = _Points(thread[by_launch], launch[by_launch])
    # the best ops by the launch's place in by_launch
    leaf = _Kept(len(by_launch), True, rank)
    top = _Kept(len(by_launch), False, rank) if with_top else None
    if len(by_launch):
        for block in events.cpu.passing_blocks():
            points.offer(block, block["correlation"] == OP, leaf, top)
    del points
    dtype = np.int64 if with_top else np.int32
    leaf_name, leaf_shape = _per_row(n, by_launch, leaf, dtype)
    if top is None:
        return OpLinks(
            leaf_name, _all(n, NO_OP), thread, launch, launch_end, leaf_shape, _all(n, NO_SHAPE)
        )
    top_name, top_shape = _per_row(n, by_launch, top, dtype)
    return OpLinks(leaf_name, top_name, thread, launch, launch_end, leaf_shape, top_shape)


def _per_row(
    n: int, places: np.ndarray, best: _Kept, dtype: type[np.integer[Any]]
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
    name = np.full(len(at), NO_OP, dtype=np.int64)
    known = np.flatnonzero(thread >= 0)
    if len(known) == 0 or len(events.cpu) == 0:
        return name
    by_point = known[lex_order((at[known], thread[known]))]
    points = _Points(thread[by_point].astype(np.int64), at[by_point].astype(np.int64))
    best = _Kept(len(by_point), True, name_rank(events.names))
    for block in events.cpu.passing_blocks():
        is_op = block["correlation"] == OP
        if skip is not None:
            is_op &= ~skip[block["name"]]
        points.offer(block, is_op, best, None)
    name[by_point] = best.taken()[0]
    return name


class _Points:
    """Points (thread, time), sorted, and the innermost and outermost op containing each,
    found a block of CPU rows at a time.

    Per thread, a block's ops in the order (start, then the longer first, then name) and
    the points within their span: the ops containing a point p are those at or before the
    last op starting by p (J) that end at or after p. The outermost is the first of them:
    where the running maximum of the ends first reaches p. The innermost is the last: found
    from J back (most often J itself or a few ops before it: the op J lies in).
    """

    _FEW_THREADS = 4  # threads matched by one mask each; beyond, grouped by one sort

    def __init__(self, thread: np.ndarray, time: np.ndarray) -> None:
        self.time = time
        self.threads = distinct(thread)
        self.first = np.searchsorted(thread, self.threads, side="left").tolist()
        self.stop = np.searchsorted(thread, self.threads, side="right").tolist()

    def _groups(
        self, block: np.ndarray, is_op: np.ndarray
    ) -> Iterator[tuple[int, slice | np.ndarray]]:
        """Per thread with points, its index and the block's ops on it (rows in order, a
        slice when they are one run)."""
        thread = block["thread"]
        if len(self.threads) <= self._FEW_THREADS:
            for i, t in enumerate(self.threads.tolist()):
                mine = thread == t
                mine &= is_op
                rows = np.flatnonzero(mine)
                if len(rows):
                    yield i, _run_or(rows)
            return
        rows = np.flatnonzero(is_op)
        slot = np.searchsorted(self.threads, thread[rows])
        np.minimum(slot, len(self.threads) - 1, out=slot)
        mine = self.threads[slot] == thread[rows]
        rows, slot = rows[mine], slot[mine]
        order = np.argsort(slot, kind="stable")
        rows, slot = rows[order], slot[order]
        bounds = np.flatnonzero(np.r_[True, slot[1:] != slot[:-1], True]).tolist()
        for lo, hi in itertools.pairwise(bounds):
            yield int(slot[lo]), _run_or(rows[lo:hi])

    def offer(
        self, block: np.ndarray, is_op: np.ndarray, inner: _Kept, outer: _Kept | None
    ) -> None:
        """Offer each point the innermost (``inner``) and outermost (``outer``, unless None)
        of the ops (the rows ``is_op`` marks) of ``block`` containing it."""
        for i, rows in self._groups(block, is_op):
            first, stop = self.first[i], self.stop[i]
            ts, end = block["ts"][rows], block["end"][rows]
            times = self.time[first:stop]
            a = int(np.searchsorted(times, ts.min(), side="left"))
            b = int(np.searchsorted(times, end.max(), side="right"))
            if a >= b:
                continue
            point = times[a:b]
            first += a
            if len(ts) < 2 or bool((ts[1:] > ts[:-1]).all()):
                order = None  # in start order, no two starting together: no ties
                last = np.searchsorted(ts, point, side="right")
                last -= 1  # J: the last op starting at or before the point
                found = _last_reaching(end, last, point)
            else:
                name, dur = block["name"][rows], end - ts
                order = np.lexsort((-np.arange(len(ts)), -inner.rank[name], -dur, ts))
                last = np.searchsorted(ts[order], point, side="right")
                last -= 1
                found = _last_reaching(end[order], last, point)
            _offer(inner, block, rows, order, first, found)
            if outer is None:
                continue
            if order is not None:
                order = np.lexsort((outer.rank[name], -dur, ts))
            reach = np.maximum.accumulate(end if order is None else end[order])
            found = np.searchsorted(reach, point, side="left")
            found[found > last] = -1
            _offer(outer, block, rows, order, first, found)


def _run_or(rows: np.ndarray) -> slice | np.ndarray:
    """Increasing rows as a slice when they are one run (views, no copies), else as they are."""
    lo, hi = int(rows[0]), int(rows[-1]) + 1
    return slice(lo, hi) if hi - lo == len(rows) else rows


def _offer(
    kept: _Kept,
    block: np.ndarray,
    rows: slice | np.ndarray,
    order: np.ndarray | None,
    first: int,
    found: np.ndarray,
) -> None:
    """Offer ``kept`` the ops ``found`` (positions in ``order`` of the block's ``rows``; −1:
    none) at the places ``first`` on."""
    hit = np.flatnonzero(found >= 0)
    op = found[hit] if order is None else order[found[hit]]
    if isinstance(rows, slice):
        op += rows.start
    else:
        op = rows[op]
    ts = block["ts"][op]
    dur = block["end"][op] - ts
    hit += first
    kept.offer(hit, ts, dur, block["name"][op], block["shape"][op])


_STEPS = 32  # steps back one op at a time; the points left then go by halving


def _last_reaching(end: np.ndarray, last: np.ndarray, point: np.ndarray) -> np.ndarray:
    """Per point, the last position at or before ``last`` whose end is at or after the point
    (−1: none). A step back at a time (the answer is most often ``last`` or a few before it),
    then, for the points still on their way, binary lifting over the maxima of the ends."""
    at = last.copy()
    active = np.flatnonzero(at >= 0)
    for _ in range(_STEPS):
        if len(active) == 0:
            return at
        here = at[active]
        short = end[here] < point[active]
        active, here = active[short], here[short]
        here -= 1
        at[active] = here
        active = active[here >= 0]
    if len(active) == 0:
        return at
    # reach[k][i]: the latest end in [i − 2^k + 1, i] (from 0 where that starts below it)
    top = int(at[active].max()) + 1
    reach = [end[:top]]
    while 1 << len(reach) <= top:
        step, below = 1 << (len(reach) - 1), reach[-1]
        level = below.copy()
        np.maximum(level[step:], below[:-step], out=level[step:])
        reach.append(level)
    here, want = at[active], point[active]
    for k in range(len(reach) - 1, -1, -1):
        going = here >= 0
        going[going] = reach[k][here[going]] < want[going]
        here[going] -= 1 << k
    np.maximum(here, -1, out=here)
    at[active] = here
    return at


class _Kept:
    """Per point (a launch's place, a point), the best op offered so far: the innermost
    (largest ts, smallest dur, smallest name) or the outermost (smallest ts, largest dur,
    smallest name); of equal ones the first offered."""

    def __init__(self, n: int, innermost: bool, rank: np.ndarray) -> None:
        self.innermost = innermost
        self.rank = rank  # per name id, its rank
        self.ts = np.zeros(n, dtype=np.int64)
        self.dur = np.zeros(n, dtype=np.int64)
        # name and shape ids: int32 as the CPU rows hold them (int64 when taken)
        self.name = np.full(n, NO_OP, dtype=np.int32)
        self.shape = np.full(n, NO_SHAPE, dtype=np.int32)

    def offer(
        self,
        place: np.ndarray,
        ts: np.ndarray,
        dur: np.ndarray,
        name: np.ndarray,
        shape: np.ndarray,
    ) -> None:
        """Keep, per place (each once), the better of its best so far and this op."""
        if len(place) == 0:
            return
        old = self.name[place]
        empty = old == NO_OP
        if not bool(empty.all()):
            old_ts, old_dur = self.ts[place], self.dur[place]
            later = ts > old_ts if self.innermost else ts < old_ts
            shorter = dur < old_dur if self.innermost else dur > old_dur
            ranked = self.rank[name] < self.rank[old]
            better = empty | later | ((ts == old_ts) & (shorter | ((dur == old_dur) & ranked)))
            place, ts, dur, name, shape = (c[better] for c in (place, ts, dur, name, shape))
        self.ts[place], self.dur[place] = ts, dur
        self.name[place], self.shape[place] = name, shape

    def taken(self) -> tuple[np.ndarray, np.ndarray]:
        """The best ops' name and shape ids per place (int32); the keys are dropped first."""
        self.ts = self.dur = np.empty(0, dtype=np.int64)
        return self.name, self.shape


def launch_threads(
    events: TraceEvents,
    launch: np.ndarray,
    on_block: Callable[[np.ndarray], None] | None = None,
    with_end: bool = True,
    narrow: bool | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per GPU row, the thread and end of its launching runtime call (the first in the file
    among calls with its correlation starting at its launch), else −1 and NO_LAUNCH; every
    block given to ``on_block`` on the way. ``with_end=False``: the ends are not kept (all
    NO_LAUNCH). ``narrow``: the threads int32 (else int64); ``not with_end`` if None."""
    n = len(events.gpu.ts)
    dtype = np.int32 if (not with_end if narrow is None else narrow) else np.int64
    if len(events.cpu) == 0 or (on_block is None and bool((launch == NO_LAUNCH).all())):
        thread = np.full(n, -1, dtype=dtype)
        return thread, (np.full(n, NO_LAUNCH, dtype=np.int64) if with_end else _all(n, NO_LAUNCH))
    calls = _call_threads(events, on_block, with_end)
    if calls is not None:
        return _launched(events, calls, dtype)[1:]
    return _matched(events, launch, with_end, dtype)


def _launches(
    events: TraceEvents,
    on_block: Callable[[np.ndarray], None] | None,
    with_end: bool,
    dtype: type[np.integer[Any]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per GPU row, ``first_launch`` and ``launch_threads``' thread and end: in one look-up
    of each row's launching call when the pass finds the CPU rows' calls in order."""
    calls = _call_threads(events, on_block, with_end) if len(events.cpu) else None
    if calls is not None:
        return _launched(events, calls, dtype)
    launch = first_launch(events)
    if len(events.cpu) == 0:
        n = len(launch)
        thread = np.full(n, -1, dtype=dtype)
        end = np.full(n, NO_LAUNCH, dtype=np.int64) if with_end else _all(n, NO_LAUNCH)
        return launch, thread, end
    return (launch, *_matched(events, launch, with_end, dtype))


def _matched(
    events: TraceEvents, launch: np.ndarray, with_end: bool, dtype: type[np.integer[Any]]
) -> tuple[np.ndarray, np.ndarray]:
    """``launch_threads`` by a pass matching the CPU rows' calls to the GPU rows by
    (correlation, start): for calls not ``events.runtime``'s in order."""
    gpu = events.gpu
    n = len(gpu.ts)
    thread = np.full(n, -1, dtype=np.int64)
    end = np.full(n, NO_LAUNCH, dtype=np.int64)
    rows = np.flatnonzero(launch != NO_LAUNCH)
    by_key = rows[lex_order((launch[rows], gpu.correlation[rows]))]
    keys = SortedPairs(gpu.correlation[by_key], launch[by_key])
    for block in events.cpu.passing_blocks():
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
        return thread.astype(dtype), _all(n, NO_LAUNCH)
    return thread.astype(dtype, copy=False), end


_ROWS_AT_ONCE = 1 << 16  # GPU rows looked up at once: the look-up's temporaries stay small


def _call_threads(
    events: TraceEvents, on_block: Callable[[np.ndarray], None] | None, with_end: bool
) -> tuple[np.ndarray, np.ndarray | None] | None:
    """Per runtime call (in ``events.runtime``), its thread and end (None: not kept), from
    one pass over the CPU rows that also gives every block to ``on_block``; None when the
    CPU rows' runtime calls are not ``events.runtime``'s, one for one in order.

    A read keeps every call both ways, in file order, so each call's thread and end are
    taken where the pass meets it (checked on every call).
    """
    runtime = events.runtime
    count = len(runtime.correlation)
    call_thread = np.empty(count, dtype=np.int32)
    call_end = np.empty(count, dtype=np.int64) if with_end else None
    seen = 0  # the calls met so far
    same = True
    for block in events.cpu.passing_blocks():
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
    return call_thread, call_end


def _launched(
    events: TraceEvents,
    calls: tuple[np.ndarray, np.ndarray | None],
    dtype: type[np.integer[Any]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per GPU row, the start, thread and end (all NO_LAUNCH when ``calls`` has no ends) of
    its launching call, looked up once, by the index ``first_calls`` gives (the earliest
    call with the row's correlation, the first in the file among equal starts); NO_LAUNCH,
    −1 and NO_LAUNCH for a row without one."""
    call_thread, call_end = calls
    n = len(events.gpu.ts)
    launch = np.full(n, NO_LAUNCH, dtype=np.int64)
    thread = np.full(n, -1, dtype=dtype)
    end = np.full(n, NO_LAUNCH, dtype=np.int64) if call_end is not None else _all(n, NO_LAUNCH)
    ids, first = first_calls(events)
    if len(ids) == 0:
        return launch, thread, end
    correlation, ts = events.gpu.correlation, events.runtime.ts
    for start in range(0, n, _ROWS_AT_ONCE):
        part = correlation[start : start + _ROWS_AT_ONCE]
        call = np.searchsorted(ids, part)
        np.minimum(call, len(ids) - 1, out=call)
        rows = np.flatnonzero((ids[call] == part) & (part >= 0))
        call = call[rows]
        if first is not None:
            call = first[call]
        rows += start
        launch[rows] = ts[call]
        thread[rows] = call_thread[call]
        if call_end is not None:
            end[rows] = call_end[call]
    return launch, thread, end
