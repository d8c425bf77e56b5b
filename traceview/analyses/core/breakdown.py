"""Each device's window split exactly: compute, exposed communication, exposed copies and
idle, with each category's busy time (the breakdown ``summary``, hints and the report show)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from traceview.aggregate import sums
from traceview.aggregate.intervals import unions
from traceview.aggregate.order import lex_order
from traceview.analyses.core.categories import CATEGORIES
from traceview.analyses.core.devices import DeviceUsage, device_of_stream
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
    busy: np.ndarray,
    category: np.ndarray,
    usage: list[DeviceUsage],
    gap_device: np.ndarray,
    host_wait: np.ndarray,
    latency: np.ndarray | None = None,
) -> tuple[Breakdown, ...]:
    """Each device's Breakdown over the ``busy`` rows; ``host_wait`` and ``latency`` (the
    launch latency, None: 0) of each gap, ``gap_device`` its device."""
    gpu = events.gpu
    device_index, values = device_of_stream(events)
    # by (device, start): the unions by device below need no sort of their own
    busy = busy[lex_order((gpu.ts[busy], device_index[gpu.stream[busy]]))]
    device = device_index[gpu.stream[busy]]
    ts = gpu.ts[busy]
    end = ts + gpu.dur[busy]
    cat = category[busy]
    copy = (gpu.kind[busy] == MEMCPY) | (gpu.kind[busy] == MEMSET)
    comm = (cat == _COMM) & ~copy
    compute = ~comm & ~copy
    n = len(values)
    compute_ns = _union_by(device[compute], ts[compute], end[compute], n)
    with_comm_ns = _union_by(device[~copy], ts[~copy], end[~copy], n)
    all_ns = _union_by(device, ts, end, n)
    comm_ns = _union_by(device[comm], ts[comm], end[comm], n)
    copy_ns = _union_by(device[copy], ts[copy], end[copy], n)
    width = len(CATEGORIES)
    by_cat = lex_order((ts, device * width + cat))  # by device and category, then start
    per_cat = unions(
        (device * width + cat)[by_cat], ts[by_cat], end[by_cat], holes=False, ordered=True
    )
    cat_busy: dict[int, list[tuple[int, int]]] = {}
    for seg, b in zip(per_cat.segment.tolist(), per_cat.busy.tolist(), strict=True):
        cat_busy.setdefault(seg // width, []).append((seg % width, b))
    gpu_time = sums.by_group(device * width + cat, gpu.dur[busy], n * width)
    wait = sums.by_group(gap_device, host_wait, n)
    latent = sums.by_group(gap_device, host_wait if latency is None else latency, n)
    index = {(type(v), v): i for i, v in enumerate(values)}
    out = []
    for u in usage:
        d = index[(type(u.device), u.device)]
        cats = sorted(
            (CategoryTime(CATEGORIES[c], b, int(gpu_time[d * width + c])) for c, b in cat_busy[d]),
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
                launch_latency_ns=0 if latency is None else int(latent[d]),
            )
        )
    return tuple(out)


def _union_by(segment: np.ndarray, start: np.ndarray, end: np.ndarray, n: int) -> np.ndarray:
    """Per segment id in [0, n): the length of the union of its intervals (rows in (segment,
    start) order)."""
    u = unions(segment, start, end, holes=False, ordered=True)
    out = np.zeros(n, dtype=np.int64)
    out[u.segment] = u.busy
    return out
