"""Decoded events → numpy columns in exact integer nanoseconds, names interned.

Only what analyses use is kept: GPU activity (kernel, memcpy, memset), runtime/driver
calls (to map a kernel to the CPU launch with the same correlation id) and ProfilerStep
windows; CPU ops when asked (``keep_cpu``), python frames and ``fwdbwd`` flows when asked
(``keep_frames``, traceview.columns.frames). Everything else is dropped as it is read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import msgspec
import numpy as np

from traceview.columns import allocations, batch, comms, cpu_rows, frames, launches
from traceview.columns.cpu_rows import RowSource, SpillFile
from traceview.columns.intern import Interner, carry_key
from traceview.columns.model import STEP_PREFIX, StepWindow, StreamKey, TraceEvents
from traceview.columns.numbers import (
    NEGATIVE_DUR,
    BadNumber,
    NeedsExactTimes,
    NeedsSlowDecode,
    to_ns,
    value_of,
)
from traceview.columns.packed_names import PackedNames
from traceview.columns.schema import (
    COMM_COLUMNS,
    DROPPABLE,
    FLOW_COLUMNS,
    FRAME_COLUMNS,
    GPU_COLUMNS,
    GPU_LAUNCH,
    KERNEL,
    MEMCPY,
    MEMORY_COLUMNS,
    MEMSET,
    RUNTIME_COLUMNS,
    CommColumns,
    FlowColumns,
    FrameColumns,
    GpuColumns,
    MemoryColumns,
    RuntimeColumns,
    arrays_of,
    from_arrays,
    join_columns,
    unused_of,
)
from traceview.columns.segments import Segments
from traceview.read.compiled import COMM_CHECKED, ScannedRows
from traceview.read.decode import ShapedArgs, check_raw_numbers, has_raw_numbers, may_carry
from traceview.read.reader import ReadStats, TraceReader

_RUNTIME, _CPU_ANNOTATION, _GPU_ANNOTATION, _PYTHON, _OTHER = 10, 11, 12, 13, -1
# Rows, and the maps of their thread, name and shape ids: the rows in mapped ids.
Renumber = Callable[[RowSource, np.ndarray, np.ndarray, np.ndarray | None], RowSource]
# The python frames kept (as annotations, with the CPU rows): step markers
# (traceview.analyses.core.step_markers): vLLM's execute_model, a causal LM's forward.
STEP_FRAMES = (": execute_model",)
MODEL_FRAMES = ("ForCausalLM_", "LMHeadModel_")


def is_step_frame(name: str) -> bool:
    """Whether a python frame may be a step marker (the markers' patterns decide)."""
    if name.endswith(STEP_FRAMES):
        return True
    return name.startswith("nn.Module: ") and any(m in name for m in MODEL_FRAMES)


MEMORY = allocations.NAME
_CATEGORIES = {
    "kernel": KERNEL,
    "gpu_memcpy": MEMCPY,
    "memcpy": MEMCPY,
    "gpu_memset": MEMSET,
    "memset": MEMSET,
    "cuda_runtime": _RUNTIME,
    "cuda_driver": _RUNTIME,
    "runtime": _RUNTIME,
    "user_annotation": _CPU_ANNOTATION,
    "cpu_op": _CPU_ANNOTATION,
    "operator": _CPU_ANNOTATION,  # 2021 kineto's name for cpu_op
    "gpu_user_annotation": _GPU_ANNOTATION,
    "python_function": _PYTHON,
}
_INT64_MAX = 2**63 - 1
_UNREAD = np.empty(0, dtype=np.int32)  # an unused column's ids, never interned (see Segments)
_GPU = [c.name for c in GPU_COLUMNS]  # where each column is in a batch's tuple
GPU_STREAM, GPU_TS, GPU_DUR = _GPU.index("stream"), _GPU.index("ts"), _GPU.index("dur")


@dataclass
class _Lists:
    """Per-batch Python lists, turned into numpy arrays once the batch is done."""

    kind: list[int] = field(default_factory=list)
    name: list[int] = field(default_factory=list)
    stream: list[int] = field(default_factory=list)
    ts: list[int] = field(default_factory=list)
    dur: list[int] = field(default_factory=list)
    corr: list[int] = field(default_factory=list)
    launch: list[int] = field(default_factory=list)
    rt_corr: list[int] = field(default_factory=list)
    rt_ts: list[int] = field(default_factory=list)
    rt_start: list[int] = field(default_factory=list)
    rt_end: list[int] = field(default_factory=list)
    steps: list[StepWindow] = field(default_factory=list)
    cpu: list[tuple[int, int, int, int, int, int]] = field(default_factory=list)
    # Events carrying a collective's metadata: (event, GPU row, thread id, ts, end).
    comm: list[tuple[Any, int, int, int, int]] = field(default_factory=list)


class EventCollector:
    """Turns batches of decoded events into columns; ``finish`` returns TraceEvents."""

    def __init__(
        self,
        keep_cpu: bool = False,
        spill: SpillFile | None = None,
        keep_frames: bool = False,
        unused: frozenset[str] = frozenset(),
        frames_from_ns: int = 0,
        shared: bool = False,
    ) -> None:
        """``spill``: where CPU rows go (default: a new temporary file when the first comes);
        ``keep_frames``: keep the python frames and fwdbwd flows (with the CPU rows);
        ``unused``: the columns left out (schema.DROPPABLE), Dropped in the result;
        ``frames_from_ns``: only the python frames at least this long are kept (their names
        interned all the same, so every id is the one a read of them all gives);
        ``shared``: the rows' columns joined into shared mappings (columns.segments), for a
        forked cache writer."""
        if not unused <= DROPPABLE:
            raise ValueError(f"not columns a read may leave out: {sorted(unused - DROPPABLE)}")
        self.keep_cpu = keep_cpu or keep_frames
        self.keep_frames = keep_frames
        self.names = Interner()
        self.streams = Interner(carry_key)
        self.threads = Interner(carry_key)
        self.launches = Interner(launches.normalise)
        self.shapes = Interner(_shape_of)
        self.shapes.id(None)  # id 0: no shape (stored as NO_SHAPE, shape ids one less)
        self.comm_keys = Interner()
        self.quality: Counter[str] = Counter()
        self.cpu_quality: Counter[str] = Counter()  # the part of quality from CPU ops
        self._categories = _Categories()
        self._gpu = Segments(GPU_COLUMNS, unused=unused_of("gpu", unused), shared=shared)
        self._runtime = Segments(
            RUNTIME_COLUMNS, unused=unused_of("runtime", unused), shared=shared
        )
        self._keep_launch = GPU_LAUNCH not in unused  # the launch ids are interned
        self._cpu = spill if spill is not None else SpillFile()  # CPU rows go to disk
        self._cpu_before: list[RowSource] = []  # a worker's rows, read before ours
        self._steps: list[StepWindow] = []
        self._span: tuple[int, int] | None = None
        self._comm: list[tuple[np.ndarray, ...]] = []  # per batch: COMM_COLUMNS
        self._memory: list[tuple[np.ndarray, ...]] = []  # per batch: MEMORY_COLUMNS
        self._frames = Segments(FRAME_COLUMNS, unused=unused_of("frames", unused), shared=shared)
        self._frames_from_ns = frames_from_ns
        self._flows = Segments(FLOW_COLUMNS, unused=unused_of("flows", unused), shared=shared)
        self._gpu_rows = 0  # GPU rows committed so far

    def add(self, events: Iterable[Any]) -> None:
        """Add one batch; all-or-nothing, so a batch can be retried after NeedsExactTimes."""
        quality, cpu_quality = self.quality.copy(), self.cpu_quality.copy()
        try:
            self._add(events)
        except NeedsExactTimes:
            self.quality, self.cpu_quality = quality, cpu_quality  # nothing counted twice
            raise
        except msgspec.ValidationError:  # see check_raw_numbers
            self.quality, self.cpu_quality = quality, cpu_quality
            raise NeedsSlowDecode from None

    def _add(self, events: Iterable[Any]) -> None:
        # Whether this batch may hold a collective's metadata: else no event is checked.
        carry = may_carry(events) if isinstance(events, list) else True
        # Rows the compiled scanner converted (read.compiled): the chunk's GPU activities and
        # runtime calls (CPU ops, python frames and flows too where it took them), which are
        # then not among ``events``; interned here in the order the Python path interns them.
        scanned: ScannedRows | None = getattr(events, "scanned", None)
        gpu, gpu_kinds, runtime, steps, ops, memory, framed = self._split(events, carry)
        new_memory = self._memory_rows(memory) if memory else None
        if scanned is not None and scanned.frames:
            new_frames = self._scanned_frame_rows(scanned) if self.keep_frames else None
        else:
            new_frames = self._frame_rows(*framed) if framed is not None else None
        lists = _Lists()
        if scanned is None:
            gpu_columns = self._gpu_columns(gpu, gpu_kinds)
        else:
            gpu_columns = self._scanned_gpu_columns(scanned)
        new_comm: list[tuple[np.ndarray, ...]] = []
        if gpu_columns is None:
            self._add_each(zip(gpu, gpu_kinds, strict=True), lists)
        elif scanned is not None:  # the rows the scanner handed back decoded
            new_comm += self._gpu_comm_rows(*_carriers(scanned, gpu=True), gpu_columns)
        elif carry:
            # Inline, not comms.carries: this runs over every GPU event of such a batch.
            at = [
                i
                for i, e in enumerate(gpu)
                if (a := e.args) is not None and type(a.collective) is str
            ]
            new_comm += self._gpu_comm_rows(at, [gpu[i] for i in at], gpu_columns)
        if scanned is None:
            runtime_times = batch.timed(runtime)
            runtime_corr = batch.correlations(runtime) if runtime_times is not None else None
        else:
            runtime_times, runtime_corr = (scanned.rt_ts, scanned.rt_dur), scanned.rt_correlation
        if runtime_times is None or runtime_corr is None:
            self._add_each(((e, _RUNTIME) for e in runtime), lists)
            runtime = []  # their CPU rows, if kept, were added one by one
        new_cpu: list[np.ndarray] = []
        if self.keep_cpu:
            if runtime_times is not None and runtime_corr is not None and len(runtime_corr):
                ts, dur = runtime_times
                calls = np.where(runtime_corr < 0, cpu_rows.UNCORRELATED, runtime_corr)
                if scanned is None:
                    threads, names = self._threads_and_names(runtime)
                else:
                    threads = self.threads.ids_of(scanned.threads)[scanned.rt_thread]
                    names = self.names.ids_of(scanned.rt_names)[scanned.rt_name]
                new_cpu.append(self._cpu_rows(threads, names, ts, ts + dur, calls))
            if scanned is not None and scanned.cpu:  # every op of the chunk: none in ``ops``
                if len(scanned.op_ts):
                    new_cpu.append(self._scanned_op_rows(scanned))
                    if len(scanned.comm_rows):
                        new_comm += self._scanned_op_comm_rows(scanned, new_cpu[-1])
            elif (op_times := batch.timed(ops)) is None:
                before = self.quality.copy()
                self._add_each(((e, _CPU_ANNOTATION) for e in ops), lists)
                self.cpu_quality.update(self.quality - before)
            elif ops:
                ts, dur = op_times
                threads, names = self._threads_and_names(ops)
                shapes = self._shape_ids(_shape_keys(ops))
                new_cpu.append(self._cpu_rows(threads, names, ts, ts + dur, _op_kinds(ops), shapes))
                if carry:
                    new_comm += self._op_comm_rows(ops, ts, ts + dur)
        elif ops:
            new_comm += self._threadless_comm_rows(ops, lists)
        self._add_each(steps, lists)
        new_comm += self._listed_comm_rows(lists)
        self._commit(lists)
        if gpu_columns is not None:
            self._commit_gpu(gpu_columns)
        if runtime_times is not None and runtime_corr is not None:
            self._commit_runtime(runtime_corr, *runtime_times)
        for table in new_cpu:
            self._cpu.append(table)
        self._comm += new_comm
        if new_memory is not None:
            self._memory.append(new_memory)
        if new_frames is not None:
            self._frames.append(frames.long_frames(new_frames[0], self._frames_from_ns))
            self._flows.append(new_frames[1])

    def _frame_rows(
        self, python: list[Any], flows: list[Any]
    ) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
        """The frame rows and flow rows of a batch (traceview.columns.frames)."""
        frame_threads = self.threads.ids_of([(e.pid, e.tid) for e in python])
        frame_names = self.names.ids_of([e.name for e in python])
        flow_threads = self.threads.ids_of([(e.pid, e.tid) for e in flows])
        return (
            frames.frame_rows(python, frame_threads, frame_names),
            frames.flow_rows(flows, flow_threads),
        )

    def _scanned_frame_rows(
        self, scanned: ScannedRows
    ) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
        """The frame rows and flow rows the scanner converted, interned as _frame_rows
        interns them."""
        frame_threads = self.threads.ids_of(scanned.frame_threads)[scanned.frame_thread]
        frame_names = self.names.ids_of(scanned.frame_names)[scanned.frame_name]
        flow_threads = self.threads.ids_of(scanned.flow_threads)[scanned.flow_thread]
        frame_rows = (
            frame_threads,
            frame_names,
            scanned.frame_ts,
            scanned.frame_end,
            scanned.frame_python_id,
            scanned.frame_python_parent,
        )
        flow_rows = (scanned.flow_flow, flow_threads, scanned.flow_ts, scanned.flow_finish)
        return frame_rows, flow_rows

    def _scanned_op_rows(self, scanned: ScannedRows) -> np.ndarray:
        """The CPU rows of the ops and step-marker frames the scanner converted, interned as
        the batch of ``ops`` is (threads, names, then shapes)."""
        threads = self.threads.ids_of(scanned.op_threads)[scanned.op_thread]
        names = self.names.ids_of(scanned.op_names)[scanned.op_name]
        shapes = self._shape_ids(scanned.shapes)[scanned.op_shape]
        return cpu_rows.rows(
            thread=threads,
            name=names,
            ts=scanned.op_ts,
            end=scanned.op_end,
            correlation=scanned.op_correlation,
            shape=shapes,
        )

    def _memory_rows(self, memory: list[Any]) -> tuple[np.ndarray, ...] | None:
        """The rows of a batch's ``[memory]`` events (their threads when CPU rows are kept)."""
        threads = self.threads.ids_of([(e.pid, e.tid) for e in memory]) if self.keep_cpu else None
        return allocations.rows(memory, threads, self.quality)

    def _gpu_comm_rows(
        self, at: list[int], carrying: list[Any], columns: tuple[np.ndarray, ...]
    ) -> list[tuple[np.ndarray, ...]]:
        """The metadata rows of the GPU rows ``at`` of a batch converted at once (their
        events ``carrying``; none, mostly)."""
        if not at:
            return []
        ts, dur = columns[GPU_TS][at], columns[GPU_DUR][at]
        rows = np.array(at, dtype=np.int64) + self._gpu_rows
        no_thread = np.full(len(at), comms.NO_THREAD)
        return [comms.rows(carrying, self.comm_keys, rows, no_thread, ts, ts + dur)]

    def _scanned_op_comm_rows(
        self, scanned: ScannedRows, table: np.ndarray
    ) -> list[tuple[np.ndarray, ...]]:
        """_op_comm_rows of the CPU op rows the scanner converted (``table``, interned)."""
        at, carrying = _carriers(scanned, gpu=False)
        if not at:
            return []
        rows = table[at]
        no_row = np.full(len(at), comms.NO_GPU_ROW)
        thread, ts, end = rows["thread"], rows["ts"], rows["end"]
        return [comms.rows(carrying, self.comm_keys, no_row, thread, ts, end)]

    def _op_comm_rows(
        self, ops: list[Any], ts: np.ndarray, end: np.ndarray
    ) -> list[tuple[np.ndarray, ...]]:
        """The metadata rows of a batch of CPU ops converted at once (``record_param_comms``)."""
        at = [i for i, e in enumerate(ops) if comms.carries(e)]
        if not at:
            return []
        carrying = [ops[i] for i in at]
        threads = self.threads.ids_of([(e.pid, e.tid) for e in carrying])
        no_row = np.full(len(at), comms.NO_GPU_ROW)
        return [comms.rows(carrying, self.comm_keys, no_row, threads, ts[at], end[at])]

    def _threadless_comm_rows(self, ops: list[Any], lists: _Lists) -> list[tuple[np.ndarray, ...]]:
        """Without CPU rows: the metadata of the CPU ops carrying it (few), thread unknown,
        so no kernel links to them but the table says they exist: the rows a read with CPU
        rows keeps, in its order (nothing is counted: CPU-op problems are not this read's)."""
        ops = [e for e in ops if comms.carries(e)]  # a collective name that is not text: none
        if not ops:
            return []
        times = batch.timed(ops)
        if times is None:
            for e in ops:
                span = _span_or_none(e)
                if span is not None:
                    lists.comm.append((e, comms.NO_GPU_ROW, comms.NO_THREAD, *span))
            return []
        ts, dur = times
        none = np.full(len(ops), comms.NO_GPU_ROW)
        return [comms.rows(ops, self.comm_keys, none, none, ts, ts + dur)]

    def _listed_comm_rows(self, lists: _Lists) -> list[tuple[np.ndarray, ...]]:
        """The metadata rows of events converted one by one."""
        if not lists.comm:
            return []
        events, gpu_row, thread, ts, end = zip(*lists.comm, strict=True)
        return [comms.rows(events, self.comm_keys, gpu_row, thread, ts, end)]

    def _threads_and_names(self, events: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        """The thread and name ids of a batch of runtime calls or CPU ops (in this order)."""
        threads = self.threads.ids_of([(e.pid, e.tid) for e in events])
        return threads, self.names.ids_of([e.name for e in events])

    @staticmethod
    def _cpu_rows(
        threads: np.ndarray,
        names: np.ndarray,
        ts: np.ndarray,
        end: np.ndarray,
        correlation: np.ndarray,
        shapes: np.ndarray | None = None,
    ) -> np.ndarray:
        """CPU rows of a batch of runtime calls or CPU ops, converted at once."""
        return cpu_rows.rows(
            thread=threads, name=names, ts=ts, end=end, correlation=correlation, shape=shapes
        )

    def _shape_ids(self, keys: list[Any]) -> np.ndarray:
        """The shape ids of (dims, types, concrete) keys, NO_SHAPE for None."""
        return self.shapes.ids_of(keys) + np.int32(cpu_rows.NO_SHAPE)

    def _split(
        self, events: Iterable[Any], carry: bool
    ) -> tuple[
        list[Any],
        list[int],
        list[Any],
        list[tuple[Any, int]],
        list[Any],
        list[Any],
        tuple[list[Any], list[Any]] | None,
    ]:
        """GPU activity (with kinds), runtime calls, ProfilerStep annotations (with kinds),
        the CPU ops to keep (when CPU activity is kept; else those carrying a collective's
        metadata, which only a batch that may ``carry`` it has), the ``[memory]`` events and
        (when frames are kept) the python frames and fwdbwd flows. Sorted a batch at a time."""
        events = events if isinstance(events, list) else list(events)
        n = len(events)
        if not n:  # a chunk the scanner took whole, mostly
            return [], [], [], [], [], [], ([], []) if self.keep_frames else None
        # Complete events ("X") only: others read as the empty category, which is no kind.
        cats = [e.cat if e.ph == "X" else "" for e in events]
        kinds = np.fromiter(map(self._categories.__getitem__, cats), np.int8, n)
        gpu_at = np.flatnonzero((kinds >= 0) & (kinds <= MEMSET))
        gpu = _picked(events, gpu_at)
        runtime_at = np.flatnonzero(kinds == _RUNTIME)
        runtime = _picked(events, runtime_at)
        marked_at = np.flatnonzero((kinds >= _CPU_ANNOTATION) & (kinds <= _GPU_ANNOTATION))
        marked = _picked(events, marked_at)
        names = [e.name for e in marked]
        is_step = np.fromiter(map(str.startswith, names, repeat(STEP_PREFIX)), bool, len(names))
        step_at = np.flatnonzero(is_step)
        steps = list(zip(_picked(marked, step_at), kinds[marked_at[step_at]].tolist(), strict=True))
        ops_at = np.flatnonzero((kinds[marked_at] == _CPU_ANNOTATION) & ~is_step)
        ops: list[Any] = []
        if self.keep_cpu:
            ops = _picked(marked, ops_at)
            python = _picked(events, np.flatnonzero(kinds == _PYTHON))
            ops += [e for e in python if is_step_frame(e.name)]
        elif carry:
            ops = [e for e in _picked(marked, ops_at) if (a := e.args) and a.collective is not None]
        # Instant events read as the empty category, which is no kind: [memory] among them.
        other = _picked(events, np.flatnonzero(kinds == _OTHER))
        memory = [e for e in other if e.name == MEMORY]
        framed = None
        if self.keep_frames:
            python_at = np.flatnonzero(kinds == _PYTHON)
            flows = [e for e in other if e.cat == frames.FLOW_CATEGORY]  # inline: every event
            framed = (_picked(events, python_at), [e for e in flows if frames.is_flow(e)])
        if has_raw_numbers(events):  # the numbers of the events left out, checked here
            kept = np.zeros(n, dtype=bool)
            kept[gpu_at] = kept[runtime_at] = kept[marked_at[step_at]] = True
            if self.keep_cpu:
                kept[marked_at[ops_at]] = True
            check_raw_numbers(_picked(events, np.flatnonzero(~kept)))
        return gpu, kinds[gpu_at].tolist(), runtime, steps, ops, memory, framed

    def _gpu_columns(self, gpu: list[Any], kinds: list[int]) -> tuple[np.ndarray, ...] | None:
        """Columns of a batch of GPU events, or None to convert them one by one."""
        if not gpu:
            return None
        times = batch.timed(gpu)
        corr = batch.correlations(gpu) if times is not None else None
        if times is None or corr is None:
            return None
        ts, dur = times
        return (
            np.array(kinds, dtype=np.int8),
            self.names.ids_of([e.name for e in gpu]),
            self.streams.ids_of(batch.stream_keys(gpu)),
            ts,
            dur,
            corr,
            launches.launch_ids(self.launches, gpu) if self._keep_launch else _UNREAD,
        )

    def _scanned_gpu_columns(self, scanned: ScannedRows) -> tuple[np.ndarray, ...] | None:
        """The columns of the GPU rows the scanner converted (None when it found none), their
        names, streams and launches interned as _gpu_columns interns them."""
        if not len(scanned.gpu_ts):
            return None
        return (
            scanned.gpu_kind,
            self.names.ids_of(scanned.gpu_names)[scanned.gpu_name],
            self.streams.ids_of(scanned.streams)[scanned.gpu_stream],
            scanned.gpu_ts,
            scanned.gpu_dur,
            scanned.gpu_correlation,
            self.launches.ids_of(scanned.launches)[scanned.gpu_launch]
            if self._keep_launch
            else _UNREAD,
        )

    def _add_each(self, pairs: Iterable[tuple[Any, int]], lists: _Lists) -> None:
        """The per-event path: exact conversion, bad events skipped and counted."""
        pairs = list(pairs)
        if pairs and has_raw_numbers([pairs[0][0]]):
            check_raw_numbers([e for e, _ in pairs])  # every number, before any is used
        for e, kind in pairs:
            try:
                self._add_event(e, kind, lists)
            except BadNumber as e:
                self.quality[str(e)] += 1

    def absorb_before(self, part: TraceEvents, renumber: Renumber | None = None) -> None:
        """Put the rows of an earlier part of the same file (a worker's) before ours.

        Rows stay in file order, so statistics accumulate in the same order as when the file
        is read serially and come out identical to the last bit. ``renumber``: maps the
        part's CPU rows to our ids (default ``cpu_rows.renumbered``), given the maps of the
        thread, name and shape ids.
        """
        self._absorb_comms_before(part)
        if len(part.memory.ts):
            threads = self.threads.ids_of(part.threads) if part.threads else None
            self._memory.insert(0, allocations.renumbered(part.memory, threads))
        names = self.names.ids_of(part.names) if part.names else np.empty(0, np.int32)
        streams = self.streams.ids_of(part.streams) if part.streams else np.empty(0, np.int32)
        gpu = part.gpu
        if len(gpu.ts):
            launch = _UNREAD
            if self._keep_launch:
                ids = self.launches.ids_of(part.launches) if part.launches else _UNREAD
                launch = ids[gpu.launch]
            columns = (
                gpu.kind,
                names[gpu.name],
                streams[gpu.stream],
                gpu.ts,
                gpu.dur,
                gpu.correlation,
                launch,
            )
            self._gpu.prepend(columns)
        if len(part.runtime.ts):
            self._runtime.prepend((part.runtime.correlation, part.runtime.ts))
        if len(part.cpu):
            threads = self.threads.ids_of(part.threads)
            shapes = self._shape_ids(list(part.shapes)) if part.shapes else None
            renumbered = (renumber or cpu_rows.renumbered)(part.cpu, threads, names, shapes)
            self._cpu_before.insert(0, renumbered)
        if self.keep_frames and len(part.threads):
            threads = self.threads.ids_of(part.threads)
            kept = frames.long_frames(arrays_of(part.frames), self._frames_from_ns)
            part_frames = from_arrays(FrameColumns, kept)  # a worker may have kept them all
            self._frames.prepend(frames.renumbered_frames(part_frames, threads, names))
            self._flows.prepend(frames.renumbered_flows(part.flows, threads))
        if part.span_ns is not None:
            self._widen_span(*part.span_ns)
        self._steps[:0] = part.steps
        self.quality.update(part.quality)
        self.cpu_quality.update(part.cpu_quality)

    def _absorb_comms_before(self, part: TraceEvents) -> None:
        """The part's metadata rows before ours, whose kernels move down by its GPU rows."""
        n = len(part.gpu.ts)
        self._comm = [comms.shifted(rows, n) for rows in self._comm]
        self._gpu_rows += n
        if len(part.comms.key):
            keys = self.comm_keys.ids_of(part.comm_keys)
            threads = self.threads.ids_of(part.threads) if part.threads else None
            self._comm.insert(0, comms.renumbered(part.comms, keys, threads))

    def _commit_gpu(self, columns: tuple[np.ndarray, ...]) -> None:
        ts, dur = columns[GPU_TS], columns[GPU_DUR]
        self._gpu_rows += len(ts)
        self._gpu.append(columns)
        self._widen_span(int(ts.min()), int((ts + dur).max()))

    def _commit_runtime(self, corr: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> None:
        if len(ts) == 0:
            return
        has = corr >= 0
        self._runtime.append((corr[has], ts[has]))
        self._widen_span(int(ts.min()), int((ts + dur).max()))

    def _add_event(self, e: Any, kind: int, lists: _Lists) -> None:
        ts_value = value_of(e.ts)
        if ts_value is None:
            raise BadNumber
        ts = to_ns(ts_value)
        dur = self._duration(e)
        if kind <= MEMSET:
            self._add_gpu(e, kind, ts, dur, lists)
        elif kind == _RUNTIME:
            corr = _correlation(e)
            if corr >= 0:
                lists.rt_corr.append(corr)
                lists.rt_ts.append(ts)
            lists.rt_start.append(ts)
            lists.rt_end.append(ts + dur)
            if self.keep_cpu:
                corr = corr if corr >= 0 else cpu_rows.UNCORRELATED
                self._add_cpu(e, ts, dur, corr, cpu_rows.NO_SHAPE, lists)
        elif e.name.startswith(STEP_PREFIX):
            self._add_step(e.name, ts, dur, kind == _GPU_ANNOTATION, lists)
        elif self.keep_cpu and kind == _CPU_ANNOTATION:
            shape = int(self._shape_ids(_shape_keys([e]))[0])
            thread = self._add_cpu(e, ts, dur, int(_op_kinds([e])[0]), shape, lists)
            if comms.carries(e):
                lists.comm.append((e, comms.NO_GPU_ROW, thread, ts, ts + dur))

    def _add_cpu(self, e: Any, ts: int, dur: int, corr: int, shape: int, lists: _Lists) -> int:
        """Add one CPU row; its thread id."""
        thread = self.threads.id((e.pid, e.tid))
        lists.cpu.append((thread, self.names.id(e.name), ts, ts + dur, corr, shape))
        return thread

    def _duration(self, e: Any) -> int:
        dur_value = value_of(e.dur)
        if dur_value is None:
            self.quality["events without dur (counted as 0)"] += 1
            return 0
        dur = to_ns(dur_value)
        if dur < 0:
            raise BadNumber(NEGATIVE_DUR)
        return dur

    def _add_gpu(self, e: Any, kind: int, ts: int, dur: int, lists: _Lists) -> None:
        key = batch.stream_key(e)
        lists.kind.append(kind)
        lists.name.append(self.names.id(e.name))
        lists.stream.append(self.streams.id(key))
        lists.ts.append(ts)
        lists.dur.append(dur)
        lists.corr.append(_correlation(e))
        launch = launches.launch_ids(self.launches, [e])[0] if self._keep_launch else 0
        lists.launch.append(int(launch))
        if comms.carries(e):
            row = self._gpu_rows + len(lists.kind) - 1  # this batch's rows are not committed
            lists.comm.append((e, row, comms.NO_THREAD, ts, ts + dur))

    def _add_step(self, name: str, ts: int, dur: int, on_gpu: bool, lists: _Lists) -> None:
        number = name[len(STEP_PREFIX) :]
        if number.isdecimal():  # as \d: not ², which isdigit() accepts and int() refuses
            lists.steps.append(StepWindow(int(number), ts, ts + dur, on_gpu))

    def _commit(self, lists: _Lists) -> None:
        if lists.kind:
            self._commit_gpu(
                (
                    np.array(lists.kind, dtype=np.int8),
                    np.array(lists.name, dtype=np.int32),
                    np.array(lists.stream, dtype=np.int32),
                    np.array(lists.ts, dtype=np.int64),
                    np.array(lists.dur, dtype=np.int64),
                    np.array(lists.corr, dtype=np.int64),
                    np.array(lists.launch, dtype=np.int32),
                )
            )
        if lists.rt_corr:
            self._runtime.append(
                (np.array(lists.rt_corr, dtype=np.int64), np.array(lists.rt_ts, dtype=np.int64))
            )
        if lists.rt_end:
            self._widen_span(min(lists.rt_start), max(lists.rt_end))
        if lists.cpu:
            table = np.array(lists.cpu, dtype=np.int64)
            self._cpu.append(
                cpu_rows.rows(**{f: table[:, i] for i, f in enumerate(cpu_rows.FIELDS)})
            )
        for step in lists.steps:
            self._widen_span(step.start_ns, step.end_ns)
        self._steps.extend(lists.steps)

    def _widen_span(self, start: int, end: int) -> None:
        if self._span is None:
            self._span = (start, end)
        else:
            self._span = (min(self._span[0], start), max(self._span[1], end))

    def add_columns(
        self,
        gpu: tuple[np.ndarray, ...] | None = None,
        runtime: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
        cpu: np.ndarray | None = None,
        steps: Iterable[StepWindow] = (),
    ) -> None:
        """Columns converted elsewhere (an Nsight Systems export): GPU rows as (kind, name,
        stream, ts, dur, correlation, launch), runtime calls as (correlation, ts, dur), CPU rows of
        cpu_rows.ROW, step windows. Ids refer to this collector's interners."""
        if gpu is not None and len(gpu[GPU_TS]):
            self._commit_gpu(gpu)
        if runtime is not None:
            self._commit_runtime(*runtime)
        if cpu is not None:
            self._cpu.append(cpu)
        for step in steps:
            self._widen_span(step.start_ns, step.end_ns)
            self._steps.append(step)

    def finish(self, reader: TraceReader) -> TraceEvents:
        """All columns, joined (the collector is emptied); stream ids renumbered in the order
        of their values."""
        return self.finish_as(str(reader.path), reader.info.size_bytes, reader.header, reader.stats)

    def finish_as(
        self, path: str, size_bytes: int, header: dict[str, Any], read: ReadStats
    ) -> TraceEvents:
        """``finish`` for a source that is not a TraceReader."""
        # The names packed first, each string freed as it is packed (the interner is spent),
        # before the columns are joined: the three are never all in memory together.
        self.names.ids.clear()
        names = PackedNames.draining(self.names.values)
        gpu = self._gpu.join()
        gpu[GPU_STREAM], streams = _sorted_streams(gpu[GPU_STREAM], self.streams.values)
        self._cpu.flush()
        return TraceEvents(
            path=path,
            size_bytes=size_bytes,
            header=header,
            read=read,
            names=names,
            streams=streams,
            gpu=from_arrays(GpuColumns, gpu),
            runtime=from_arrays(RuntimeColumns, self._runtime.join()),
            steps=self._steps,
            span_ns=self._span,
            quality=self.quality,
            cpu=cpu_rows.from_parts([*self._cpu_before, self._cpu]),
            cpu_quality=self.cpu_quality,
            threads=self.threads.values,
            launches=self.launches.values,
            shapes=self.shapes.values[1:] if self.shapes.values else [],
            comms=from_arrays(CommColumns, join_columns(self._comm, COMM_COLUMNS)),
            comm_keys=self.comm_keys.values,
            memory=from_arrays(MemoryColumns, join_columns(self._memory, MEMORY_COLUMNS)),
            frames=from_arrays(FrameColumns, self._frames.join()),
            flows=from_arrays(FlowColumns, self._flows.join()),
            frames_read=self.keep_frames,
            frames_from_ns=self._frames_from_ns if self.keep_frames else 0,
        )


def scan_rule(keep_cpu: bool) -> dict[str, list[bytes]]:
    """The events this collector never keeps, for the compiled scanner to drop unread
    (traceview.read.compiled; the Python reader decodes them and _split leaves them out).

    A superset of what _split keeps is handed to Python: complete events of the categories in
    ``categories`` are dropped unless their name starts with, ends with or holds one of the
    ``keep_*`` texts; events of no kind (not complete, or of a category not in ``known``) are
    dropped unless named as in ``keep_other_names``. Whoever teaches the collector to keep
    another kind of event changes this rule with it (tests/real/test_reader_paths.py compares
    the two readers on every trace)."""
    kinds = {cat: kind for cat, kind in _CATEGORIES.items()}
    gpu_annotations = [c for c, k in kinds.items() if k == _GPU_ANNOTATION]
    python = [c for c, k in kinds.items() if k == _PYTHON]
    cpu_annotations = [c for c, k in kinds.items() if k == _CPU_ANNOTATION]
    # With CPU rows every CPU op is kept, and the python frames that may be step markers.
    dropped = gpu_annotations + python + ([] if keep_cpu else cpu_annotations)
    return {
        "known": [c.encode() for c in kinds],
        "categories": [c.encode() for c in dropped],
        "keep_prefixes": [STEP_PREFIX.encode()],
        "keep_suffixes": [frame.encode() for frame in STEP_FRAMES],
        "keep_contains": [frame.encode() for frame in MODEL_FRAMES],
        "keep_other_names": [MEMORY.encode()],
    }


def is_gpu_activity(cat: str) -> bool:
    """Whether events of this category are GPU rows (a kernel, memcpy or memset)."""
    return _CATEGORIES.get(cat.lower(), _OTHER) in (KERNEL, MEMCPY, MEMSET)


GPU_ANNOTATION_CATEGORY = "gpu_user_annotation"


class _Categories(dict[str, int]):
    """Category text → kind, each new text looked up once (case-insensitively)."""

    def __missing__(self, cat: str) -> int:
        kind = self[cat] = _CATEGORIES.get(cat.lower(), _OTHER)
        return kind


def _carriers(scanned: ScannedRows, gpu: bool) -> tuple[list[int], list[Any]]:
    """The GPU rows (``gpu``), else the CPU op rows, of a chunk's scanned rows whose decoded
    event (``comm_events``) carries a collective's metadata, and those events."""
    at, carrying = [], []
    for row, e in zip(scanned.comm_rows.tolist(), scanned.comm_events, strict=True):
        if (row >= 0 if gpu else COMM_CHECKED < row < 0) and comms.carries(e):
            at.append(row if gpu else -1 - row)
            carrying.append(e)
    return at, carrying


def _picked(items: list[Any], at: np.ndarray) -> list[Any]:
    """The items at the positions ``at``, in order."""
    return [items[i] for i in at.tolist()]


def _span_or_none(e: Any) -> tuple[int, int] | None:
    """(ts, end) in ns of an event the per-event path keeps (dur missing: 0), else None."""
    ts_value, dur_value = value_of(e.ts), value_of(e.dur)
    if ts_value is None:
        return None
    try:
        ts, dur = to_ns(ts_value), 0 if dur_value is None else to_ns(dur_value)
    except BadNumber:
        return None
    return (ts, ts + dur) if dur >= 0 else None


def _op_kinds(ops: list[Any]) -> np.ndarray:
    """The CPU-row mark of each CPU op: ANNOTATION for a user_annotation, FRAME for a
    python frame (only step markers read those), else OP."""
    marks = {"user_annotation": cpu_rows.ANNOTATION, "python_function": cpu_rows.FRAME}
    return np.array([marks.get(e.cat.lower(), cpu_rows.OP) for e in ops], dtype=np.int64)


def _shape_keys(ops: list[Any]) -> list[Any]:
    """Per CPU op, its shape key (interned as its (Input Dims, Input type, Concrete Inputs)
    raw text, see _shape_of): the three texts joined, made a batch at a time."""
    try:
        args = [e.args or _NO_ARGS for e in ops]
        dims = [a.input_dims or a.input_dims_2021 for a in args]
        types = [a.input_type for a in args]
        concrete = [a.concrete_inputs for a in args]
    except AttributeError:  # decoded without shapes: a span that has none
        return [None] * len(ops)
    return list(map(_SHAPE_SEPARATOR.join, zip(dims, types, concrete, strict=True)))


# Never in JSON text (a control character, which a string holds only escaped), so the three
# texts of a shape key are found again between it.
_SHAPE_SEPARATOR = b"\x1f"
_NO_ARGS = ShapedArgs()


def _shape_of(key: Any) -> tuple[bytes, bytes, bytes] | None:
    """A shape key as it is kept: the (dims, types, concrete) texts; None without dims."""
    if type(key) is not bytes:
        return key  # type: ignore[no-any-return]
    dims, types, concrete = key.split(_SHAPE_SEPARATOR)
    return (dims, types, concrete) if dims else None


def _correlation(e: Any) -> int:
    """The event's correlation id, or −1 (absent, or too large for int64)."""
    args = e.args
    if args is None or args.correlation is None or not 0 <= args.correlation <= _INT64_MAX:
        return -1
    return int(args.correlation)


def _sorted_streams(
    ids: np.ndarray, streams: list[tuple[Any, Any]]
) -> tuple[np.ndarray, list[StreamKey]]:
    """Stream ids in the order of the (device, stream) values, numbers before text.

    Ids then do not depend on the order events were read in (serial or in parallel parts).
    ``ids`` (the join's own, writable) are renumbered in place: a shared column stays shared.
    """
    order = sorted(range(len(streams)), key=lambda i: tuple(map(_value_key, streams[i])))
    remap = np.empty(len(order), dtype=np.int32)
    remap[order] = np.arange(len(order), dtype=np.int32)
    keys = [StreamKey(*streams[i]) for i in order]
    # A slice at a time: np.take(remap, ids, out=ids) buffers the whole column and its
    # indices as intp (6.5 M rows: +74 MiB and 120 ms, against +1 MiB and 15 ms).
    for start in range(0, len(ids), _RENUMBER_ROWS):
        part = ids[start : start + _RENUMBER_ROWS]
        part[:] = remap[part]
    return ids, keys


_RENUMBER_ROWS = 1 << 18


def _value_key(value: Any) -> tuple[int, Any]:
    """Sort key for trace values that may be numbers, text or null."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, value)
    return (1, str(value))
