"""Data-quality checks of a trace and its time resolution, measured once as numbers and kept
in the cache (this code is part of the cache's ingest fingerprint; the wording is not:
traceview.analyses.core.quality_words)."""

from __future__ import annotations

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
    ts = events.gpu.ts
    exact = events.read.exact_times or bool(len(ts) and (ts % 1000 != 0).any())
    return "ns" if exact else "us"


def _overlaps(events: TraceEvents) -> tuple[int, int]:
    """How many activities run into the previous one on their stream, and the most by which."""
    gpu = events.gpu
    if len(gpu.ts) < 2:
        return 0, 0
    # Rows by stream, then start (ties in row order); few row-sized arrays alive at a time.
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
    return False, int(np.count_nonzero(~launched_mask(events)))
