"""The lines that introduce every report: the trace, its GPUs, warnings."""

from __future__ import annotations

from traceview.analyses.summary import TraceSummary
from traceview.render import units


def trace_lines(trace: TraceSummary) -> list[str]:
    """``trace``/``gpu`` header lines and one line per warning."""
    devices = f"{trace.devices} device{'s' if trace.devices != 1 else ''}"
    if trace.device_names:
        devices += f" ({', '.join(trace.device_names)})"
    lines = [
        f"trace    {trace.path} ({units.size(trace.size_bytes)}), "
        f"{units.count(trace.events_read)} events, span {units.duration(trace.span_us)}",
        f"gpu      {devices}, {trace.streams} stream{'s' if trace.streams != 1 else ''}",
    ]
    lines += [f"warning  {w}" for w in trace.warnings]
    return lines
