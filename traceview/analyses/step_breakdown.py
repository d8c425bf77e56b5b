"""Per step and device: the step's window split exactly into compute, exposed communication,
exposed memcpy/memset, host wait and other idle (the report's per-step chart).

A step's window is its CPU window (``ProfilerStep#N`` [ts, ts + dur]; a GPU-only step: its GPU
annotation's), laid on each device's timeline. In it: **compute** = the union of the device's
compute kernels (not communication, not copies) inside the window; **communication** = the
union with communication kernels − compute (exposed communication); **memcpy/memset** = the
union of all busy activities − the union without copies; **host wait** = the part of the
window inside the host-wait stretch of a device gap ([gap start, gap start + host wait],
docs/metrics.md "Devices"); **other idle** = the rest (gpu wait, launch latency, and time
outside the device's window). The five add up to the window. Definitions in docs/metrics.md
"Steps: where each step's time went".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from traceview.analyses.core.categories import CATEGORIES
from traceview.analyses.core.devices import GapSet, device_of_stream
from traceview.analyses.core.in_us import us_fields
from traceview.analyses.core.steps import StepRow
from traceview.columns.model import TraceEvents
from traceview.columns.schema import MEMCPY, MEMSET

_COMM = CATEGORIES.index("communication")


@dataclass(frozen=True)
class StepSplit:
    """One step on one device: its window and the five parts that add up to it (ns)."""

    step: int
    device: Any
    window_ns: int
    compute_ns: int
    communication_ns: int
    memcpy_memset_ns: int
    host_wait_ns: int
    other_idle_ns: int

    def as_dict(self) -> dict[str, Any]:
        return us_fields(self)


@dataclass(frozen=True)
class StepBreakdown:
    """Every step's split, step by step (devices in trace order within a step)."""

    rows: tuple[StepSplit, ...]

    def as_json(self) -> dict[str, Any]:
        return {"steps": [r.as_dict() for r in self.rows]}


def step_breakdown(
    events: TraceEvents, steps: list[StepRow], category: np.ndarray, gaps: GapSet
) -> StepBreakdown:
    """The StepBreakdown of ``steps`` (the step table), from each GPU row's category and
    the device gaps with their host wait."""
    if not steps:
        return StepBreakdown(())
    gpu = events.gpu
    device_index, values = device_of_stream(events)
    busy = np.flatnonzero(gpu.dur > 0)
    device = device_index[gpu.stream[busy]]
    start = gpu.ts[busy]
    end = start + gpu.dur[busy]
    copy = (gpu.kind[busy] == MEMCPY) | (gpu.kind[busy] == MEMSET)
    comm = (category[busy] == _COMM) & ~copy
    compute = ~comm & ~copy
    a = np.array([s.cpu_start_ns for s in steps], dtype=np.int64)
    b = np.array([s.cpu_end_ns for s in steps], dtype=np.int64)
    window = b - a
    per_device = []
    for d in range(len(values)):
        on = device == d
        c = covered(*merged(start[on & compute], end[on & compute]), a, b)
        cc = covered(*merged(start[on & ~copy], end[on & ~copy]), a, b)
        everything = covered(*merged(start[on], end[on]), a, b)
        held = gaps.device == d
        gap_start = gaps.start[held]
        h = covered(*merged(gap_start, gap_start + gaps.host_wait[held]), a, b)
        per_device.append((c, cc - c, everything - cc, h, window - everything - h))
    rows = [
        StepSplit(s.step, values[d], int(window[i]), *(int(part[i]) for part in parts))
        for i, s in enumerate(steps)
        for d, parts in enumerate(per_device)
        if any(dev.device == values[d] for dev in s.devices) or len(values) == 1
    ]
    return StepBreakdown(tuple(rows))


def merged(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of the intervals [start, end] as disjoint intervals, by start."""
    if len(start) == 0:
        return start[:0], end[:0]
    order = np.argsort(start, kind="stable")
    s, e = start[order], np.maximum.accumulate(end[order])
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > e[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], e[last]


def covered(start: np.ndarray, end: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per window [a, b]: the length of the disjoint sorted intervals inside it."""
    if len(start) == 0:
        return np.zeros(len(a), dtype=np.int64)
    total = np.concatenate([[0], np.cumsum(end - start)])

    def upto(t: np.ndarray) -> np.ndarray:  # the intervals' length before t
        i = np.searchsorted(start, t, side="right")  # intervals starting at or before t
        j = np.maximum(i - 1, 0)
        part = np.clip(t - start[j], 0, end[j] - start[j])
        return np.where(i > 0, total[j] + part, 0)

    return np.asarray(upto(b) - upto(a), dtype=np.int64)
