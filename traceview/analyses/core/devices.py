"""Busy time, idle time and the gaps of each GPU device: the one definition every command uses.

Busy events are the selected GPU activities (kernel, memcpy and memset unless narrowed) whose
duration is positive: an event of zero length keeps nothing busy and never splits a gap. A
device's **window** runs from its earliest start to its latest end, **busy** is the length of
the union of its events' [ts, ts + dur], **idle** = window − busy. A **device gap** is a hole of
positive length between two consecutive maximal intervals of that union, so idle = the sum of
the device gaps. The gap's *before* event is, of the events ending where it starts, the one
that started last (then the smallest name); its *after* event, of those starting where it
ends, the one ending first (then the smallest name). **Host wait** = how long after the gap
began the CPU launched the after event (clamped to [0, gap]); 0 when it has no launch.
Definitions in docs/metrics.md; tests check them against tests/reference.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from traceview.aggregate.intervals import (
    ordered_union_extent,
    union_extent,
    unions,
    unions_in_order,
)
from traceview.aggregate.order import (
    first_of_runs,
    lex_order,
    lex_order_of,
    narrowed,
    packed_order,
)
from traceview.aggregate.sorted_runs import increasing_runs, smallest_at, smallest_match
from traceview.columns.model import TraceEvents
from traceview.columns.packed_names import ranks, ranks_of

NO_LAUNCH = np.iinfo(np.int64).min
# The launch-latency bound (docs/metrics.md "Devices"): a gap's time after its next activity's
# launch (or after the gap began, when it was launched earlier) up to this long is the launch
# path's latency — h200/decode.json.gz: median 11.8 µs, 99th percentile 35 µs — not a wait.
LAUNCH_LATENCY_NS = 50_000


@dataclass(frozen=True)
class DeviceUsage:
    """One device's window [start, end] and busy time over a selection (ns)."""

    device: Any
    start_ns: int
    end_ns: int
    busy_ns: int

    @property
    def window_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def idle_ns(self) -> int:
        return self.window_ns - self.busy_ns

    @property
    def busy_pct(self) -> float:
        return 100.0 * self.busy_ns / self.window_ns if self.window_ns > 0 else 0.0

    @property
    def idle_pct(self) -> float:
        return 100.0 * self.idle_ns / self.window_ns if self.window_ns > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The ``trace.devices`` entries of the JSON outputs."""
        return {
            "device": self.device,
            "window_us": self.window_ns / 1000,
            "busy_us": self.busy_ns / 1000,
            "busy_pct": self.busy_pct,
        }


@dataclass(frozen=True)
class GapSet:
    """Gaps as columns: the device (its index in ``device_of_stream``'s values), the GPU
    rows before and after, the host wait (ns; int32 from ``device_gaps`` where every one
    fits), and whether the row after has a launch (None: not kept; ``launch_latency``
    looks it up). Each gap's [start, end] in ns is not held (16 B a gap) but derived: the
    end of the row before, the start of the row after (``ts``, ``dur``: the GPU columns);
    ``starts`` holds the starts when ``before`` does not (``device_gaps(with_before=False)``)."""

    device: np.ndarray
    before: np.ndarray
    after: np.ndarray
    host_wait: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    launched: np.ndarray | None = None
    starts: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.after)

    @property
    def start(self) -> np.ndarray:
        """Each gap's start (ns): where the row before it ends (a fresh array)."""
        if self.starts is not None:
            return self.starts
        start: np.ndarray = self.ts[self.before]
        start += self.dur[self.before]
        return start

    @property
    def end(self) -> np.ndarray:
        """Each gap's end (ns): where the row after it starts (a fresh array)."""
        end: np.ndarray = self.ts[self.after]
        return end

    def length(self) -> np.ndarray:
        """Each gap's length (end − start), made a pass of gaps at a time (no gap-sized
        temporaries)."""
        out = np.empty(len(self), dtype=np.int64)
        for lo in range(0, len(out), _PASS):
            part = self.take(slice(lo, lo + _PASS))
            np.subtract(part.end, part.start, out=out[lo : lo + _PASS])
        return out

    def take(self, keep: np.ndarray | slice) -> GapSet:
        """The gaps selected by a mask, an index array or a slice (views)."""
        launched = None if self.launched is None else self.launched[keep]
        starts = None if self.starts is None else self.starts[keep]
        return GapSet(
            self.device[keep],
            self.before if len(self.before) == 0 else self.before[keep],
            self.after[keep],
            self.host_wait[keep],
            self.ts,
            self.dur,
            launched,
            starts,
        )


def device_of_stream(events: TraceEvents) -> tuple[np.ndarray, list[Any]]:
    """Per stream id, the index of its device; and the device values in trace-value order
    (streams are sorted by (device, stream) value, so devices come in order)."""
    values: list[Any] = []
    seen: dict[tuple[type, Any], int] = {}
    index = np.empty(len(events.streams), dtype=np.int64)
    for i, stream in enumerate(events.streams):
        key = (type(stream.device), stream.device)
        if key not in seen:
            seen[key] = len(values)
            values.append(stream.device)
        index[i] = seen[key]
    return index, values


def first_launch(events: TraceEvents, rows: np.ndarray | None = None) -> np.ndarray:
    """Per GPU row (of ``rows``; None: every row): the start of the earliest runtime call
    with its correlation id, else ``NO_LAUNCH``."""
    gpu = events.gpu
    correlation = gpu.correlation if rows is None else gpu.correlation[rows]
    if len(events.runtime.correlation) == 0 or len(correlation) == 0:
        return np.full(len(correlation), NO_LAUNCH, dtype=np.int64)
    return LaunchIndex(events).launches(correlation)


class LaunchIndex:
    """``first_launch``'s look-up of correlation ids, made once for many queries. Without a
    sorted copy of the calls when their ids come in a few increasing runs (searched run by
    run), else with one int64 key a call (its id and its index, sorted) when each id is
    once; else the distinct ids with their earliest start (``first_calls``)."""

    def __init__(self, events: TraceEvents) -> None:
        runtime = events.runtime
        self.events = events
        self.correlation, self.ts = runtime.correlation, runtime.ts
        self.runs = increasing_runs(self.correlation)
        if self.runs is None and len(self.correlation) >= _LEAN_FROM:
            self.runs = increasing_runs(self.correlation, overlaps=_LEAN_OVERLAPS)
        self.keys = None if self.runs is not None else _call_keys(self.correlation)
        self.sorted = None
        if self.runs is None and self.keys is None:
            self.sorted = _launches_by_correlation(events)

    def launches(self, correlation: np.ndarray) -> np.ndarray:
        """Per id: the start of the earliest call with it, else NO_LAUNCH."""
        if self.runs is not None:
            found = smallest_match(self.correlation, self.ts, self.runs, correlation, NO_LAUNCH)
            found[correlation < 0] = NO_LAUNCH
            return found
        if self.keys is not None:
            return _keyed_launches(self.keys, self.ts, correlation)
        assert self.sorted is not None
        corr, launch = self.sorted
        at = np.searchsorted(corr, correlation)
        np.minimum(at, len(corr) - 1, out=at)
        matched = corr[at] == correlation
        matched &= correlation >= 0
        out: np.ndarray = np.take(launch, at, out=at, mode="clip")  # in place: int64 both
        out[~matched] = NO_LAUNCH
        return out

    def calls(self, correlation: np.ndarray) -> np.ndarray:
        """Per id: the index (in ``events.runtime``) of the earliest call with it, the first
        in the file among equal starts (its start is ``launches``'), else −1 (int64)."""
        out: np.ndarray
        if self.runs is not None:
            out = smallest_at(self.correlation, self.ts, self.runs, correlation)
            out[correlation < 0] = -1
            return out
        if self.keys is not None:
            keys, bits = self.keys.keys, self.keys.bits
            probe = np.clip(correlation, self.keys.low, self.keys.high)
            probe -= self.keys.low
            probe <<= bits
            at = np.searchsorted(keys, probe)
            np.minimum(at, len(keys) - 1, out=at)
            out = keys[at]
            hit = (out >> bits) == (probe >> bits)
            hit &= correlation >= max(self.keys.low, 0)
            hit &= correlation <= self.keys.high
            out &= (1 << bits) - 1
            out[~hit] = -1
            return out
        ids, first = first_calls(self.events)
        at = np.searchsorted(ids, correlation)
        np.minimum(at, len(ids) - 1, out=at)
        hit = (ids[at] == correlation) & (correlation >= 0)
        out = at if first is None else first[at]
        out[~hit] = -1
        return out


_PASS = 1 << 16  # rows a pass where a pass's temporaries are enough


def busy_in_order(
    events: TraceEvents, major: np.ndarray
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """The busy GPU rows (dur > 0) in (major, start) order, a pass at a time: their rows,
    majors (int64), starts and ends (fresh arrays). ``major``: a non-negative id per GPU row
    (its stream, its device). The one row-sized array is the order (int32 where it fits)."""
    gpu = events.gpu
    order = packed_order(major, gpu.ts)
    if order is None:
        order = lex_order((gpu.ts, major))
    for lo in range(0, len(order), _PASS):
        rows = order[lo : lo + _PASS]
        rows = rows[gpu.dur[rows] > 0]
        start = gpu.ts[rows]
        yield rows, major[rows].astype(np.int64), start, start + gpu.dur[rows]


# From this many calls (a ~1.5 GB trace) their sorted key (8 B a call) costs more than the
# searches in more runs a query: a 7.8 GB trace's 2.6·10^6 calls in 75 runs, 5 over each id.
_LEAN_FROM = 1 << 19
_LEAN_OVERLAPS = 16


@dataclass(frozen=True)
class _CallKeys:
    """Per call, ``(id − low) << bits | index``, sorted: the calls by id (each id once)."""

    keys: np.ndarray
    bits: int
    low: int
    high: int


def _call_keys(correlation: np.ndarray) -> _CallKeys | None:
    """The calls' keys, or None when they would not fit in int64 or an id is on two calls."""
    n = len(correlation)
    low, high = int(correlation.min()), int(correlation.max())
    bits = n.bit_length()
    if (high - low + 1) << bits >= 1 << 63:
        return None
    keys = correlation - low
    keys <<= bits
    for lo in range(0, n, _PASS):
        keys[lo : lo + _PASS] |= np.arange(lo, min(lo + _PASS, n))
    keys.sort(kind="stable")  # timsort: near-linear on the few increasing runs
    for lo in range(0, n - 1, _PASS):
        ids = keys[lo : lo + _PASS + 1] >> bits
        if not bool((ids[1:] > ids[:-1]).all()):
            return None
    return _CallKeys(keys, bits, low, high)


def _keyed_launches(calls: _CallKeys, ts: np.ndarray, correlation: np.ndarray) -> np.ndarray:
    """``LaunchIndex.launches`` through the calls' keys, a pass of ids at a time."""
    out = np.empty(len(correlation), dtype=np.int64)
    keys, bits = calls.keys, calls.bits
    for lo in range(0, len(correlation), _PASS):
        part = correlation[lo : lo + _PASS]
        probe = np.clip(part, calls.low, calls.high)
        probe -= calls.low
        probe <<= bits
        at = np.searchsorted(keys, probe)
        np.minimum(at, len(keys) - 1, out=at)
        key = keys[at]
        del at
        hit = (key >> bits) == (probe >> bits)
        del probe
        hit &= part >= max(calls.low, 0)
        hit &= part <= calls.high
        key &= (1 << bits) - 1  # the call's index
        found = ts[key]
        found[~hit] = NO_LAUNCH
        out[lo : lo + _PASS] = found
    return out


def launches_of(events: TraceEvents, launch: np.ndarray | None, rows: np.ndarray) -> np.ndarray:
    """``first_launch`` of ``rows``: from ``launch`` (every row's, when the caller has it),
    else worked out for these rows alone."""
    return first_launch(events, rows) if launch is None else launch[rows]


def _launches_by_correlation(events: TraceEvents) -> tuple[np.ndarray, np.ndarray]:
    """The distinct correlation ids of the runtime calls, ascending, and the start of the
    earliest call with each. Calls are mostly recorded in correlation order, each id once:
    then the columns themselves, without a sort or a copy."""
    correlation, first = first_calls(events)
    ts = events.runtime.ts
    return correlation, (ts if first is None else ts[first])


def first_calls(events: TraceEvents) -> tuple[np.ndarray, np.ndarray | None]:
    """The distinct correlation ids of the runtime calls, ascending, and per id the index
    (in ``events.runtime``) of the earliest call with it, the first in the file among equal
    starts; None for the index when it is each call's own (the ids ascending, each once).
    Not kept for the next look-up: a kept index (0.7 MB here) pins freed heap below it,
    +3.5 MB peak RSS for gaps, for 2-4 ms a look-up saved."""
    correlation, ts = events.runtime.correlation, events.runtime.ts
    if bool((correlation[1:] > correlation[:-1]).all()):
        return correlation, None
    # A parallel read's calls come as a few sorted runs: a stable sort merges them (2 ms for
    # 1.7·10^5 calls, against 12 ms packed with ts), and with each id once it is the answer.
    order = np.argsort(correlation, kind="stable")
    ordered = correlation[order]
    if bool((ordered[1:] > ordered[:-1]).all()):
        return ordered, order
    order = lex_order((ts, correlation))
    ordered = correlation[order]
    first = first_of_runs(ordered)
    return ordered[first], order[first]


def launch_times(events: TraceEvents, first: np.ndarray | None = None) -> np.ndarray:
    """Per GPU row: the start of its launching runtime call, else the row's own ts (ns);
    ``first`` is ``first_launch(events)`` when the caller has it already."""
    if first is None:
        return launch_times_of(events.gpu.ts, first_launch(events), copy=False)
    return launch_times_of(events.gpu.ts, first)


@dataclass(frozen=True)
class LaunchTimes:
    """``launch_times`` made for the rows asked (``times[rows]``, a fresh array), not held
    for every GPU row (8 B a row): ``first`` (``first_launch``), else the row's own start
    ``ts``."""

    ts: np.ndarray
    first: np.ndarray

    def __len__(self) -> int:
        return len(self.ts)

    def __getitem__(self, rows: slice | np.ndarray) -> np.ndarray:
        return launch_times_of(self.ts[rows], self.first[rows])


def launch_times_of(ts: np.ndarray, first: np.ndarray, copy: bool = True) -> np.ndarray:
    """Per GPU row: ``first`` (its launching call's start, ``first_launch``), else the row's
    own start ``ts`` (a fresh array; ``copy=False``: ``first`` itself, filled in)."""
    launch = first.copy() if copy else first
    none = launch == NO_LAUNCH
    launch[none] = ts[none]
    return launch


def launch_times_by_pass(events: TraceEvents) -> Iterator[tuple[slice, np.ndarray]]:
    """``launch_times(events)`` a pass of GPU rows at a time: (the rows, their times), with
    no row-sized array of them."""
    gpu = events.gpu
    index = None
    if len(events.runtime.correlation) and len(gpu.ts):
        index = LaunchIndex(events)
    for lo in range(0, len(gpu.ts), _PASS):
        at = slice(lo, lo + _PASS)
        if index is None:
            yield at, gpu.ts[at]
            continue
        launch = index.launches(gpu.correlation[at])
        none = launch == NO_LAUNCH
        launch[none] = gpu.ts[at][none]
        yield at, launch


def name_rank(names: Sequence[str]) -> np.ndarray:
    """``rank[id]`` = position of the name string in sorted order (ties broken like strings);
    packed names are ranked without a string each."""
    return ranks(names)


def positive(events: TraceEvents, rows: np.ndarray) -> np.ndarray:
    """The rows (GPU row indices) whose duration is positive: the busy events."""
    mask = events.gpu.dur[rows] > 0
    busy: np.ndarray = rows if bool(mask.all()) else rows[mask]
    return busy


def busy_by_device(events: TraceEvents) -> np.ndarray:
    """The busy rows (duration > 0) in (device, start) order, as int32 positions when they
    fit: one int64 key a row, (device, start − the least, row) packed, sorted in place,
    when that fits (no gathered starts, no permutation); else a sort of the rows."""
    gpu = events.gpu
    n = len(gpu.ts)
    dtype = np.int32 if n < 2**31 else np.int64
    device, _ = device_of_stream(events)
    several = len(device) > 0 and int(device.max()) > 0
    busy = gpu.dur > 0
    count = int(np.count_nonzero(busy))
    if count == 0:
        return np.zeros(0, dtype=dtype)
    low = int(np.min(gpu.ts, where=busy, initial=np.iinfo(np.int64).max))
    high = int(np.max(gpu.ts, where=busy, initial=np.iinfo(np.int64).min))
    index_bits, time_bits = n.bit_length(), (high - low).bit_length()
    devices = int(device.max()) + 1 if several else 1
    if devices << (time_bits + index_bits) >= 1 << 63:
        return _busy_sorted(events, np.flatnonzero(busy).astype(dtype), device, several)
    key = np.empty(count, dtype=np.int64)
    filled = 0
    for lo in range(0, n, _PASS):
        rows = np.flatnonzero(busy[lo : lo + _PASS])
        k = np.subtract(gpu.ts[lo : lo + _PASS][rows], low)
        if several:
            k |= device[gpu.stream[lo : lo + _PASS][rows]].astype(np.int64) << time_bits
        k <<= index_bits
        rows += lo
        k |= rows
        key[filled : filled + len(k)] = k
        filled += len(k)
    del busy
    key.sort(kind="stable")  # timsort: the rows come nearly in start order
    out = np.empty(count, dtype=dtype)
    mask = (1 << index_bits) - 1
    for lo in range(0, count, _PASS):
        out[lo : lo + _PASS] = key[lo : lo + _PASS] & mask
    return out


def _busy_sorted(
    events: TraceEvents, rows: np.ndarray, device: np.ndarray, several: bool
) -> np.ndarray:
    """``busy_by_device`` by a sort of the busy ``rows`` (their key would not fit)."""
    gpu = events.gpu
    if several:
        order = lex_order((gpu.ts[rows], device[gpu.stream[rows]]))
    else:  # one device: by start alone
        order = np.argsort(gpu.ts[rows], kind="stable")
    ordered: np.ndarray = rows[order]
    return ordered


def usage(events: TraceEvents, rows: np.ndarray | None = None) -> list[DeviceUsage]:
    """Window and busy time of each device over the busy events among ``rows`` (None: all
    rows, without a copy of the columns when every event is busy)."""
    gpu = events.gpu
    device, values = device_of_stream(events)
    if len(values) <= _DEVICES_ONE_BY_ONE and len(gpu.ts) >= _LEAN_ROWS:
        return _usage_by_device(events, rows, device, values)
    if rows is None and bool((gpu.dur > 0).all()):
        ts, dur, stream = gpu.ts, gpu.dur, gpu.stream
    else:
        rows = positive(events, np.arange(len(gpu.ts)) if rows is None else rows)
        ts, dur, stream = gpu.ts[rows], gpu.dur[rows], gpu.stream[rows]
        del rows
    segment = device.astype(np.int32)[stream]
    end = ts + dur
    del dur
    u = unions(segment, ts, end, holes=False)
    return _usage_list(u.segment, u.first, u.last, u.busy, values)


# Up to this many devices, each one's busy rows are taken by a mask over the rows and
# their union measured from their starts and ends sorted apart (about 20 bytes a row at
# once, against the ~50 of one sort of the rows by (device, start)).
_DEVICES_ONE_BY_ONE = 16
# ... from this many GPU rows (a ~1.8 GB trace): below, the one sort is the faster (H200
# big trace, 1.5·10^5 rows: 2.1-2.6 ms against 3.9).
_LEAN_ROWS = 1 << 19


def _usage_by_device(
    events: TraceEvents, rows: np.ndarray | None, device: np.ndarray, values: list[Any]
) -> list[DeviceUsage]:
    """``usage``, a device at a time (``device``, ``values``: as ``device_of_stream``)."""
    gpu = events.gpu
    busy: np.ndarray = gpu.dur > 0 if rows is None else positive(events, rows)
    one = len(values) == 1
    of_row = (
        None if one else device.astype(np.int8)[gpu.stream if rows is None else gpu.stream[busy]]
    )
    out = []
    for d, value in enumerate(values):
        if one:
            take = busy
        elif rows is None:
            take = busy & (of_row == d)
        else:
            take = busy[of_row == d]
        # rows in start order (one stream, or streams that take turns): none copied
        extent = ordered_union_extent(gpu.ts, gpu.dur, take)
        if extent is None:
            start = gpu.ts[take]
            if len(start) == 0:
                continue
            end = gpu.dur[take]
            end += start
            extent = union_extent(start, end)
            del start, end
        del take
        out.append(DeviceUsage(value, *extent))
    return out


def device_gaps(
    events: TraceEvents,
    rows: np.ndarray,
    launch: np.ndarray | None,
    name_rank: np.ndarray | None,
    with_before: bool = True,
) -> tuple[list[DeviceUsage], GapSet]:
    """Each device's usage and every device gap of the busy events among ``rows``.

    ``launch`` is ``first_launch(events)`` (None: looked up for the rows needed),
    ``name_rank`` the rank of each name id in sorted order (ties between events are broken
    by name text; None: only the names of tied events are ranked). ``with_before=False``:
    the gaps' ``before`` rows are not looked for (left empty), for callers that sum the gaps
    up.
    """
    rows = positive(events, rows)
    gpu = events.gpu
    device_index, values = device_of_stream(events)
    # per stream id, int8 for up to 128 devices: the sorted rows' devices 1 B a row, not 4
    device = _small(device_index, len(values))
    # Sorted by (device, ts, end, name): after, the first of those at (device, end), is the
    # row right after the hole; before, the first at (device, start) by (end, −ts, name),
    # is found in the same order. The sort key is made from temporaries and the tie keys only
    # for tied rows: only the sorted columns are held (row-sized, 20 MB each at 2.5·10^6).
    ties = end_and_name_ties(events, rows, name_rank)
    order = lex_order_of([_devices_of(events, rows, device), gpu.ts[rows]], ties)
    del ties
    # the rows in sorted order, held instead of the rows and the order (a hole's neighbours
    # are positions in the sorted rows)
    rows = rows[order]
    del order
    # the sorted rows' starts and ends again where needed (neither held a second time)
    ends_of, starts_of = partial(row_ends, events, rows), partial(row_starts, events, rows)
    columns = [_devices_of(events, rows, device), gpu.ts[:0], row_ends(events, rows, slice(None))]
    u = unions_in_order(
        columns,
        neighbours=True,
        prev=with_before,
        ends_of=ends_of,
        spans=not with_before,
        starts_of=starts_of,
    )
    assert u.hole_next is not None
    # the holes' neighbours as rows, written over their positions (no copy beside them)
    after = _rows_at(rows, u.hole_next)
    before = _rows_at(rows, u.hole_prev) if u.hole_prev is not None else rows[:0]
    del rows, ends_of, starts_of
    # only the holes' columns from here: the positions in the sorted rows go before the
    # host waits' temporaries come
    used = _usage_list(u.segment, u.first, u.last, u.busy, values)
    # the gaps' starts and ends are the rows' own (derived, not held) but without ``before``
    segment, starts = _small(u.hole_segment, len(values)), (None if with_before else u.hole_start)
    del u
    n = len(after)
    gaps = GapSet(
        segment, before, after, np.empty(n, np.int64), gpu.ts, gpu.dur, np.empty(n, bool), starts
    )
    host_waits(events, launch, gaps)
    # int32 where every host wait fits (a wait is at most its gap): 4 B a gap, not 8, held
    # to the end of a summary
    return used, replace(gaps, host_wait=narrowed(gaps.host_wait))


def _small(device: np.ndarray, devices: int) -> np.ndarray:
    """The gaps' device indices in the fewest bytes that hold ``devices`` (int8 for up to
    127 devices: 1 B a gap held to the end of a summary, not 4)."""
    for dtype in (np.int8, np.int16):
        if devices <= np.iinfo(dtype).max + 1:
            return device.astype(dtype)
    return device


def row_ends(events: TraceEvents, rows: np.ndarray, at: slice) -> np.ndarray:
    """The ends of ``rows[at]``, their starts added a pass at a time (no array of as many
    starts, 8 B a row, beside them)."""
    part = rows[at]
    end: np.ndarray = events.gpu.dur[part]
    for lo in range(0, len(part), _PASS):
        end[lo : lo + _PASS] += events.gpu.ts[part[lo : lo + _PASS]]
    return end


def _devices_of(events: TraceEvents, rows: np.ndarray, device: np.ndarray) -> np.ndarray:
    """``device`` (per stream) of each of ``rows``, a pass at a time: no row-sized array of
    their streams (4 B a row) beside it."""
    out = np.empty(len(rows), dtype=device.dtype)
    stream = events.gpu.stream
    for lo in range(0, len(rows), _PASS):
        out[lo : lo + _PASS] = device[stream[rows[lo : lo + _PASS]]]
    return out


def _rows_at(rows: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """``rows[positions]``, written over ``positions`` a pass at a time where the two have
    one dtype (the positions are not used after)."""
    if positions.dtype != rows.dtype:
        return np.asarray(rows[positions])
    for lo in range(0, len(positions), _PASS):
        part = positions[lo : lo + _PASS]
        part[:] = rows[part]
    return positions


def row_starts(events: TraceEvents, rows: np.ndarray, at: np.ndarray | slice) -> np.ndarray:
    """The starts of ``rows[at]``."""
    start: np.ndarray = events.gpu.ts[rows[at]]
    return start


def end_and_name_ties(
    events: TraceEvents, rows: np.ndarray, name_rank: np.ndarray | None, by_name: bool = True
) -> Callable[[np.ndarray], list[np.ndarray]]:
    """The tie keys of ``lex_order_then`` for ``rows`` (positions ``at`` of them): the end,
    then the name (``name_rank`` of every name id, or None: only the names asked for are
    ranked; ``by_name=False``: the end only)."""
    gpu = events.gpu

    def ties(at: np.ndarray) -> list[np.ndarray]:
        tied = rows[at]
        end = gpu.ts[tied] + gpu.dur[tied]
        if not by_name:
            return [end]
        name = gpu.name[tied]
        return [ranks_of(events.names, name) if name_rank is None else name_rank[name], end]

    return ties


def row_columns(events: TraceEvents, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The stream, start and end of ``rows``."""
    gpu = events.gpu
    ts = gpu.ts[rows]
    end = gpu.dur[rows]
    end += ts
    return gpu.stream[rows], ts, end


def host_waits(events: TraceEvents, launch: np.ndarray | None, gaps: GapSet) -> None:
    """Fills ``gaps.host_wait`` (and ``gaps.launched``: whether the row after has a launch,
    for ``launch_latency``, looked up once; ``launch`` as for ``launches_of``), _WAIT_PASS
    gaps at a time: looking launches up takes a few times the rows' size in temporaries (at
    2.5·10^6 gaps, ~45 MB at once)."""
    assert gaps.launched is not None
    index = None
    if launch is None and len(gaps) and len(events.runtime.correlation):
        index = LaunchIndex(events)  # made once for every pass
    for lo in range(0, len(gaps), _WAIT_PASS):
        at = slice(lo, lo + _WAIT_PASS)
        part = gaps.take(at)
        if index is None:
            found = launches_of(events, launch, part.after)
        else:
            found = index.launches(events.gpu.correlation[part.after])
        np.not_equal(found, NO_LAUNCH, out=gaps.launched[at])
        gaps.host_wait[at] = host_wait(found, part.start, part.end)


_WAIT_PASS = 1 << 16


def host_wait(launch: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """clamp(launch − start, 0, end − start) per gap; 0 where there is no launch. ``launch``
    (of each gap's next row: a fresh array, as ``launch[after]`` is) becomes the result."""
    wait = launch
    none = wait == NO_LAUNCH
    wait[none] = start[none]
    del none
    wait -= start
    length = end - start
    np.clip(wait, 0, length, out=wait)
    return wait


def launch_latency(events: TraceEvents, launch: np.ndarray | None, gaps: GapSet) -> np.ndarray:
    """Per gap: its **launch latency**, the time after the host wait (gap − host wait) when
    the next activity has a launch and that time is at most LAUNCH_LATENCY_NS; else 0 (that
    time is a **gpu wait**: a dependency, an event, a copy). ``launch`` as for
    ``launches_of``; not looked up when ``gaps`` holds it)."""
    launched = gaps.launched
    if launched is None:
        launched = launches_of(events, launch, gaps.after) != NO_LAUNCH
    rest = gaps.end
    rest -= gaps.start
    rest -= gaps.host_wait
    return np.where(launched & (rest <= LAUNCH_LATENCY_NS), rest, 0)


def _usage_list(
    segment: np.ndarray, first: np.ndarray, last: np.ndarray, busy: np.ndarray, values: list[Any]
) -> list[DeviceUsage]:
    return [
        DeviceUsage(values[d], s, e, b)
        for d, s, e, b in zip(
            segment.tolist(), first.tolist(), last.tolist(), busy.tolist(), strict=True
        )
    ]
