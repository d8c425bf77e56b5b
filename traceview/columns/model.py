"""What a read gives the analyses: one trace as columns (TraceEvents) and what comes with them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np

from traceview.columns import allocations, comms
from traceview.columns.comms import CommKey, no_comms, threadless
from traceview.columns.cpu_rows import CpuRows, KindOrdered, Renumbered, from_parts
from traceview.columns.frames import renumbered_flows, renumbered_frames
from traceview.columns.packed_names import PackedNames
from traceview.columns.schema import (
    GPU_LAUNCH,
    CommColumns,
    Dropped,
    FlowColumns,
    FrameColumns,
    GpuColumns,
    MemoryColumns,
    RuntimeColumns,
    dropped,
    empty,
    from_arrays,
    unused_of,
)
from traceview.read.reader import ReadStats as ReadStats  # part of the trace model

STEP_PREFIX = "ProfilerStep#"


@dataclass(frozen=True)
class StepWindow:
    """One ``ProfilerStep#N`` annotation (or a serving framework's step marker, see
    analyses.core.step_markers): [start, end] in ns, from the CPU or the GPU side; a marker's
    own name, phase, batch size and token count when it says them."""

    step: int
    start_ns: int
    end_ns: int
    on_gpu: bool
    label: str = ""  # the marker's name ("" for ProfilerStep#N)
    phase: str = ""  # prefill, decode, mixed, capture, warmup, unknown ("": not known yet)
    batch: int | None = None
    tokens: int | None = None
    cut: bool = False  # the trace ends inside it (analyses.core.step_markers.step_phases)


@dataclass(frozen=True)
class DataChecks:
    """What can mislead in the GPU rows, as numbers (integer ns); the warnings' wording is
    built from them for each report (traceview.analyses.core.quality), never stored."""

    overlaps: int = 0  # activities that start before the previous one on their stream ends
    overlap_max_ns: int = 0
    zero_durations: int = 0
    no_launches: bool = False  # GPU rows but not one runtime launch event
    missing_launches: int = 0  # GPU rows whose correlation id no launch carries
    long_activities: int = 0  # longer than analyses.quality.SUSPICIOUS_NS
    longest_ns: int = 0


@dataclass(frozen=True)
class TraceFacts:
    """What the summary of every report says about the data, worked out once per trace
    (it takes a pass over all GPU rows) and kept in the cache: data-quality checks and
    whether timestamps carry ns (``ns``) or whole µs (``us``)."""

    checks: DataChecks
    time_resolution: str


class StreamKey(NamedTuple):
    """One GPU stream: the trace's own device and stream values (numbers stay numbers)."""

    device: Any
    stream: Any


@dataclass(frozen=True)
class TraceEvents:
    """Everything the analyses need from one trace, in memory-light columns."""

    path: str
    size_bytes: int
    header: dict[str, Any]
    read: ReadStats
    names: Sequence[str]  # by name id; a PackedNames when read (traceview.columns.packed_names)
    streams: list[StreamKey]  # by stream id
    gpu: GpuColumns
    runtime: RuntimeColumns
    steps: list[StepWindow]
    span_ns: tuple[int, int] | None
    quality: Counter[str]
    # Runtime calls and CPU ops, for explaining GPU gaps (empty unless asked for).
    cpu: CpuRows = field(default_factory=CpuRows)
    threads: list[tuple[Any, Any]] = field(default_factory=list)
    facts: TraceFacts | None = None  # None: not worked out yet (see analyses.summary)
    # The part of ``quality`` that comes from CPU ops (counted only when CPU rows are kept).
    cpu_quality: Counter[str] = field(default_factory=Counter)
    # Launch configurations (grid, block, ...; see traceview.columns.launches) by id.
    launches: list[tuple[int, ...]] = field(default_factory=list)
    # The distinct (Input Dims, Input type, Concrete Inputs) of CPU ops, as raw JSON text
    # (b"" when absent); a CPU row's ``shape`` indexes it.
    shapes: list[tuple[bytes, bytes, bytes]] = field(default_factory=list)
    # A collective's metadata (traceview.columns.comms): a row per kernel or CPU op carrying
    # it (none in most traces); a row's ``key`` indexes ``comm_keys``.
    comms: CommColumns = field(default_factory=no_comms)
    comm_keys: list[CommKey] = field(default_factory=list)
    # The caching allocator's ``[memory]`` events (traceview.columns.allocations), a row each
    # (none in a trace recorded without profile_memory).
    memory: MemoryColumns = field(default_factory=allocations.no_memory)
    # Python frames and fwdbwd flows (``source``), a row each; read only when asked for
    # (``frames_read``): a read that did not look for them has none, whatever the trace holds.
    frames: FrameColumns = field(default_factory=lambda: empty(FrameColumns))
    flows: FlowColumns = field(default_factory=lambda: empty(FlowColumns))
    frames_read: bool = False
    # Of the frames read, those shorter than this (ns) were left out (summary's read: its
    # host-stall hint looks at no shorter one); 0: every frame.
    frames_from_ns: int = 0


def without_frames(events: TraceEvents) -> TraceEvents:
    """Exactly what a read that does not look for frames gives."""
    if not events.frames_read:
        return events
    return replace(
        events,
        frames=empty(FrameColumns),
        flows=empty(FlowColumns),
        frames_read=False,
        frames_from_ns=0,
    )


def flows_for_frames(events: TraceEvents) -> TraceEvents:
    """``events`` without their fwdbwd flows when they hold no python frame: a flow only
    leads a kernel to a frame (traceview.analyses.source_flows), so none is read then (the
    H200 big trace's copies: 44 MB of flows, no frame)."""
    if len(events.frames.ts) or not len(events.flows.flow):
        return events
    return replace(events, flows=empty(FlowColumns))


def without_columns(events: TraceEvents, unused: frozenset[str]) -> TraceEvents:
    """``events`` as a read that leaves ``unused`` out (schema.DROPPABLE) gives them: each
    such column Dropped, of its length, and without the launch ids no launch configuration
    (such a read interns none)."""
    groups = {}
    for field_name in sorted({c.partition(".")[0] for c in unused}):
        group = getattr(events, field_name)
        groups[field_name] = replace(
            group,
            **{
                name: dropped(getattr(group, name).dtype, len(getattr(group, name)))
                for name in unused_of(field_name, unused)
            },
        )
    launches = [] if GPU_LAUNCH in unused else events.launches
    return replace(events, launches=launches, **groups)


def without_cpu(events: TraceEvents) -> TraceEvents:
    """Exactly what reading the trace without CPU rows gives: no CPU rows, threads, frames or
    the counters of CPU-op problems, and names renumbered as such a read interns them (GPU
    names in order of first use)."""
    events = without_frames(events)
    name = events.gpu.name
    first = np.full(len(events.names), len(name), dtype=np.int64)
    np.minimum.at(first, name, np.arange(len(name)))  # each name's first row, without a sort
    used = np.flatnonzero(first < len(name))
    order = used[np.argsort(first[used], kind="stable")]
    new_id = np.full(len(events.names), -1, dtype=np.int32)
    new_id[order] = np.arange(len(order), dtype=np.int32)
    return replace(
        events,
        gpu=replace(events.gpu, name=new_id[events.gpu.name]),
        names=PackedNames.of(events.names).take(order),
        quality=events.quality - events.cpu_quality,
        cpu_quality=Counter(),
        cpu=CpuRows(),
        threads=[],
        shapes=[],
        comms=threadless(events.comms),
        memory=allocations.threadless(events.memory),
    )


def canonical(events: TraceEvents) -> TraceEvents:
    """``events`` as no read strategy shapes them: each table of values (names, threads,
    launches, shapes, collective keys) sorted and every id renumbered to match (a read split
    in two processes interns the second part's values first, one read in order the first
    part's; the streams a read sorts itself), and the CPU rows grouped by kind
    (cpu_rows.KindOrdered: their order in a read follows its chunks). What ``export`` writes
    and ``events()`` gives."""
    names = order_of(list(events.names), plain=True)
    threads, launches = order_of(events.threads), order_of(events.launches)
    shapes, keys = order_of(events.shapes, plain=True), order_of(events.comm_keys, plain=True)
    name_of, thread_of, launch_of, shape_of, key_of = map(
        _inverse, (names, threads, launches, shapes, keys)
    )
    gpu = events.gpu
    launch = gpu.launch if isinstance(gpu.launch, Dropped) else launch_of[gpu.launch]
    return replace(
        events,
        names=PackedNames.of(events.names).take(names),
        threads=[events.threads[i] for i in threads],
        launches=[events.launches[i] for i in launches],
        shapes=[events.shapes[i] for i in shapes],
        comm_keys=[events.comm_keys[i] for i in keys],
        gpu=replace(gpu, name=name_of[gpu.name], launch=launch),
        cpu=from_parts([KindOrdered(Renumbered(events.cpu, thread_of, name_of, shape_of))]),
        comms=from_arrays(CommColumns, comms.renumbered(events.comms, key_of, thread_of)),
        memory=from_arrays(MemoryColumns, allocations.renumbered(events.memory, thread_of)),
        frames=from_arrays(FrameColumns, renumbered_frames(events.frames, thread_of, name_of)),
        flows=from_arrays(FlowColumns, renumbered_flows(events.flows, thread_of)),
    )


def order_of(values: Sequence[Any], plain: bool = False) -> np.ndarray:
    """The positions of ``values`` in sorted order: by the values themselves if ``plain``
    (all text, or all tuples of text or of bytes), else by value_key."""
    key = (lambda i: values[i]) if plain else (lambda i: value_key(values[i]))
    return np.array(sorted(range(len(values)), key=key), dtype=np.int64)


def value_key(value: Any) -> tuple[Any, ...]:
    """A total order over the JSON values a trace's tables hold (None, bools, numbers, text
    and tuples of them): by kind, then value; an int before the float equal to it."""
    if value is None:
        return (0,)
    if isinstance(value, bool):
        return (1, int(value))
    if isinstance(value, int | float):
        return (2, value, isinstance(value, float))
    if isinstance(value, str):
        return (3, value)
    if isinstance(value, bytes):
        return (4, value)
    return (5, tuple(value_key(v) for v in value))


def _inverse(order: np.ndarray) -> np.ndarray:
    """The new id of each old one, when the old ids are put in ``order`` (int32)."""
    new = np.empty(len(order), dtype=np.int32)
    new[order] = np.arange(len(order), dtype=np.int32)
    return new
