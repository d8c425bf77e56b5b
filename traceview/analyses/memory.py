"""The ``memory`` command's answer: per device, the caching allocator's peak, when it came,
the steps' peaks and growth, and the live allocations at the peak by the op that made them.

Every figure comes from the ``[memory]`` events (traceview.columns.allocations), whose
``Total Allocated`` and ``Total Reserved`` are the allocator's own counters after each event;
an older PyTorch wrote ``Bytes`` alone, and then the allocated level is rebuilt as the running
sum of ``Bytes`` from the trace's start (the reserve unknown). docs/metrics.md defines each one.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from traceview.analyses.core.oplinks import NO_OP, ops_around
from traceview.analyses.core.steps import Window, step_windows
from traceview.columns.allocations import NO_ADDR, NO_TOTAL
from traceview.columns.model import TraceEvents
from traceview.columns.schema import MemoryColumns

CPU_TYPE = 0  # ``Device Type`` of host memory
TIMELINE_POINTS = 200  # a device's timeline holds at most this many points
NO_OP_NAME = "(no op)"  # an allocation made outside every CPU op
HEADROOM_PCT = 90.0  # a peak reserved at least this % of the device's memory: little headroom
SLACK_SHARE = 0.30  # reserved above allocated by at least this share at the peak: fragmentation
NO_EVENTS = (
    "no [memory] events in this trace: record them with "
    "torch.profiler.profile(profile_memory=True) (record_shapes and with_stack help too)"
)


@dataclass(frozen=True)
class Holder:
    """The live allocations at the peak made inside one op: their bytes and number."""

    op: str
    bytes: int
    count: int


@dataclass(frozen=True)
class StepMemory:
    """One step: the highest allocated level in it and the level's change over it."""

    step: int
    peak_allocated_bytes: int
    growth_bytes: int


@dataclass(frozen=True)
class DeviceMemory:
    """One device's (or the host's) allocator figures; times in ns of the trace's clock."""

    device: int
    device_type: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    reserved_at_peak_bytes: int  # Total Reserved when the allocated peak came
    peak_ts_ns: int
    peak_step: int | None
    allocations: int
    frees: int
    start_allocated_bytes: int
    end_allocated_bytes: int
    holders: tuple[Holder, ...]
    steps: tuple[StepMemory, ...]
    timeline: tuple[tuple[int, int, int], ...]  # (ts ns, allocated, reserved)
    total_memory_bytes: int | None  # the device's memory (deviceProperties' totalGlobalMem)
    rebuilt: bool = False  # Bytes alone: the level their running sum, the reserve unknown
    addressed: bool = True  # the allocations up to the peak carry addresses (else no holders)

    @property
    def reserve_known(self) -> bool:
        """Whether the trace gives the reserve (the allocator's Total Reserved)."""
        return not self.rebuilt and self.device_type != CPU_TYPE

    @property
    def held_before_bytes(self) -> int:
        """Of the peak, the bytes of allocations made before the trace's first event."""
        return self.peak_allocated_bytes - sum(h.bytes for h in self.holders)

    @property
    def slack(self) -> float:
        """How far the reserve exceeds the allocated level at the peak, as a share of it (0
        for host memory, whose reserve the trace does not give)."""
        if self.peak_allocated_bytes <= 0 or not self.reserve_known:
            return 0.0
        return (self.reserved_at_peak_bytes - self.peak_allocated_bytes) / self.peak_allocated_bytes

    @property
    def peak_reserved_pct(self) -> float | None:
        """The peak reserved as a % of the device's memory, when the trace gives it."""
        if not self.total_memory_bytes or self.rebuilt:
            return None
        return 100 * self.peak_reserved_bytes / self.total_memory_bytes


@dataclass(frozen=True)
class MemoryReport:
    """The devices' figures (by device id), the host's (Device Type 0), and the events read."""

    devices: tuple[DeviceMemory, ...]
    cpu: DeviceMemory | None
    events: int

    def summary_dict(self) -> dict[str, Any]:
        """The ``memory`` object of ``summary -f json``: each device's peaks (and the host's)."""
        return {
            "events": self.events,
            "devices": [_peaks(d) for d in self.devices],
            "cpu": None if self.cpu is None else _peaks(self.cpu),
            "note": NO_EVENTS if self.events == 0 else None,
        }


def _peaks(d: DeviceMemory) -> dict[str, Any]:
    return {
        "device": d.device,
        "device_type": d.device_type,
        "peak_allocated_bytes": d.peak_allocated_bytes,
        "peak_reserved_bytes": None if d.rebuilt else d.peak_reserved_bytes,
        "reserved_at_peak_bytes": None if d.rebuilt else d.reserved_at_peak_bytes,
        "peak_ts_us": d.peak_ts_ns / 1000,
        "peak_step": d.peak_step,
        "total_memory_bytes": d.total_memory_bytes,
        "peak_reserved_pct": d.peak_reserved_pct,
    }


def analyse_memory(events: TraceEvents, holders: bool = True) -> MemoryReport:
    """Every device's figures and the host's, from the trace's ``[memory]`` events; without
    ``holders``, none (no pass over the CPU rows)."""
    table = events.memory
    windows = step_windows(events)
    totals = device_memory_sizes(events.header)
    devices, cpu = [], None
    keys = sorted(set(zip(table.device.tolist(), table.device_type.tolist(), strict=True)))
    for device, kind in keys:
        rows = _time_ordered(table, device, kind)
        total = None if kind == CPU_TYPE else totals.get(device)
        figures = _device(events, table, rows, windows, (device, kind, total), holders)
        if kind == CPU_TYPE:
            cpu = figures
        else:
            devices.append(figures)
    return MemoryReport(tuple(devices), cpu, len(table.ts))


def device_memory_sizes(header: dict[str, Any]) -> dict[int, int]:
    """Each device's memory in bytes by id, from the header's deviceProperties."""
    props = header.get("deviceProperties")
    sizes: dict[int, int] = {}
    for p in props if isinstance(props, list) else []:
        if (
            isinstance(p, dict)
            and type(p.get("id")) is int
            and type(p.get("totalGlobalMem")) is int
        ):
            sizes[p["id"]] = p["totalGlobalMem"]
    return sizes


def _device(
    events: TraceEvents,
    table: MemoryColumns,
    rows: np.ndarray | slice,
    windows: dict[int, Window],
    which: tuple[int, int, int | None],
    holders: bool,
) -> DeviceMemory:
    """One device's figures from its rows in time order (_time_ordered); events without the
    allocator's totals (an older PyTorch) get the level rebuilt from ``Bytes``."""
    ts, size = table.ts[rows], table.bytes[rows]
    allocated, reserved = table.allocated[rows], table.reserved[rows]
    rebuilt = bool((allocated == NO_TOTAL).any())
    if rebuilt:  # the running sum of Bytes from the trace's start; the reserve unknown
        allocated = rebuilt_level(size)
        reserved = np.zeros(len(size), dtype=np.int64)
        start = 0
    else:
        start = int(allocated[0] - size[0])  # the level before the first event
    peak = int(np.argmax(allocated))  # the first event at the highest level
    before_first = start > allocated[peak]  # the level before the first event is higher
    if before_first:
        peak = 0
    upto = np.arange(peak + 1) if isinstance(rows, slice) else rows[: peak + 1]
    addressed = bool((table.addr[upto] != NO_ADDR).any())
    held = np.empty(0, dtype=np.int64)
    if holders and not before_first and addressed:
        held = _live_at(table, upto)
    return DeviceMemory(
        device=which[0],
        device_type=which[1],
        peak_allocated_bytes=max(int(allocated[peak]), start),
        peak_reserved_bytes=int(reserved.max()),
        reserved_at_peak_bytes=int(reserved[peak]),
        peak_ts_ns=int(ts[peak]),
        peak_step=_step_at(windows, int(ts[peak])),
        allocations=int((size > 0).sum()),
        frees=int((size < 0).sum()),
        start_allocated_bytes=start,
        end_allocated_bytes=int(allocated[-1]),
        holders=_holders(events, table, held),
        steps=tuple(_steps(windows, ts, allocated, start)),
        timeline=_timeline(ts, allocated, reserved),
        total_memory_bytes=which[2],
        rebuilt=rebuilt,
        addressed=addressed,
    )


def rebuilt_level(size: np.ndarray) -> np.ndarray:
    """The allocated level after each event, from ``Bytes`` alone (in time order): their
    running sum, 0 at the trace's start; refused when it would leave int64."""
    if len(size) and float(np.abs(size.astype(np.float64)).sum()) >= 2**63:
        from traceview.errors import TraceviewError

        raise TraceviewError("[memory] events: their Bytes add up beyond int64")
    return np.cumsum(size, dtype=np.int64)


def _time_ordered(table: MemoryColumns, device: int, kind: int) -> np.ndarray | slice:
    """The rows of one device in time order (file order among equal times): all of them, as
    they are, when the table holds one device in time order (no copies of its columns)."""
    mine = (table.device == device) & (table.device_type == kind)
    rows: np.ndarray | slice = slice(None) if mine.all() else np.flatnonzero(mine)
    del mine
    ts = table.ts[rows]
    if len(ts) < 2 or bool((ts[1:] >= ts[:-1]).all()):
        return rows
    return np.arange(len(table.ts))[rows][np.argsort(ts, kind="stable")]


def _live_at(table: MemoryColumns, rows: np.ndarray) -> np.ndarray:
    """Of ``rows`` (in time order), the allocations no later row frees: for each address,
    its last event, when that is an allocation."""
    rows = rows[table.addr[rows] != NO_ADDR]
    backwards = rows[::-1]
    _, last = np.unique(table.addr[backwards], return_index=True)
    final = backwards[last]
    return np.sort(final[table.bytes[final] > 0])


def _holders(events: TraceEvents, table: MemoryColumns, live: np.ndarray) -> tuple[Holder, ...]:
    """The live allocations summed by the innermost CPU op around each, largest first."""
    op = ops_around(events, table.thread[live], table.ts[live])
    sums: dict[str, list[int]] = {}
    for name_id, size in zip(op.tolist(), table.bytes[live].tolist(), strict=True):
        name = NO_OP_NAME if name_id == NO_OP else events.names[name_id]
        entry = sums.setdefault(name, [0, 0])
        entry[0] += size
        entry[1] += 1
    order = sorted(sums.items(), key=lambda item: (-item[1][0], item[0]))
    return tuple(Holder(name, total, count) for name, (total, count) in order)


def _step_at(windows: dict[int, Window], ts: int) -> int | None:
    """The step whose window holds ``ts`` (the first such), or None."""
    return next((n for n, w in windows.items() if w.start_ns <= ts <= w.end_ns), None)


def _steps(
    windows: dict[int, Window], ts: np.ndarray, allocated: np.ndarray, start: int
) -> list[StepMemory]:
    """Per step: the peak level in its window (the level at its start included) and the
    level at its end less the level at its start."""
    out = []
    for number, w in windows.items():
        before = int(np.searchsorted(ts, w.start_ns, side="left"))
        last = int(np.searchsorted(ts, w.end_ns, side="right"))
        at_start = int(allocated[before - 1]) if before else start
        at_end = int(allocated[last - 1]) if last else start
        inside = allocated[before:last]
        peak = max(at_start, int(inside.max())) if len(inside) else at_start
        out.append(StepMemory(number, peak, at_end - at_start))
    return out


def _timeline(
    ts: np.ndarray, allocated: np.ndarray, reserved: np.ndarray
) -> tuple[tuple[int, int, int], ...]:
    """At most TIMELINE_POINTS (ts, allocated, reserved): the highest point of each of that
    many runs of events of equal length, so the peak is always among them."""
    if len(ts) <= TIMELINE_POINTS:
        picked = np.arange(len(ts))
    else:
        bounds = np.linspace(0, len(ts), TIMELINE_POINTS + 1).astype(np.int64)
        picked = np.array(
            [a + int(np.argmax(allocated[a:b])) for a, b in itertools.pairwise(bounds)]
        )
    return tuple(
        zip(ts[picked].tolist(), allocated[picked].tolist(), reserved[picked].tolist(), strict=True)
    )


def rising_steps(device: DeviceMemory) -> bool:
    """Whether the allocated level rose over every step (at least two): a leak or a growing
    cache."""
    return len(device.steps) >= 2 and all(s.growth_bytes > 0 for s in device.steps)
