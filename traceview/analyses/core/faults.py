"""The numbers behind ``traceview audit`` (analyses.audit): which launch calls are which, the
CPU span, runs of rows per stream or device, order and clock faults. Definitions in
docs/audit.md; every function here is numpy over whole columns, no loop per event."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from traceview.aggregate.order import distinct, lex_order
from traceview.aggregate.percentiles import median
from traceview.analyses.core.graphs import GRAPH_LAUNCH
from traceview.columns.model import TraceEvents

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
    name id, kind (call_kind), start, end, thread, correlation; and the span of every CPU row
    (ops included), (0, 0) when there is none."""

    name: np.ndarray
    kind: np.ndarray
    ts: np.ndarray
    end: np.ndarray
    thread: np.ndarray
    correlation: np.ndarray
    cpu_span: tuple[int, int]


def runtime_calls(events: TraceEvents) -> Calls:
    """One pass over the CPU rows, block by block: the runtime calls' columns kept."""
    parts: list[tuple[np.ndarray, ...]] = []
    lo, hi = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    for block in events.cpu.blocks():
        if len(block) == 0:
            continue
        lo, hi = min(lo, int(block["ts"].min())), max(hi, int(block["end"].max()))
        call = block["correlation"] >= 0
        parts.append(tuple(np.array(block[f][call]) for f in _CALL_FIELDS))
    columns = [
        np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, dtype=dtype)
        for i, dtype in enumerate(_CALL_DTYPES)
    ]
    name = columns[0]
    kind = np.full(len(name), OTHER_CALL, dtype=np.int8)
    if len(name):
        used = distinct(name)  # each distinct name once, not once per call
        kinds = np.array([call_kind(events.names[i]) for i in used.tolist()], dtype=np.int8)
        kind = kinds[np.searchsorted(used, name)]
    span = (lo, hi) if lo <= hi else (0, 0)
    return Calls(name, kind, columns[1], columns[2], columns[3], columns[4], span)


_CALL_FIELDS = ("name", "ts", "end", "thread", "correlation")
_CALL_DTYPES = (np.int32, np.int64, np.int64, np.int32, np.int64)


def contains(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Mask: which of ``ids`` are in ``sorted_ids`` (a binary search, not np.isin's sort)."""
    if len(sorted_ids) == 0:
        return np.zeros(len(ids), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_ids, ids), len(sorted_ids) - 1)
    return np.asarray(sorted_ids[at] == ids)


def earlier_end(group: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per row: the latest end among the rows of its group that start before it (earlier
    start, or the same start and an earlier row), NO_END when none."""
    n = len(ts)
    out = np.full(n, NO_END, dtype=np.int64)
    if n < 2:
        return out
    order = lex_order((ts, group))
    g, e = group[order], end[order]
    first = np.r_[True, g[1:] != g[:-1]]
    # a running maximum restarted at each group: offset each group's ends above the last's
    start = np.flatnonzero(first)
    base = np.minimum.reduceat(ts[order], start)
    rel = e - np.repeat(base, np.diff(np.r_[start, n]))
    width = int(rel.max()) + 1 if n else 1
    if width <= 0 or len(start) * width >= 2**62:  # cannot offset: the previous row alone
        previous = np.r_[NO_END, e[:-1]]
        previous[first] = NO_END
        out[order] = previous
        return out
    rank = np.repeat(np.arange(len(start), dtype=np.int64), np.diff(np.r_[start, n]))
    running = np.maximum.accumulate(rel + rank * width) - rank * width
    before = np.r_[NO_END, running[:-1]]
    before[first] = NO_END
    known = before != NO_END
    before[known] += np.repeat(base, np.diff(np.r_[start, n]))[known]
    out[order] = before
    return out


def order_faults(group: np.ndarray, ts: np.ndarray, correlation: np.ndarray) -> np.ndarray:
    """Rows (indices) whose correlation id is lower than that of the row before them in their
    group, the group's rows taken by start (then id): a call made, or a kernel run, before one
    numbered earlier. Rows with no id (< 0, or 0: CUPTI numbers from 1) are left out."""
    rows = np.flatnonzero(correlation > 0)
    if len(rows) < 2:
        return np.zeros(0, dtype=np.int64)
    order = rows[lex_order((correlation[rows], ts[rows], group[rows]))]
    g, c = group[order], correlation[order]
    bad = (g[1:] == g[:-1]) & (c[1:] < c[:-1])
    return np.asarray(order[1:][bad])


DRIFT_BINS = 16
DRIFT_MIN_BINS = 8
DRIFT_MIN_NS = 50_000  # a trend of the launch → start floor smaller than this is jitter
DRIFT_FIT = 8  # the floor's scatter around the trend must be under 1/8 of the trend


def drift(launch: np.ndarray, start: np.ndarray) -> int | None:
    """The trend of the launch → start delay over the trace (ns; > 0: the device's clock
    runs ahead of the host's), or None when the floor shows no clean trend.

    The times are split into DRIFT_BINS equal spans of launch time; each span's smallest
    delay is the floor (queued work only adds to it). The trend is the Theil–Sen slope of the
    floors times the launches' span, reported when it is at least DRIFT_MIN_NS and the
    floors' median distance from the line is under 1/DRIFT_FIT of it (a queue that comes and
    goes scatters the floors; a drifting clock moves them all)."""
    if len(launch) < 4 * DRIFT_BINS:
        return None
    lo, span = int(launch.min()), int(launch.max() - launch.min())
    if span <= 0:
        return None
    bins = np.minimum((launch - lo) // max(span // DRIFT_BINS, 1), DRIFT_BINS - 1)
    floor = np.full(DRIFT_BINS, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(floor, bins, start - launch)
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
