"""The operator view: GPU and CPU time per launching operator (``traceview ops``).

Each kernel is attributed to one op (analyses.oplinks: the leaf op by default, the top op with
``--level top``) or to the ``(no op)`` row — those launched before the trace to their own
``(launched before the trace)`` row — so the rows' GPU time adds up to the kernel time.
Per op name: calls and CPU time (every ``cpu_op`` event of that name, whatever it launched),
kernels, GPU time (sum of durations), GPU busy (per device the union of its kernels, summed
over devices), kernels per call, median queue delay (kernel start − launch start), % of GPU
time. A CUDA-graph replay's kernels go to the op around its graph launch (those of a launch
outside any op to their own row) and its launch call counts once, by its first kernel, in the
queue delay and the launch bound. Definitions in docs/metrics.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from traceview.aggregate import sums
from traceview.aggregate.intervals import RunningUnions
from traceview.aggregate.order import ids_dtype, positions_where
from traceview.aggregate.percentiles import nearest_rank
from traceview.analyses.core.categories import CATEGORIES, categorize
from traceview.analyses.core.devices import NO_LAUNCH, busy_by_device, device_of_stream
from traceview.analyses.core.graphs import graph_launch_ids, launch_counted, replayed
from traceview.analyses.core.opcalls import op_calls
from traceview.analyses.core.oplinks import OpLinks, link_ops, no_call
from traceview.analyses.core.prelaunch import (
    PRELAUNCH_ROW,
    launched_before_trace,
    without_runtime,
)
from traceview.analyses.core.trace import TraceSummary, summarize
from traceview.analyses.ops.groups import GRAPH_NO_OP, PRELAUNCH, OpKeys, group_of
from traceview.analyses.ops.nesting import counted_calls
from traceview.analyses.ops.peaks import Peaks, device_peaks, load_peaks_file
from traceview.analyses.ops.work import bound, group_work, pair_work, peak_flops
from traceview.choices import OpGroupBy, OpLevel, check_choice
from traceview.columns.cpu_rows import NO_SHAPE
from traceview.columns.model import TraceEvents
from traceview.columns.schema import KERNEL
from traceview.errors import UsageError

if TYPE_CHECKING:
    from traceview.analyses.core.common import Shared

LEVELS = tuple(OpLevel)
NO_OP_ROW = "(no op)"
GRAPH_NO_OP_ROW = "(graph replay, no op)"
SCHEMA_VERSION = 2


GROUPS = tuple(OpGroupBy)


@dataclass(frozen=True)
class OpOptions:
    """Which op a kernel is attributed to, how rows are grouped, how many to show, and an
    optional file of peaks (see analyses.peaks)."""

    level: OpLevel = OpLevel.LEAF
    top: int = 20
    group_by: OpGroupBy = OpGroupBy.OP
    peaks_file: Path | None = None

    def side_files(self) -> tuple[Path, ...]:
        """The files these options name besides the trace (an -o never replaces them)."""
        return () if self.peaks_file is None else (self.peaks_file,)


@dataclass(frozen=True)
class OpRow:
    """One op name (with ``--group-by op+shapes``, one name and Input Dims and types): its
    calls and CPU time, the kernels attributed to it (ns), and what its shapes tell."""

    name: str
    calls: int
    cpu_time_ns: int
    kernels: int
    gpu_time_ns: int
    gpu_busy_ns: int
    queue_delay_ns: int | None  # median kernel start − launch call start
    pct_gpu_time: float
    cpu_self_ns: int = 0
    shapes: str | None = None
    flops: int | None = None
    bytes: int | None = None
    dtype: str | None = None
    bound: str | None = None
    peak_tflops_per_s: float | None = None
    peak_tb_per_s: float | None = None
    ceiling_tflops_per_s: float | None = None  # the dtype's peak, else the device's highest
    graph_kernels: int = 0  # of its kernels, those CUDA-graph replays ran
    graph_launches: int = 0  # the graph launches that ran them

    @property
    def tflops_per_s(self) -> float | None:
        return _rate(self.flops, self.gpu_busy_ns)

    @property
    def above_peak(self) -> bool:
        """The FLOP rate exceeds what the device can do in its dtype (in any dtype when the
        dtype is unknown): a figure to distrust, not a speed."""
        rate, ceiling = self.tflops_per_s, self.ceiling_tflops_per_s
        return rate is not None and ceiling is not None and rate > ceiling

    @property
    def tb_per_s(self) -> float | None:
        return _rate(self.bytes, self.gpu_busy_ns)

    @property
    def intensity(self) -> float | None:
        if self.flops is None or not self.bytes:
            return None
        return self.flops / self.bytes

    @property
    def pct_of_peak(self) -> float | None:
        """% of the roofline: max(FLOPs / peak FLOP/s, bytes / peak bandwidth) / GPU busy."""
        peaks = (self.peak_tflops_per_s, self.peak_tb_per_s)
        if self.flops is None or self.bytes is None or None in peaks or not self.gpu_busy_ns:
            return None
        ideal_ns = max(self.flops / peaks[0] / 1e3, self.bytes / peaks[1] / 1e3)  # type: ignore[operator]
        return 100.0 * ideal_ns / self.gpu_busy_ns

    @property
    def _queue_us(self) -> float | None:
        return None if self.queue_delay_ns is None else self.queue_delay_ns / 1000

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "shapes": self.shapes,
            "calls": self.calls,
            "kernels": self.kernels,
            "gpu_time_us": self.gpu_time_ns / 1000,
            "gpu_busy_us": self.gpu_busy_ns / 1000,
            "cpu_time_us": self.cpu_time_ns / 1000,
            "cpu_self_us": self.cpu_self_ns / 1000,
            "kernels_per_call": self.kernels / self.calls if self.calls else None,
            "queue_delay_us": self._queue_us,
            "launch_delay_us": self._queue_us,  # the old name of queue_delay_us
            "pct_gpu_time": self.pct_gpu_time,
            "flops": self.flops,
            "bytes": self.bytes,
            "dtype": self.dtype,
            "tflops_per_s": self.tflops_per_s,
            "tb_per_s": self.tb_per_s,
            "intensity": self.intensity,
            "peak_tflops_per_s": self.peak_tflops_per_s,
            "peak_tb_per_s": self.peak_tb_per_s,
            "pct_of_peak": self.pct_of_peak,
            "above_peak": self.above_peak,
            "bound": self.bound,
            "graph": self.graph_kernels > 0,
            "graph_launches": self.graph_launches,
            "graph_kernels": self.graph_kernels,
        }


def _rate(amount: int | None, busy_ns: int) -> float | None:
    """Per second, in units of 10^12 (TFLOP/s, TB/s)."""
    if amount is None or busy_ns <= 0:
        return None
    return amount / busy_ns / 1e3


@dataclass(frozen=True)
class OpReport:
    """The result of ``traceview ops``."""

    trace: TraceSummary
    options: OpOptions
    kernels: int
    gpu_time_ns: int
    rows: list[OpRow]
    left_out: int = 0
    notes: list[str] = field(default_factory=list)
    peaks: Peaks | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "trace": self.trace.as_dict(),
            "level": self.options.level,
            "group_by": self.options.group_by,
            "device": None if self.peaks is None else self.peaks.as_dict(),
            "totals": {"kernels": self.kernels, "gpu_time_us": self.gpu_time_ns / 1000},
            "ops": [r.as_dict() for r in self.rows],
            "left_out": self.left_out,
            "notes": list(self.notes),
        }


def check_options(options: OpOptions) -> None:
    """Usage errors, before any reading."""
    check_choice("--level", options.level, OpLevel)
    if options.top < 0:
        raise UsageError(f"--top {options.top}: must not be negative (0 shows all)")
    check_choice("--group-by", options.group_by, OpGroupBy)
    if options.peaks_file is not None:
        load_peaks_file(options.peaks_file)


def analyse_ops(
    events: TraceEvents,
    options: OpOptions,
    shared: Shared | None = None,
    by_device: np.ndarray | None = None,
) -> OpReport:
    """Attribute every kernel to an op; per op name (or name and shapes) its CPU and GPU
    figures and, where shapes allow, FLOPs, bytes and the bound; by GPU time.
    ``shared``: the op links, op calls and summary, when the caller has them already;
    ``by_device``: ``busy_by_device(events)``, when the caller has it."""
    check_options(options)
    leaf = options.level == "leaf"
    # the trace's summary first: its devices' unions and checks' temporaries (~40 bytes a
    # row) come before the links are held
    trace = summarize(events) if shared is None else shared.trace
    # the top ops only for --level top: else the leaf ops alone, int32 (link_ops)
    links = link_ops(events, with_top=not leaf, with_end=True) if shared is None else shared.links
    keys = OpKeys(events, options.group_by == "op+shapes")
    graphs = graph_launch_ids(events) if shared is None else shared.graphs
    category = categorize(events, links, dtype=np.int8) if shared is None else shared.category
    # the runtime calls are read no more but by the launched mask, kept: freed where the
    # caller handed ``events`` over (commands.ops), 16 B a call
    events = without_runtime(events)
    k = _by_kernel(events, links, leaf, keys, graphs, category, by_device)
    used, n = k.used, len(k.used)
    calls = op_calls(events) if shared is None else shared.calls
    pair_group = group_of(used, keys.of(calls.name, calls.shape))
    per_call = [_sums(pair_group, x, n) for x in (calls.calls, calls.cpu_ns, calls.self_ns)]
    works = pair_work(events, calls)
    counted = counted_calls(events, calls, works, innermost=leaf)
    work = group_work(calls, works, pair_group, n, counted)
    extra = load_peaks_file(options.peaks_file) if options.peaks_file is not None else None
    peaks, peak_note = device_peaks(events.header, extra)
    kernels, gpu_ns, busy, delay = k.kernels, k.gpu_ns, k.busy, k.delay
    launch_ns, graph_kernels, graph_launches, comm = (
        k.launch_ns,
        k.graph_kernels,
        k.graph_launches,
        k.comm,
    )
    total = sums.total(gpu_ns)
    out = []
    for g, key in enumerate(used.tolist()):
        name_id, shape_key = keys.split(key)
        named = name_id < len(events.names)
        flops, moved = (work.flops[g], work.bytes[g]) if named else (None, None)
        dtype = work.dtype[g] if named else None
        peak_f = peak_flops(peaks, dtype)
        peak_b = None if peaks is None else peaks.tb_per_s
        out.append(
            OpRow(
                name=events.names[name_id] if named else _no_op_row(name_id, keys),
                calls=int(per_call[0][g]),
                cpu_time_ns=int(per_call[1][g]),
                kernels=int(kernels[g]),
                gpu_time_ns=int(gpu_ns[g]),
                gpu_busy_ns=int(busy[g]),
                queue_delay_ns=delay[g],
                pct_gpu_time=100.0 * int(gpu_ns[g]) / total if total else 0.0,
                cpu_self_ns=int(per_call[2][g]),
                shapes=keys.text(shape_key),
                flops=flops,
                bytes=moved,
                dtype=dtype,
                bound=bound(
                    bool(comm[g]), int(busy[g]), int(launch_ns[g]), flops, moved, peak_f, peak_b
                ),
                peak_tflops_per_s=peak_f,
                peak_tb_per_s=peak_b,
                ceiling_tflops_per_s=_ceiling(peaks, peak_f),
                graph_kernels=int(graph_kernels[g]),
                graph_launches=int(graph_launches[g]),
            )
        )
    out.sort(key=lambda r: (-r.gpu_time_ns, r.name, r.shapes or ""))
    kept = out if options.top == 0 else out[: options.top]
    notes = []
    if len(events.cpu) == 0 and k.count:
        notes.append("no CPU ops in this trace: every kernel is in the (no op) row")
    if peak_note is not None:
        notes.append(peak_note)
    notes += _above_peak_notes(out)
    over = sum(
        1 for r in out if r.pct_of_peak is not None and r.pct_of_peak > 100 and not r.above_peak
    )
    if over:
        notes.append(
            (
                f"{over} rows above 100% of the peak of their"
                if over > 1
                else "1 row above 100% of the peak of its"
            )
            + " dtype: fp32 ops that ran on TF32 tensor cores are measured against the fp32"
            " peak, or the peaks are not this GPU's (--peaks)"
        )
    return OpReport(
        trace=trace,
        options=options,
        kernels=k.count,
        gpu_time_ns=total,
        rows=kept,
        left_out=len(out) - len(kept),
        notes=notes,
        peaks=peaks,
    )


def _ceiling(peaks: Peaks | None, peak_tflops: float | None) -> float | None:
    """The most TFLOP/s a row can reach: its dtype's peak, else the device's highest peak."""
    if peak_tflops is not None:
        return peak_tflops
    return max(peaks.tflops.values(), default=None) if peaks is not None else None


def _above_peak_notes(rows: list[OpRow]) -> list[str]:
    """A note per row whose FLOP rate is above the device's peak for its dtype."""
    return [
        f"{r.name}: {r.tflops_per_s:.2f} TFLOP/s is above the {r.ceiling_tflops_per_s:g} "
        f"TFLOP/s peak of {r.dtype or 'any dtype'} on this GPU, so it is not a speed: its "
        "FLOPs may be counted twice (ops nested in a way the trace does not show), the op "
        "may run in another dtype than its inputs (fp32 on TF32 tensor cores), or the peaks "
        "are not this GPU's (--peaks)"
        for r in rows
        if r.above_peak
    ]


def _shapes_of(shape: np.ndarray | None, rows: np.ndarray) -> np.ndarray:
    if shape is None:
        return np.full(len(rows), NO_SHAPE, dtype=np.int64)
    shapes: np.ndarray = shape[rows]
    return shapes


def _sums(group: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Per group, the exact sum of ``values`` (rows with group −1 left out)."""
    keep = group >= 0
    return sums.by_group(group[keep], values[keep], n)


def _no_op_row(name_id: int, keys: OpKeys) -> str:
    if name_id == keys.prelaunch:
        return PRELAUNCH_ROW
    return GRAPH_NO_OP_ROW if name_id == keys.graph_no_op else NO_OP_ROW


@dataclass(frozen=True)
class _Kernels:
    """Per group of kernels (``used``: the sorted group keys): kernels, GPU time, busy
    time, median queue delay, launch calls' time, graph kernels and launches, and whether
    all are communication kernels; ``count``: the kernels."""

    used: np.ndarray
    count: int
    kernels: np.ndarray
    gpu_ns: np.ndarray
    busy: np.ndarray
    delay: list[int | None]
    launch_ns: np.ndarray
    graph_kernels: np.ndarray
    graph_launches: np.ndarray
    comm: np.ndarray


_PASS = 1 << 16


def _by_kernel(
    events: TraceEvents,
    links: OpLinks,
    leaf: bool,
    keys: OpKeys,
    graphs: np.ndarray,
    category: np.ndarray,
    by_device: np.ndarray | None,
) -> _Kernels:
    """The kernels' figures per group, a pass of kernels at a time: only the kernels'
    int32 positions, each GPU row's group (int32) and three masks are row-sized."""
    gpu = events.gpu
    rows = positions_where(gpu.kind == KERNEL)
    graph = replayed(events, rows, graphs)
    once = launch_counted(events, rows, graphs)  # a graph launch once, by its first kernel
    before = launched_before_trace(events)
    op_of = links.leaf if leaf else links.top
    shape_of = links.leaf_shape if leaf else links.top_shape
    key = np.empty(len(rows), dtype=np.int32 if keys.bound < 2**31 else np.int64)
    for lo in range(0, len(rows), _PASS):
        at = rows[lo : lo + _PASS]
        op = op_of[at]
        op = np.where(graph[lo : lo + _PASS] & (op < 0), GRAPH_NO_OP, op)
        op = np.where(before[at], PRELAUNCH, op)  # no op of the trace
        key[lo : lo + _PASS] = keys.of(op, _shapes_of(shape_of, at))
    del before
    used, group = _dense(key, keys.bound)
    del key
    n = len(used)
    kernels = np.zeros(n, dtype=np.int64)
    gpu_ns, launch_ns = sums.GroupSums(n), sums.GroupSums(n)
    graph_kernels = np.zeros(n, dtype=np.int64)
    graph_launches = np.zeros(n, dtype=np.int64)
    not_comm = np.zeros(n, dtype=np.int64)
    delayed = np.zeros(n, dtype=np.int64)  # kernels with a launch, by group
    low, high = np.iinfo(np.int64).max, np.iinfo(np.int64).min  # of their queue delays
    comm = CATEGORIES.index("communication")
    for lo in range(0, len(rows), _PASS):
        at = rows[lo : lo + _PASS]
        g = group[lo : lo + _PASS]
        kernels += np.bincount(g, minlength=n)
        gpu_ns.add(g, gpu.dur[at])
        launch = np.where(once[lo : lo + _PASS], links.launch[at], NO_LAUNCH)
        has = launch != NO_LAUNCH
        if has.any():
            delayed += np.bincount(g[has], minlength=n)
            delay = gpu.ts[at][has] - launch[has]
            low, high = min(low, int(delay.min())), max(high, int(delay.max()))
        call = links.launch_ns[at]
        has &= call != no_call(call)
        launch_ns.add(g[has], call[has].astype(np.int64, copy=False))
        in_graph = graph[lo : lo + _PASS]
        graph_kernels += np.bincount(g[in_graph], minlength=n)
        graph_launches += np.bincount(g[in_graph & once[lo : lo + _PASS]], minlength=n)
        not_comm += np.bincount(g[category[at] != comm], minlength=n)
    del graph
    if len(rows):  # the last pass's views would hold the kernels' columns
        del at, g, launch, has, call
    # each GPU row's group (−1: no kernel), int16 where the groups allow: 2 B a row
    group_of_row = np.full(len(gpu.ts), -1, dtype=ids_dtype(n))
    group_of_row[rows] = group
    del rows, group  # the kernels' rows are found again a pass at a time from here
    delay = _launch_delay(events, links, group_of_row, once, delayed, (low, high))
    del once
    return _Kernels(
        used=used,
        count=int(kernels.sum()),
        kernels=kernels,
        gpu_ns=gpu_ns.out,
        busy=_busy(events, group_of_row, n, by_device),
        delay=delay,
        launch_ns=launch_ns.out,
        graph_kernels=graph_kernels,
        graph_launches=graph_launches,
        comm=not_comm == 0,
    )


def _dense(key: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """``dense_ids(key, bound)`` with the ids int32, marked and mapped a pass at a time (into
    ``key`` itself where it is int32: it is not used after); not one bincount, which casts
    the int32 keys to a row-sized int64 copy."""
    if bound > max(4 * len(key), 1 << 16):
        used = np.unique(key)
        table = None
    else:
        present = np.zeros(bound, dtype=bool)
        for lo in range(0, len(key), _PASS):
            present[key[lo : lo + _PASS]] = True
        used = np.flatnonzero(present)
        table = np.cumsum(present, dtype=np.int32)
        table -= 1
    group = key if key.dtype == np.int32 else np.empty(len(key), dtype=np.int32)
    for lo in range(0, len(key), _PASS):
        part = key[lo : lo + _PASS]
        group[lo : lo + _PASS] = np.searchsorted(used, part) if table is None else table[part]
    return used, group


def _busy(
    events: TraceEvents, group_of_row: np.ndarray, n: int, by_device: np.ndarray | None
) -> np.ndarray:
    """Per group: the union of its kernels (dur > 0) on each device, summed over devices;
    the busy rows taken in (device, start) order (``by_device``, else sorted here) a pass
    at a time, each (group, device)'s union carried from pass to pass."""
    device, values = device_of_stream(events)
    width = max(len(values), 1)
    gpu = events.gpu
    order = busy_by_device(events) if by_device is None else by_device
    union = RunningUnions(n * width)
    for lo in range(0, len(order), _PASS):
        at = order[lo : lo + _PASS]
        g = group_of_row[at]
        kernel = g >= 0
        at = at[kernel]
        segment = g[kernel].astype(np.int64)
        segment *= width
        segment += device[gpu.stream[at]]
        union.add_grouped(segment, gpu.ts[at], gpu.dur[at])
    return sums.by_group(np.arange(n * width) // width, union.busy(), n)


def _launch_delay(
    events: TraceEvents,
    links: OpLinks,
    group_of_row: np.ndarray,
    once: np.ndarray,
    counted: np.ndarray,
    span: tuple[int, int],
) -> list[int | None]:
    """Per group: the median (nearest rank) of kernel start − launch start over its kernels
    (``group_of_row`` >= 0) that have a launch (counted launches: ``once``, per kernel in
    row order; ``counted`` per group, their delays in [``span``]); None when none has.
    The delays are taken again a pass at a time into one sorted int64 key a kernel, (group,
    delay − least) packed, as ``nearest_rank`` sorts them, when it fits (else the delays
    and their groups, for ``nearest_rank``)."""
    n, total = len(counted), int(counted.sum())
    if total == 0:
        return [None] * n
    low, high = span
    bits = (high - low).bit_length()
    fits = n << bits < 1 << 63
    keys = np.empty(total if fits else 0, dtype=np.int64)
    delays = np.empty(0 if fits else total, dtype=np.int64)
    groups = np.empty(0 if fits else total, dtype=np.int64)
    gpu, filled, seen = events.gpu, 0, 0
    for lo in range(0, len(group_of_row), _PASS):
        kernel = group_of_row[lo : lo + _PASS]
        at = np.flatnonzero(kernel >= 0)
        group = kernel[at]
        at += lo
        launch = np.where(once[seen : seen + len(at)], links.launch[at], NO_LAUNCH)
        seen += len(at)
        has = launch != NO_LAUNCH
        delay = gpu.ts[at][has] - launch[has]
        g = group[has].astype(np.int64)
        part = slice(filled, filled + len(delay))
        filled = part.stop
        if not fits:
            delays[part], groups[part] = delay, g
            continue
        g <<= bits
        delay -= low
        g |= delay
        keys[part] = g
    if fits:
        keys.sort()
        first = np.concatenate([[0], np.cumsum(counted)[:-1]])
        present = counted > 0
        at = (first + np.maximum((50 * counted + 99) // 100, 1) - 1)[present]
        median = np.zeros(n, dtype=np.int64)
        median[present] = (keys[at] & ((1 << bits) - 1)) + low
    else:
        median = nearest_rank(groups, delays, n, (50,))[50]
    return [int(m) if c else None for m, c in zip(median.tolist(), counted.tolist(), strict=True)]
