"""Which CPU operator launched each GPU activity: the link behind the operator view and the
kernel categories.

A GPU activity's launch is the earliest runtime call with its ``args.correlation`` (the first in
the file among equal starts); its ops are the ``cpu_op`` events (2021 traces: ``Operator``; not
``ProfilerStep#N``) on the launch's thread (pid, tid) whose closed window [ts, ts + dur] contains
the launch's start. The **leaf** op is the
innermost of them (largest ts, then smallest dur, then smallest name), the **top** op the
outermost (smallest ts, then largest dur, then smallest name). ``External id`` is not used: in
real traces it links few kernels (0 of 8,568 in one).

One pass over the CPU rows, block by block, that answers each launch once when each thread's
ops come in start order (else keeps per launch the best op so far), so memory stays flat
whatever the number of CPU ops.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from traceview.aggregate.order import (
    concat_ranges,
    distinct,
    first_of_runs,
    ids_dtype,
    lex_order,
)
from traceview.aggregate.sorted_pairs import SortedPairs
from traceview.analyses.core.devices import NO_LAUNCH, LaunchIndex, first_launch, name_rank
from traceview.columns.cpu_rows import NO_SHAPE, OP, CpuRows
from traceview.columns.model import TraceEvents
from traceview.columns.schema import dropped

NO_OP = -1


@dataclass(frozen=True)
class OpLinks:
    """Per GPU row: the name id of its leaf and top op (NO_OP when none), the thread id and
    start of its launch (−1 / NO_LAUNCH when none), its launch call's duration (ns, int32
    where every one fits: ``no_call`` marks none), and the shape id of its leaf and top op
    (NO_SHAPE when none)."""

    leaf: np.ndarray
    top: np.ndarray
    thread: np.ndarray
    launch: np.ndarray
    launch_ns: np.ndarray
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
    block of CPU rows in the pass that finds the launches (a caller's own pass, saved; a
    block is valid only during the call); ``with_top=False``: the leaf ops alone, in less
    memory: the top ops are not looked for (``top`` all NO_OP, ``top_shape`` all NO_SHAPE).
    The ops and shapes are int32 and the threads int16 where the trace's threads allow (ids
    into lists). ``with_end``: the launches' ends kept (else all NO_LAUNCH); ``with_top``
    if None."""
    n = len(events.gpu.ts)
    with_end = with_top if with_end is None else with_end
    dtype = np.int32
    # the launches' threads int16 where the trace's threads allow (2 B a GPU row held)
    launch, thread, launch_ns = _launches(
        events, on_block, with_end, ids_dtype(len(events.threads))
    )
    rank = name_rank(events.names) if rank is None else rank
    points = _Points(thread, launch)  # its sort's key gone before the links are made
    leaf = (np.full(n, NO_OP, dtype=dtype), np.full(n, NO_SHAPE, dtype=dtype))
    top = (np.full(n, NO_OP, dtype=dtype), np.full(n, NO_SHAPE, dtype=dtype)) if with_top else None
    _find_ops(events.cpu, None, rank, points, leaf, top)
    del points
    if top is None:
        top = (_all(n, NO_OP), _all(n, NO_SHAPE))
    return OpLinks(leaf[0], top[0], thread, launch, launch_ns, leaf[1], top[1])


def no_call(launch_ns: np.ndarray) -> int:
    """The value that marks a row without a launch call in ``launch_ns`` (OpLinks): its
    dtype's least (NO_LAUNCH for int64)."""
    return int(np.iinfo(launch_ns.dtype).min)


def _durations(dur: np.ndarray) -> np.ndarray:
    """Durations (NO_LAUNCH: none) as int32 where every one fits above int32's least value,
    which then marks none (half the memory); else as they are."""
    has = dur != NO_LAUNCH
    info = np.iinfo(np.int32)
    low = int(np.min(dur, where=has, initial=0))
    high = int(np.max(dur, where=has, initial=0))
    if not (info.min < low and high <= info.max):
        return dur
    out = dur.astype(np.int32)
    out[~has] = info.min
    return out


def launches_only(links: OpLinks) -> OpLinks:
    """``links`` with their launch times alone: every other column Dropped (its length, no
    data; any read of it fails loudly), for what reads the launch times and nothing else."""
    n = len(links.launch)

    def gone(column: np.ndarray | None) -> np.ndarray | None:
        return None if column is None else dropped(column.dtype, n)

    return OpLinks(
        leaf=dropped(links.leaf.dtype, n),
        top=dropped(links.top.dtype, n),
        thread=dropped(links.thread.dtype, n),
        launch=links.launch,
        launch_ns=dropped(links.launch_ns.dtype, n),
        leaf_shape=gone(links.leaf_shape),
        top_shape=gone(links.top_shape),
    )


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
    name = np.full(len(at), NO_OP, dtype=np.int32)  # ids into lists: int32, as link_ops'
    shape = np.full(len(at), NO_SHAPE, dtype=np.int32)
    points = _Points(thread, at.astype(np.int64, copy=False))
    _find_ops(events.cpu, skip, name_rank(events.names), points, (name, shape), None)
    return name


Found = tuple[np.ndarray, np.ndarray]  # per point, the chosen op's name and shape ids


class _Points:
    """Points (thread, time; thread < 0: none) in (thread, time, index) order, without a
    sorted copy of their times: ``order`` (int32 when it fits), and per thread the range
    of its points in it."""

    def __init__(self, thread: np.ndarray, time: np.ndarray) -> None:
        self.thread, self.time = thread, time
        self.order = _by_thread_and_time(thread, time)
        self.threads = distinct(thread[thread >= 0]) if len(self.order) else thread[:0]
        self.first, self.stop = [], []
        for t in self.threads.tolist():  # a few threads: searched in the unsorted view
            self.first.append(self._first(functools.partial(self._below, t), 0, len(self.order)))
        self.stop = [*self.first[1:], len(self.order)]

    def _below(self, thread: int, at: int) -> bool:
        return bool(self.thread[at] < thread)

    def _first(self, before: Callable[[int], bool], lo: int, hi: int) -> int:
        """The first position in [lo, hi) of ``order`` whose point is not ``before``
        (given a point's index), those that are coming first."""
        order = self.order
        while lo < hi:
            mid = (lo + hi) // 2
            if before(int(order[mid])):
                lo = mid + 1
            else:
                hi = mid
        return lo

    def from_time(self, i: int, value: int, lo: int | None = None, after: bool = False) -> int:
        """The first position of thread ``i``'s points (from ``lo``) at or after ``value``
        (``after``: after it)."""
        time = self.time
        start = self.first[i] if lo is None else lo
        if after:
            return self._first(lambda at: bool(time[at] <= value), start, self.stop[i])
        return self._first(lambda at: bool(time[at] < value), start, self.stop[i])

    def groups(
        self, block: np.ndarray, is_op: np.ndarray
    ) -> Iterator[tuple[int, slice | np.ndarray]]:
        """Per thread with points, its index and the block's ops on it (rows in order, a
        slice when they are one run)."""
        thread = block["thread"]
        if len(self.threads) <= _FEW_THREADS:
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
        if len(rows) == 0:
            return
        order = np.argsort(slot, kind="stable")
        rows, slot = rows[order], slot[order]
        bounds = np.flatnonzero(np.r_[True, slot[1:] != slot[:-1], True]).tolist()
        for lo, hi in itertools.pairwise(bounds):
            yield int(slot[lo]), _run_or(rows[lo:hi])


_FEW_THREADS = 4  # threads matched by one mask each; beyond, grouped by one sort


def _by_thread_and_time(thread: np.ndarray, time: np.ndarray) -> np.ndarray:
    """The indices of the points with a thread (>= 0), ordered by (thread, time, index):
    one int64 key a point, (thread, time − the least, index) packed, sorted in place, when
    that fits; else ``lex_order``."""
    n = len(thread)
    known = thread >= 0
    count = int(np.count_nonzero(known))
    dtype = np.int32 if n < 2**31 else np.int64
    if count == 0:
        return np.zeros(0, dtype=dtype)
    low = int(np.min(time, where=known, initial=np.iinfo(np.int64).max))
    high = int(np.max(time, where=known, initial=np.iinfo(np.int64).min))
    index_bits, time_bits = n.bit_length(), (high - low).bit_length()
    if (int(thread.max()) + 1) << (index_bits + time_bits) >= 1 << 63:
        rows = np.flatnonzero(known)
        ordered: np.ndarray = rows[lex_order((time[rows], thread[rows]))].astype(dtype)
        return ordered
    del known
    key = np.empty(count, dtype=np.int64)
    filled = 0
    for lo in range(0, n, _PASS):
        part = thread[lo : lo + _PASS]
        rows = np.flatnonzero(part >= 0)
        k = part[rows].astype(np.int64)
        k <<= time_bits
        k |= time[lo : lo + _PASS][rows] - low
        k <<= index_bits
        rows += lo
        k |= rows
        key[filled : filled + len(k)] = k
        filled += len(k)
    # timsort: the launches come in a few runs (0.35 ms for 1.5·10^5, quicksort 26 ms)
    key.sort(kind="stable")
    out = np.empty(count, dtype=dtype)
    mask = (1 << index_bits) - 1
    for lo in range(0, count, _PASS):
        out[lo : lo + _PASS] = key[lo : lo + _PASS] & mask
    return out


_PASS = 1 << 16  # rows a pass where a pass's temporaries are enough
_CARRIED = 1 << 16  # more ops open at once on a thread: the sweep gives way to the merge


class _OutOfOrder(Exception):
    """A thread's ops do not come in start order from block to block (or too many are open
    at once): the sweep cannot answer each point once."""


def _find_ops(
    cpu: CpuRows,
    skip: np.ndarray | None,
    rank: np.ndarray,
    points: _Points,
    inner: Found,
    outer: Found | None,
) -> None:
    """Per point, the innermost op containing it (into ``inner``) and the outermost (into
    ``outer``, unless None), of the CPU rows that are ops (``skip``: per name id, ops left
    out): a sweep, each point answered once, when each thread's ops come in start order
    from block to block; else each block's best offered to each point, the best kept."""
    if len(points.order) == 0 or len(cpu) == 0:
        return
    try:
        _sweep(cpu, skip, rank, points, inner, outer)
    except _OutOfOrder:
        for found in (inner, outer):
            if found is not None:
                found[0][:] = NO_OP
                found[1][:] = NO_SHAPE
        _merge(cpu, skip, rank, points, inner, outer)


def _ops_of(cpu: CpuRows, skip: np.ndarray | None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every block of CPU rows and which of its rows are ops (not left out by ``skip``)."""
    for block in cpu.passing_blocks():
        is_op = block["correlation"] == OP
        if skip is not None:
            is_op &= ~skip[block["name"]]
        yield block, is_op


def _sweep(
    cpu: CpuRows,
    skip: np.ndarray | None,
    rank: np.ndarray,
    points: _Points,
    inner: Found,
    outer: Found | None,
) -> None:
    """``_find_ops`` by a sweep: per thread, the points before the last start of a block's
    ops are answered by those ops and the earlier ones still open (carried); raises
    _OutOfOrder when a block's ops start before an earlier block's last."""
    count = len(points.threads)
    carried: list[tuple[np.ndarray, ...]] = [()] * count
    latest = [np.iinfo(np.int64).min] * count  # the latest start met on the thread
    done = list(points.first)  # the points answered, per thread: up to this position
    for block, is_op in _ops_of(cpu, skip):
        for i, rows in points.groups(block, is_op):
            ts = block["ts"][rows]
            start = int(ts.min())
            if start < latest[i]:
                raise _OutOfOrder
            upto = int(ts.max())
            ops: tuple[np.ndarray, ...] = (
                ts, block["end"][rows], block["name"][rows], block["shape"][rows]
            )  # fmt: skip
            earlier = carried[i]
            if earlier and int(earlier[0].max()) == start:  # ties on start: one set, sorted
                ops = tuple(np.concatenate(pair) for pair in zip(earlier, ops, strict=True))
                earlier = ()
            stop = points.from_time(i, upto, done[i])
            _answer(ops, earlier, rank, points, done[i], stop, inner, outer)
            done[i], latest[i] = stop, upto
            # those that may hold a later point
            held = ops[1] >= upto
            carried[i] = tuple(c[held] for c in ops)
            if earlier:
                held = earlier[1] >= upto
                still = (c[held] for c in earlier)
                carried[i] = tuple(map(np.concatenate, zip(still, carried[i], strict=True)))
            if len(carried[i][0]) > _CARRIED:
                raise _OutOfOrder
    for i, left in enumerate(carried):
        if left:
            _answer(left, (), rank, points, done[i], points.stop[i], inner, outer)


def _answer(
    ops: tuple[np.ndarray, ...],
    earlier: tuple[np.ndarray, ...],
    rank: np.ndarray,
    points: _Points,
    lo: int,
    hi: int,
    inner: Found,
    outer: Found | None,
) -> None:
    """Answer the points at [lo, hi) of ``points.order`` from ``ops`` and ``earlier`` (ts,
    end, name and shape, in file order; every op that may contain them), the earlier all
    starting before any of ``ops``: an op of ``ops`` containing a point is more inner than
    any earlier one, an earlier one more outer."""
    if hi <= lo:
        return
    at = points.order[lo:hi]
    point = points.time[at]
    with_outer = outer is not None
    found = _containing(ops, rank, point, with_outer)
    before = _containing(earlier, rank, point, with_outer) if earlier else (None, None)
    for into, op, other, more in zip(
        (inner, outer), found, before, (False, True), strict=True
    ):  # fmt: skip
        if into is None or op is None:
            continue
        hit = op >= 0
        if other is not None:  # the other set's op where it has one and wins, or alone
            mine = (other >= 0) & ~hit if not more else other >= 0
            where = at[mine]
            into[0][where] = earlier[2][other[mine]]
            into[1][where] = earlier[3][other[mine]]
            if more:
                hit &= ~mine
        where = at[hit]
        op = op[hit]
        into[0][where] = ops[2][op]
        into[1][where] = ops[3][op]


def _merge(
    cpu: CpuRows,
    skip: np.ndarray | None,
    rank: np.ndarray,
    points: _Points,
    inner: Found,
    outer: Found | None,
) -> None:
    """``_find_ops`` when the sweep cannot: per block and thread, the best of the block's
    ops for each point within their span, offered to the best kept so far."""
    n = len(points.order)
    kept = [_Kept(n, True, rank), _Kept(n, False, rank) if outer is not None else None]
    for block, is_op in _ops_of(cpu, skip):
        for i, rows in points.groups(block, is_op):
            ts, end = block["ts"][rows], block["end"][rows]
            lo = points.from_time(i, int(ts.min()))
            hi = points.from_time(i, int(end.max()), lo, after=True)
            if hi <= lo:
                continue
            ops = (ts, end, block["name"][rows], block["shape"][rows])
            point = points.time[points.order[lo:hi]]
            for best, op in zip(
                kept, _containing(ops, rank, point, outer is not None), strict=True
            ):
                if best is None or op is None:
                    continue
                hit = np.flatnonzero(op >= 0)
                op = op[hit]
                hit += lo
                t = ts[op]
                best.offer(hit, t, end[op] - t, ops[2][op], ops[3][op])
    for best, found in zip(kept, (inner, outer), strict=True):
        if best is not None and found is not None:
            name, shape = best.taken()
            found[0][points.order] = name
            found[1][points.order] = shape


def _containing(
    ops: tuple[np.ndarray, ...], rank: np.ndarray, point: np.ndarray, outermost: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """Per point (ascending), the position in ``ops`` (ts, end, name, ...) of the innermost
    op containing it and of the outermost (None unless ``outermost``); −1: none.

    In the order (start, then the longer first, then name, then position), the ops
    containing a point p are those at or before the last op starting by p (J) that end at or
    after p: the innermost is the last of them (J itself or a few before it most often: the
    op J lies in), the outermost the first, where the running maximum of the ends first
    reaches p. Ops in strict start order need no sort (no ties).
    """
    ts, end, name = ops[0], ops[1], ops[2]
    if len(ts) < 2 or bool((ts[1:] > ts[:-1]).all()):
        last = np.searchsorted(ts, point, side="right")
        last -= 1  # J
        found = _last_reaching(end, last, point)
        if not outermost:
            return found, None
        first = np.searchsorted(np.maximum.accumulate(end), point, side="left")
        first[first > last] = -1
        return found, first
    dur = end - ts
    ranked = rank[name]
    order = np.lexsort((-np.arange(len(ts)), -ranked, -dur, ts))
    last = np.searchsorted(ts[order], point, side="right")
    last -= 1
    found = _last_reaching(end[order], last, point)
    found = np.where(found >= 0, order[found], -1)
    if not outermost:
        return found, None
    order = np.lexsort((ranked, -dur, ts))
    first = np.searchsorted(np.maximum.accumulate(end[order]), point, side="left")
    first = np.where(first <= last, order[np.minimum(first, len(ts) - 1)], -1)
    return found, first


def _run_or(rows: np.ndarray) -> slice | np.ndarray:
    """Increasing rows as a slice when they are one run (views, no copies), else as they are."""
    lo, hi = int(rows[0]), int(rows[-1]) + 1
    return slice(lo, hi) if hi - lo == len(rows) else rows


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


def launches_and_threads(events: TraceEvents) -> tuple[np.ndarray, np.ndarray]:
    """Per GPU row, the start and thread (int32) of its launching call: ``_launches`` without
    the durations."""
    launch, thread, _ = _launches(events, None, False, np.int32)
    return launch, thread


def _launches(
    events: TraceEvents,
    on_block: Callable[[np.ndarray], None] | None,
    with_end: bool,
    dtype: type[np.integer[Any]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per GPU row, ``first_launch`` and the thread and duration of that launching runtime
    call (the first in the file among calls with its correlation starting at its launch),
    else −1 and ``no_call`` (the durations as OpLinks.launch_ns; all NO_LAUNCH unless
    ``with_end``): in one look-up of each row's launching call when the pass finds the CPU
    rows' calls in order; every block given to ``on_block`` on the way. The threads are
    ``dtype``."""
    calls = _call_threads(events, on_block, with_end, dtype) if len(events.cpu) else None
    if calls is not None:
        return _launched(events, calls, dtype)
    launch = first_launch(events)
    if len(events.cpu) == 0:
        n = len(launch)
        thread = np.full(n, -1, dtype=dtype)
        return launch, thread, _all(n, NO_LAUNCH)
    return (launch, *_matched(events, launch, with_end, dtype))


def _matched(
    events: TraceEvents, launch: np.ndarray, with_end: bool, dtype: type[np.integer[Any]]
) -> tuple[np.ndarray, np.ndarray]:
    """``_launches``' threads and durations by a pass matching the CPU rows' calls to the
    GPU rows by (correlation, start): for calls not ``events.runtime``'s in order."""
    gpu = events.gpu
    n = len(gpu.ts)
    thread = np.full(n, -1, dtype=np.int64)
    dur = np.full(n, NO_LAUNCH, dtype=np.int64)
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
        taken = which[first]
        dur[target[first]] = calls["end"][taken] - calls["ts"][taken]
    if not with_end:
        return thread.astype(dtype), _all(n, NO_LAUNCH)
    return thread.astype(dtype, copy=False), _durations(dur)


_ROWS_AT_ONCE = 1 << 16  # GPU rows looked up at once: the look-up's temporaries stay small


def _call_threads(
    events: TraceEvents,
    on_block: Callable[[np.ndarray], None] | None,
    with_end: bool,
    dtype: type[np.integer[Any]],
) -> tuple[np.ndarray, np.ndarray | None] | None:
    """Per runtime call (in ``events.runtime``), its thread (``dtype``) and duration (None:
    not kept; int32 where every one fits, as ``_durations``), from
    one pass over the CPU rows that also gives every block to ``on_block``; None when the
    CPU rows' runtime calls are not ``events.runtime``'s, one for one in order.

    A read keeps every call both ways, in file order, so each call's thread and end are
    taken where the pass meets it (checked on every call).
    """
    runtime = events.runtime
    count = len(runtime.correlation)
    call_thread = np.empty(count, dtype=dtype)
    call_dur = np.empty(count, dtype=np.int64) if with_end else None
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
            if call_dur is not None:
                np.subtract(block["end"][at], block["ts"][at], out=call_dur[seen:upto])
        seen = upto
    if not (same and seen == count):
        return None
    return call_thread, (None if call_dur is None else _durations(call_dur))


def _launched(
    events: TraceEvents,
    calls: tuple[np.ndarray, np.ndarray | None],
    dtype: type[np.integer[Any]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per GPU row, the start, thread and duration (``calls``' dtype; all NO_LAUNCH when it
    has none) of its launching call (``LaunchIndex.calls``), looked up once; NO_LAUNCH, −1
    and ``no_call`` for a row without one."""
    call_thread, call_dur = calls
    n = len(events.gpu.ts)
    launch = np.full(n, NO_LAUNCH, dtype=np.int64)
    thread = np.full(n, -1, dtype=dtype)
    if call_dur is None:
        dur = _all(n, NO_LAUNCH)
    else:
        dur = np.full(n, no_call(call_dur), dtype=call_dur.dtype)
    if len(events.runtime.correlation) == 0:
        return launch, thread, dur
    index = LaunchIndex(events)
    correlation, ts = events.gpu.correlation, events.runtime.ts
    for start in range(0, n, _ROWS_AT_ONCE):
        call = index.calls(correlation[start : start + _ROWS_AT_ONCE])
        rows = np.flatnonzero(call >= 0)
        call = call[rows]
        rows += start
        launch[rows] = ts[call]
        thread[rows] = call_thread[call]
        if call_dur is not None:
            dur[rows] = call_dur[call]
    return launch, thread, dur
