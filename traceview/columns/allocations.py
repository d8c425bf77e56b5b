"""The caching allocator's ``[memory]`` instant events (``profile_memory=True``) as a small
side table, one row per event (traceview.columns.schema.MEMORY_COLUMNS); a trace without them
costs nothing.

An event is kept when its ``ph`` is ``i`` or ``I``, its name ``[memory]`` and its ``Device
Type``, ``Device Id``, ``Bytes``, ``Total Allocated`` and ``Total Reserved`` are integers
(``Addr`` may be absent: −1); any other is skipped and counted, and so is one whose totals are
negative. An older PyTorch wrote neither total (``Device Type``, ``Device Id``, ``Bytes``
only): such an event is kept with both totals NO_TOTAL, for the analysis to rebuild the level
from the running sum of ``Bytes``. An address is kept as the bits of a 64-bit word, so one
beyond 2^63 stays distinct.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from traceview.columns import batch
from traceview.columns.numbers import BadNumber, to_ns, value_of
from traceview.columns.schema import MEMORY_COLUMNS, MemoryColumns, empty

NAME = "[memory]"
NO_THREAD = -1
NO_ADDR = -1
NO_TOTAL = -1  # an event of an older PyTorch, without Total Allocated and Total Reserved
SKIPPED = "[memory] events skipped: a field missing, not an integer or out of range"
NEGATIVE = "[memory] events skipped: a negative Total Allocated or Total Reserved"
_INSTANT = ("i", "I")
_INT32 = 2**31
_INT64 = 2**63


def rows(
    events: Sequence[Any], thread: np.ndarray | None, quality: Counter[str]
) -> tuple[np.ndarray, ...] | None:
    """The table rows (MEMORY_COLUMNS order) of a batch's ``[memory]`` events, the thread
    ids given (None: NO_THREAD); bad events counted in ``quality``. None when none is kept.
    Raises NeedsExactTimes as the per-event path does (nothing counted then)."""
    kept: list[tuple[int, ...]] = []
    bad = Counter[str]()
    times = batch.ns_array([e.ts for e in events])
    for k, e in enumerate(events):
        row = _row(e, None if times is None else int(times[k]))
        if isinstance(row, str):
            bad[row] += 1
        else:
            tid = NO_THREAD if thread is None else int(thread[k])
            kept.append((tid, *row))
    quality.update(bad)
    if not kept:
        return None
    columns = zip(*kept, strict=True)
    return tuple(np.array(c, dtype=d.dtype) for c, d in zip(columns, MEMORY_COLUMNS, strict=True))


def _row(e: Any, ts: int | None) -> tuple[int, ...] | str:
    """(ts, device type, device, bytes, addr, allocated, reserved) of one event, or why it
    is skipped (SKIPPED, NEGATIVE)."""
    a = e.args
    if e.ph not in _INSTANT or a is None or not hasattr(a, "total_allocated"):
        return SKIPPED
    if ts is None:
        value = value_of(e.ts)  # raw text of an exactly decoded event: its Decimal
        if value is None:
            return SKIPPED
        try:
            ts = to_ns(value)
        except BadNumber:
            return SKIPPED
    small = (a.device_type, a.device_id)
    totals = (a.total_allocated, a.total_reserved)
    if totals == (None, None):  # an older PyTorch: Bytes alone
        totals = (NO_TOTAL, NO_TOTAL)
    large = (a.alloc_bytes, *totals)
    if not all(type(v) is int and -_INT32 <= v < _INT32 for v in small):
        return SKIPPED
    if not all(type(v) is int and -_INT64 <= v < _INT64 for v in large):
        return SKIPPED
    if a.total_allocated is not None and min(totals) < 0:
        return NEGATIVE
    return (ts, *small, large[0], _address(a.addr), *large[1:])


def _address(value: Any) -> int:
    """An address as a signed 64-bit word (its bits), NO_ADDR when absent or not one."""
    if type(value) is not int or not 0 <= value < 2 * _INT64:
        return NO_ADDR
    return value - 2 * _INT64 if value >= _INT64 else value


def threadless(table: MemoryColumns) -> MemoryColumns:
    """The table of a read without CPU rows: the threads unknown (NO_THREAD)."""
    if not (table.thread >= 0).any():
        return table
    return replace(table, thread=np.full(len(table.thread), NO_THREAD, dtype=np.int32))


def renumbered(table: MemoryColumns, threads: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """A table's rows with its thread ids put through a map (None: as they are)."""
    thread = table.thread
    if threads is not None and len(thread):
        thread = np.where(thread >= 0, threads[np.maximum(thread, 0)], thread).astype(np.int32)
    return (thread, *(getattr(table, c.name) for c in MEMORY_COLUMNS[1:]))


def no_memory() -> MemoryColumns:
    """The table of a trace without ``[memory]`` events."""
    return empty(MemoryColumns)
