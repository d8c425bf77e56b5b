"""Renderings of a MemoryReport: per device its peak, holders at the peak and steps."""

from __future__ import annotations

from typing import Any

from traceview.analyses.core.trace import TraceSummary
from traceview.analyses.memory import (
    CPU_TYPE,
    HEADROOM_PCT,
    NO_EVENTS,
    SLACK_SHARE,
    DeviceMemory,
    MemoryReport,
    rising_steps,
)
from traceview.render import first_rows as capped
from traceview.render import units
from traceview.render.document import Document, Lines, Section
from traceview.render.header import trace_lines
from traceview.render.tables import Table, to_csv

SCHEMA_VERSION = 1
GIB = 1 << 30
_DEVICE_TYPES = {0: "CPU", 1: "CUDA", 6: "HIP"}
_HOLDER_HEADERS = ("#", "Op", "Held", "Bytes", "Count", "% of peak")
_STEP_HEADERS = ("Step", "Peak allocated", "Growth")
CSV_FIELDS = ("device", "device_type", "peak_allocated_bytes", "peak_reserved_bytes",
               "reserved_at_peak_bytes", "peak_ts_us", "peak_step", "allocations", "frees",
               "start_allocated_bytes", "end_allocated_bytes", "held_before_bytes",
               "total_memory_bytes")  # fmt: skip


def device_json(d: DeviceMemory) -> dict[str, Any]:
    """One device's object: the contract's fields first, then the extras (the reserve null
    when the level was rebuilt from Bytes alone; holders unknown when addresses are missing:
    ``held_before_bytes`` null)."""
    known = not d.rebuilt
    return {
        "device": d.device,
        "peak_allocated_bytes": d.peak_allocated_bytes,
        "peak_reserved_bytes": d.peak_reserved_bytes if known else None,
        "peak_ts_us": d.peak_ts_ns / 1000,
        "peak_step": d.peak_step,
        "allocations": d.allocations,
        "frees": d.frees,
        "start_allocated_bytes": d.start_allocated_bytes,
        "end_allocated_bytes": d.end_allocated_bytes,
        "holders": [{"op": h.op, "bytes": h.bytes, "count": h.count} for h in d.holders],
        "steps": [
            {
                "step": s.step,
                "peak_allocated_bytes": s.peak_allocated_bytes,
                "growth_bytes": s.growth_bytes,
            }
            for s in d.steps
        ],
        "device_type": d.device_type,
        "peak_allocated_gib": d.peak_allocated_bytes / GIB,
        "peak_reserved_gib": d.peak_reserved_bytes / GIB if known else None,
        "reserved_at_peak_bytes": d.reserved_at_peak_bytes if known else None,
        "held_before_bytes": d.held_before_bytes if d.addressed else None,
        "total_memory_bytes": d.total_memory_bytes,
        "level": "rebuilt from Bytes" if d.rebuilt else "Total Allocated",
        "timeline": [
            {"ts_us": ts / 1000, "allocated_bytes": a, "reserved_bytes": r if known else None}
            for ts, a, r in d.timeline
        ],
    }


def reserved_text(d: DeviceMemory, bytes_: int) -> str:
    """A reserve as shown: ``unknown`` when the trace does not give it (Bytes alone)."""
    return "unknown" if d.rebuilt else units.memory(bytes_)


def as_json(trace: TraceSummary, report: MemoryReport) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "trace": trace.as_dict(),
        "devices": [device_json(d) for d in report.devices],
        "cpu": None if report.cpu is None else device_json(report.cpu),
        "notes": notes(report),
    }


def label(d: DeviceMemory) -> str:
    """``device 0`` (its Device Type when not CUDA), or ``host`` for CPU memory."""
    if d.device_type == CPU_TYPE:
        return "host"
    kind = _DEVICE_TYPES.get(d.device_type, f"Device Type {d.device_type}")
    return f"device {d.device}" + ("" if d.device_type == 1 else f" ({kind})")


def notes(report: MemoryReport) -> list[str]:
    """What the figures say: no events; little headroom; a reserve well above the allocated
    level; growth over every step; a peak from before the trace."""
    if report.events == 0:
        return [NO_EVENTS]
    out = []
    for d in (*report.devices, *([report.cpu] if report.cpu is not None else [])):
        if d.rebuilt:
            out.append(
                f"{label(d)}: the [memory] events carry only Bytes (an older PyTorch): the "
                "allocated level is their running sum in time order from the trace's start (0 "
                "before the first event); the reserve is unknown"
            )
        pct = d.peak_reserved_pct
        if pct is not None and pct >= HEADROOM_PCT:
            out.append(
                f"{label(d)}: the peak reserved is {units.pct(pct)}% of the device's "
                f"{units.memory(d.total_memory_bytes or 0)}: little headroom"
            )
        if d.slack >= SLACK_SHARE:
            reserved, allocated = d.reserved_at_peak_bytes, d.peak_allocated_bytes
            out.append(
                f"{label(d)}: at the peak the allocator reserved {units.memory(reserved)} for "
                f"{units.memory(allocated)} allocated (+{units.pct(100 * d.slack)}%): "
                "fragmentation; try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
            )
        if rising_steps(d):
            growth = sum(s.growth_bytes for s in d.steps)
            out.append(
                f"{label(d)}: the allocated level rose in every one of the {len(d.steps)} steps "
                f"(+{units.memory(growth)} in all): a leak, or a cache still growing"
            )
        if not d.addressed and d.peak_allocated_bytes > 0:
            out.append(f"{label(d)}: addresses missing: holders unknown")
        elif d.peak_allocated_bytes > 0 and d.held_before_bytes == d.peak_allocated_bytes:
            out.append(f"{label(d)}: the peak is held by allocations made before the trace")
    return out


def _figures(d: DeviceMemory) -> list[str]:
    """The device's figures as aligned lines."""
    step = "" if d.peak_step is None else f", step {d.peak_step}"
    total = ""
    if d.peak_reserved_pct is not None:
        total = f" ({units.pct(d.peak_reserved_pct)}% of {units.memory(d.total_memory_bytes or 0)})"
    exact = "" if d.peak_allocated_bytes < 1024 else f" ({units.count(d.peak_allocated_bytes)} B)"
    lines = [
        f"peak allocated  {units.memory(d.peak_allocated_bytes)}{exact} at ts "
        f"{units.timestamp(d.peak_ts_ns)} µs{step}",
        f"peak reserved   {reserved_text(d, d.peak_reserved_bytes)}{total}; at the allocated "
        f"peak {reserved_text(d, d.reserved_at_peak_bytes)}",
        f"events          {units.counted(d.allocations, 'allocation')}, "
        f"{units.counted(d.frees, 'free')}",
        f"allocated       {units.memory(d.start_allocated_bytes)} before the first event, "
        f"{units.memory(d.end_allocated_bytes)} after the last",
    ]
    return lines if d.device_type != CPU_TYPE else lines[:1] + lines[2:]  # no host reserve


def _holders(d: DeviceMemory, top: int) -> Section:
    """The ops holding the live allocations at the peak, and what the trace cannot attribute."""
    title = f"{label(d)}: live allocations at the peak, by the op that made them"
    if not d.addressed:
        return Section(Lines(["addresses missing: holders unknown"]), title=title)
    before = (
        f"{units.memory(d.held_before_bytes)} of the peak held by allocations made before the "
        "trace's first [memory] event"
    )
    if not d.holders:
        return Section(Lines([f"none in the trace: {before}"]), title=title)
    rows = [
        (str(k), h.op, units.memory(h.bytes), units.count(h.bytes), units.count(h.count),
         units.pct(100 * h.bytes / d.peak_allocated_bytes) if d.peak_allocated_bytes else "-")
        for k, h in enumerate(capped.head(d.holders, top), 1)
    ]  # fmt: skip
    lines = [capped.more_line(len(d.holders), top, "op", "--top")]
    lines.append(before if d.held_before_bytes else None)
    note = "; ".join(line for line in lines if line is not None) or None
    table = Table(_HOLDER_HEADERS, (True, False, True, True, True, True), rows)
    return Section(table, title, note, drop_order=("Bytes", "% of peak", "#"))


def _steps(d: DeviceMemory) -> Section:
    rows = [
        (str(s.step), units.memory(s.peak_allocated_bytes), _signed(s.growth_bytes))
        for s in d.steps
    ]
    return Section(Table(_STEP_HEADERS, (True, True, True), rows), title=f"{label(d)}: steps")


def _signed(n: int) -> str:
    return ("+" if n > 0 else "−" if n < 0 else "") + units.memory(abs(n))


def _sections(d: DeviceMemory, top: int) -> list[Section]:
    out = [Section(Lines(_figures(d), aligned=True), title=label(d)), _holders(d, top)]
    return out + ([_steps(d)] if d.steps else [])


def csv_rows(report: MemoryReport) -> list[tuple[Any, ...]]:
    """One row of CSV_FIELDS per device (the host's last, device ``cpu``), raw numbers."""
    rows = []
    for d in (*report.devices, *([report.cpu] if report.cpu is not None else [])):
        data = device_json(d)
        data["device"] = "cpu" if d.device_type == CPU_TYPE else d.device
        rows.append(tuple("" if data[f] is None else data[f] for f in CSV_FIELDS))
    return rows


def csv(report: MemoryReport) -> str:
    return to_csv(CSV_FIELDS, csv_rows(report))


def document(trace: TraceSummary, report: MemoryReport, top: int) -> Document:
    """``traceview memory`` in every format; tables show the ``top`` holders (0: all), JSON
    and CSV every one."""
    head = [*trace_lines(trace), f"memory   {units.counted(report.events, '[memory] event')}"]
    sections: list[Section] = []
    for d in (*report.devices, *([report.cpu] if report.cpu is not None else [])):
        sections += _sections(d, top)
    return Document(
        head=head,
        sections=sections,
        foot=[f"note     {n}" for n in notes(report)],
        data=lambda: as_json(trace, report),
        csv=lambda: csv(report),
    )
