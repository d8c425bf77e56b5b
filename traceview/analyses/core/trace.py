"""What every report says about the trace itself (the header of each output)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from traceview.analyses.core.devices import DeviceUsage, usage
from traceview.analyses.core.prelaunch import prelaunched
from traceview.analyses.core.quality import measure_checks, time_resolution
from traceview.analyses.core.quality_words import quality_warnings
from traceview.columns.allocations import SKIPPED as MEMORY_SKIPPED
from traceview.columns.model import DataChecks, ReadStats, TraceEvents, TraceFacts

_HEADER_FIELDS = ("schemaVersion", "displayTimeUnit", "baseTimeNanoseconds", "traceName")


@dataclass(frozen=True)
class TraceSummary:
    """File, size, events read, span, devices and streams, header fields, warnings.

    ``devices`` holds each device's window and busy time over the report's selection (the
    whole trace, or the --pstep steps, ...); ``device_count`` counts the trace's devices.
    """

    path: str
    size_bytes: int
    events_read: int
    span_ns: int
    span_start_ns: int
    device_count: int
    devices: tuple[DeviceUsage, ...]
    streams: int
    device_names: tuple[str, ...]
    header: dict[str, Any]
    warnings: tuple[str, ...]
    time_resolution: str = "us"

    def as_dict(self) -> dict[str, Any]:
        """The ``trace`` object of the JSON outputs."""
        return {
            "path": self.path,
            "size_bytes": self.size_bytes,
            "events_read": self.events_read,
            "span_us": self.span_ns / 1000,
            "span_start_us": self.span_start_ns / 1000,
            "device_count": self.device_count,
            "devices": [d.as_dict() for d in self.devices],
            "streams": self.streams,
            "device_names": list(self.device_names),
            "header": self.header,
            "time_resolution": self.time_resolution,
            "warnings": list(self.warnings),
        }


def with_facts(events: TraceEvents) -> TraceEvents:
    """``events`` with its TraceFacts worked out (kept if they are known already)."""
    return events if events.facts is not None else replace(events, facts=facts_of(events))


def facts_of(events: TraceEvents) -> TraceFacts:
    """The trace's TraceFacts: as known, or worked out now."""
    if events.facts is not None:
        return events.facts
    return TraceFacts(measure_checks(events), time_resolution(events))


def summarize(
    events: TraceEvents,
    devices: list[DeviceUsage] | None = None,
    extra_warnings: tuple[str, ...] = (),
    memory: bool = False,
) -> TraceSummary:
    """The TraceSummary of a read trace; ``devices`` defaults to every device's usage over
    all its GPU activity; ``memory``: for a command that reads the ``[memory]`` events
    (their warnings are its alone)."""
    facts = facts_of(events)
    span = events.span_ns
    if devices is None:
        devices = usage(events)
    return TraceSummary(
        path=events.path,
        size_bytes=events.size_bytes,
        events_read=events.read.events,
        span_ns=span[1] - span[0] if span else 0,
        span_start_ns=span[0] if span else 0,
        device_count=len({(type(s.device), s.device) for s in events.streams}),
        devices=tuple(devices),
        streams=len(events.streams),
        device_names=_device_names(events.header),
        header=_header_fields(events.header),
        warnings=(
            *read_warnings(events, memory),
            *quality_warnings(facts.checks, events.header, _before(events, facts.checks)),
            *extra_warnings,
        ),
        time_resolution=facts.time_resolution,
    )


def _before(events: TraceEvents, checks: DataChecks) -> tuple[int, int, int]:
    """The activities launched before the trace, for the warning (looked for only when some
    activity has no launch)."""
    if checks.no_launches or not checks.missing_launches or len(events.gpu.ts) == 0:
        return (0, 0, 0)
    p = prelaunched(events)
    return (p.count, p.gpu_time_ns, p.until_ns)


def _device_names(header: dict[str, Any]) -> tuple[str, ...]:
    """The GPUs' names from ``deviceProperties``; an empty name is told by what is known
    (``unnamed, cc 9.4, 304 SMs``)."""
    props = header.get("deviceProperties")
    if not isinstance(props, list):
        return ()
    return tuple(sorted({_device_name(p) for p in props if isinstance(p, dict) and "name" in p}))


def _device_name(p: dict[str, Any]) -> str:
    name = str(p["name"]).strip()
    if name:
        return name
    known = ["unnamed"]
    if "computeMajor" in p and "computeMinor" in p:
        known.append(f"cc {p['computeMajor']}.{p['computeMinor']}")
    if "numSms" in p:
        known.append(f"{p['numSms']} SMs")
    return ", ".join(known)


def _header_fields(header: dict[str, Any]) -> dict[str, Any]:
    out = {k: header[k] for k in _HEADER_FIELDS if k in header}
    info = header.get("distributedInfo")
    if isinstance(info, dict):
        out["distributedInfo"] = {
            k: info[k] for k in ("backend", "rank", "world_size") if k in info
        }
    return out


def read_warnings(events: TraceEvents, memory: bool = False) -> list[str]:
    """What reading could not take as it was: skipped events, missing durations, truncation;
    the ``[memory]`` events skipped only for a command that reads them (``memory``)."""
    return read_problems(events.read, events.quality, memory)


def read_problems(read: ReadStats, quality: Mapping[str, int], memory: bool = False) -> list[str]:
    """``read_warnings`` from the read's figures alone (as a cache entry's metadata has them)."""
    notes = [f"{n} {why}" for why, n in sorted(read.skipped.items())]
    notes += [f"{n} {why}" for why, n in sorted(quality.items()) if memory or why != MEMORY_SKIPPED]
    if read.truncated_at is not None:
        notes.append(
            f"TRUNCATED trace: analysed only the {read.events} events before byte "
            f"{read.truncated_at} (--partial)"
        )
    return notes
