"""The lines that introduce every report: the trace, its GPUs, warnings."""

from __future__ import annotations

from traceview.analyses.core.trace import TraceSummary
from traceview.render import units


def trace_lines(trace: TraceSummary) -> list[str]:
    """``trace``/``gpu`` header lines and one line per warning."""
    devices = units.counted(trace.device_count, "device")
    if trace.device_names:
        devices += f" ({', '.join(trace.device_names)})"
    lines = [
        f"trace    {trace.path} ({units.size(trace.size_bytes)}), "
        f"{units.counted(trace.events_read, 'event')}, span {units.duration_ns(trace.span_ns)}",
        f"gpu      {devices}, {units.counted(trace.streams, 'stream')}",
    ]
    lines += [f"warning  {w}" for w in trace.warnings]
    return lines


def device_busy_lines(trace: TraceSummary) -> list[str]:
    """One line per device: busy % of its window (over the report's selection)."""
    return [
        f"device   {d.device}: busy {units.pct(d.busy_pct)}% "
        f"({units.duration_ns(d.busy_ns)} of {units.duration_ns(d.window_ns)})"
        for d in trace.devices
    ]


def run_line(ranks: int, size_bytes: int) -> str:
    """The header line of a report over several rank files: ranks, files, bytes."""
    return (
        f"run      {units.counted(ranks, 'rank')}, {units.counted(ranks, 'file')}, "
        f"{units.size(size_bytes)}"
    )
