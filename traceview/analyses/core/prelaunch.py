"""GPU work launched before the trace began: the queued tail of the step before profiling.

Definition (docs/metrics.md, "Launched before the trace"): a GPU activity whose correlation id
no runtime call in the trace carries, that starts before the first activity on its device
whose launch the trace does carry. Such work was queued before the profiler started recording
launches (kineto records GPU activity from the moment it starts, launches only from then on).
A trace with no launches at all (GPU-only traces) has none: nothing tells what came first.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, replace

import numpy as np

from traceview.aggregate.grouped import reduce_at
from traceview.aggregate.sorted_runs import contains, in_sorted, increasing_runs
from traceview.columns.model import TraceEvents
from traceview.columns.schema import Dropped, RuntimeColumns, dropped


def launched_mask(events: TraceEvents) -> np.ndarray:
    """Per GPU row: whether some runtime call in the trace carries its correlation id
    (read-only: the same array for the same two columns, which summary asks 8 times)."""
    gpu, runtime = events.gpu.correlation, events.runtime.correlation
    if len(runtime) == 0:
        return np.zeros(len(gpu), dtype=bool)
    for known in (_kept.get(id(runtime)), _last_mask):
        if known is not None and known[0]() is gpu and known[1]() is runtime:
            return known[2]
    runs = increasing_runs(runtime)
    if runs is not None:  # searched run by run in the column itself, a pass at a time
        mask = contains(runtime, runs, gpu)
    else:
        # a binary search in the sorted launch ids, a pass of rows at a time: the sorted
        # copy (8 B a call) and a pass's temporaries, not 16 B a row more
        mask = in_sorted(np.sort(runtime, kind="stable"), gpu)
    mask.flags.writeable = False
    _remember_mask(gpu, runtime, mask)
    return mask


def without_runtime(events: TraceEvents) -> TraceEvents:
    """``events`` with their runtime columns Dropped (their count kept), for analyses done
    with the calls but for ``launched_mask``: it is worked out now and kept as long as the
    new columns are. The calls' 16 B each are freed once nothing else holds ``events``."""
    runtime = events.runtime
    if isinstance(runtime.correlation, Dropped):
        return events  # let go already
    mask = launched_mask(events)
    lean = RuntimeColumns(*(dropped(c.dtype, len(c)) for c in (runtime.correlation, runtime.ts)))
    try:
        gpu = weakref.ref(events.gpu.correlation, _forget)
    except TypeError:  # not weakly referable (not an ndarray): the calls are kept
        return events
    _kept[id(lean.correlation)] = (gpu, weakref.ref(lean.correlation, _forget), mask)
    return replace(events, runtime=lean)


# The last mask with (weak references to) the columns it was worked out from: a column that
# is gone cannot be mistaken for a new one at the same address. ``without_runtime``'s are kept
# apart, by their Dropped column's id, until either column is gone: they cannot be worked
# out again.
Known = tuple[weakref.ref[np.ndarray], weakref.ref[np.ndarray], np.ndarray]
_last_mask: Known | None = None
_kept: dict[int, Known] = {}


def _remember_mask(gpu: np.ndarray, runtime: np.ndarray, mask: np.ndarray) -> None:
    global _last_mask
    try:  # the mask is dropped with either column (a long-lived process keeps no stale one)
        _last_mask = (weakref.ref(gpu, _forget), weakref.ref(runtime, _forget), mask)
    except TypeError:  # not weakly referable (not an ndarray): not remembered
        _last_mask = None


def _forget(gone: weakref.ref[np.ndarray]) -> None:
    global _last_mask
    if _last_mask is not None and gone in _last_mask[:2]:
        _last_mask = None
    for key, known in list(_kept.items()):
        if gone in known[:2]:
            del _kept[key]


def _device_of_stream(events: TraceEvents) -> np.ndarray:
    """Per stream id: a dense id of its device (the trace's own device value)."""
    devices: dict[object, int] = {}
    return np.array(
        [devices.setdefault(key.device, len(devices)) for key in events.streams], dtype=np.int64
    )


PRELAUNCH_ROW = "(launched before the trace)"  # their name wherever ops or steps show them


@dataclass(frozen=True)
class Prelaunched:
    """How many activities were launched before the trace, their GPU time, and how far
    into the trace (from its first event) the last of them ends (ns)."""

    count: int
    gpu_time_ns: int
    until_ns: int


def prelaunched(events: TraceEvents) -> Prelaunched:
    """The Prelaunched figures of ``events`` (all 0 when there are none)."""
    mask = launched_before_trace(events)
    if not mask.any():
        return Prelaunched(0, 0, 0)
    gpu = events.gpu
    start = events.span_ns[0] if events.span_ns else 0
    end = int((gpu.ts[mask] + gpu.dur[mask]).max())
    return Prelaunched(int(mask.sum()), int(gpu.dur[mask].sum()), end - start)


def launched_before_trace(events: TraceEvents) -> np.ndarray:
    """Per GPU row: whether it is work launched before the trace began (module docstring)."""
    gpu = events.gpu
    launched = launched_mask(events)
    if len(gpu.ts) == 0 or not launched.any():
        return np.zeros(len(gpu.ts), dtype=bool)
    device = _device_of_stream(events)
    first = np.full(int(device.max()) + 1, np.iinfo(np.int64).max, dtype=np.int64)
    out = np.empty(len(gpu.ts), dtype=bool)
    if len(first) == 1:  # one device: no look-up of each row's
        first[0] = np.min(gpu.ts, where=launched, initial=first[0])
        np.less(gpu.ts, first[0], out=out)
        out &= ~launched
        return out
    for lo in range(0, len(out), _PASS):  # a pass's temporaries, not the rows'
        at = slice(lo, lo + _PASS)
        mine = launched[at]
        reduce_at(np.minimum, first, device[gpu.stream[at][mine]], gpu.ts[at][mine])
    for lo in range(0, len(out), _PASS):
        at = slice(lo, lo + _PASS)
        np.less(gpu.ts[at], first[device[gpu.stream[at]]], out=out[at])
        out[at] &= ~launched[at]
    return out


_PASS = 1 << 16  # rows a pass
