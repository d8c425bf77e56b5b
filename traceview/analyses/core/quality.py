"""Data-quality checks of a trace and its time resolution, measured once as numbers and kept
in the cache (this code is part of the cache's ingest fingerprint; the wording is not:
traceview.analyses.core.quality_words)."""

from __future__ import annotations

import itertools

import numpy as np

from traceview.aggregate.order import lex_order
from traceview.analyses.core.prelaunch import launched_mask
from traceview.columns.model import DataChecks, TraceEvents

SUSPICIOUS_NS = 10 * 1_000_000_000  # a single GPU activity longer than 10 s


def measure_checks(events: TraceEvents) -> DataChecks:
    """Overlaps, zero durations, missing launches and suspiciously long activities, counted."""
    dur = events.gpu.dur
    long = dur > SUSPICIOUS_NS
    overlaps, overlap_max = _overlaps(events)
    no_launches, missing = _missing_launches(events)
    return DataChecks(
        overlaps=overlaps,
        overlap_max_ns=overlap_max,
        zero_durations=int(np.count_nonzero(dur == 0)),
        no_launches=no_launches,
        missing_launches=missing,
        long_activities=int(np.count_nonzero(long)),
        longest_ns=int(dur.max()) if long.any() else 0,
    )


def time_resolution(events: TraceEvents) -> str:
    """``ns`` when timestamps carry sub-µs digits, else ``us``."""
    if events.read.exact_times:
        return "ns"
    ts = events.gpu.ts
    for lo in range(0, len(ts), _PASS):  # a pass's temporaries; most ns traces: one pass
        if bool((ts[lo : lo + _PASS] % 1000 != 0).any()):
            return "ns"
    return "us"


def _overlaps(events: TraceEvents) -> tuple[int, int]:
    """How many activities run into the previous one on their stream, and the most by which
    (rows by stream, then start, ties in row order), a stream at a time: a stream's rows are
    mostly in order already, and then only a pass of its ends is made at a time."""
    gpu = events.gpu
    if len(gpu.ts) < 2:
        return 0, 0
    streams = len(events.streams)
    if streams > _STREAMS_MAX:
        return _overlaps_sorted(events)
    count, most = 0, 0
    if streams == 1:
        parts: list[np.ndarray | None] = [None]
    else:  # the rows by stream (a radix sort of 16-bit ids, stable)
        order = np.argsort(gpu.stream.astype(np.int16), kind="stable")
        bounds = np.searchsorted(gpu.stream[order], np.arange(streams + 1))
        parts = [order[lo:hi] for lo, hi in itertools.pairwise(bounds.tolist())]
    for rows in parts:
        if rows is not None and len(rows) < 2:
            continue
        ts = gpu.ts if rows is None else gpu.ts[rows]
        if bool((ts[1:] < ts[:-1]).any()):
            by_start = np.argsort(ts, kind="stable")
            rows = by_start if rows is None else rows[by_start]
            del by_start
        del ts
        n, far = _into_next(gpu.ts, gpu.dur, rows)
        if n:
            count, most = count + n, max(most, far)
    return count, most


def _into_next(ts: np.ndarray, dur: np.ndarray, rows: np.ndarray | None) -> tuple[int, int]:
    """Of ``rows`` (None: every row) in start order: how many run into the next, and the
    most by which, a pass at a time (no row-sized copy of the starts and ends)."""
    count, most = 0, 0
    n = len(ts) if rows is None else len(rows)
    for lo in range(0, n - 1, _PASS):
        hi = min(lo + _PASS, n - 1)
        if rows is None:
            into = ts[lo:hi] + dur[lo:hi]
            into -= ts[lo + 1 : hi + 1]
        else:
            at = rows[lo:hi]
            into = ts[at] + dur[at]
            into -= ts[rows[lo + 1 : hi + 1]]
        found = int(np.count_nonzero(into > 0))
        if found:
            count, most = count + found, max(most, int(into.max()))
    return count, most


_PASS = 1 << 16  # rows a pass
_STREAMS_MAX = 1 << 15  # stream ids sorted as 16-bit ints


def _overlaps_sorted(events: TraceEvents) -> tuple[int, int]:
    """``_overlaps`` with one sort of every row by (stream, start)."""
    gpu = events.gpu
    order = lex_order((gpu.ts, gpu.stream))
    end = (gpu.ts + gpu.dur)[order]
    into_next = gpu.ts[order][1:]
    np.subtract(end[:-1], into_next, out=into_next)  # how far each row runs into the next
    del end
    stream = gpu.stream[order]
    del order
    overlap = into_next[(stream[1:] == stream[:-1]) & (into_next > 0)]
    if len(overlap) == 0:
        return 0, 0
    return len(overlap), int(overlap.max())


def _missing_launches(events: TraceEvents) -> tuple[bool, int]:
    """Whether GPU rows came without any launch event; else how many match none."""
    if len(events.gpu.ts) == 0:
        return False, 0
    if len(events.runtime.correlation) == 0:
        return True, 0
    return False, len(events.gpu.ts) - int(np.count_nonzero(launched_mask(events)))
