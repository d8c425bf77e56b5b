"""Data-quality checks of a trace: measured once as numbers (kept in the cache), worded for
every report's header and JSON."""

from __future__ import annotations

from typing import Any

import numpy as np

from traceview.aggregate.order import lex_order
from traceview.events import DataChecks, TraceEvents
from traceview.humanize import duration

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


def quality_warnings(checks: DataChecks, header: dict[str, Any]) -> list[str]:
    """The checks that found something, in words (and a display unit the trace misstates)."""
    warnings = []
    if checks.overlaps:
        warnings.append(
            f"{checks.overlaps} GPU activities overlap the previous one on their stream "
            f"(up to {duration(checks.overlap_max_ns / 1000)})"
        )
    if checks.zero_durations:
        warnings.append(f"{checks.zero_durations} GPU activities have a duration of 0")
    if checks.no_launches:
        warnings.append("no runtime launch events: --pstep uses each kernel's own start time")
    elif checks.missing_launches:
        warnings.append(
            f"{checks.missing_launches} GPU activities have no matching launch event "
            "(--pstep uses their own start time)"
        )
    if checks.long_activities:
        warnings.append(
            f"{checks.long_activities} GPU activities last longer than "
            f"{duration(SUSPICIOUS_NS / 1000)} (longest {duration(checks.longest_ns / 1000)}): "
            "check the trace"
        )
    unit = header.get("displayTimeUnit")
    if unit not in (None, "ms", "us"):
        warnings.append(
            f"displayTimeUnit is {unit!r}; ts and dur are read as µs, as the trace format defines"
        )
    return warnings


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
    gpu, runtime = events.gpu, events.runtime
    if len(gpu.ts) == 0:
        return False, 0
    if len(runtime.correlation) == 0:
        return True, 0
    # A binary search in the sorted launch ids: a third of the memory np.isin takes.
    launches = np.sort(runtime.correlation)
    at = np.searchsorted(launches, gpu.correlation)
    np.minimum(at, len(launches) - 1, out=at)
    return False, int(np.count_nonzero(launches[at] != gpu.correlation))
