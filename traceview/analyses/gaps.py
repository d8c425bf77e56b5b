"""Why the GPU is idle: device gaps (default) or per-stream gaps, per-device idle time split
into host wait and the rest, transitions, a gap histogram and the largest gaps with their cause.

Device scope (the default): the gaps of each device's busy union (analyses.devices) — what a
person means by "the GPU is idle". Stream scope (``--per-stream``): per stream, busy
activities ordered by (start, end, name); each consecutive pair gives a signed gap = next start
− previous end: > 0 is an idle gap, < 0 an overlap, 0 a zero gap. The per-stream table is
shown in both scopes. ``--min-gap`` drops positive gaps below the threshold from the gap
counts, totals, histogram and largest list; transitions use every gap (device scope) or every
consecutive pair (stream scope), unfiltered. All arithmetic is in int64 ns; µs floats appear
only in the result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from traceview.aggregate import moments, sums
from traceview.aggregate.intervals import Unions, unions, unions_in_order
from traceview.aggregate.order import dense_ids, lex_order_of_rows, packed_order, positions_where
from traceview.analyses.core.cpu_context import NO_CONTEXT, CpuContext, GapQuery, cpu_contexts
from traceview.analyses.core.devices import (
    DeviceUsage,
    GapSet,
    device_gaps,
    device_of_stream,
    end_and_name_ties,
    host_waits,
    launch_latency,
    launches_of,
    row_columns,
    row_ends,
    row_starts,
    usage,
)
from traceview.analyses.core.in_us import us_fields
from traceview.analyses.core.names import display_names
from traceview.analyses.core.selection import Selection, select
from traceview.analyses.core.steps import Steps
from traceview.analyses.core.streamed import json_list, rows_of
from traceview.analyses.core.trace import TraceSummary, summarize
from traceview.choices import GAP_SORT_ALIASES, GapSort, check_choice
from traceview.columns.model import TraceEvents
from traceview.columns.packed_names import ranks_of, subset
from traceview.columns.schema import GPU_KINDS
from traceview.errors import UsageError
from traceview.parsing import parse_duration, parse_hist_range, parse_steps

if TYPE_CHECKING:
    from traceview.analyses.core.common import Shared

SCHEMA_VERSION = 2
SORT_KEYS = tuple(GapSort)
_SORT_FIELD = {
    "count": "count",
    "avg": "mean_ns",
    "max": "max_ns",
    "min": "min_ns",
    "stdev": "std_ns",
    "total": "total_ns",
}


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
    sort: GapSort = GapSort.TOTAL
    top: int = 15
    per_stream: bool = False
    context: bool = True  # read CPU rows to say what held each listed gap
    stream_top: int = 100  # streams in the Streams table (0: all; JSON and CSV hold all)

    @property
    def scope(self) -> str:
        """``device`` (device gaps) or ``stream`` (gaps per stream, --per-stream)."""
        return "stream" if self.per_stream else "device"


def options_from_words(
    *,
    busy: str,
    min_gap: str,
    stream: Sequence[str] | None,
    device: Sequence[str] | None,
    pstep: str | None,
    hist_min: str | None,
    hist_max: str | None,
    bins: int,
    linear: bool,
    largest: int,
    gap_sort: GapSort | str,
    gap_top: int,
    per_stream: bool,
    context: bool,
    stream_top: int,
) -> GapOptions:
    """GapOptions from the words of ``traceview gaps``' options, for the command line and
    ``traceview.open(...).gaps()`` alike."""
    hist_min_ns, hist_max_ns = parse_hist_range(hist_min, hist_max)
    return GapOptions(
        busy=tuple(k.strip() for k in busy.split(",") if k.strip()),
        min_gap_ns=parse_duration(min_gap, "--min-gap"),
        streams=tuple(stream) if stream else None,
        devices=tuple(device) if device else None,
        steps=tuple(parse_steps(pstep)) if pstep else (),
        hist_min_ns=hist_min_ns,
        hist_max_ns=hist_max_ns,
        bins=bins,
        linear=linear,
        largest=largest,
        sort=cast(GapSort, gap_sort),
        top=gap_top,
        per_stream=per_stream,
        context=context,
        stream_top=stream_top,
    )


@dataclass(frozen=True)
class StreamGaps:
    """Gaps, overlaps and idle time of one stream."""

    device: Any
    stream: Any
    events: int
    gaps: int
    gap_total_ns: int
    overlaps: int
    overlap_ns: int
    zero_gaps: int
    window_ns: int
    busy_ns: int
    idle_ns: int

    def as_dict(self) -> dict[str, Any]:
        return us_fields(self)


@dataclass(frozen=True)
class DeviceIdle:
    """Idle time of one device (window − busy union = the sum of its device gaps), how many
    of its gaps --min-gap keeps and their total, and over all its gaps the host wait, the
    launch latency and the rest, the gpu wait (idle = host wait + launch latency + gpu
    wait)."""

    device: Any
    window_ns: int
    busy_ns: int
    idle_ns: int
    idle_pct: float
    gaps: int
    gap_total_ns: int
    host_wait_ns: int
    launch_latency_ns: int = 0

    @property
    def gpu_wait_ns(self) -> int:
        return self.idle_ns - self.host_wait_ns - self.launch_latency_ns

    def as_dict(self) -> dict[str, Any]:
        return {**us_fields(self), "gpu_wait_us": self.gpu_wait_ns / 1000}


@dataclass(frozen=True)
class GapTotals:
    """The scope's positive gaps that --min-gap keeps, and its idle time: the sum of the
    devices' idle (device scope) or of the streams' idle (stream scope)."""

    gaps: int
    gap_total_ns: int
    idle_ns: int

    @property
    def mean_gap_ns(self) -> float:
        return self.gap_total_ns / self.gaps if self.gaps else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            **us_fields(self),
            "mean_gap_us": self.gap_total_ns / (self.gaps * 1000) if self.gaps else 0.0,
        }


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
    total_ns: int
    min_ns: int
    max_ns: int
    std_ns: float

    @property
    def mean_ns(self) -> float:
        return self.total_ns / self.count

    def as_dict(self) -> dict[str, Any]:
        return {
            "from": self.from_name,
            "to": self.to_name,
            "count": self.count,
            "total_us": self.total_ns / 1000,
            "mean_us": self.total_ns / (self.count * 1000),
            "min_us": self.min_ns / 1000,
            "max_us": self.max_ns / 1000,
            "std_us": self.std_ns / 1000,
        }


@dataclass(frozen=True)
class LargestGap:
    """One idle gap: ``start_ns`` from the start of the trace span and ``ts_ns`` on the trace's
    clock; the stream of the activity after it; the host wait and the cause."""

    device: Any
    stream: Any
    start_ns: int
    ts_ns: int
    gap_ns: int
    before: str
    after: str
    host_wait_ns: int
    context: CpuContext = NO_CONTEXT
    launch_latency_ns: int = 0

    @property
    def cause(self) -> str:
        """``cpu`` when the CPU had not yet launched the next activity as the GPU ran dry;
        else ``launch latency`` when the gap is within the launch-latency bound of its
        launch; else ``gpu wait`` (a dependency, an event, a copy)."""
        if self.host_wait_ns > 0:
            return "cpu"
        return "launch latency" if self.launch_latency_ns > 0 else "gpu wait"

    def as_dict(self) -> dict[str, Any]:
        out = us_fields(self, skip=("context",))
        out["cause"] = self.cause
        out["cpu"] = self.context.as_dict()
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
    transitions: Sequence[Transition]  # a list, or made as they are read (``streamed``)
    largest: list[LargestGap]
    left_out_transitions: int = 0
    notes: list[str] = field(default_factory=list)
    # full → displayed (of the names shown; of every GPU name, asked for, when ``streamed``)
    shown_names: Mapping[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """The ``--format json`` document (schema_version 2)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "scope": self.options.scope,
            "trace": self.trace.as_dict(),
            "busy": list(self.options.busy),
            "totals": self.totals.as_dict(),
            "streams": [s.as_dict() for s in self.streams],
            "devices": [d.as_dict() for d in self.devices],
            "histogram": self.histogram.as_dict(),
            "transitions": json_list(self.transitions, Transition.as_dict),
            "left_out_transitions": self.left_out_transitions,
            "largest": [g.as_dict() for g in self.largest],
            "notes": list(self.notes),
        }


def analyse_gaps(
    events: TraceEvents, options: GapOptions, shared: Shared | None = None, streamed: bool = False
) -> GapReport:
    """Select busy activities; compute per-stream, per-device, transition and gap figures.
    ``shared``: the name ranks, launches and, when every row is selected, the device usage
    and gaps, when the caller has them already. ``streamed``: the transitions are made as
    they are read (every one of 10^6 pairs, for a report of them all).

    Row-sized arrays are made one after another and dropped as soon as they are used: on a
    4 GB trace each costs 2-18 MB, and those alive together set the peak memory.
    """
    check_options(options)
    mask, notes = _selection(events, options)
    every = bool(mask.all())
    rows = positions_where(mask)
    del mask
    if shared is None:  # names ranked and launches looked up only where needed
        rank: np.ndarray | None = None
        launch: np.ndarray | None = None
    else:
        rank, launch = shared.rank, shared.links.launch
    # the stream table first: its row-sized temporaries are gone before the device gaps come
    stream_table = None if options.per_stream else _stream_table(events, rows, options)
    held = [rows]  # device scope: handed over (the streams' own gaps are not made)
    if stream_table is not None:
        del rows
    lent = shared is not None and every and shared.gaps is not None
    if lent:
        assert shared is not None and shared.gaps is not None
        usage, all_device_gaps = shared.usage, shared.gaps
    else:  # the rows freed inside once sorted, when only the call holds them
        usage, all_device_gaps = device_gaps(events, held.pop(), launch, rank)
    del held
    devices = _device_rows(events, usage, all_device_gaps, options.min_gap_ns, launch)
    # every device gap is of positive length: --min-gap 0 keeps them all
    device_kept = None
    if options.min_gap_ns > 0:
        device_kept = all_device_gaps.length() >= options.min_gap_ns
    if stream_table is None:  # the streams' gaps replace the devices' (summed up above)
        del all_device_gaps, device_kept
        streams, gaps, (before, after, signed) = _stream_scope(events, rows, rank, launch, options)
        del rows
        idle_ns = sum(s.idle_ns for s in streams)
        largest = _largest(events, gaps, launch, options.largest)
        lengths = gaps.length()
        del gaps
        pairs = _Pairs.of_arrays(before, after, signed)
        del before, after, signed
    else:
        streams, idle_ns = stream_table, sum(u.idle_ns for u in usage)
        largest = _largest(events, all_device_gaps, launch, options.largest, device_kept)
        if lent:  # the caller's set: the names after and the lengths made a pass at a time
            pairs = _Pairs.of_gaps(events.gpu.name, all_device_gaps)
            lengths = None  # made once the transitions are done
        else:  # ours: the columns the transitions need, the rest of the set let go of
            names = events.gpu.name
            signed = all_device_gaps.length()
            before, after = all_device_gaps.before, all_device_gaps.after
            del all_device_gaps
            pairs = _Pairs.of_arrays(names[before], names[after], signed)
            lengths = _kept(signed, device_kept)
            del before, after, signed, device_kept
    del launch
    shown, distinct = _transitions(events.names, rank, pairs, options, streamed)
    del pairs
    if lengths is None:
        lengths = _kept(all_device_gaps.length(), device_kept)
    return GapReport(
        trace=summarize(events, usage),
        options=options,
        totals=_totals(lengths, idle_ns),
        streams=streams,
        devices=devices,
        histogram=_histogram(lengths, options),
        transitions=shown,
        largest=largest,
        left_out_transitions=distinct - len(shown),
        notes=notes,
        shown_names=_shown_names(events, shown, largest, streamed),
    )


def device_idle(events: TraceEvents, options: GapOptions) -> list[DeviceIdle]:
    """Only the per-device rows of ``analyse_gaps`` (the same figures), without the streams,
    transitions, histogram and largest gaps."""
    check_options(options)
    mask, _ = _selection(events, options)
    rows = positions_where(mask)
    del mask
    usage, gaps = device_gaps(events, rows, None, None, with_before=False)
    del rows
    return _device_rows(events, usage, gaps, options.min_gap_ns, None)


def device_usage(events: TraceEvents, options: GapOptions) -> list[DeviceUsage]:
    """Only the window, busy and idle time of ``device_idle``'s rows (the same figures, in
    the same order), without the gaps: their sort and host waits take about 90 bytes a row
    at once, the union alone about 20."""
    check_options(options)
    mask, _ = _selection(events, options)
    if bool(mask.all()):
        return usage(events)
    return usage(events, positions_where(mask))


def _shown_names(
    events: TraceEvents,
    transitions: Sequence[Transition],
    largest: list[LargestGap],
    streamed: bool = False,
) -> Mapping[str, str]:
    """The displayed name of each name in the tables, decided over every GPU name (with
    ``streamed`` transitions, each found when asked for)."""
    used, _ = dense_ids(events.gpu.name, len(events.names))  # np.unique without a sort
    display = display_names(subset(events.names, used))
    if streamed:
        return display
    listed = {n for t in transitions for n in (t.from_name, t.to_name)}
    listed |= {n for g in largest for n in (g.before, g.after)}
    return {n: display.get(n, n) for n in listed}


def _stream_table(events: TraceEvents, rows: np.ndarray, options: GapOptions) -> list[StreamGaps]:
    """Only the per-stream table: with device gaps, the streams' own gaps are not used. Nor
    is the order of rows tied on (stream, ts, end): the same interval, whichever comes first,
    so no name is ranked."""
    source = _sorted_rows(events, rows, None, by_name=False)  # the GPU row of each, in order
    # their starts and ends taken a pass at a time where needed: 16 B a row not held
    starts, ends = partial(row_starts, events, source), partial(row_ends, events, source)
    stream = events.gpu.stream[source]
    figures = _pair_figures(len(events.streams), stream, starts, ends, options.min_gap_ns)
    u = unions_in_order(
        [stream, events.gpu.ts[:0], ends(slice(None))], holes=False, starts_of=starts
    )
    return _stream_list(events, stream, u, figures)


def _stream_pairs(
    events: TraceEvents, rows: np.ndarray, rank: np.ndarray | None, options: GapOptions
) -> tuple[np.ndarray, ...]:
    """The rows in stream order (their GPU rows, stream, ts, end); the consecutive pairs on
    one stream, their signed gap, and which of them --min-gap keeps."""
    source = _sorted_rows(events, rows, rank)  # the GPU row of each row in stream order
    stream, ts, end = row_columns(events, source)
    pairs = _pairs(stream)
    gap = ts[pairs + 1]
    gap -= end[pairs]
    kept = (gap > 0) & (gap >= options.min_gap_ns)
    return source, stream, ts, end, pairs, gap, kept


def _stream_scope(
    events: TraceEvents,
    rows: np.ndarray,
    rank: np.ndarray | None,
    launch: np.ndarray | None,
    options: GapOptions,
) -> tuple[list[StreamGaps], GapSet, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per stream: the table rows, the positive gaps --min-gap keeps, and every consecutive
    pair as (name before, name after, signed gap) for the transitions."""
    source, stream, ts, end, pairs, gap, kept = _stream_pairs(events, rows, rank, options)
    table = _stream_rows(events, stream, ts, end, options.min_gap_ns)
    del ts
    del end
    at = pairs[kept]
    device_index, _ = device_of_stream(events)
    n, gpu = len(at), events.gpu
    gaps = GapSet(
        device_index[stream[at]],
        source[at],
        source[at + 1],
        np.empty(n, np.int64),
        gpu.ts,
        gpu.dur,
        np.empty(n, bool),
    )
    host_waits(events, launch, gaps)
    name = events.gpu.name[source]
    return table, gaps, (name[pairs], name[pairs + 1], gap)


def _sorted_rows(
    events: TraceEvents, rows: np.ndarray, rank: np.ndarray | None, by_name: bool = True
) -> np.ndarray:
    """The selected GPU rows in (stream, ts, end, name) order (names compared as strings;
    ``rank`` of every name id, or None: only the names of rows tied on (stream, ts) are
    ranked, and the end asked for only there; ``by_name=False``: ties on (stream, ts, end)
    left in row order)."""
    gpu = events.gpu
    ties = end_and_name_ties(events, rows, rank, by_name)
    order = packed_order(gpu.stream, gpu.ts, ties, rows)  # int32 positions, where they fit
    if order is None:
        order = lex_order_of_rows(gpu.stream, gpu.ts, rows, ties)
    return _compact(rows[order], len(gpu.ts))


def _compact(index: np.ndarray, bound: int) -> np.ndarray:
    """Numbers below ``bound`` as int32 when they fit: half the memory of numpy's int64."""
    return index.astype(np.int32, copy=False) if bound < 2**31 else index


def check_options(options: GapOptions) -> None:
    """Reject option values that make no sense (named as ``traceview gaps`` spells them)."""
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
        raise UsageError(f"--gap-top {options.top}: must not be negative (0 shows all)")
    for flag, value in (("--hist-min", options.hist_min_ns), ("--hist-max", options.hist_max_ns)):
        if value is not None and (value < 0 or (value == 0 and not options.linear)):
            kind = "negative" if value < 0 else "zero on a log scale (use --linear)"
            raise UsageError(f"{flag}: must not be {kind}")
    lo, hi = options.hist_min_ns, options.hist_max_ns
    if lo is not None and hi is not None and lo >= hi:
        raise UsageError(f"--hist-min {lo}ns must be below --hist-max {hi}ns")
    check_choice("--gap-sort", options.sort, GapSort)


def _selection(events: TraceEvents, options: GapOptions) -> tuple[np.ndarray, list[str]]:
    """Mask over GPU rows for the busy kinds, streams, devices and steps."""
    selection = Selection(options.busy, options.steps, options.devices, options.streams)
    chosen = select(events, selection)
    return chosen.mask, chosen.notes


def _pairs(stream: np.ndarray) -> np.ndarray:
    """Indices ``i`` of the sorted rows where row ``i + 1`` is on the same stream."""
    return positions_where(stream[1:] == stream[:-1])


def _stream_rows(
    events: TraceEvents, stream: np.ndarray, ts: np.ndarray, end: np.ndarray, min_gap_ns: int
) -> list[StreamGaps]:
    """One StreamGaps per stream present (in trace-value order), all streams at once, from
    the rows in stream order: the unions first, then the gap of each consecutive pair on a
    stream (row-sized temporaries made one after another)."""
    u = unions(stream, ts, end, holes=False, ordered=True)  # the rows are in stream order
    figures = _pair_figures(
        len(events.streams), stream, ts.__getitem__, end.__getitem__, min_gap_ns
    )
    return _stream_list(events, stream, u, figures)


def _pair_figures(
    n: int,
    stream: np.ndarray,
    starts: Callable[[slice], np.ndarray],
    ends: Callable[[slice], np.ndarray],
    min_gap_ns: int,
) -> tuple[np.ndarray, ...]:
    """Per stream id (``n`` of them), from the rows in stream order (``starts``, ``ends``: a
    slice of theirs at a time): the gaps --min-gap keeps and their total, the overlaps and
    theirs, the zero gaps. A pass of consecutive pairs at a time."""
    gaps, gap_ns, overlaps, overlap_ns, zeros = (np.zeros(n, dtype=np.int64) for _ in range(5))
    for lo in range(0, len(stream) - 1, _PASS):
        hi = min(lo + _PASS, len(stream) - 1)
        gap = starts(slice(lo + 1, hi + 1)) - ends(slice(lo, hi))  # i+1's start after i's end
        left = stream[lo:hi]
        pair = left == stream[lo + 1 : hi + 1]  # a pair if on one stream
        kept = pair & (gap > 0) & (gap >= min_gap_ns)
        gaps += np.bincount(left[kept], minlength=n)
        gap_ns = sums.added(gap_ns, _sum_by(left[kept], gap[kept], n))
        over = pair & (gap < 0)
        overlaps += np.bincount(left[over], minlength=n)
        overlap_ns = sums.added(overlap_ns, -_sum_by(left[over], gap[over], n))
        pair &= gap == 0
        zeros += np.bincount(left[pair], minlength=n)
    return gaps, gap_ns, overlaps, overlap_ns, zeros


def _stream_list(
    events: TraceEvents, stream: np.ndarray, u: Unions, figures: tuple[np.ndarray, ...]
) -> list[StreamGaps]:
    """One StreamGaps per stream present, in trace-value order: ``u`` their unions,
    ``figures`` those of _pair_figures, ``stream`` each row's."""
    gaps, gap_ns, overlaps, overlap_ns, zeros = figures
    count = np.bincount(stream, minlength=len(events.streams))
    sid = u.segment
    columns = zip(
        sid.tolist(),
        count[sid].tolist(),
        gaps[sid].tolist(),
        gap_ns[sid].tolist(),
        overlaps[sid].tolist(),
        overlap_ns[sid].tolist(),
        zeros[sid].tolist(),
        (u.last - u.first).tolist(),
        u.busy.tolist(),
        strict=True,
    )
    out = [
        StreamGaps(
            device=events.streams[i].device,
            stream=events.streams[i].stream,
            events=n,
            gaps=g,
            gap_total_ns=g_ns,
            overlaps=o,
            overlap_ns=o_ns,
            zero_gaps=z,
            window_ns=window,
            busy_ns=busy,
            idle_ns=window - busy,
        )
        for i, n, g, g_ns, o, o_ns, z, window, busy in columns
    ]
    out.sort(key=lambda r: (_value_key(r.device), _value_key(r.stream)))
    return out


def _value_key(value: Any) -> tuple[int, Any]:
    """Orders numbers numerically before strings (device/stream values may mix types)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, value)
    return (1, str(value))


def _sum_by(group: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """Exact int64 sums of ``values`` per group."""
    return sums.by_group(group, values, groups)


def _device_rows(
    events: TraceEvents,
    usage: list[DeviceUsage],
    gaps: GapSet,
    min_gap_ns: int,
    launch: np.ndarray | None,
) -> list[DeviceIdle]:
    """Per device: idle of its window, the gaps --min-gap keeps, host wait and launch
    latency over all gaps (``launch`` as for ``launches_of``), a pass of gaps at a time."""
    _, values = device_of_stream(events)
    n = len(values)
    count, total, wait, latency = (np.zeros(n, dtype=np.int64) for _ in range(4))
    for lo in range(0, len(gaps), _PASS):  # a pass's temporaries, not the gaps'
        part = gaps.take(slice(lo, lo + _PASS))
        length = part.end - part.start
        kept = length >= min_gap_ns
        device = part.device if bool(kept.all()) else part.device[kept]
        count += np.bincount(device, minlength=n)
        total = sums.added(total, _sum_by(device, length[kept], n))
        wait = sums.added(wait, _sum_by(part.device, part.host_wait, n))
        latency = sums.added(latency, _sum_by(part.device, launch_latency(events, launch, part), n))
    index = {(type(v), v): i for i, v in enumerate(values)}
    return [
        DeviceIdle(
            device=u.device,
            window_ns=u.window_ns,
            busy_ns=u.busy_ns,
            idle_ns=u.idle_ns,
            idle_pct=u.idle_pct,
            gaps=int(count[i]),
            gap_total_ns=int(total[i]),
            host_wait_ns=int(wait[i]),
            launch_latency_ns=int(latency[i]),
        )
        for u in usage
        for i in (index[(type(u.device), u.device)],)
    ]


_PASS = 1 << 16  # gaps a pass


def _kept(lengths: np.ndarray, kept: np.ndarray | None) -> np.ndarray:
    """The ``lengths`` of the gaps --min-gap keeps (``kept``; None: all)."""
    return lengths if kept is None or bool(kept.all()) else lengths[kept]


def _totals(lengths: np.ndarray, idle_ns: int) -> GapTotals:
    count, total = len(lengths), sums.total(lengths)
    return GapTotals(gaps=count, gap_total_ns=total, idle_ns=idle_ns)


@dataclass(frozen=True)
class _Pairs:
    """Consecutive pairs for the transitions: the name (id) before each gap, and ``part``,
    the names after and the signed gaps of the pairs at some positions."""

    before: np.ndarray
    part: Callable[[np.ndarray | slice], tuple[np.ndarray, np.ndarray]]

    @classmethod
    def of_arrays(cls, before: np.ndarray, after: np.ndarray, gap: np.ndarray) -> _Pairs:
        return cls(before, lambda at: (after[at], gap[at]))

    @classmethod
    def of_gaps(cls, name: np.ndarray, gaps: GapSet) -> _Pairs:
        """The device gaps' pairs: the names before them (4 B a gap) held, the rest made
        for the positions asked."""

        def part(at: np.ndarray | slice) -> tuple[np.ndarray, np.ndarray]:
            some = gaps.take(at)
            return name[some.after], some.length()

        return cls(name[gaps.before], part)


def _transitions(
    names: Sequence[str],
    rank: np.ndarray | None,
    pairs: _Pairs,
    options: GapOptions,
    streamed: bool = False,
) -> tuple[Sequence[Transition], int]:
    """Statistics of the (signed) gap per (name before, name after): the ``options.top`` first
    by the sort field (then the names), and how many pairs there are. Ranked as arrays, so a
    row is built only for the pairs shown, whatever the number of distinct names.

    Pairs are worked out in passes of about _PASS_GAPS gaps, split by the name before (so
    each pair is in one pass): a pass's temporaries are a few times its gaps' size, and the
    first ``top`` of all pairs are among each pass's candidates (the pairs whose sort value
    reaches its ``top``-th). Only the candidates' names are ranked (``rank``: of every name
    id, or None).
    """
    before = pairs.before
    passes = max(1, -(-len(before) // _PASS_GAPS))
    # each pair's pass, worked out once (1 B a gap while fewer than 256 passes)
    bucket = (before % passes).astype(np.min_scalar_type(passes - 1)) if passes > 1 else None
    parts = []
    distinct = 0
    for j in range(passes):
        # the pass's places among all gaps (None: all of them)
        positions = None if bucket is None else positions_where(bucket == j)
        at = slice(None) if positions is None else positions
        after, gap = pairs.part(at)
        pairs_here, part = _pair_stats(len(names), before[at], after, gap, options, positions)
        del after, gap
        distinct += pairs_here
        parts.append(part)
    # each column joined, and its parts freed, before the next (with --gap-top 0 the passes
    # keep every pair: 2.5 M pairs take 20 MB a column)
    by_column = [list(column) for column in zip(*parts, strict=True)]
    del parts
    first, second, value, count, total, low, high, std = map(_joined, by_column)
    both = np.concatenate((first, second))
    ranked = ranks_of(names, both) if rank is None else rank[both]
    order = np.lexsort((ranked[len(first) :], ranked[: len(first)], -value))
    del both, ranked
    chosen = order if options.top == 0 else order[: options.top]
    columns = (first, second, count, total, low, high, std)
    return rows_of(partial(_transition_rows, names, columns), chosen, streamed), distinct


def _transition_rows(
    names: Sequence[str], columns: tuple[np.ndarray, ...], chosen: np.ndarray
) -> list[Transition]:
    """The transitions ``chosen`` (positions in ``columns``), in that order."""
    first, second, count, total, low, high, std = (c[chosen].tolist() for c in columns)
    return [
        Transition(names[f], names[s], n, t, lo, hi, sd)
        for f, s, n, t, lo, hi, sd in zip(first, second, count, total, low, high, std, strict=True)
    ]


_PASS_GAPS = 1 << 18


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    """The parts as one array; the list emptied."""
    joined = np.concatenate(parts) if len(parts) > 1 else parts[0]
    parts.clear()
    return joined


def _pair_stats(
    width: int,
    before: np.ndarray,
    after: np.ndarray,
    gap: np.ndarray,
    options: GapOptions,
    positions: np.ndarray | None = None,
) -> tuple[int, tuple[np.ndarray, ...]]:
    """How many distinct (before, after) name pairs these gaps have, and per pair (those
    whose sort value reaches the ``options.top``-th largest, ties included; all with top 0):
    the names, the sort value, count, total, min, max and standard deviation of the gap.
    ``positions``: the gaps' places among all (a pass of them): each pair's deviation is
    then summed as over all, to the last bit, whatever the passes (moments.accumulate)."""
    width = max(width, 1)
    key: np.ndarray = before.astype(np.int32 if width * width < 2**31 else np.int64)
    key *= width
    key += after
    used, group = dense_ids(key, width * width)
    del key
    stats = moments.accumulate(group, gap, len(used), positions=positions)
    del group
    std = stats.std()
    count, total = stats.count, stats.total
    value = {
        "count": count.astype(np.float64),
        "total_ns": total.astype(np.float64),
        "mean_ns": total / count,
        "min_ns": stats.minimum.astype(np.float64),
        "max_ns": stats.maximum.astype(np.float64),
        "std_ns": std,
    }[_sort_field(options.sort)]
    first, second = used // width, used % width
    columns = (first, second, value, count, total, stats.minimum, stats.maximum, std)
    if options.top == 0 or len(used) <= options.top:
        return len(used), columns
    threshold = np.partition(value, len(value) - options.top)[len(value) - options.top]
    keep = value >= threshold
    return len(used), tuple(column[keep] for column in columns)


def _sort_field(sort: str) -> str:
    """The Transition field a --sort key orders by (largest first)."""
    return _SORT_FIELD[GAP_SORT_ALIASES.get(GapSort(sort), sort)]


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
    below = above = 0
    counts = np.zeros(len(edges) - 1, dtype=np.int64)
    for at in range(0, len(positive), _PASS):  # a pass's temporaries, not the gaps'
        part = positive[at : at + _PASS]
        below += int(np.count_nonzero(part < lo))
        above += int(np.count_nonzero(part > hi))
        inside = part[(part >= lo) & (part <= hi)]
        which = np.searchsorted(edges, inside, side="right") - 1
        np.minimum(which, len(edges) - 2, out=which)
        counts += np.bincount(which, minlength=len(edges) - 1)
    return Histogram("us", (edges / 1000).tolist(), counts.tolist(), below, above)


def _largest(
    events: TraceEvents,
    gaps: GapSet,
    launch: np.ndarray | None,
    n: int,
    kept: np.ndarray | None = None,
) -> list[LargestGap]:
    """The ``n`` longest gaps (all with n = 0) of those ``kept`` (a mask; None: all), longest
    first (ties: earliest first), with the CPU context of each (``launch``: first_launch of
    every GPU row, or None)."""
    index = None if kept is None or bool(kept.all()) else np.flatnonzero(kept)
    if index is None and 0 < n < len(gaps):
        chosen = gaps.take(_longest_in_passes(gaps, n))
    else:
        start = gaps.start
        length = gaps.end - start
        if index is not None:
            length, start = length[index], start[index]
        if len(length) == 0:
            return []
        order = _longest(length, start, n or len(length))
        del length, start
        chosen = gaps.take(order if index is None else index[order])
        del index
    gpu = events.gpu
    latency: list[int] = launch_latency(events, launch, chosen).tolist()
    contexts = cpu_contexts(
        events,
        GapQuery(
            gpu.correlation[chosen.after],
            launches_of(events, launch, chosen.after),
            chosen.start,
            chosen.end,
            chosen.host_wait,
        ),
    )
    origin = events.span_ns[0] if events.span_ns else 0
    out = []
    for start, end, before, after, wait, context, latent in zip(
        chosen.start.tolist(),
        chosen.end.tolist(),
        chosen.before.tolist(),
        chosen.after.tolist(),
        chosen.host_wait.tolist(),
        contexts,
        latency,
        strict=True,
    ):
        key = events.streams[int(gpu.stream[after])]
        out.append(
            LargestGap(
                device=key.device,
                stream=key.stream,
                start_ns=start - origin,
                ts_ns=start,
                gap_ns=end - start,
                before=events.names[int(gpu.name[before])],
                after=events.names[int(gpu.name[after])],
                host_wait_ns=wait,
                context=context,
                launch_latency_ns=latent,
            )
        )
    return out


def _longest_in_passes(gaps: GapSet, n: int) -> np.ndarray:
    """``_longest`` of every gap's length (0 < n < the gaps), a pass of gaps at a time: the
    n first of all are among their pass's candidates (at least its n-th largest length)."""
    candidates = []
    for lo in range(0, len(gaps), _PASS):
        part = gaps.take(slice(lo, lo + _PASS))
        length = part.end
        length -= part.start
        k = len(length) - min(n, len(length))
        found = np.flatnonzero(length >= np.partition(length, k)[k])
        found += lo
        candidates.append(found)
    among = np.concatenate(candidates)
    chosen = gaps.take(among)
    start = chosen.start
    length = chosen.end - start
    picked: np.ndarray = among[_longest(length, start, n)]
    return picked


def _longest(length: np.ndarray, start: np.ndarray, n: int) -> np.ndarray:
    """Indices of the ``n`` largest lengths, largest first, ties by start then index.

    Exactly the head of ``np.lexsort((start, -length))``, sorting only the lengths that can
    be in it (those at least the n-th largest) instead of every gap.
    """
    if n < len(length):
        threshold = np.partition(length, len(length) - n)[len(length) - n]
        candidates = np.flatnonzero(length >= threshold)
    else:
        candidates = np.arange(len(length))
    return candidates[np.lexsort((start[candidates], -length[candidates]))][:n]


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
    "check_options",
    "device_idle",
    "device_usage",
]
