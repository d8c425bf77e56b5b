"""CPU op calls per (name, shape): how many, their total and their self CPU time.

Self time of a call = its duration minus the durations of its direct children: the calls
whose parent it is. A call's parent is found as a stack walk over each thread's calls in
order (ts, then longest first, then file order) finds it: the innermost call still open, i.e.
the first of the previous call and its ancestors whose closed window contains its end. Done
here by pointer jumping (each round, a call not contained by its candidate moves on to the
candidate's candidate), so the rounds grow with the log of the nesting, not with the calls;
exact for properly nested calls (any two either nested or disjoint), as kineto writes them.

Taken a block of CPU rows at a time (OpCallsByBlock) when each thread's calls come in the
file in that order already, as kineto writes them: only each thread's open calls (its last
call and that one's ancestors) are carried from block to block, and the sums per (name,
shape), so memory stays flat whatever the number of calls. Otherwise every call is held at
once (thread, ts, end, name, shape: 28 bytes a call, about 29 more at the peak of their sort)
and the walk runs a slice of the sorted calls at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traceview.aggregate import sums
from traceview.aggregate.order import dense_ids, lex_order_then
from traceview.columns.cpu_rows import OP, ROW
from traceview.columns.model import TraceEvents

OP_FIELDS = ("thread", "ts", "end", "name", "shape")


@dataclass(frozen=True)
class OpCalls:
    """Per distinct (name id, shape id) of CPU op calls (shape NO_SHAPE when none): calls,
    total CPU time and self CPU time (ns)."""

    name: np.ndarray
    shape: np.ndarray
    calls: np.ndarray
    cpu_ns: np.ndarray
    self_ns: np.ndarray


def op_calls(events: TraceEvents, columns: tuple[np.ndarray, ...] | None = None) -> OpCalls:
    """The OpCalls of every cpu_op (2021: Operator) row of the trace; ``columns``: the ops'
    OP_FIELDS (``OpColumns``), when the caller has read them already."""
    if columns is not None:
        return _whole(events, columns)
    found = OpCallsByBlock(events)
    for block in events.cpu.blocks():
        found.add(block)
    return found.result()


def _whole(events: TraceEvents, columns: tuple[np.ndarray, ...] | None = None) -> OpCalls:
    """op_calls with every op's columns held at once (``columns``, else read here)."""
    thread, ts, end, name, shape = _op_columns(events) if columns is None else columns
    del columns
    children = _children_time(thread, ts, end)
    del thread
    dur = end - ts
    del ts, end
    self_ns = dur - children
    del children
    width = np.int64(max(len(events.shapes), 0) + 1)
    key = name.astype(np.int64) * width + (shape.astype(np.int64) + 1)
    del name, shape
    used, group = dense_ids(key, int(len(events.names) * width) or 1)
    del key
    n = len(used)
    return OpCalls(
        name=used // width,
        shape=used % width - 1,
        calls=np.bincount(group, minlength=n).astype(np.int64),
        cpu_ns=sums.by_group(group, dur, n),
        self_ns=sums.by_group(group, self_ns, n),
    )


class OpCallsByBlock:
    """op_calls of blocks of CPU rows given in file order (``add``), without holding the ops.

    While each thread's calls come in (ts, −end) order (ties in file order: the order the
    walk sorts them into), a block's ops are walked after the calls its threads still have
    open (each thread's last call and that one's ancestors: a later call's parent is one of
    them or a later call); a call's self time is summed when it can take no more children
    (it left its thread's open calls). Else, or when the open calls grow past _MAX_OPEN (a
    nesting that deep would be walked again every block), the result is op_calls over every
    op held at once, from a pass of its own.
    """

    _MAX_OPEN = 1 << 14
    _PART = 1 << 14  # rows walked at once
    _TABLE = 1 << 20  # the most keys looked up in a table (4 MB) rather than searched

    def __init__(self, events: TraceEvents) -> None:
        self.events = events
        self.width = np.int64(max(len(events.shapes), 0) + 1)
        self.in_order = True
        # the open calls, by thread and in each thread's order (outermost first)
        i64 = np.zeros(0, dtype=np.int64)
        self.open: tuple[np.ndarray, ...] = (np.zeros(0, dtype=np.int32), i64, i64, i64, i64)
        # per (name, shape) key seen, sorted: calls, total and self time
        self.keys, self.calls, self.cpu_ns, self.self_ns = i64, i64, i64, i64
        self.dur_total = self.self_total = 0  # |values| summed exactly, as sums.check does
        # each key's position in ``keys`` (−1: not seen), when the keys' range is small
        bound = int(len(events.names) * self.width)
        self.table = np.full(bound, -1, dtype=np.int32) if bound <= self._TABLE else None

    def add(self, block: np.ndarray) -> None:
        """Take the next block of CPU rows (ops or not)."""
        # a part at a time: a part's temporaries stay in the cache and the heap (a block's,
        # 0.5 MB each, were mapped afresh each time: 0.13 s against 0.07 s on 0.6 M ops)
        for lo in range(0, len(block), self._PART):
            if self.in_order:
                self._add(block[lo : lo + self._PART])

    def _add(self, block: np.ndarray) -> None:
        ops = np.flatnonzero(block["correlation"] == OP)
        if len(ops) == 0:
            return
        name, shape = block["name"][ops], block["shape"][ops]
        key = name.astype(np.int64) * self.width + (shape.astype(np.int64) + 1)
        columns = (block["thread"][ops], block["ts"][ops], block["end"][ops], key)
        carried = len(self.open[0])
        thread, ts, end, key, children = _joined(self.open, columns)
        order = np.argsort(thread, kind="stable")
        t, s, e = thread[order], ts[order], end[order]
        later = (s[1:] > s[:-1]) | ((s[1:] == s[:-1]) & (e[1:] <= e[:-1]))
        if not (later | (t[1:] != t[:-1])).all():
            self._give_up()
            return
        k, c = key[order], children[order]
        fresh = order >= carried  # the block's ops (the open calls were counted before)
        found = _walk(t, s, e)
        dur = e - s
        child = np.flatnonzero((found >= 0) & fresh)
        np.add.at(c, found[child], dur[child])
        # the calls still open: each thread's last call and its ancestors
        still = np.zeros(len(t), dtype=bool)
        at = np.flatnonzero(np.r_[t[1:] != t[:-1], True])
        for _ in range(self._MAX_OPEN):
            still[at] = True
            at = found[at]
            at = at[at >= 0]
            if len(at) == 0:
                break
        if len(at) or int(still.sum()) > self._MAX_OPEN:
            self._give_up()
            return
        self.dur_total += _abs_total(dur[fresh])
        done = ~still
        self_ns = dur[done] - c[done]
        self.self_total += _abs_total(self_ns)
        at = self._slots(k)
        self.calls += np.bincount(at[fresh], minlength=len(self.keys))
        np.add.at(self.cpu_ns, at[fresh], dur[fresh])
        np.add.at(self.self_ns, at[done], self_ns)
        self.open = (t[still], s[still], e[still], k[still], c[still])

    def _slots(self, key: np.ndarray) -> np.ndarray:
        """Each key's position in ``keys``, the keys not seen before added (sums 0)."""
        known = self.keys
        at: np.ndarray
        if self.table is not None:
            at = self.table[key]
            seen = at >= 0
        else:
            at = np.searchsorted(known, key)
            seen = at < len(known)
            seen[seen] = known[at[seen]] == key[seen]
        if seen.all():
            return at
        keys = _merged(known, key[~seen])
        if self.table is not None:
            self.table[keys] = np.arange(len(keys), dtype=np.int32)
        moved = np.searchsorted(keys, known)
        grown = []
        for column in (self.calls, self.cpu_ns, self.self_ns):
            out = np.zeros(len(keys), dtype=np.int64)
            out[moved] = column
            grown.append(out)
        self.keys, (self.calls, self.cpu_ns, self.self_ns) = keys, grown
        at = np.searchsorted(keys, key) if self.table is None else self.table[key]
        return at

    def _give_up(self) -> None:
        self.in_order = False
        i64 = np.zeros(0, dtype=np.int64)
        self.open = (i64,) * 5
        self.keys, self.calls, self.cpu_ns, self.self_ns = i64, i64, i64, i64

    def result(self) -> OpCalls:
        """The OpCalls of every op given (of a pass of its own when they came out of order)."""
        if not self.in_order:
            return _whole(self.events)
        _, s, e, k, c = self.open
        self.open = ()
        dur = e - s
        self_ns = dur - c
        self.self_total += _abs_total(self_ns)
        np.add.at(self.self_ns, self._slots(k), self_ns)
        self.table = None
        if self.dur_total >= _END or self.self_total >= _END:
            raise sums.SumOverflow
        keys, width = self.keys, self.width
        return OpCalls(
            name=keys // width,
            shape=keys % width - 1,
            calls=self.calls,
            cpu_ns=self.cpu_ns,
            self_ns=self.self_ns,
        )


_END = 2**63


def _joined(held: tuple[np.ndarray, ...], new: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """The open calls' columns followed by the block's (children: 0 for the block's)."""
    out = [
        np.concatenate((h, n.astype(h.dtype, copy=False)))
        for h, n in zip(held[:4], new, strict=True)
    ]
    out.append(np.concatenate((held[4], np.zeros(len(new[0]), dtype=np.int64))))
    return tuple(out)


def _merged(known: np.ndarray, new: np.ndarray) -> np.ndarray:
    """The sorted distinct values of both (``known`` sorted and distinct)."""
    values = np.concatenate((known, new))
    values.sort()
    keep = np.r_[True, values[1:] != values[:-1]] if len(values) else np.zeros(0, dtype=bool)
    return values[keep]


def _abs_total(values: np.ndarray) -> int:
    """The exact sum of |values| (a Python int)."""
    if len(values) == 0:
        return 0
    largest = max(int(values.max()), -int(values.min()))
    if largest * len(values) < _END:
        return int(np.abs(values).sum())
    return sum(abs(v) for v in values.tolist())


def _op_columns(events: TraceEvents) -> tuple[np.ndarray, ...]:
    """OP_FIELDS of the CPU ops, in file order (ts and end int64, the ids int32 as stored)."""
    gathered = OpColumns(len(events.cpu))
    for block in events.cpu.blocks():
        gathered.add(block)
    return gathered.columns()


class OpColumns:
    """The CPU ops' OP_FIELDS gathered from blocks of CPU rows, in file order: 28 bytes an
    op, held only by a caller that reads the rows for something else too.

    Each block's ops are written straight into one array per field, made for ``capacity``
    ops (the CPU rows: pages past the ops are never touched) and grown if need be (np.take
    into them, twice as fast as np.compress on the blocks' strided fields): no
    per-block parts joined at the end (on the 1 GB benchmark trace, joining 34 MB of parts
    took 0.05 s of a warm report, and as much memory again).
    """

    def __init__(self, capacity: int = 0) -> None:
        self.arrays = [np.empty(capacity, dtype=ROW[field]) for field in OP_FIELDS]
        self.count = 0

    def add(self, block: np.ndarray) -> None:
        ops = np.flatnonzero(block["correlation"] == OP)
        end = self.count + len(ops)
        if end > len(self.arrays[0]):
            self.arrays = [np.resize(a, max(end, 2 * len(a))) for a in self.arrays]
        for array, field in zip(self.arrays, OP_FIELDS, strict=True):
            np.take(block[field], ops, out=array[self.count : end])
        self.count = end

    def columns(self) -> tuple[np.ndarray, ...]:
        """One array per field (views of the arrays written, dropped here)."""
        out = tuple(array[: self.count] for array in self.arrays)
        self.arrays = []
        return out


def parents(thread: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per call, the index of its parent call (−1 for none); see the module docstring.

    The walk runs a slice of the sorted calls at a time, each slice starting at a call that
    no earlier call of its thread reaches (or a thread's first): a call's candidates are the
    call before it and that one's ancestors, so none lies before such a call, and each slice
    is walked on its own. Its temporaries are then a slice's, not every call's."""
    n = len(ts)
    # positions in int32 when they fit: half the memory
    index = np.dtype(np.int32) if n < 2**31 - 1 else np.dtype(np.int64)
    parent = np.full(n, -1, dtype=index)
    if n == 0:
        return parent
    order = _by_thread(thread, ts, end)
    if order is None:
        # lex_order((−end, ts, thread)), stable: file order in ties; −end made only for the
        # calls tied on (thread, ts)
        order = lex_order_then(thread, ts, lambda at: [-end[at]])
    order = order.astype(index)
    starts = _slice_starts(thread, end, order)
    for lo, hi in zip(starts, [*starts[1:], n], strict=True):
        at = order[lo:hi]
        found = _walk(thread[at], ts[at], end[at])
        parent[at] = np.where(found >= 0, at[np.maximum(found, 0)], -1)
    return parent


def _by_thread(thread: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """The calls by thread, in file order within each: lex_order((−end, ts, thread)) when
    each thread's calls are in the file by (ts, −end) already, as kineto writes them (its
    ties are in file order too); else None. Checked a slice at a time: no call-sized keys."""
    order = np.argsort(thread, kind="stable")
    for lo in range(0, len(order) - 1, _SLICE):
        at = order[lo : lo + _SLICE + 1]  # with the next slice's first call
        t, s, e = thread[at], ts[at], end[at]
        later = (s[1:] > s[:-1]) | ((s[1:] == s[:-1]) & (e[1:] <= e[:-1]))
        if not (later | (t[1:] != t[:-1])).all():
            return None
    return order


_SLICE = 1 << 17  # calls a slice of the walk holds at least (but the last)


def _slice_starts(thread: np.ndarray, end: np.ndarray, order: np.ndarray) -> list[int]:
    """Where slices of at least _SLICE sorted calls start: 0, then the first call at or after
    each _SLICE-th position that is a thread's first or whose end no earlier call of its
    thread reaches (a run of calls with no such call makes one longer slice)."""
    starts = [0]
    last_thread, reach = -1, 0  # the thread of the calls before, the latest end among them
    for lo in range(_SLICE, len(order), _SLICE):
        at = order[lo - _SLICE : lo]  # the calls before lo, for the reach carried on
        # (the reach is carried from block to block; a run of one thread's calls is cut
        # only where a call ends after every earlier call of its thread)
        last_thread, reach = _carried(thread[at], end[at], last_thread, reach)
        if starts[-1] > lo - _SLICE:
            continue  # the last start lies inside this block: the reach passed it already
        start = _first_start(thread, end, order, lo, last_thread, reach)
        if start is not None:
            starts.append(start)
    return starts


def _carried(t: np.ndarray, e: np.ndarray, last_thread: int, reach: int) -> tuple[int, int]:
    """The thread of the last of these sorted calls and the latest end among its thread's
    calls so far, given those of the calls before them."""
    thread = int(t[-1])
    run = np.flatnonzero(t != thread)
    first = int(run[-1]) + 1 if len(run) else 0
    latest = int(e[first:].max())
    if first == 0 and thread == last_thread:
        latest = max(latest, reach)
    return thread, latest


def _first_start(
    thread: np.ndarray, end: np.ndarray, order: np.ndarray, lo: int, last_thread: int, reach: int
) -> int | None:
    """The first position from ``lo`` on (within _SLICE of it) whose call can start a slice,
    given the thread and latest end of the calls before ``lo``."""
    at = order[lo : lo + _SLICE]
    t, e = thread[at], end[at]
    head = np.empty(len(at), dtype=bool)
    head[0] = int(t[0]) != last_thread
    np.not_equal(t[1:], t[:-1], out=head[1:])
    runs = np.flatnonzero(head)
    # within the first run (the thread of the calls before lo, unless it starts anew)
    stop = int(runs[0]) if len(runs) else len(at)
    if stop:
        before = np.maximum.accumulate(e[:stop])
        before = np.maximum(np.r_[reach, before[:-1]], reach)
        free = np.flatnonzero(before < e[:stop])
        if len(free):
            return lo + int(free[0])
    return lo + stop if stop < len(at) else None


def _walk(thread: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per call of a slice in sorted order (the first with no parent), the position in the
    slice of its parent, −1 for none."""
    n = len(ts)
    index = np.dtype(np.int32) if n < 2**31 - 1 else np.dtype(np.int64)
    t, e = thread, end
    cand: np.ndarray = np.arange(-1, n - 1, dtype=index)
    head = np.r_[True, t[1:] != t[:-1]]
    cand[head] = -1
    cand[_unreached(head, ts, e)] = -1  # no earlier call can hold them: no parent
    del head
    found: np.ndarray = np.full(n, -1, dtype=index)  # parent in sorted positions, once known
    done = cand < 0
    # the first round's test for every call at once, without gathers: most calls lie inside
    # the one before them (the loop's first round then only moves the others on)
    inside = np.zeros(n, dtype=bool)
    np.greater_equal(e[:-1], e[1:], out=inside[1:])
    inside &= ~done
    found[inside] = cand[inside]
    done |= inside
    del inside
    while not done.all():
        todo = np.flatnonzero(~done)
        c = cand[todo]
        inside = e[c] >= e[todo]
        found[todo[inside]] = c[inside]
        done[todo[inside]] = True
        rest, c = todo[~inside], c[~inside]
        # The candidate's parent if known, else its own candidate.
        nxt = np.where(done[c], found[c], cand[c])
        cand[rest] = nxt
        done[rest[nxt < 0]] = True
    return found


def _unreached(head: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Mask over the calls sorted by (thread, ts, −end) (``head``: a thread's first call):
    those whose end no earlier call of their thread reaches. None of those is inside an
    earlier call, so none has a parent; marking them at once spares the pointer jumping its
    longest chains (a thread's top-level calls, each one's candidate the one before)."""
    run = np.cumsum(head) - 1
    rel = end - ts[np.flatnonzero(head)][run]  # ≥ 0: from the thread's first start
    width = int(rel.max()) + 1 if len(rel) else 1
    if len(rel) == 0 or (int(run[-1]) + 1) * width >= 1 << 62:
        return np.zeros(len(end), dtype=bool)  # the bands would not fit: leave it to the walk
    band = run * width
    reach = np.maximum.accumulate(rel + band) - band  # latest end so far within the thread
    unreached = np.zeros(len(end), dtype=bool)
    unreached[1:] = reach[:-1] < rel[1:]
    unreached &= ~head
    return unreached


def _children_time(thread: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per call, the summed duration of its direct children."""
    parent = parents(thread, ts, end)
    out = np.zeros(len(ts), dtype=np.int64)
    total = 0  # the children's durations, summed exactly: as sums.by_group, refused past int64
    for lo in range(0, len(ts), _SLICE):  # a slice at a time: no call-sized temporaries
        p = parent[lo : lo + _SLICE]
        has = np.flatnonzero(p >= 0)
        dur = sums.check(end[lo : lo + _SLICE][has] - ts[lo : lo + _SLICE][has])
        total += int(np.abs(dur).sum())
        np.add.at(out, p[has], dur)
    if total >= 2**63:
        raise sums.SumOverflow
    return out
