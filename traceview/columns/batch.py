"""Vectorised conversion of a batch of decoded events into numpy columns.

The common case — numbers that are ints, or floats small enough to hold ns exactly — is
converted a whole batch at a time. Anything unusual (missing or non-numeric values, huge
ints, negative durations, epoch-scale floats) returns None, and the caller converts that
batch event by event, which counts and skips bad events and switches to exact decoding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from traceview.columns.raw_numbers import NS_LIMIT as NS_LIMIT
from traceview.columns.raw_numbers import ns_of_raws

# Shared with the per-event path (events.to_ns), so both accept exactly the same values.
FLOAT_EXACT_LIMIT = float(2**33)  # below this, a 3-decimal µs float holds its ns exactly
_INT_LIMIT = NS_LIMIT // 1000


def ns_array(values: Sequence[Any]) -> np.ndarray | None:
    """µs values as int64 ns, or None if any value needs the per-event path."""
    if values and type(values[0]) is msgspec.Raw:
        return ns_of_raws(values)
    try:
        array = np.array(values)
    except (OverflowError, ValueError):
        return None
    if array.dtype.kind == "i":
        if len(array) and (array.max() >= _INT_LIMIT or array.min() <= -_INT_LIMIT):
            return None
        return array.astype(np.int64) * 1000
    if array.dtype.kind == "f":
        if len(array) and not (np.abs(array) < FLOAT_EXACT_LIMIT).all():  # also NaN, inf
            return None
        ns: np.ndarray = np.rint(array * 1000).astype(np.int64)
        return ns
    return None


def correlations(events: Sequence[Any]) -> np.ndarray | None:
    """args.correlation per event (−1 when absent), or None if one is out of range."""
    values = [
        a.correlation if (a := e.args) is not None and a.correlation is not None else -1
        for e in events
    ]
    try:
        array = np.array(values, dtype=np.int64)
    except (OverflowError, ValueError, TypeError):
        return None
    return array if not (array < -1).any() else None


def stream_key(e: Any) -> tuple[Any, Any]:
    """(device, stream): device = args.device, else pid; stream = args.stream, else tid."""
    a = e.args
    if a is None or a.device is None:
        return (e.pid, e.tid)
    return (a.device, a.stream if a.stream is not None else e.tid)


def stream_keys(events: Sequence[Any]) -> list[tuple[Any, Any]]:
    """The stream_key of each event (inline: this runs over every GPU event)."""
    return [
        (e.pid, e.tid)
        if (a := e.args) is None or a.device is None
        else (a.device, e.tid if a.stream is None else a.stream)
        for e in events
    ]


def timed(events: Sequence[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """(ts, dur) in ns for a batch, or None if it needs the per-event path."""
    ts = ns_array([e.ts for e in events])
    if ts is None:
        return None
    dur = ns_array([e.dur for e in events])
    if dur is None or (len(dur) and dur.min() < 0):
        return None
    return ts, dur
