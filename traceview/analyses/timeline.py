"""The report's timeline: GPU utilisation over the whole trace, binned, per device and per
stream; and the GPU work of one step as rectangles per stream.

Utilisation of a bin = the length of the union of the busy events (kernel, memcpy, memset with
dur > 0) of the device (or stream) inside the bin, divided by the bin's width: exact integer ns
from the unions' maximal intervals, with no Python loop per event or stream. The bins split the
trace span into ``bins`` parts of equal width (± 1 ns). Definitions in docs/metrics.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from traceview.aggregate import sums
from traceview.aggregate.intervals import UnionPieces, unions
from traceview.analyses.core.categories import CATEGORIES, categorize
from traceview.analyses.core.devices import DeviceUsage, GapSet, busy_in_order, device_of_stream
from traceview.analyses.core.graphs import replayed
from traceview.analyses.core.steps import (
    Launches,
    StepRows,
    describe_ranges,
    step_ranges,
    step_windows,
)
from traceview.columns.model import TraceEvents
from traceview.columns.schema import KERNEL
from traceview.errors import TraceviewError

BINS = 1000
MAX_STREAM_ROWS = 64  # stream rows kept (the busiest); device rows are always kept
MAX_RECTANGLES = 20_000
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class UtilRow:
    """One device (``stream`` None) or one stream: its busy ns in each bin."""

    device: Any
    stream: Any
    busy: np.ndarray  # int64, one per bin

    def as_dict(self, width: np.ndarray) -> dict[str, Any]:
        pct = np.divide(100.0 * self.busy, width, out=np.zeros(len(width)), where=width > 0)
        return {
            "device": self.device,
            "stream": self.stream,
            "busy_us": sums.total(self.busy) / 1000,
            "busy_pct": np.round(pct, 2).tolist(),
        }


@dataclass(frozen=True)
class Utilisation:
    """Busy ns per bin of every device and of the busiest streams over ``edges`` (ns)."""

    edges: np.ndarray  # int64, bins + 1
    rows: tuple[UtilRow, ...]
    streams_left_out: int

    def as_json(self) -> dict[str, Any]:
        width = np.diff(self.edges)
        start = int(self.edges[0]) if len(self.edges) else 0
        return {
            "schema_version": SCHEMA_VERSION,
            "start_us": start / 1000,
            "edges_ms": ((self.edges - start) / 1e6).tolist(),
            "rows": [r.as_dict(width) for r in self.rows],
            "streams_left_out": self.streams_left_out,
        }


@dataclass(frozen=True)
class StepWork:
    """The GPU work of one step: per rectangle its stream (index into ``streams``), start
    and duration (ns), name id, category (index into CATEGORIES) and whether a CUDA-graph
    replay ran it; the longest ``MAX_RECTANGLES`` when there are more (``total`` says how
    many)."""

    step: int
    start_ns: int
    end_ns: int
    streams: list[tuple[Any, Any]]
    stream: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    name: np.ndarray
    category: np.ndarray
    total: int
    graph: np.ndarray | None = None  # bool per rectangle; None: not known

    @property
    def capped(self) -> bool:
        return self.total > len(self.ts)


def bin_edges(start: int, end: int, bins: int = BINS) -> np.ndarray:
    """``bins`` + 1 integer edges splitting [start, end] into near-equal parts."""
    span = max(end - start, bins)  # at least 1 ns a bin
    return start + (np.arange(bins + 1, dtype=np.int64) * span) // bins


def busy_per_bin(
    segment: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    segments: int,
    edges: np.ndarray,
    merged: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """(segments × bins) int64: per segment id in [0, segments), the length of the union of
    its intervals inside each bin [edges[k], edges[k+1]); ``merged``: their
    ``merged_intervals`` when the caller has them already (then the intervals are unused)."""
    cover = BinCover(segments, edges)
    cover.add(*(merged_intervals(segment, start, end) if merged is None else merged))
    return cover.result()


class BinCover:
    """Per segment and bin, the summed length of intervals inside the bin, added (or taken
    away) a group of intervals at a time: the length inside a bin adds up over intervals
    that do not overlap, so a union is its pieces' sum, or its span's less its holes'."""

    def __init__(self, segments: int, edges: np.ndarray) -> None:
        self.segments, self.edges, self.n = segments, edges, len(edges) - 1
        # Partial bins: exact in float64 (every sum is an integer below 2**53 in size).
        self.parts = np.zeros(segments * self.n)
        # Whole bins: +1 from the first whole bin, −1 from the last's next, summed along bins.
        self.covered = np.zeros(segments * (self.n + 1), dtype=np.int64)

    def add(self, seg: np.ndarray, a: np.ndarray, b: np.ndarray, sign: int = 1) -> None:
        """Intervals [a, b] of segments ``seg`` (``sign`` −1: taken away)."""
        edges, n = self.edges, self.n
        a, b = np.clip(a, edges[0], edges[-1]), np.clip(b, edges[0], edges[-1])
        keep = b > a
        seg, a, b = seg[keep], a[keep], b[keep]
        ka = np.minimum(np.searchsorted(edges, a, side="right") - 1, n - 1)
        kb = np.maximum(np.searchsorted(edges, b, side="left") - 1, 0)
        same = ka == kb
        size = self.segments * n
        parts = np.zeros(size)
        parts += np.bincount(seg[same] * n + ka[same], weights=(b - a)[same], minlength=size)
        cross = ~same
        s, ka, kb, a, b = seg[cross], ka[cross], kb[cross], a[cross], b[cross]
        parts += np.bincount(s * n + ka, weights=edges[ka + 1] - a, minlength=size)
        parts += np.bincount(s * n + kb, weights=b - edges[kb], minlength=size)
        wide = self.segments * (n + 1)
        covered = np.bincount(s * (n + 1) + ka + 1, minlength=wide)
        covered -= np.bincount(s * (n + 1) + kb, minlength=wide)
        if sign < 0:
            self.parts -= parts
            self.covered -= covered
        else:
            self.parts += parts
            self.covered += covered

    def result(self) -> np.ndarray:
        segments, n = self.segments, self.n
        out = np.rint(self.parts).astype(np.int64).reshape(segments, n)
        whole = np.cumsum(self.covered.reshape(segments, n + 1)[:, :n], axis=1)
        out += whole * np.diff(self.edges)
        return out


def merged_intervals(
    segment: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The maximal intervals of each segment's union: (segment, start, end), in (segment,
    start) order. A union is [first, last] less its holes."""
    u = unions(segment, start, end)
    return maximal(u.segment, u.first, u.last, u.hole_segment, u.hole_start, u.hole_end)


def maximal(
    segment: np.ndarray,
    first: np.ndarray,
    last: np.ndarray,
    hole_segment: np.ndarray,
    hole_start: np.ndarray,
    hole_end: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The maximal intervals of unions given as each segment's (ascending ids) first start
    and last end and the holes in (segment, start) order: segment s's are [first, its first
    hole's start], [that hole's end, the next one's start], ..., [its last hole's end, last].
    Placed where they go, with no sort: in a union, starts and ends strictly increase."""
    holes = np.bincount(np.searchsorted(segment, hole_segment), minlength=len(segment))
    at = np.cumsum(holes + 1) - (holes + 1)  # where each segment's first interval goes
    size = len(segment) + len(hole_segment)
    is_first, is_last = np.zeros(size, dtype=bool), np.zeros(size, dtype=bool)
    is_first[at], is_last[at + holes] = True, True
    starts, ends = np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int64)
    starts[is_first], starts[~is_first] = first, hole_end
    ends[is_last], ends[~is_last] = last, hole_start
    return np.repeat(segment, holes + 1), starts, ends


def utilisation(
    events: TraceEvents,
    bins: int = BINS,
    usage: list[DeviceUsage] | None = None,
    gaps: GapSet | None = None,
) -> Utilisation:
    """Every device's and the busiest streams' busy ns per bin, over the trace span.
    ``usage`` and ``gaps``: ``device_gaps`` over every GPU row, when the caller has them (a
    device's union is then its span less its gaps). A pass of rows at a time: the one
    row-sized array is the rows' order by (stream, start)."""
    span = _busy_span(events)
    if span is None:
        return Utilisation(np.zeros(0, dtype=np.int64), (), 0)
    lo, hi = span
    if events.span_ns is not None:
        lo, hi = min(lo, events.span_ns[0]), max(hi, events.span_ns[1])
    edges = bin_edges(lo, hi, bins)
    device_index, devices = device_of_stream(events)
    if usage is None or gaps is None:
        per_device = _union_bins(events, device_index, len(devices), edges)
    else:
        per_device = _device_bins(usage, gaps, devices, edges)
    per_stream = _union_bins(events, None, len(events.streams), edges)
    totals = per_stream.sum(axis=1)  # a row: its unions cut into bins, at most the span
    used = np.flatnonzero(totals > 0)
    kept = used[np.argsort(-totals[used], kind="stable")][:MAX_STREAM_ROWS]
    rows: list[UtilRow] = []
    for d, device in enumerate(devices):
        rows.append(UtilRow(device, None, per_device[d]))
        mine = sorted(s for s in kept.tolist() if device_index[s] == d)
        rows += [UtilRow(device, events.streams[s].stream, per_stream[s]) for s in mine]
    return Utilisation(edges, tuple(rows), len(used) - len(kept))


_PASS = 1 << 16  # rows a pass


def _busy_span(events: TraceEvents) -> tuple[int, int] | None:
    """The earliest start and latest end of the busy rows (dur > 0); None when none."""
    gpu = events.gpu
    lo, hi = None, None
    for at in range(0, len(gpu.ts), _PASS):
        busy = gpu.dur[at : at + _PASS] > 0
        if not busy.any():
            continue
        ts = gpu.ts[at : at + _PASS][busy]
        end = ts + gpu.dur[at : at + _PASS][busy]
        low, high = int(ts.min()), int(end.max())
        lo, hi = (low, high) if lo is None or hi is None else (min(lo, low), max(hi, high))
    return None if lo is None or hi is None else (lo, hi)


def _device_bins(
    usage: list[DeviceUsage], gaps: GapSet, devices: list[Any], edges: np.ndarray
) -> np.ndarray:
    """Per device, its busy ns per bin: its span [first start, last end] less its device
    gaps (the holes of its union), the gaps a pass at a time."""
    index = {(type(v), v): i for i, v in enumerate(devices)}
    segment = np.array([index[(type(u.device), u.device)] for u in usage], dtype=np.int64)
    first = np.array([u.start_ns for u in usage], dtype=np.int64)
    last = np.array([u.end_ns for u in usage], dtype=np.int64)
    cover = BinCover(len(devices), edges)
    cover.add(segment, first, last)
    for lo in range(0, len(gaps), _PASS):
        part = gaps.take(slice(lo, lo + _PASS))
        cover.add(part.device.astype(np.int64), part.start, part.end, sign=-1)
    return cover.result()


def _union_bins(
    events: TraceEvents, device_index: np.ndarray | None, segments: int, edges: np.ndarray
) -> np.ndarray:
    """Per stream (``device_index``: per device, by each stream's), the busy ns per bin of
    the union of its busy rows: the rows taken in (segment, start) order a pass at a time,
    each pass's union cut into pieces that do not overlap, the last carried to the next."""
    stream = events.gpu.stream
    major = stream if device_index is None else device_index.astype(np.int32)[stream]
    cover = BinCover(segments, edges)
    pieces = UnionPieces()
    for _, seg, start, end in busy_in_order(events, major):
        cover.add(*pieces.add(seg, start, end))
    cover.add(*pieces.finish())
    return cover.result()


def pick_step(events: TraceEvents, wanted: int | None) -> int | None:
    """The step to draw: ``wanted``, else the median step number (nearest rank); None when
    the trace has no steps. A step the trace lacks is an error naming those it has."""
    numbers = list(step_windows(events))
    if wanted is None:
        return numbers[(len(numbers) + 1) // 2 - 1] if numbers else None
    if wanted not in numbers:
        have = describe_ranges(step_ranges(numbers)) if numbers else "none"
        raise TraceviewError(
            f"--timeline-step {wanted}: no such step in this trace (steps: {have})"
        )
    return wanted


def step_work(
    events: TraceEvents,
    step: int,
    cap: int = MAX_RECTANGLES,
    launch: Launches | None = None,
    graphs: np.ndarray | None = None,
) -> StepWork:
    """The GPU work (dur > 0) of ``step`` (assigned as in ``traceview steps``), the longest
    ``cap`` rectangles when there are more; ``launch``: ``launch_times(events)`` when the
    caller has it already; ``graphs``: the graph launches' correlation ids, to mark the
    rectangles graph replays ran."""
    window = step_windows(events)[step]
    gpu = events.gpu
    rows = StepRows(events, np.flatnonzero(gpu.dur > 0), launch).within(window)
    total = len(rows)
    if total > cap:
        rows = rows[np.argsort(-gpu.dur[rows], kind="stable")[:cap]]
    rows = np.sort(rows)
    used, stream = np.unique(gpu.stream[rows], return_inverse=True)
    end = gpu.ts[rows] + gpu.dur[rows]
    return StepWork(
        step=step,
        start_ns=int(gpu.ts[rows].min()) if len(rows) else window.start_ns,
        end_ns=int(end.max()) if len(rows) else window.end_ns,
        streams=[events.streams[s] for s in used.tolist()],
        stream=stream.astype(np.int64),
        ts=gpu.ts[rows],
        dur=gpu.dur[rows],
        name=gpu.name[rows],
        category=_categories(events, rows),
        total=total,
        graph=None if graphs is None else replayed(events, rows, graphs),
    )


@dataclass(frozen=True)
class GraphStep:
    """A step some of whose kernels CUDA-graph replays ran: how many, of how many, in how
    many replays."""

    step: int
    graph_kernels: int
    kernels: int
    replays: int


def graph_steps(
    events: TraceEvents, graphs: np.ndarray, launch: Launches | None = None
) -> list[GraphStep]:
    """Per step (assigned as in ``traceview steps``) with graph kernels, the counts."""
    if not len(graphs):
        return []
    gpu = events.gpu
    by_step = StepRows(events, np.flatnonzero(gpu.kind == KERNEL), launch)
    out = []
    for number, window in step_windows(events).items():
        rows = by_step.within(window)
        graph = replayed(events, rows, graphs)
        if graph.any():
            replays = len(np.unique(gpu.correlation[rows[graph]]))
            out.append(GraphStep(number, int(graph.sum()), len(rows), replays))
    return out


def _categories(events: TraceEvents, rows: np.ndarray) -> np.ndarray:
    """The category (by name and kind, no op link) of each row."""
    return categorize(events)[rows] if len(rows) else np.zeros(0, dtype=np.int64)


__all__ = [
    "CATEGORIES",
    "GraphStep",
    "StepWork",
    "Utilisation",
    "graph_steps",
    "pick_step",
    "step_work",
    "utilisation",
]
