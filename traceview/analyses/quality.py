"""Data-quality warnings about a trace, shown in every report's header and JSON."""

from __future__ import annotations

import numpy as np

from traceview.aggregate.order import lex_order
from traceview.events import TraceEvents
from traceview.render.units import duration

SUSPICIOUS_NS = 10 * 1_000_000_000  # a single GPU activity longer than 10 s


def quality_warnings(events: TraceEvents) -> list[str]:
    """Things in the data that can mislead: overlaps, zero durations, missing launches."""
    checks = (_overlaps, _zero_durations, _missing_launches, _suspicious, _display_unit)
    return [w for check in checks if (w := check(events))]


def _overlaps(events: TraceEvents) -> str | None:
    gpu = events.gpu
    if len(gpu.ts) < 2:
        return None
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
        return None
    return (
        f"{len(overlap)} GPU activities overlap the previous one on their stream "
        f"(up to {duration(int(overlap.max()) / 1000)})"
    )


def _zero_durations(events: TraceEvents) -> str | None:
    zero = int((events.gpu.dur == 0).sum())
    return f"{zero} GPU activities have a duration of 0" if zero else None


def _missing_launches(events: TraceEvents) -> str | None:
    gpu, runtime = events.gpu, events.runtime
    if len(gpu.ts) == 0:
        return None
    if len(runtime.correlation) == 0:
        return "no runtime launch events: --pstep uses each kernel's own start time"
    # A binary search in the sorted launch ids: a third of the memory np.isin takes.
    launches = np.sort(runtime.correlation)
    at = np.searchsorted(launches, gpu.correlation)
    np.minimum(at, len(launches) - 1, out=at)
    missing = int(np.count_nonzero(launches[at] != gpu.correlation))
    if missing == 0:
        return None
    return (
        f"{missing} GPU activities have no matching launch event "
        "(--pstep uses their own start time)"
    )


def _suspicious(events: TraceEvents) -> str | None:
    dur = events.gpu.dur
    long = int((dur > SUSPICIOUS_NS).sum())
    if not long:
        return None
    return (
        f"{long} GPU activities last longer than {duration(SUSPICIOUS_NS / 1000)} "
        f"(longest {duration(int(dur.max()) / 1000)}): check the trace"
    )


def _display_unit(events: TraceEvents) -> str | None:
    unit = events.header.get("displayTimeUnit")
    if unit in (None, "ms", "us"):
        return None
    return f"displayTimeUnit is {unit!r}; ts and dur are read as µs, as the trace format defines"
