"""Python frames and ``fwdbwd`` flows as rows (FRAME_COLUMNS, FLOW_COLUMNS), for ``source``.

A trace recorded with ``with_stack=True`` holds a ``python_function`` event per Python call
(``file.py(LINE): function`` or ``nn.Module: Class_N``, with ``Python id`` and ``Python parent
id``); ``fwdbwd`` flow events tie each backward op (``ph`` ``f``, ``bp`` ``e``) to the
forward op that made it (``ph`` ``s``, same ``id``). Read only when a command asks for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from traceview.columns import batch
from traceview.columns.numbers import BadNumber, to_ns, value_of
from traceview.columns.schema import FLOW_COLUMNS, FRAME_COLUMNS, FlowColumns, FrameColumns

FLOW_CATEGORY = "fwdbwd"
NO_ID = -1
_INT64_MAX = 2**63 - 1


def is_flow(e: Any) -> bool:
    """Whether an event is a fwdbwd flow's start (``s``) or finish (``f``; kineto binds every
    one to its enclosing slice, ``bp`` ``e``, which is not decoded)."""
    return e.cat == FLOW_CATEGORY and e.ph in ("s", "f")


def _id(value: Any) -> int:
    """An id as int64, NO_ID when absent, null, not an int or out of range."""
    if type(value) is int and 0 <= value <= _INT64_MAX:
        return value
    return NO_ID


def _spans(events: Sequence[Any], with_dur: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows kept, ts, end) in ns: a batch at a time, else event by event, leaving out the
    events whose numbers cannot be read (a frame without dur: an instant)."""
    times = batch.timed(events) if with_dur else _ts_only(events)
    if times is not None:
        return np.arange(len(events)), times[0], times[0] + times[1]
    kept: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    for i, e in enumerate(events):
        try:
            ts_value, dur_value = value_of(e.ts), value_of(e.dur) if with_dur else None
            if ts_value is None:
                continue
            start, length = to_ns(ts_value), 0 if dur_value is None else to_ns(dur_value)
        except (BadNumber, msgspec.MsgspecError):
            continue
        if length >= 0:
            kept.append(i)
            starts.append(start)
            ends.append(start + length)
    as_array = np.array
    return (
        as_array(kept, np.int64),
        as_array(starts, np.int64),
        as_array(ends, np.int64),
    )


def _ts_only(events: Sequence[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    ts = batch.ns_array([e.ts for e in events])
    return None if ts is None else (ts, np.zeros(len(ts), dtype=np.int64))


def frame_rows(
    events: Sequence[Any], threads: np.ndarray, names: np.ndarray
) -> tuple[np.ndarray, ...]:
    """A batch of ``python_function`` events as FRAME_COLUMNS (thread and name ids given)."""
    if not events:
        return tuple(np.empty(0, c.dtype) for c in FRAME_COLUMNS)
    kept, ts, end = _spans(events, True)
    args = [events[i].args for i in kept.tolist()]
    ids = np.fromiter((_id(getattr(a, "python_id", None)) for a in args), np.int64, len(args))
    parents = np.fromiter(
        (_id(getattr(a, "python_parent", None)) for a in args), np.int64, len(args)
    )
    return (threads[kept].astype(np.int32), names[kept].astype(np.int32), ts, end, ids, parents)


def flow_rows(events: Sequence[Any], threads: np.ndarray) -> tuple[np.ndarray, ...]:
    """A batch of fwdbwd flow events as FLOW_COLUMNS (thread ids given)."""
    if not events:
        return tuple(np.empty(0, c.dtype) for c in FLOW_COLUMNS)
    kept, ts, _ = _spans(events, False)
    picked = [events[i] for i in kept.tolist()]
    finish = (np.array([e.ph for e in picked]) == "f").astype(np.int8)
    return (_ids(picked), threads[kept].astype(np.int32), ts, finish)


def _ids(events: list[Any]) -> np.ndarray:
    """The events' ``id`` as int64 (NO_ID where not an int in range): at once where all are
    (kineto's), else one by one."""
    try:
        raw = [e.id for e in events]
        ids = np.array(raw, dtype=np.int64) if set(map(type, raw)) <= {int} else None
    except (AttributeError, OverflowError):  # a span decoded without ids; beyond int64
        ids = None
    if ids is not None and not (ids < 0).any():
        return ids
    return np.fromiter((_id(getattr(e, "id", None)) for e in events), np.int64, len(events))


_TS, _END = (next(i for i, c in enumerate(FRAME_COLUMNS) if c.name == n) for n in ("ts", "end"))


def long_frames(rows: Sequence[np.ndarray], from_ns: int) -> tuple[np.ndarray, ...]:
    """The frame rows (FRAME_COLUMNS) at least ``from_ns`` long (end − ts; all when 0)."""
    if from_ns <= 0:
        return tuple(rows)
    keep = np.flatnonzero(rows[_END] - rows[_TS] >= from_ns)
    return tuple(rows) if len(keep) == len(rows[_TS]) else tuple(c[keep] for c in rows)


def renumbered_frames(
    rows: FrameColumns, threads: np.ndarray, names: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Another part's frame rows with its thread and name ids mapped to this read's."""
    return (
        threads[rows.thread].astype(np.int32),
        names[rows.name].astype(np.int32),
        rows.ts,
        rows.end,
        rows.python_id,
        rows.python_parent,
    )


def renumbered_flows(rows: FlowColumns, threads: np.ndarray) -> tuple[np.ndarray, ...]:
    """Another part's flow rows with its thread ids mapped to this read's."""
    return (rows.flow, threads[rows.thread].astype(np.int32), rows.ts, rows.finish)
