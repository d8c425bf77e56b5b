"""A snapshot: the small, versioned JSON summary of a trace that ``traceview diff`` compares.

It stores what a diff needs and nothing else: whole-trace totals, per-device idle and
per-kernel statistics; per ProfilerStep its duration, kernel count, kernel time and device idle;
and per kernel its count and time in every step, so that ``diff`` can take per-step medians and
apply ``--pstep`` to a snapshot exactly as to a trace. ``diff`` turns a trace into a snapshot in
memory first, so trace-vs-trace, trace-vs-snapshot and snapshot-vs-snapshot agree.

Size. Kernel names dominate: real traces have 10–200 distinct kernels (the largest in
../shared/traces has 194), so up to ``MAX_KERNELS`` every kernel is stored. Beyond that, the
largest kernels covering ``COVER`` of the kernel time are stored (at least ``MAX_KERNELS``) and
the rest are summed in ``other`` with a 12-hex-digit digest of each name, so ``diff`` can tell a
kernel below this snapshot's cut from a new one. At most ``MAX_STORED`` are stored whatever they
cover: with 10^5 distinct names (compiled models) their step arrays would take gigabytes.
Per-step arrays cost kernels × steps numbers, so the last ``MAX_STEPS`` steps are kept (warm-up
comes first); whole-trace figures always cover everything. Times are µs rounded to the ns.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from traceview import __version__
from traceview.aggregate import sums
from traceview.analyses.core.fused import fused_op_shares, fusion_leaf
from traceview.analyses.core.oplinks import link_ops
from traceview.analyses.core.step_parts import StepParts, step_parts
from traceview.analyses.core.steps import StepRow, StepRows, Window, step_table, step_windows
from traceview.analyses.core.trace import TraceSummary
from traceview.analyses.gaps import GapOptions, device_usage
from traceview.analyses.kernels import (
    KernelOptions,
    KernelReport,
    KernelRow,
    analyse_kernels,
    launching_op_groups,
)
from traceview.choices import KernelGroupBy, KernelSort
from traceview.columns.model import TraceEvents
from traceview.columns.packed_names import subset
from traceview.columns.schema import KERNEL

KIND = "traceview-snapshot"
SCHEMA_VERSION = 2
MAX_KERNELS = 200
COVER = 0.999
MAX_STORED = 2000
MAX_STEPS = 100


@dataclass(frozen=True)
class Totals:
    """Whole-trace kernel figures; ``gpu_busy_us`` and ``idle_us`` = the devices' busy and
    idle time summed, ``gpu_busy_pct`` = summed busy / summed device windows × 100."""

    count: int
    total_us: float
    distinct: int
    gpu_busy_us: float
    gpu_busy_pct: float
    idle_us: float


@dataclass(frozen=True)
class DeviceStat:
    """Idle time of one device, as ``traceview gaps`` reports it (busy: kernel, memcpy, memset)."""

    device: Any
    window_us: float
    busy_us: float
    idle_us: float
    idle_pct: float


@dataclass(frozen=True)
class StepDeviceStat:
    """A step's GPU work on one device, as ``traceview steps`` reports it."""

    device: Any
    window_us: float
    busy_us: float
    idle_us: float
    busy_pct: float
    lag_us: float


@dataclass(frozen=True)
class StepStat:
    """One ProfilerStep: duration, kernels launched in it, their time, and its device figures:
    ``idle_us`` = the devices' idle summed, ``gpu_busy_pct`` = summed busy / summed windows."""

    step: int
    duration_us: float
    kernels: int
    kernel_time_us: float
    idle_us: float
    gpu_busy_pct: float
    gpu_only: bool
    devices: tuple[StepDeviceStat, ...] = ()
    step_time_us: float | None = None  # GPU-paced where the GPU set the pace (None: older files)


@dataclass(frozen=True)
class KernelStat:
    """Whole-trace statistics of one kernel name, and its count and time in each stored step."""

    name: str
    count: int
    total_us: float
    mean_us: float
    std_us: float
    min_us: float
    max_us: float
    p50_us: float
    p90_us: float
    p99_us: float
    step_counts: tuple[int, ...]
    step_totals_us: tuple[float, ...]


@dataclass(frozen=True)
class OtherKernels:
    """The kernels below the storage cut, summed; ``digests`` identify their names."""

    kernels: int
    count: int
    total_us: float
    step_counts: tuple[int, ...]
    step_totals_us: tuple[float, ...]
    digests: tuple[str, ...]


@dataclass(frozen=True)
class SnapshotTrace:
    """The ``trace`` object: the file and what every output's header says of it (the keys of
    TraceSummary.as_dict; all but ``path`` may be absent from older snapshots)."""

    path: str
    size_bytes: int = 0
    events_read: int = 0
    span_us: float = 0.0
    span_start_us: float = 0.0
    device_count: int = 0
    devices: tuple[dict[str, Any], ...] = ()
    streams: int = 0
    device_names: tuple[str, ...] = ()
    header: dict[str, Any] = field(default_factory=dict)
    time_resolution: str = "us"
    warnings: tuple[str, ...] = ()

    @classmethod
    def of(cls, summary: TraceSummary) -> SnapshotTrace:
        d = summary.as_dict()
        return cls(
            **{
                **d,
                "devices": tuple(d["devices"]),
                "device_names": summary.device_names,
                "warnings": summary.warnings,
            }
        )


@dataclass(frozen=True)
class Snapshot:
    """The snapshot document (``schema_version`` 2); ``steps`` align with the step arrays;
    traceview.app.snapshot_file writes and reads it."""

    kind: str
    schema_version: int
    traceview_version: str
    trace: SnapshotTrace
    totals: Totals
    devices: tuple[DeviceStat, ...]
    steps: tuple[StepStat, ...]
    steps_left_out: int
    kernels: tuple[KernelStat, ...]
    other: OtherKernels
    ops: tuple[KernelStat, ...] = ()  # by launching op (diff --group-by op); () when not made
    fused_ops: tuple[KernelStat, ...] = ()  # by fused op (diff --group-by fused-op); () likewise
    step_parts: tuple[StepParts, ...] = ()  # per step its time in parts (diff --explain)


_DIGEST_BYTES = 6


def digest(name: str) -> str:
    """A short, stable identifier of a kernel name."""
    data = name.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=_DIGEST_BYTES).hexdigest()


def build_snapshot(
    events: TraceEvents,
    max_kernels: int = MAX_KERNELS,
    max_steps: int = MAX_STEPS,
    max_stored: int = MAX_STORED,
    ops: bool = False,
    fused: bool = False,
    parts: bool = False,
) -> Snapshot:
    """Summarise a read trace (kernels only; idle counts kernel, memcpy and memset as busy);
    with ``ops`` (a trace read with its CPU rows), the kernels by launching op too; with
    ``fused``, by fused op (analyses.core.fused: Inductor kernels shared among their ops);
    with ``parts``, each step's time in parts (analyses.core.step_parts, diff --explain)."""
    # Rows only for the kernels that can be stored: with 10^6 names, a row each costs seconds.
    # A snapshot stores full names only: no display names (a pass over every distinct name).
    report = analyse_kernels(
        events,
        KernelOptions(sort=KernelSort.TOTAL, top=max(max_kernels, max_stored)),
        shown_names=False,
    )
    devices = device_usage(events, GapOptions())
    windows = step_windows(events)
    kept = list(windows)[max(len(windows) - max_steps, 0) :]  # the last max_steps steps
    steps = step_table(events, {n: windows[n] for n in kept})
    stored = _stored(report, max_kernels, max_stored)
    slot, digests = _slots_and_digests(events, [r.name for r in stored])
    n = len(events.gpu.ts)
    rows_by = StepRows(events, np.arange(n, dtype=np.int32 if n < 2**31 else np.int64))
    step_rows = (rows_by.within(windows[s.step]) for s in steps)  # views, one at a time
    of_rows = partial(_name_slots, slot, events.gpu.name)
    counts, totals = _step_sums(events, step_rows, len(steps), of_rows, len(stored))
    by_op = _op_stats(events, rows_by, [windows[s.step] for s in steps]) if ops else ()
    by_fused = _fused_stats(events, rows_by, [windows[s.step] for s in steps]) if fused else ()
    split = tuple(step_parts(events, steps, [windows[s.step] for s in steps])) if parts else ()
    del slot, of_rows, rows_by, step_rows
    return Snapshot(
        kind=KIND,
        schema_version=SCHEMA_VERSION,
        traceview_version=__version__,
        trace=SnapshotTrace.of(report.trace),
        totals=Totals(
            count=report.count,
            total_us=report.total_ns / 1000,
            distinct=report.distinct,
            gpu_busy_us=report.gpu_busy_ns / 1000,
            gpu_busy_pct=round(report.gpu_busy_pct, 3),
            idle_us=sum(d.idle_ns for d in devices) / 1000,
        ),
        devices=tuple(
            DeviceStat(
                d.device,
                d.window_ns / 1000,
                d.busy_ns / 1000,
                d.idle_ns / 1000,
                round(d.idle_pct, 3),
            )
            for d in devices
        ),
        steps=tuple(_step_stat(row) for row in steps),
        steps_left_out=len(windows) - len(steps),
        kernels=tuple(kernel_stat(row, counts[:, i], totals[:, i]) for i, row in enumerate(stored)),
        other=OtherKernels(
            kernels=report.distinct - len(stored),
            count=report.count - sum(r.count for r in stored),
            total_us=(report.total_ns - sum(r.total_ns for r in stored)) / 1000,
            step_counts=tuple(counts[:, -1].tolist()),
            step_totals_us=tuple((totals[:, -1] / 1000).tolist()),
            digests=_digest_texts(digests),  # made last: the rest is freed by now
        ),
        ops=by_op,
        fused_ops=by_fused,
        step_parts=split,
    )


def _name_slots(slot: np.ndarray, names: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The columns of kernel ``rows`` by their names (``slot``: per name id)."""
    out: np.ndarray = slot[names[rows]]
    return out


def _op_stats(
    events: TraceEvents, rows_by: StepRows, windows: list[Window]
) -> tuple[KernelStat, ...]:
    """Every launching op's row (analyses.kernels ``--group-by op``) with its count and time
    in each step."""
    report = analyse_kernels(
        events, KernelOptions(sort=KernelSort.TOTAL, top=0, group_by=KernelGroupBy.OP)
    )
    kernels = events.gpu.kind == KERNEL
    labels, group = launching_op_groups(events, kernels)
    rows = list(report.rows)
    column = {row.name: i for i, row in enumerate(rows)}
    slot = np.full(len(events.gpu.ts), len(rows), dtype=np.int64)
    slot[kernels] = np.array([column[label] for label in labels], dtype=np.int64)[group]
    step_rows = (rows_by.within(w) for w in windows)
    counts, totals = _step_sums(events, step_rows, len(windows), lambda r: slot[r], len(rows))
    return tuple(kernel_stat(row, counts[:, i], totals[:, i]) for i, row in enumerate(rows))


def _fused_stats(
    events: TraceEvents, rows_by: StepRows, windows: list[Window]
) -> tuple[KernelStat, ...]:
    """Every fused op's row (analyses.kernels ``--group-by fused-op``) with its count and
    time (the shares of the kernels it ran in) in each step."""
    report = analyse_kernels(
        events, KernelOptions(sort=KernelSort.TOTAL, top=0, group_by=KernelGroupBy.FUSED_OP)
    )
    rows = list(report.rows)
    column = {row.name: i for i, row in enumerate(rows)}
    member, owner = rows_by.members(windows)
    kernel = events.gpu.kind[member] == KERNEL
    member, owner = member[kernel], owner[kernel]
    leaf = (
        fusion_leaf(events, link_ops(events, with_top=False), member)
        if len(events.cpu)
        else np.full(len(member), -1)
    )
    shares = fused_op_shares(events, member, leaf)
    of_label = np.array([column.get(x, len(rows)) for x in shares.labels] + [len(rows)])
    col = of_label[shares.label]
    step = owner[shares.row]
    counts = np.zeros((len(windows), len(rows) + 1), dtype=np.int64)
    totals = np.zeros((len(windows), len(rows) + 1), dtype=np.int64)
    np.add.at(counts, (step, col), 1)
    np.add.at(totals, (step, col), shares.share)
    return tuple(kernel_stat(row, counts[:, i], totals[:, i]) for i, row in enumerate(rows))


def _stored(report: KernelReport, max_kernels: int, max_stored: int) -> list[KernelRow]:
    """The rows (largest total first) kept by name: all, or those covering COVER of the time;
    never more than ``max_stored`` (``report`` has at least the rows to store)."""
    rows = report.rows
    if report.distinct <= max_kernels:
        return list(rows)
    need = COVER * report.total_ns
    covered, keep = 0, 0
    while keep < min(len(rows), max_stored) and (keep < max_kernels or covered < need):
        covered += rows[keep].total_ns
        keep += 1
    return list(rows[:keep])


def _slots_and_digests(events: TraceEvents, stored: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """In one pass over the kernel names (each decoded once): per name id, the column of its
    stored kernel (``len(stored)``: ``other``), and the digests of the names not stored, as
    sorted integers (8 bytes each, not a string each: 10^6 names would hold ~70 MB)."""
    gpu = events.gpu
    used = np.flatnonzero(np.bincount(gpu.name[gpu.kind == KERNEL], minlength=len(events.names)))
    column = {name: i for i, name in enumerate(stored)}
    slot = np.full(len(events.names), len(stored), dtype=np.int64)

    def hidden() -> Iterator[int]:
        for name_id, name in zip(used.tolist(), subset(events.names, used), strict=True):
            at = column.get(name)
            if at is None:
                yield _digest_number(name)
            else:
                slot[name_id] = at

    digests = np.fromiter(hidden(), dtype=np.uint64)
    digests.sort()
    return slot, digests


def _digest_number(name: str) -> int:
    """``digest(name)`` as the integer its hex digits spell."""
    data = name.encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=_DIGEST_BYTES).digest(), "big")


def _digest_texts(numbers: np.ndarray) -> tuple[str, ...]:
    """Digests as ``digest`` writes them, from ``_digest_number``'s integers (order kept)."""
    return tuple(f"{n:0{2 * _DIGEST_BYTES}x}" for n in numbers.tolist())


def _step_sums(
    events: TraceEvents,
    step_rows: Iterable[np.ndarray],
    steps: int,
    slot: Callable[[np.ndarray], np.ndarray],
    stored: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Per step (row indices of its GPU activity, ``steps`` of them, in any order) and stored
    kernel (column, the last one is ``other``; ``slot``: the columns of kernel rows): count
    and time ns."""
    gpu = events.gpu
    counts = np.zeros((steps, stored + 1), dtype=np.int64)
    totals: list[np.ndarray] = []
    kernels = gpu.kind == KERNEL
    for row, rows in enumerate(step_rows):
        rows = rows[kernels[rows]]
        which = slot(rows)
        counts[row] = np.bincount(which, minlength=stored + 1)
        totals.append(sums.by_group(which, gpu.dur[rows], stored + 1))
    return counts, np.array(totals, dtype=np.int64).reshape(steps, stored + 1)


def _step_stat(row: StepRow) -> StepStat:
    busy = sum(d.busy_ns for d in row.devices)
    window = sum(d.window_ns for d in row.devices)
    return StepStat(
        step=row.step,
        duration_us=(row.cpu_end_ns - row.cpu_start_ns) / 1000,
        kernels=row.kernels,
        kernel_time_us=row.kernel_time_ns / 1000,
        idle_us=(window - busy) / 1000,
        gpu_busy_pct=round(100.0 * busy / window, 3) if window else 0.0,
        gpu_only=row.gpu_only,
        step_time_us=row.step_ns / 1000,
        devices=tuple(
            StepDeviceStat(
                d.device,
                d.window_ns / 1000,
                d.busy_ns / 1000,
                d.idle_ns / 1000,
                round(d.busy_pct, 3),
                d.lag_ns / 1000,
            )
            for d in row.devices
        ),
    )


def kernel_stat(row: KernelRow, counts: np.ndarray, totals_ns: np.ndarray) -> KernelStat:
    """A kernels-table row as stored in a snapshot (the file's µs), with its count and time in
    each step."""
    return KernelStat(
        name=row.name,
        count=row.count,
        total_us=row.total_ns / 1000,
        mean_us=round(row.mean_ns / 1000, 3),
        std_us=round(row.std_ns / 1000, 3),
        min_us=row.min_ns / 1000,
        max_us=row.max_ns / 1000,
        p50_us=row.p50_ns / 1000,
        p90_us=row.p90_ns / 1000,
        p99_us=row.p99_ns / 1000,
        step_counts=tuple(counts.tolist()),
        step_totals_us=tuple((totals_ns / 1000).tolist()),
    )


__all__ = [
    "KIND",
    "SCHEMA_VERSION",
    "DeviceStat",
    "KernelStat",
    "OtherKernels",
    "Snapshot",
    "SnapshotTrace",
    "StepStat",
    "Totals",
    "build_snapshot",
    "digest",
    "kernel_stat",
]
