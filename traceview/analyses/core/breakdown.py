"""Each device's window split exactly: compute, exposed communication, exposed copies and
idle, with each category's busy time (the breakdown ``summary``, hints and the report show)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from traceview.aggregate import sums
from traceview.aggregate.intervals import RunningUnions
from traceview.analyses.core.categories import CATEGORIES
from traceview.analyses.core.devices import (
    DeviceUsage,
    GapSet,
    busy_by_device,
    device_of_stream,
    launch_latency,
)
from traceview.columns.model import TraceEvents
from traceview.columns.schema import MEMCPY, MEMSET

_COMM = CATEGORIES.index("communication")


@dataclass(frozen=True)
class CategoryTime:
    """A category on one device (busy = the union of its activities) or overall (ns)."""

    category: str
    busy_ns: int
    gpu_time_ns: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "busy_us": self.busy_ns / 1000,
            "gpu_time_us": self.gpu_time_ns / 1000,
        }


@dataclass(frozen=True)
class Breakdown:
    """One device's window split exactly: compute + exposed communication + exposed
    memcpy/memset + idle = window; with the unions of communication and of copies, the host
    wait and the launch latency of its gaps, and each category's busy time (ns)."""

    device: Any
    window_ns: int
    compute_ns: int
    exposed_communication_ns: int
    exposed_copy_ns: int
    idle_ns: int
    communication_ns: int
    copy_ns: int
    host_wait_ns: int
    categories: tuple[CategoryTime, ...]
    launch_latency_ns: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "window_us": self.window_ns / 1000,
            "compute_us": self.compute_ns / 1000,
            "exposed_communication_us": self.exposed_communication_ns / 1000,
            "exposed_memcpy_memset_us": self.exposed_copy_ns / 1000,
            "idle_us": self.idle_ns / 1000,
            "communication_us": self.communication_ns / 1000,
            "memcpy_memset_us": self.copy_ns / 1000,
            "host_wait_us": self.host_wait_ns / 1000,
            "launch_latency_us": self.launch_latency_ns / 1000,
            "categories": [c.as_dict() for c in self.categories],
        }


def breakdowns(
    events: TraceEvents,
    category: np.ndarray,
    usage: list[DeviceUsage],
    gaps: GapSet,
    launch: np.ndarray | None = None,
    by_device: np.ndarray | None = None,
) -> tuple[Breakdown, ...]:
    """Each device's Breakdown over the busy rows (duration > 0); ``gaps``: the device gaps
    (their host waits, and launch latencies: ``launch`` as for ``launch_latency``).

    The rows are sorted once by (device, start) into int32 positions and taken a pass at a
    time: every union (the compute, communication and copy rows, the rows but copies, all
    rows, each category) carried from pass to pass, so nothing row-sized but that order is
    held."""
    gpu = events.gpu
    device_index, values = device_of_stream(events)
    n = len(values)
    width = len(CATEGORIES)
    classes = RunningUnions(n * _CLASSES)  # per device: compute, communication, copies
    no_copy = RunningUnions(n)
    every = RunningUnions(n)
    per_cat = RunningUnions(n * width)
    gpu_time = sums.GroupSums(n * width)
    rows = busy_by_device(events) if by_device is None else by_device
    for lo in range(0, len(rows), _PASS):
        at = rows[lo : lo + _PASS]
        ts = gpu.ts[at]
        dur = gpu.dur[at]
        device = device_index[gpu.stream[at]]
        cat = category[at].astype(np.int64)
        copy = gpu.kind[at]
        copy = (copy == MEMCPY) | (copy == MEMSET)
        cls = np.where(copy, 2, (cat == _COMM).astype(np.int64))  # 0 compute, 1 comm, 2 copy
        cls += device * _CLASSES
        classes.add_grouped(cls, ts, dur)
        keep = ~copy
        no_copy.add(device[keep], ts[keep], ts[keep] + dur[keep])
        cat += device * width
        per_cat.add_grouped(cat, ts, dur, gpu_time)
        every.add(device, ts, ts + dur)
    del rows
    by_class = classes.busy().reshape(-1, _CLASSES)
    compute_ns, comm_ns, copy_ns = by_class[:, 0], by_class[:, 1], by_class[:, 2]
    with_comm_ns, all_ns = no_copy.busy(), every.busy()
    cat_busy: dict[int, list[tuple[int, int]]] = {}
    cat_seen, cat_ns = per_cat.seen, per_cat.busy()
    for seg in np.flatnonzero(cat_seen).tolist():
        cat_busy.setdefault(seg // width, []).append((seg % width, int(cat_ns[seg])))
    wait, latent = _gap_sums(events, gaps, launch, n)
    index = {(type(v), v): i for i, v in enumerate(values)}
    out = []
    for u in usage:
        d = index[(type(u.device), u.device)]
        cats = sorted(
            (
                CategoryTime(CATEGORIES[c], b, int(gpu_time.out[d * width + c]))
                for c, b in cat_busy[d]
            ),
            key=lambda c: (-c.gpu_time_ns, c.category),
        )
        out.append(
            Breakdown(
                device=u.device,
                window_ns=u.window_ns,
                compute_ns=int(compute_ns[d]),
                exposed_communication_ns=int(with_comm_ns[d] - compute_ns[d]),
                exposed_copy_ns=int(all_ns[d] - with_comm_ns[d]),
                idle_ns=u.window_ns - int(all_ns[d]),
                communication_ns=int(comm_ns[d]),
                copy_ns=int(copy_ns[d]),
                host_wait_ns=int(wait[d]),
                categories=tuple(cats),
                launch_latency_ns=int(latent[d]),
            )
        )
    return tuple(out)


_CLASSES = 3
_PASS = 1 << 16


def _gap_sums(
    events: TraceEvents, gaps: GapSet, launch: np.ndarray | None, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per device: the summed host waits and launch latencies of its gaps, a pass of gaps at
    a time."""
    wait, latent = sums.GroupSums(n), sums.GroupSums(n)
    for lo in range(0, len(gaps), _PASS):
        part = gaps.take(slice(lo, lo + _PASS))
        wait.add(part.device, part.host_wait)
        latent.add(part.device, launch_latency(events, launch, part))
    return wait.out, latent.out
