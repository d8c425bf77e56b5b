"""Idle gaps between consecutive GPU activities on each stream, per-device idle time,
name-to-name transitions, a gap histogram and the largest gaps.

Per stream, busy activities are ordered by (start, end, name). Each consecutive pair gives a
signed gap = next start − previous end: > 0 is an idle gap, < 0 an overlap, 0 a zero gap.
``--min-gap`` drops positive gaps below the threshold from the gap counts, totals, histogram
and largest list; transitions always use every consecutive pair, unfiltered.
All arithmetic is in int64 ns; µs floats appear only in the result.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import numpy as np

from traceview.aggregate import moments
from traceview.aggregate.intervals import union_length
from traceview.aggregate.order import dense_ids, lex_order
from traceview.analyses.cpu_context import NO_CONTEXT, CpuContext, cpu_contexts
from traceview.analyses.steps import Steps, in_steps, select_steps, step_windows
from traceview.analyses.summary import TraceSummary, summarize
from traceview.errors import UsageError
from traceview.events import GPU_KINDS, TraceEvents

SCHEMA_VERSION = 1
SORT_KEYS = ("count", "avg", "max", "min", "stdev", "total")
_SORT_ALIASES = {"avggap": "avg", "maxgap": "max"}
_SORT_FIELD = {
    "count": "count",
    "avg": "mean_us",
    "max": "max_us",
    "min": "min_us",
    "stdev": "std_us",
    "total": "total_us",
}
_UNITS_NS = {"ns": 1, "us": 1000, "µs": 1000, "μs": 1000, "ms": 1_000_000, "s": 1_000_000_000}
_DURATION = re.compile(r"^\s*([+-]?)(\d+(?:\.\d*)?|\.\d+)\s*([a-zµμ]*)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class GapOptions:
    """What to select (kinds, streams, devices, steps) and how to report it.

    ``streams``/``devices`` are matched against the trace's values by their text, so ``7``
    and ``"7"`` both select stream 7.
    """

    busy: tuple[str, ...] = GPU_KINDS
    min_gap_ns: int = 0
    streams: Sequence[Any] | None = None
    devices: Sequence[Any] | None = None
    steps: Steps = ()  # step numbers and (first, last) ranges
    hist_min_ns: int | None = None
    hist_max_ns: int | None = None
    bins: int = 20
    linear: bool = False
    largest: int = 10
    sort: str = "total"
    top: int = 15


@dataclass(frozen=True)
class StreamGaps:
    """Gaps, overlaps and idle time of one stream."""

    device: Any
    stream: Any
    events: int
    gaps: int
    gap_total_us: float
    overlaps: int
    overlap_us: float
    zero_gaps: int
    window_us: float
    busy_us: float
    idle_us: float

    def as_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


@dataclass(frozen=True)
class DeviceIdle:
    """Idle time of one device: its window minus the union of its streams' activity."""

    device: Any
    window_us: float
    busy_us: float
    idle_us: float
    idle_pct: float

    def as_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


@dataclass(frozen=True)
class GapTotals:
    """Positive gaps over all streams, and the sum of the streams' idle time."""

    gaps: int
    gap_total_us: float
    idle_us: float
    mean_gap_us: float

    def as_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


@dataclass(frozen=True)
class Histogram:
    """Counts of positive gaps per bin; ``edges`` has one more entry than ``counts``."""

    unit: str
    edges: list[float]
    counts: list[int]
    below: int
    above: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "edges": list(self.edges),
            "counts": list(self.counts),
            "below": self.below,
            "above": self.above,
        }


@dataclass(frozen=True)
class Transition:
    """Statistics of the signed gap between a ``from_name`` activity and the next one."""

    from_name: str
    to_name: str
    count: int
    total_us: float
    mean_us: float
    min_us: float
    max_us: float
    std_us: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "from": self.from_name,
            "to": self.to_name,
            "count": self.count,
            "total_us": self.total_us,
            "mean_us": self.mean_us,
            "min_us": self.min_us,
            "max_us": self.max_us,
            "std_us": self.std_us,
        }


@dataclass(frozen=True)
class LargestGap:
    """One idle gap; ``start_us`` is relative to the start of the trace span."""

    device: Any
    stream: Any
    start_us: float
    length_us: float
    before: str
    after: str
    context: CpuContext = NO_CONTEXT

    @property
    def cpu_context(self) -> str | None:
        return self.context.describe()

    def as_dict(self) -> dict[str, Any]:
        out = {f: getattr(self, f) for f in self.__dataclass_fields__ if f != "context"}
        out["cpu_context"] = self.cpu_context
        out["launch"] = self.context.as_dict()
        return out


@dataclass(frozen=True)
class GapReport:
    """The result of ``traceview gaps``: every rendering reads this one object."""

    trace: TraceSummary
    options: GapOptions
    totals: GapTotals
    streams: list[StreamGaps]
    devices: list[DeviceIdle]
    histogram: Histogram
    transitions: list[Transition]
    largest: list[LargestGap]
    left_out_transitions: int = 0
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` document (schema_version 1)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "trace": self.trace.as_dict(),
            "busy": list(self.options.busy),
            "totals": self.totals.as_dict(),
            "streams": [s.as_dict() for s in self.streams],
            "devices": [d.as_dict() for d in self.devices],
            "histogram": self.histogram.as_dict(),
            "transitions": [t.as_dict() for t in self.transitions],
            "largest": [g.as_dict() for g in self.largest],
        }


def parse_duration(text: str) -> int:
    """``250ns``, ``1us``, ``0.5ms``, ``2s`` or a bare number of µs, as integer ns."""
    m = _DURATION.match(text)
    unit = m.group(3).lower() if m else ""
    if not m or unit not in ("", *_UNITS_NS):
        raise UsageError(f"duration {text!r}: expected a number with ns, us, ms or s (e.g. 5us)")
    if m.group(1) == "-":
        raise UsageError(f"duration {text!r}: must not be negative")
    value = Decimal(m.group(2)) * _UNITS_NS[unit or "us"]
    return int(value.to_integral_value(rounding=ROUND_HALF_EVEN))


def analyse_gaps(events: TraceEvents, options: GapOptions) -> GapReport:
    """Select busy activities; compute per-stream, per-device, transition and gap figures.

    Row-sized arrays are made one after another and dropped as soon as they are used: on a
    4 GB trace each costs 2-18 MB, and those alive together set the peak memory.
    """
    _check(options)
    trace = summarize(events)  # first: its own row-sized temporaries are gone before ours
    mask, notes = _selection(events, options)
    source = _sorted_rows(events, np.flatnonzero(mask))  # the GPU row of each sorted row
    del mask
    gpu = events.gpu
    stream, ts, name = gpu.stream[source], gpu.ts[source], gpu.name[source]
    end = gpu.dur[source]
    end += ts
    pairs = _pairs(stream)
    gap = ts[pairs + 1]
    gap -= end[pairs]
    kept = (gap > 0) & (gap >= options.min_gap_ns)
    stream_rows = _stream_rows(events, stream, ts, end, pairs, gap, kept)
    span_start = events.span_ns[0] if events.span_ns else 0
    positive = gap[kept]
    transitions = _transitions(events.names, name, pairs, gap, options.sort)
    del gap
    shown = transitions if options.top == 0 else transitions[: options.top]
    devices = _devices(events, stream, ts, end)
    del ts
    return GapReport(
        trace=trace,
        options=options,
        totals=_totals(positive, stream_rows),
        streams=[row for row, _ in stream_rows],
        devices=devices,
        histogram=_histogram(positive, options),
        transitions=shown,
        largest=_largest(
            events, pairs[kept], positive, (stream, end, name, source), span_start, options
        ),
        left_out_transitions=len(transitions) - len(shown),
        notes=notes,
    )


def _sorted_rows(events: TraceEvents, rows: np.ndarray) -> np.ndarray:
    """The selected GPU rows in (stream, ts, end, name) order (names compared as strings)."""
    gpu = events.gpu
    stream, ts = gpu.stream[rows], gpu.ts[rows]
    end = gpu.dur[rows]
    end += ts
    order = lex_order((_name_rank(events.names)[gpu.name[rows]], end, ts, stream))
    return _compact(rows[order], len(gpu.ts))


def _compact(index: np.ndarray, bound: int) -> np.ndarray:
    """Numbers below ``bound`` as int32 when they fit: half the memory of numpy's int64."""
    return index.astype(np.int32) if bound < 2**31 else index


def _check(options: GapOptions) -> None:
    """Reject option values that make no sense."""
    unknown = set(options.busy) - set(GPU_KINDS)
    if unknown or not options.busy:
        bad = sorted(unknown)[0] if unknown else ""
        raise UsageError(f"--busy: unknown kind {bad!r} (known: {', '.join(GPU_KINDS)})")
    if options.min_gap_ns < 0:
        raise UsageError("--min-gap: must not be negative")
    if options.bins < 1:
        raise UsageError(f"--bins {options.bins}: must be at least 1")
    if options.largest < 0:
        raise UsageError(f"--largest {options.largest}: must not be negative")
    if options.top < 0:
        raise UsageError(f"--top {options.top}: must not be negative (0 shows all)")
    for flag, value in (("--hist-min", options.hist_min_ns), ("--hist-max", options.hist_max_ns)):
        if value is not None and (value < 0 or (value == 0 and not options.linear)):
            kind = "negative" if value < 0 else "zero on a log scale (use --linear)"
            raise UsageError(f"{flag}: must not be {kind}")
    lo, hi = options.hist_min_ns, options.hist_max_ns
    if lo is not None and hi is not None and lo >= hi:
        raise UsageError(f"--hist-min ({lo} ns) must be below --hist-max ({hi} ns)")
    _sort_field(options.sort)


def _selection(events: TraceEvents, options: GapOptions) -> tuple[np.ndarray, list[str]]:
    """Mask over GPU rows for the busy kinds, streams, devices and steps."""
    gpu = events.gpu
    kinds = [GPU_KINDS.index(k) for k in options.busy]
    mask = np.isin(gpu.kind, kinds)
    wanted_streams = np.ones(len(events.streams), dtype=bool)
    if options.streams is not None:
        keep = {str(v) for v in options.streams}
        wanted_streams &= np.array([str(s) in keep for _, s in events.streams], dtype=bool)
    if options.devices is not None:
        keep = {str(v) for v in options.devices}
        wanted_streams &= np.array([str(d) in keep for d, _ in events.streams], dtype=bool)
    if len(wanted_streams):
        mask &= wanted_streams[gpu.stream]
    notes: list[str] = []
    if options.steps:
        windows = step_windows(events)
        chosen = select_steps(options.steps, windows)
        mask &= in_steps(events, chosen, windows)
        gpu_only = [n for n in chosen if windows[n].gpu_only]
        if gpu_only:
            notes.append(
                "steps " + ", ".join(map(str, gpu_only)) + " have no CPU ProfilerStep: "
                "used the gpu_user_annotation window and each activity's own start time"
            )
    return mask, notes


def _name_rank(names: list[str]) -> np.ndarray:
    """``rank[id]`` = position of the name string in sorted order (ties broken like strings)."""
    rank = np.empty(len(names), dtype=np.int64)
    rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    return rank


def _pairs(stream: np.ndarray) -> np.ndarray:
    """Indices ``i`` of the sorted rows where row ``i + 1`` is on the same stream."""
    return _compact(np.flatnonzero(stream[1:] == stream[:-1]), len(stream))


def _bounds(stream: np.ndarray) -> list[tuple[int, int, int]]:
    """(stream id, first row, end row) of each stream's run in the sorted rows."""
    if len(stream) == 0:
        return []
    starts = np.flatnonzero(np.r_[True, stream[1:] != stream[:-1]])
    stops = np.r_[starts[1:], len(stream)]
    return list(zip(stream[starts].tolist(), starts.tolist(), stops.tolist(), strict=True))


def _stream_rows(
    events: TraceEvents,
    stream: np.ndarray,
    ts: np.ndarray,
    end: np.ndarray,
    pairs: np.ndarray,
    gap: np.ndarray,
    kept: np.ndarray,
) -> list[tuple[StreamGaps, int]]:
    """One StreamGaps per stream (in trace-value order), each with its idle time in ns."""
    n = len(events.streams)
    pair_stream = stream[pairs]
    gaps = np.bincount(pair_stream[kept], minlength=n)
    gap_ns = _sum_by(pair_stream[kept], gap[kept], n)
    over = gap < 0
    overlaps = np.bincount(pair_stream[over], minlength=n)
    overlap_ns = -_sum_by(pair_stream[over], gap[over], n)
    zeros = np.bincount(pair_stream[gap == 0], minlength=n)
    out = []
    for sid, lo, hi in _bounds(stream):
        window = int(end[lo:hi].max()) - int(ts[lo])
        busy = union_length(ts[lo:hi], end[lo:hi])
        device, stream_value = events.streams[sid]
        row = StreamGaps(
            device=device,
            stream=stream_value,
            events=hi - lo,
            gaps=int(gaps[sid]),
            gap_total_us=int(gap_ns[sid]) / 1000,
            overlaps=int(overlaps[sid]),
            overlap_us=int(overlap_ns[sid]) / 1000,
            zero_gaps=int(zeros[sid]),
            window_us=window / 1000,
            busy_us=busy / 1000,
            idle_us=(window - busy) / 1000,
        )
        out.append((row, window - busy))
    out.sort(key=lambda r: (_value_key(r[0].device), _value_key(r[0].stream)))
    return out


def _sum_by(group: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """Exact int64 sums of ``values`` per group."""
    total = np.zeros(groups, dtype=np.int64)
    np.add.at(total, group, values)
    return total


def _value_key(value: Any) -> tuple[int, Any]:
    """Orders numbers numerically before strings (device/stream values may mix types)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, value)
    return (1, str(value))


def _devices(
    events: TraceEvents, stream: np.ndarray, ts: np.ndarray, end: np.ndarray
) -> list[DeviceIdle]:
    """Per device (first element of the stream key): window, busy union, idle."""
    runs: dict[Any, list[tuple[int, int]]] = {}
    for sid, lo, hi in _bounds(stream):
        runs.setdefault(events.streams[sid][0], []).append((lo, hi))
    out = []
    for device, spans in sorted(runs.items(), key=lambda kv: _value_key(kv[0])):
        s = np.concatenate([ts[lo:hi] for lo, hi in spans])
        e = np.concatenate([end[lo:hi] for lo, hi in spans])
        window = int(e.max()) - int(s.min())
        busy = union_length(s, e, scratch=True)  # s and e are our own copies
        out.append(
            DeviceIdle(
                device=device,
                window_us=window / 1000,
                busy_us=busy / 1000,
                idle_us=(window - busy) / 1000,
                idle_pct=100 * (window - busy) / window if window > 0 else 0.0,
            )
        )
    return out


def _totals(positive: np.ndarray, stream_rows: list[tuple[StreamGaps, int]]) -> GapTotals:
    count, total = len(positive), int(positive.sum())
    return GapTotals(
        gaps=count,
        gap_total_us=total / 1000,
        idle_us=sum(idle for _, idle in stream_rows) / 1000,
        mean_gap_us=total / (count * 1000) if count else 0.0,
    )


def _transitions(
    names: list[str], name: np.ndarray, pairs: np.ndarray, gap: np.ndarray, sort: str
) -> list[Transition]:
    """Statistics of the signed gap per (previous name, next name), sorted."""
    width = max(len(names), 1)
    key = name[pairs].astype(np.int32 if width * width < 2**31 else np.int64)
    key *= width
    key += name[pairs + 1]
    used, group = dense_ids(key, width * width)
    del key
    stats = moments.accumulate(group, gap, len(used))
    std = stats.std()
    rows = []
    for g, k in enumerate(used.tolist()):
        count, total = int(stats.count[g]), int(stats.total[g])
        rows.append(
            Transition(
                from_name=names[k // width],
                to_name=names[k % width],
                count=count,
                total_us=total / 1000,
                mean_us=total / (count * 1000),
                min_us=int(stats.minimum[g]) / 1000,
                max_us=int(stats.maximum[g]) / 1000,
                std_us=float(std[g]) / 1000,
            )
        )
    field_name = _sort_field(sort)
    rows.sort(key=lambda t: (-getattr(t, field_name), t.from_name, t.to_name))
    return rows


def _sort_field(sort: str) -> str:
    """The Transition field a --sort key orders by (largest first)."""
    field_name = _SORT_FIELD.get(_SORT_ALIASES.get(sort, sort))
    if field_name is None:
        raise UsageError(f"--sort {sort!r}: expected one of {', '.join(SORT_KEYS)}")
    return field_name


def _histogram(positive: np.ndarray, options: GapOptions) -> Histogram:
    """Log (default) or linear bins over [lo, hi]; the last bin includes its right edge.

    lo and hi default to the smallest and largest gap. A range of one value is a single bin.
    """
    if len(positive) == 0 and (options.hist_min_ns is None or options.hist_max_ns is None):
        return Histogram("us", [], [], 0, 0)
    lo = options.hist_min_ns if options.hist_min_ns is not None else int(positive.min())
    hi = options.hist_max_ns if options.hist_max_ns is not None else int(positive.max())
    if lo >= hi:  # only when one bound is defaulted: collapse onto the given one
        lo = hi = options.hist_min_ns if options.hist_min_ns is not None else hi
        edges = np.array([lo, hi], dtype=np.float64)
    elif options.linear:
        edges = np.linspace(lo, hi, options.bins + 1)
    else:
        edges = np.geomspace(lo, hi, options.bins + 1)
    edges[0], edges[-1] = lo, hi
    below = int((positive < lo).sum())
    above = int((positive > hi).sum())
    inside = positive[(positive >= lo) & (positive <= hi)]
    which = np.searchsorted(edges, inside, side="right") - 1
    which = np.minimum(which, len(edges) - 2)
    counts = np.bincount(which, minlength=len(edges) - 1)
    return Histogram("us", (edges / 1000).tolist(), counts.tolist(), below, above)


def _largest(
    events: TraceEvents,
    at: np.ndarray,
    length: np.ndarray,
    sorted_rows: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    span_start: int,
    options: GapOptions,
) -> list[LargestGap]:
    """The ``options.largest`` longest gaps, longest first (ties: earliest first)."""
    if options.largest == 0 or len(at) == 0:
        return []
    stream, end, name, source = sorted_rows
    order = _longest(length, end[at], options.largest).tolist()
    before = [int(at[i]) for i in order]
    correlation = events.gpu.correlation
    launches = [(int(correlation[source[b + 1]]), int(end[b])) for b in before]
    contexts = cpu_contexts(events, launches)
    out = []
    for i, prev, context in zip(order, before, contexts, strict=True):
        device, stream_value = events.streams[int(stream[prev])]
        out.append(
            LargestGap(
                device=device,
                stream=stream_value,
                start_us=(int(end[prev]) - span_start) / 1000,
                length_us=int(length[i]) / 1000,
                before=events.names[int(name[prev])],
                after=events.names[int(name[prev + 1])],
                context=context,
            )
        )
    return out


def _longest(length: np.ndarray, end: np.ndarray, n: int) -> np.ndarray:
    """Indices of the ``n`` largest lengths, largest first, ties by end then index.

    Exactly the head of ``np.lexsort((end, -length))``, sorting only the lengths that can
    be in it (those at least the n-th largest) instead of every gap.
    """
    if n < len(length):
        threshold = np.partition(length, len(length) - n)[len(length) - n]
        candidates = np.flatnonzero(length >= threshold)
    else:
        candidates = np.arange(len(length))
    return candidates[np.lexsort((end[candidates], -length[candidates]))][:n]


__all__ = [
    "SORT_KEYS",
    "DeviceIdle",
    "GapOptions",
    "GapReport",
    "GapTotals",
    "Histogram",
    "LargestGap",
    "StreamGaps",
    "Transition",
    "analyse_gaps",
    "parse_duration",
]
