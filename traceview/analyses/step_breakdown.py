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

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from traceview.aggregate.intervals import UnionPieces
from traceview.aggregate.order import distinct
from traceview.analyses.core.categories import CATEGORIES
from traceview.analyses.core.devices import GapSet, busy_in_order, device_of_stream
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
    the device gaps with their host wait. The busy rows are taken a pass at a time in
    (device, start) order, each union made as pieces that do not overlap (UnionPieces): the
    length inside a window adds up over them."""
    if not steps:
        return StepBreakdown(())
    device_index, values = device_of_stream(events)
    a = np.array([s.cpu_start_ns for s in steps], dtype=np.int64)
    b = np.array([s.cpu_end_ns for s in steps], dtype=np.int64)
    window = b - a
    # per device and step: compute, all but copies, every busy row, host wait
    inside = np.zeros((4, len(values), len(steps)), dtype=np.int64)

    def cover(part: int, pieces: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        seg, start, end = pieces
        if len(seg) == 0:
            return
        bounds = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1], True]).tolist()
        for lo, hi in itertools.pairwise(bounds):
            inside[part, int(seg[lo])] += covered(start[lo:hi], end[lo:hi], a, b)

    _busy_unions(events, device_index, category, cover)
    _host_waits(gaps, cover)
    compute, not_copy, every, host = inside
    per_device = [
        (compute[d], not_copy[d] - compute[d], every[d] - not_copy[d], host[d],
         window - every[d] - host[d])
        for d in range(len(values))
    ]  # fmt: skip
    rows = [
        StepSplit(s.step, values[d], int(window[i]), *(int(part[i]) for part in parts))
        for i, s in enumerate(steps)
        for d, parts in enumerate(per_device)
        if any(dev.device == values[d] for dev in s.devices) or len(values) == 1
    ]
    return StepBreakdown(tuple(rows))


_PASS = 1 << 16  # rows a pass
Cover = Callable[[int, tuple[np.ndarray, np.ndarray, np.ndarray]], None]


def _busy_unions(
    events: TraceEvents, device_index: np.ndarray, category: np.ndarray, cover: Cover
) -> None:
    """Per device, the unions of its compute rows (0), of all but its copies (1) and of all
    its busy rows (2), given to ``cover`` as pieces."""
    gpu = events.gpu
    unions = [UnionPieces() for _ in range(3)]
    for rows, seg, start, end in busy_in_order(events, device_index.astype(np.int32)[gpu.stream]):
        kind = gpu.kind[rows]
        copy = (kind == MEMCPY) | (kind == MEMSET)
        compute = (category[rows] != _COMM) & ~copy
        not_copy = ~copy
        cover(0, unions[0].add(seg[compute], start[compute], end[compute]))
        cover(1, unions[1].add(seg[not_copy], start[not_copy], end[not_copy]))
        cover(2, unions[2].add(seg, start, end))  # the last use of ``end``: overwritten
    for part, union in enumerate(unions):
        cover(part, union.finish())


def _host_waits(gaps: GapSet, cover: Cover) -> None:
    """Per device, the union of its gaps' host-wait stretches [start, start + host wait],
    given to ``cover`` (3) as pieces: the gaps a pass at a time where they come in (device,
    start) order, as ``device_gaps`` makes them; else each device's sorted and merged."""
    if _in_order(gaps):
        union = UnionPieces()
        for lo in range(0, len(gaps), _PASS):
            part = gaps.take(slice(lo, lo + _PASS))
            start = part.start
            cover(3, union.add(part.device.astype(np.int64), start, start + part.host_wait))
        cover(3, union.finish())
        return
    gap_start = gaps.start
    for d in distinct(gaps.device).tolist():
        held = gaps.device == d
        start, end = merged(gap_start[held], gap_start[held] + gaps.host_wait[held])
        cover(3, (np.full(len(start), d, dtype=np.int64), start, end))


def _in_order(gaps: GapSet) -> bool:
    """Whether the gaps come by device, then start."""
    last: tuple[int, int] | None = None
    for lo in range(0, len(gaps), _PASS):
        part = gaps.take(slice(lo, lo + _PASS))
        device, start = part.device, part.start
        if last is not None and (int(device[0]), int(start[0])) < last:
            return False
        later = (device[1:] > device[:-1]) | (
            (device[1:] == device[:-1]) & (start[1:] >= start[:-1])
        )
        if not later.all():
            return False
        last = (int(device[-1]), int(start[-1]))
    return True


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
