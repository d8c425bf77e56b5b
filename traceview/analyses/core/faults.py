"""The numbers behind ``traceview audit`` (analyses.audit): which launch calls are which, the
CPU span, runs of rows per stream or device, order and clock faults. Definitions in
docs/audit.md; every function here is numpy over whole columns, no loop per event."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from traceview.aggregate.order import distinct, ids_dtype, lex_order, packed_order
from traceview.aggregate.percentiles import median
from traceview.aggregate.sorted_runs import in_sorted
from traceview.analyses.core.graphs import GRAPH_LAUNCH
from traceview.columns.model import TraceEvents
from traceview.columns.schema import RuntimeColumns

# The runtime and driver calls that put work on a GPU: a kernel, a copy, a fill, a graph.
# Versioned and per-thread-stream names too (cudaLaunchKernel_v7000, cuLaunchKernel_ptsz).
KERNEL_CALL, COPY_CALL, FILL_CALL, GRAPH_CALL, OTHER_CALL = 0, 1, 2, 3, 4
CALL_KINDS = ("kernel launches", "copies", "fills", "graph launches")
_KERNEL = re.compile(r"^(?:cuda|cu|hip)(?:Ext)?(?:Module)?Launch(?:Cooperative)?Kernel\w*$")
_COPY = re.compile(r"^(?:cuda|cu|hip)Memcpy\w*$")
_FILL = re.compile(r"^(?:cuda|cu|hip)Memset\w*$")
NO_END = np.iinfo(np.int64).min


def call_kind(name: str) -> int:
    """KERNEL_CALL, COPY_CALL, FILL_CALL, GRAPH_CALL or OTHER_CALL for a runtime call's name."""
    if _KERNEL.match(name):
        return KERNEL_CALL
    if GRAPH_LAUNCH.match(name):
        return GRAPH_CALL
    if _COPY.match(name):
        return COPY_CALL
    if _FILL.match(name):
        return FILL_CALL
    return OTHER_CALL


@dataclass(frozen=True)
class Calls:
    """The runtime calls of a trace's CPU rows (those with a correlation id), in file order:
    name id, kind (call_kind), start, duration, thread, correlation; and the span of every CPU
    row (ops included), (0, 0) when there is none. Start and correlation are the runtime
    columns themselves when these hold the same calls (as the reader makes them)."""

    name: np.ndarray
    kind: np.ndarray
    ts: np.ndarray
    dur: np.ndarray  # int32 when every duration fits
    thread: np.ndarray
    correlation: np.ndarray
    cpu_span: tuple[int, int]


def runtime_calls(events: TraceEvents) -> Calls:
    """One pass over the CPU rows, block by block: the runtime calls' names, durations and
    threads written into columns made once (no parts joined), their starts and ids checked
    against the runtime columns and taken from them; in a trace where these differ, a second
    pass keeps copies of their own."""
    shared = _CallColumns(events, len(events.runtime.ts), events.runtime)
    calls = shared.fill(events) or _CallColumns(events, len(events.cpu), None).fill(events)
    assert calls is not None  # without the runtime columns to match, every block fits
    return calls


class _CallColumns:
    """The calls' columns filled block by block, up to ``size`` calls; ``runtime``: the runtime
    columns the calls' starts and ids must equal (None: copied)."""

    def __init__(self, events: TraceEvents, size: int, runtime: RuntimeColumns | None) -> None:
        self.runtime = runtime
        self.name = np.empty(size, dtype=np.int32)
        self.dur = np.empty(size, dtype=np.int32)
        self.thread = np.empty(size, dtype=ids_dtype(len(events.threads)))
        own = runtime is None
        self.ts = np.empty(size if own else 0, dtype=np.int64)
        self.correlation = np.empty(size if own else 0, dtype=np.int64)
        self.count = 0

    def fill(self, events: TraceEvents) -> Calls | None:
        """The Calls, or None when the calls are not the runtime columns' own."""
        lo, hi = np.iinfo(np.int64).max, np.iinfo(np.int64).min
        for block in events.cpu.blocks():
            if len(block) == 0:
                continue
            lo, hi = min(lo, int(block["ts"].min())), max(hi, int(block["end"].max()))
            if not self._add(block, block["correlation"] >= 0):
                return None
        n = self.count
        if self.runtime is not None and n != len(self.runtime.ts):
            return None
        ts, correlation = (
            (self.ts[:n], self.correlation[:n])
            if self.runtime is None
            else (self.runtime.ts, self.runtime.correlation)
        )
        name, span = self.name[:n], ((lo, hi) if lo <= hi else (0, 0))
        kind = _kinds(events, name)
        return Calls(name, kind, ts, self.dur[:n], self.thread[:n], correlation, span)

    def _add(self, block: np.ndarray, call: np.ndarray) -> bool:
        """The block's rows where ``call`` added (field by field: a structured array's rows
        taken whole cost 3 times as much); False when they are not the runtime columns'."""
        ts, correlation = block["ts"][call], block["correlation"][call]
        at = slice(self.count, self.count + len(ts))
        if at.stop > len(self.name):
            return False
        if self.runtime is None:
            self.ts[at], self.correlation[at] = ts, correlation
        elif not (
            np.array_equal(self.runtime.ts[at], ts)
            and np.array_equal(self.runtime.correlation[at], correlation)
        ):
            return False
        dur = block["end"][call]
        dur -= ts
        if len(dur) and self.dur.dtype != np.int64 and not _fits(dur, self.dur.dtype):
            self.dur = self.dur.astype(np.int64)
        self.name[at], self.dur[at] = block["name"][call], dur
        self.thread[at] = block["thread"][call]
        self.count = at.stop
        return True


def _fits(values: np.ndarray, dtype: np.dtype) -> bool:
    info = np.iinfo(dtype)
    return int(values.min()) >= info.min and int(values.max()) <= info.max


def _kinds(events: TraceEvents, name: np.ndarray) -> np.ndarray:
    """Each call's kind, through a table of the names used (each distinct name once)."""
    if len(name) == 0:
        return np.zeros(0, dtype=np.int8)
    used = distinct(name)
    table = np.full(int(used[-1]) + 1, OTHER_CALL, dtype=np.int8)
    table[used] = [call_kind(events.names[i]) for i in used.tolist()]
    kind: np.ndarray = table[name]
    return kind


def carried(keys: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Mask: which of ``ids`` some key (>= 0) equals. Through a table of the keys' range when
    it takes at most _TABLE_BYTES a key (a trace's correlation ids: ~17 over its GPU rows;
    8 times faster than a search), else a binary search in their sorted distinct values."""
    out = np.zeros(len(ids), dtype=bool)
    known = keys >= 0
    if not known.any() or len(ids) == 0:
        return out
    low = int(np.min(keys, where=known, initial=np.iinfo(np.int64).max))
    size = int(keys.max()) - low + 1
    if size > _TABLE_BYTES * len(keys):
        return in_sorted(distinct(keys[known]), ids)
    del known
    # a bit a key value (a bool each: 17 B a GPU row on the H200 trace's ids, the audit's peak)
    table = np.zeros((size + 7) >> 3, dtype=np.uint8)
    for lo in range(0, len(keys), _PASS):
        part = keys[lo : lo + _PASS]
        at = part[part >= 0] - low
        np.bitwise_or.at(table, at >> 3, np.left_shift(1, at & 7).astype(np.uint8))
    for lo in range(0, len(ids), _PASS):
        at = ids[lo : lo + _PASS] - low
        inside = (at >= 0) & (at < size)
        at = at[inside]
        bits = table[at >> 3] >> (at & 7).astype(np.uint8)
        out[lo : lo + _PASS][inside] = (bits & 1).astype(bool)
    return out


_TABLE_BYTES = 32  # what the sorted distinct keys' temporaries take at most, a key


def group_order(group: np.ndarray | None, ts: np.ndarray) -> np.ndarray | None:
    """Rows by group, then start, ties in row order (``lex_order((ts, group))``); ``group``
    None: one group. None when that is the rows' own order."""
    one = group is None or len(group) == 0 or int(group.min()) == int(group.max())
    if one and ascending(ts):
        return None
    # int32 positions from one packed key sorted in place (held through the audit's checks)
    order = packed_order(None if one else group, ts)
    if order is not None:
        return order
    if group is None or one:
        return np.argsort(ts, kind="stable")
    return lex_order((ts, group))


def ascending(values: np.ndarray, strictly: bool = False) -> bool:
    """Whether ``values`` never descend (``strictly``: nor repeat), a pass at a time (no
    row-sized temporary)."""
    for lo in range(0, len(values) - 1, _PASS):
        part = values[lo : lo + _PASS + 1]
        down = part[1:] <= part[:-1] if strictly else part[1:] < part[:-1]
        if bool(down.any()):
            return False
    return True


Rows = np.ndarray | slice  # a pass's rows: their indices, or a slice of rows in order


def earlier_ends(
    order: np.ndarray | None, group: np.ndarray | None, ts: np.ndarray, dur: np.ndarray
) -> Iterator[tuple[Rows, np.ndarray]]:
    """The rows in ``order`` (group_order's; None: every row in its order), a pass at a time:
    the pass's rows and, per row, the latest end among the rows of its group that start before
    it (earlier start, or the same start and an earlier row), NO_END when none. Where the ends
    cannot be offset within 62 bits per group, the previous row's end alone (as before)."""
    n = len(ts) if order is None else len(order)
    previous_only = n > 0 and not _offsets_fit(group, ts, dur)
    carry, carry_group = NO_END, None
    for lo in range(0, n, _PASS):
        at: Rows = slice(lo, min(lo + _PASS, n)) if order is None else order[lo : lo + _PASS]
        end = ts[at] + dur[at]
        starts = np.zeros(len(end), dtype=bool)
        if group is not None:
            g = group[at]
            starts[1:] = g[1:] != g[:-1]
            starts[0] = carry_group is not None and g[0] != carry_group
            carry_group = g[-1]
        running = end if previous_only else _running_max(end, starts)
        before = np.empty(len(end), dtype=np.int64)
        before[0] = NO_END
        before[1:] = running[:-1]
        before[starts] = NO_END
        head = int(np.argmax(starts)) if starts.any() else len(end)  # the carry's group's rows
        if previous_only:
            before[0] = carry if head else NO_END
        else:
            np.maximum(before[:head], carry, out=before[:head])
        last = int(running[-1])
        carry = max(carry, last) if head == len(end) and not previous_only else last
        yield at, before


def picked(at: Rows, hit: np.ndarray) -> np.ndarray:
    """The indices of a pass's rows where ``hit``."""
    if isinstance(at, slice):
        return np.asarray(np.flatnonzero(hit) + at.start)
    return np.asarray(at[hit])


def _running_max(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The running maximum of ``values``, restarted where ``starts``: each segment offset
    above the last, so that one accumulate does them all (a loop per segment when the
    offsets would not fit in 62 bits)."""
    if not starts.any():
        return np.asarray(np.maximum.accumulate(values))
    rank = np.cumsum(starts)
    low = int(values.min())
    width = int(values.max()) - low + 1
    if (int(rank[-1]) + 1) * width < 1 << 62:
        shifted = values - low
        shifted += rank * width
        out: np.ndarray = np.maximum.accumulate(shifted)
        out -= rank * width
        out += low
        return out
    out = np.empty_like(values)
    bounds = [0, *np.flatnonzero(starts).tolist(), len(values)]
    for a, b in itertools.pairwise(bounds):
        if b > a:
            out[a:b] = np.maximum.accumulate(values[a:b])
    return out


def _offsets_fit(group: np.ndarray | None, ts: np.ndarray, dur: np.ndarray) -> bool:
    """Whether each group's ends, less its first start, times the number of groups fit in 62
    bits (the whole-column running maximum this was first worked out with needed it)."""
    groups = 1 if group is None else len(distinct(group))
    low = int(ts.min())
    if int(dur.min()) >= 0 and groups * (int(ts.max()) + int(dur.max()) - low + 1) < 1 << 62:
        return True  # a bound of the widest group's
    key = np.zeros(len(ts), dtype=np.int64) if group is None else group
    base = np.full(int(key.max()) + 1, np.iinfo(np.int64).max, dtype=np.int64)
    top = np.full(len(base), np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(base, key, ts)
    np.maximum.at(top, key, ts + dur)
    seen = base <= top
    width = int((top[seen] - base[seen]).max()) + 1
    return width > 0 and groups * width < 1 << 62


def order_faults(group: np.ndarray, ts: np.ndarray, correlation: np.ndarray) -> np.ndarray:
    """Rows (indices, in that order) whose correlation id is lower than that of the row before
    them in their group, the group's rows taken by start (then id): a call made, or a kernel
    run, before one numbered earlier. Rows with no id (< 0, or 0: CUPTI numbers from 1) are
    left out. One sort of every row (none when they are one group in start order, no two at
    one start); the comparisons a pass at a time."""
    if np.count_nonzero(correlation > 0) < 2:
        return np.zeros(0, dtype=np.int64)
    one = int(group.min()) == int(group.max())
    order = None
    if not (one and ascending(ts, strictly=True)):
        # int32 positions from one packed key sorted in place, where it fits
        order = packed_order(group, ts, lambda rows: [correlation[rows]])
        if order is None:
            order = lex_order((correlation, ts, group))
    found = []
    last_group, last_id = None, 0
    for lo in range(0, len(ts), _PASS):
        at: Rows = slice(lo, lo + _PASS) if order is None else order[lo : lo + _PASS]
        c = correlation[at]
        known = c > 0
        if not known.any():
            continue
        g, c = group[at][known], c[known]
        bad = np.empty(len(c), dtype=bool)
        bad[0] = last_group is not None and g[0] == last_group and c[0] < last_id
        bad[1:] = (g[1:] == g[:-1]) & (c[1:] < c[:-1])
        found.append(picked(at, known)[bad].astype(np.int64, copy=False))
        last_group, last_id = g[-1], int(c[-1])
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


_PASS = 1 << 16  # rows a pass


DRIFT_BINS = 16
DRIFT_MIN_BINS = 8
DRIFT_MIN_NS = 50_000  # a trend of the launch → start floor smaller than this is jitter
DRIFT_FIT = 8  # the floor's scatter around the trend must be under 1/8 of the trend


class Drift:
    """Per device, the trend of the launch → start delay over the trace (ns; > 0: the device's
    clock runs ahead of the host's), or None when the floor shows no clean trend.

    The times are split into DRIFT_BINS equal spans of launch time; each span's smallest
    delay is the floor (queued work only adds to it). The trend is the Theil–Sen slope of the
    floors times the launches' span, reported when it is at least DRIFT_MIN_NS and the
    floors' median distance from the line is under 1/DRIFT_FIT of it (a queue that comes and
    goes scatters the floors; a drifting clock moves them all).

    The rows (device index, None where there is one device; launch, start) come a pass at a
    time, twice: to ``span``, then to ``floors``."""

    def __init__(self, devices: int) -> None:
        self.count = np.zeros(devices, dtype=np.int64)
        self.low = np.full(devices, np.iinfo(np.int64).max, dtype=np.int64)
        self.high = np.full(devices, np.iinfo(np.int64).min, dtype=np.int64)
        self.floor = np.full((devices, DRIFT_BINS), np.iinfo(np.int64).max, dtype=np.int64)

    def span(self, device: np.ndarray | None, launch: np.ndarray) -> None:
        if len(launch) == 0:
            return
        if device is None:  # one device: no scatter
            self.count[0] += len(launch)
            self.low[0] = min(self.low[0], launch.min())
            self.high[0] = max(self.high[0], launch.max())
            return
        self.count += np.bincount(device, minlength=len(self.count))
        np.minimum.at(self.low, device, launch)
        np.maximum.at(self.high, device, launch)

    def floors(self, device: np.ndarray | None, launch: np.ndarray, start: np.ndarray) -> None:
        step = np.maximum((self.high - self.low) // DRIFT_BINS, 1)
        if device is None:
            bins = launch - int(self.low[0])
            bins //= int(step[0])
        else:
            bins = launch - self.low[device]
            bins //= step[device]
        np.minimum(bins, DRIFT_BINS - 1, out=bins)
        delay = start - launch
        if device is None and len(bins) and bool((bins[1:] >= bins[:-1]).all()):
            # launches in order: each bin a run of rows
            first = np.flatnonzero(np.r_[True, bins[1:] != bins[:-1]])
            lowest = np.minimum.reduceat(delay, first)
            floor = self.floor[0]
            floor[bins[first]] = np.minimum(floor[bins[first]], lowest)
            return
        if device is None:
            np.minimum.at(self.floor[0], bins, delay)
        else:
            np.minimum.at(self.floor, (device, bins), delay)

    def trend(self, device: int) -> int | None:
        if self.count[device] < 4 * DRIFT_BINS or self.high[device] <= self.low[device]:
            return None
        floor = self.floor[device]
        seen = np.flatnonzero(floor != np.iinfo(np.int64).max)
        if len(seen) < DRIFT_MIN_BINS:
            return None
        x, y = seen.astype(np.float64), floor[seen].astype(np.float64)
        i, j = np.triu_indices(len(x), 1)
        slope = median((y[j] - y[i]) / (x[j] - x[i]))
        scatter = median(np.abs(y - slope * x - median(y - slope * x)))
        trend = slope * DRIFT_BINS  # per bin → over the span
        if abs(trend) < DRIFT_MIN_NS or scatter * DRIFT_FIT > abs(trend):
            return None
        return round(trend)


def record_counts(lines: Sequence[str]) -> list[str]:
    """kineto's ``Record counts: Out-of-range = 0, ...`` INFO lines whose counts of lost or
    misplaced records are not all 0 (blocklisted runtime calls are left out on purpose)."""
    out = []
    for line in lines:
        if "Record counts:" not in line:
            continue
        counts = re.findall(r"([A-Za-z][^,=:]*?)\s*=\s*(\d+)", line.split("Record counts:", 1)[1])
        if any(int(n) for what, n in counts if not what.startswith("Blocklisted")):
            out.append(line)
    return out
