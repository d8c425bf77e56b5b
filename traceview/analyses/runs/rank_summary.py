"""What one rank of a run contributes: a small summary worked out next to its columns.

A worker reads a rank's file (the per-file reader and cache) and keeps only this: per kernel
name mergeable Moments and a quantile sketch, the devices' busy and idle time, communication
time, exposed communication, the median step time and the communication kernels (for the
collectives). Definitions in docs/metrics.md ("Several ranks"). Times in ns; a rank's
timestamps are moved to epoch time with ``baseTimeNanoseconds`` when its header has it, so
ranks compare on one clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from traceview.aggregate import moments, sketch, sums
from traceview.aggregate.intervals import unions
from traceview.aggregate.order import dense_ids
from traceview.aggregate.percentiles import nearest_rank
from traceview.analyses.core.devices import (
    DeviceUsage,
    device_gaps,
    device_of_stream,
    positive,
    usage,
)
from traceview.analyses.core.steps import StepRow, step_table
from traceview.analyses.core.trace import TraceSummary, summarize
from traceview.analyses.kernels import KernelOptions, KernelReport, analyse_kernels, selection
from traceview.analyses.runs import bandwidth
from traceview.analyses.runs.comm_meta import kernel_meta, ops_would_add
from traceview.analyses.snapshot import Snapshot, build_snapshot
from traceview.choices import KernelGroupBy
from traceview.columns.model import TraceEvents
from traceview.columns.schema import KERNEL

COMMUNICATION = re.compile(r"nccl|rccl", re.IGNORECASE)


@dataclass(frozen=True)
class KernelStats:
    """Per kernel name: Moments and the quantile sketch of the durations (ns)."""

    names: list[str]
    moments: moments.Moments
    sketch: sketch.Sketch


@dataclass(frozen=True)
class CommKernels:
    """A rank's communication kernels in start order (ties: trace order): the index of the
    name in ``names``, start (ns, epoch when the header gives the base) and duration (ns); and
    what the trace says of their collective (traceview.analyses.runs.comm_meta): the index of its
    (process group, collective name) in ``groups``, its sequence number, its size S in bytes
    (traceview.analyses.runs.bandwidth) and the number of ranks in its group (−1: not said)."""

    names: list[str]
    name: np.ndarray
    start: np.ndarray
    dur: np.ndarray
    groups: list[tuple[str, str]]
    group: np.ndarray
    seq: np.ndarray
    bytes: np.ndarray
    members: np.ndarray


@dataclass(frozen=True)
class GapFigures:
    """The device gaps of every device of a set of ranks (ns): Moments and the sketch of
    their lengths (one group), the host wait summed."""

    lengths: moments.Moments
    sketch: sketch.Sketch
    host_wait_ns: int


@dataclass(frozen=True)
class RankSummary:
    """One rank of a run: everything the multi-rank commands need from its file."""

    rank: int
    path: str
    size_bytes: int
    kernels: int
    kernel_time_ns: int
    stats: KernelStats  # over the kernels selected by the kernel options
    devices: list[DeviceUsage]
    comm_ns: int
    exposed_comm_ns: int
    median_step_ns: int | None
    comm: CommKernels
    steps: tuple[tuple[int, int, int], ...] = ()  # (step, CPU duration, kernel time) ns
    gaps: GapFigures | None = None
    report: KernelReport | None = None  # the per-file kernels table, when asked for
    step_report: tuple[TraceSummary, list[StepRow]] | None = None  # the per-file steps table
    snapshot: Snapshot | None = None  # the one-file snapshot, for a run snapshot
    warnings: tuple[str, ...] = ()

    @property
    def busy_ns(self) -> int:
        return sum(d.busy_ns for d in self.devices)

    @property
    def idle_ns(self) -> int:
        return sum(d.idle_ns for d in self.devices)

    @property
    def busy_pct(self) -> float:
        window = sum(d.window_ns for d in self.devices)
        return 100.0 * self.busy_ns / window if window else 0.0


def summarize_rank(
    events: TraceEvents,
    rank: int,
    options: KernelOptions | None = None,
    report: bool = False,
    snapshot: bool = False,
) -> RankSummary:
    """The summary of one rank's events; with ``report`` also its per-file kernels and steps
    tables, with ``snapshot`` its one-file snapshot."""
    options = options or KernelOptions()
    gpu = events.gpu
    rows = step_table(events)
    kernel = np.flatnonzero(gpu.kind == KERNEL)
    comm = _is_comm(events)[gpu.name[kernel]] if len(kernel) else np.zeros(0, dtype=bool)
    return RankSummary(
        rank=rank,
        path=events.path,
        size_bytes=events.size_bytes,
        kernels=len(kernel),
        kernel_time_ns=sums.total(gpu.dur[kernel]),
        stats=kernel_stats(events, options),
        devices=usage(events, np.arange(len(gpu.ts))),
        comm_ns=sums.total(gpu.dur[kernel[comm]]),
        exposed_comm_ns=exposed_ns(events, kernel, comm),
        median_step_ns=median_step_ns(rows),
        comm=comm_kernels(events, kernel[comm]),
        steps=tuple((r.step, r.cpu_end_ns - r.cpu_start_ns, r.kernel_time_ns) for r in rows),
        gaps=gap_figures(events),
        report=analyse_kernels(events, options) if report else None,
        step_report=(summarize(events), rows) if report else None,
        snapshot=build_snapshot(events) if snapshot else None,
    )


def needs_cpu_rows(events: TraceEvents) -> bool:
    """Whether the rank's communication kernels lack metadata that CPU ops of a read without
    CPU rows carry (so the rank is read again with them, to link each kernel to its op)."""
    kernel = np.flatnonzero(events.gpu.kind == KERNEL)
    comm = _is_comm(events)[events.gpu.name[kernel]] if len(kernel) else kernel.astype(bool)
    return ops_would_add(events, kernel[comm])


def kernel_stats(events: TraceEvents, options: KernelOptions) -> KernelStats:
    """Moments and sketch per name of the GPU rows the kernel options select."""
    mask, _ = selection(events, replace(options, group_by=KernelGroupBy.NAME))
    used, group = dense_ids(events.gpu.name[mask], len(events.names))
    dur = events.gpu.dur[mask]
    return KernelStats(
        names=[events.names[i] for i in used.tolist()],
        moments=moments.accumulate(group, dur, len(used)),
        sketch=sketch.of_values(group, dur),
    )


def gap_figures(events: TraceEvents) -> GapFigures:
    """The device gaps of all GPU activity (the ``gaps`` command's default busy events)."""
    _, gaps = device_gaps(events, np.arange(len(events.gpu.ts)), None, None, with_before=False)
    length = gaps.end - gaps.start
    one = np.zeros(len(length), dtype=np.int64)
    return GapFigures(
        moments.accumulate(one, length, 1),
        sketch.of_values(one, length),
        sums.total(gaps.host_wait),
    )


def merge_gaps(a: GapFigures, b: GapFigures) -> GapFigures:
    """The gap figures of both."""
    return GapFigures(
        moments.merge(a.lengths, b.lengths),
        sketch.merge(a.sketch, b.sketch),
        a.host_wait_ns + b.host_wait_ns,
    )


def exact_percentiles(events: TraceEvents, options: KernelOptions) -> dict[int, np.ndarray]:
    """Exact nearest-rank p50/p90/p99 per name, in ``kernel_stats``' name order (tests)."""
    mask, _ = selection(events, replace(options, group_by=KernelGroupBy.NAME))
    used, group = dense_ids(events.gpu.name[mask], len(events.names))
    return nearest_rank(group, events.gpu.dur[mask], len(used), (50, 90, 99))


def _is_comm(events: TraceEvents) -> np.ndarray:
    """Per name id: whether it is a communication kernel's (contains nccl or rccl, any case)."""
    return np.array([COMMUNICATION.search(n) is not None for n in events.names], dtype=bool)


def exposed_ns(events: TraceEvents, kernel: np.ndarray, comm: np.ndarray) -> int:
    """Σ over devices of the time covered by communication kernels and by no other kernel:
    |U(all kernels)| − |U(other kernels)| per device."""
    every = positive(events, kernel)
    others = positive(events, kernel[~comm])
    return _busy(events, every) - _busy(events, others)


def _busy(events: TraceEvents, rows: np.ndarray) -> int:
    device, _ = device_of_stream(events)
    ts = events.gpu.ts[rows]
    u = unions(device[events.gpu.stream[rows]], ts, ts + events.gpu.dur[rows])
    return sums.total(u.busy)


def median_step_ns(rows: list[StepRow]) -> int | None:
    """The nearest-rank median of the CPU step durations; None without steps."""
    if not rows:
        return None
    durations = sorted(r.cpu_end_ns - r.cpu_start_ns for r in rows)
    return durations[(len(durations) + 1) // 2 - 1]


def comm_kernels(events: TraceEvents, rows: np.ndarray) -> CommKernels:
    """The communication kernels among ``rows``, in (start, row) order, on the epoch clock,
    with their collectives' metadata."""
    gpu = events.gpu
    start = gpu.ts[rows] + time_base_ns(events.header)
    order = np.lexsort((rows, start))
    rows = rows[order]
    used, name = dense_ids(gpu.name[rows], len(events.names))
    meta = kernel_meta(events, rows)
    groups, group = _groups(events.comm_keys, meta.key)
    size = bandwidth.element_bytes([dtype for _, _, dtype in events.comm_keys] + [""])
    return CommKernels(
        names=[events.names[i] for i in used.tolist()],
        name=name,
        start=start[order],
        dur=gpu.dur[rows],
        groups=groups,
        group=group,
        seq=meta.seq,
        bytes=bandwidth.message_bytes(meta.in_nelems, meta.out_nelems, size[meta.key]),
        members=meta.group_size,
    )


def _groups(
    keys: list[tuple[str, str, str]], key: np.ndarray
) -> tuple[list[tuple[str, str]], np.ndarray]:
    """The distinct (process group, collective) of the keys used, sorted, and the index of
    each kernel's (−1 for key −1)."""
    used = np.unique(key[key >= 0])
    groups = sorted({keys[k][:2] for k in used.tolist()})
    index = {pair: i for i, pair in enumerate(groups)}
    of_key = np.full(len(keys) + 1, -1, np.int64)  # the last: key −1
    for k in used.tolist():
        of_key[k] = index[keys[k][:2]]
    return groups, of_key[key]


def time_base_ns(header: dict[str, Any]) -> int:
    """``baseTimeNanoseconds`` when the header has it as an integer, else 0 (the trace's ts
    are then epoch µs already)."""
    base = header.get("baseTimeNanoseconds")
    return base if isinstance(base, int) and not isinstance(base, bool) else 0
