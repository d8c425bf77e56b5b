"""The column schema, declared once: every column of every group, its name and numpy dtype.

Everything else is derived from these tables: the column dataclasses are checked against them
when this module is imported, and the joined and empty columns (traceview.columns.collect), the
worker's transport (traceview.columns.parallel), the CPU rows' record type
(traceview.columns.cpu_rows) and the cache's Parquet schema (traceview.cache.store) are built
from them. Adding a column means adding a row here and a field to its dataclass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, NamedTuple, TypeVar

import numpy as np

KERNEL, MEMCPY, MEMSET = 0, 1, 2
GPU_KINDS = ("kernel", "memcpy", "memset")


class Column(NamedTuple):
    name: str
    dtype: np.dtype


def _table(*columns: tuple[str, str]) -> tuple[Column, ...]:
    return tuple(Column(name, np.dtype(dtype)) for name, dtype in columns)


# One row per GPU activity. kind: KERNEL, MEMCPY or MEMSET; name: index into TraceEvents.names;
# stream: index into TraceEvents.streams; ts, dur in ns; correlation: −1 when absent; launch:
# index into TraceEvents.launches (traceview.columns.launches).
GPU_COLUMNS = _table(
    ("kind", "<i1"), ("name", "<i4"), ("stream", "<i4"), ("ts", "<i8"), ("dur", "<i8"),
    ("correlation", "<i8"), ("launch", "<i4"),
)  # fmt: skip
# One row per runtime/driver call that carries a correlation id: the id and its start (ns).
RUNTIME_COLUMNS = _table(("correlation", "<i8"), ("ts", "<i8"))
# One row per CPU op or runtime call kept for the gaps' CPU context (traceview.columns.cpu_rows):
# thread: index into TraceEvents.threads; name: into TraceEvents.names; ts, end in ns;
# correlation: a runtime call's id, or a mark (cpu_rows.OP, UNCORRELATED, ANNOTATION, FRAME);
# shape: index into TraceEvents.shapes, or cpu_rows.NO_SHAPE.
CPU_COLUMNS = _table(
    ("thread", "<i4"), ("name", "<i4"), ("ts", "<i8"), ("end", "<i8"), ("correlation", "<i8"),
    ("shape", "<i4"),
)  # fmt: skip

# One row per kernel or CPU op carrying a collective's metadata (traceview.columns.comms; no
# rows in a trace without it): gpu_row: the kernel's GPU row, −1 for a CPU op; thread: the CPU
# op's (index into TraceEvents.threads), −1 for a kernel; ts, end in ns; key: index into
# TraceEvents.comm_keys (process group, collective, dtype); the numbers, −1 when absent.
COMM_COLUMNS = _table(
    ("gpu_row", "<i8"), ("thread", "<i4"), ("ts", "<i8"), ("end", "<i8"), ("key", "<i4"),
    ("in_nelems", "<i8"), ("out_nelems", "<i8"), ("group_size", "<i8"), ("seq", "<i8"),
)  # fmt: skip
# One row per ``[memory]`` instant event of the caching allocator (traceview.columns.allocations;
# no rows in a trace recorded without profile_memory): thread: the CPU thread that asked (index
# into TraceEvents.threads, −1 when CPU rows are not kept); ts in ns; device_type: the event's
# ``Device Type`` (0 CPU, 1 CUDA, 6 HIP, ...); device: its ``Device Id``; bytes: its ``Bytes``
# (< 0: a free); addr: its ``Addr`` (bits of a 64-bit address); allocated, reserved: its
# ``Total Allocated`` and ``Total Reserved`` after the event.
MEMORY_COLUMNS = _table(
    ("thread", "<i4"), ("ts", "<i8"), ("device_type", "<i4"), ("device", "<i4"), ("bytes", "<i8"),
    ("addr", "<i8"), ("allocated", "<i8"), ("reserved", "<i8"),
)  # fmt: skip

# One row per python frame (``python_function`` event, traces recorded with_stack=True), kept
# only by reads that ask for frames (``source``; traceview.columns.frames): thread: index into
# TraceEvents.threads; name: into TraceEvents.names (``file.py(LINE): function`` or
# ``nn.Module: Class_N``); ts, end in ns; python_id, python_parent: its ``Python id`` and
# ``Python parent id`` (−1 when absent, null or not an int64).
FRAME_COLUMNS = _table(
    ("thread", "<i4"), ("name", "<i4"), ("ts", "<i8"), ("end", "<i8"), ("python_id", "<i8"),
    ("python_parent", "<i8"),
)  # fmt: skip
# One row per ``fwdbwd`` flow event (kept with the frames), tying a backward op to the forward
# op that made it: flow: its ``id``; thread: index into TraceEvents.threads; ts in ns;
# finish: 0 for the start (ph ``s``, on the forward op), 1 for the finish (ph ``f``, on the
# backward op).
FLOW_COLUMNS = _table(("flow", "<i8"), ("thread", "<i4"), ("ts", "<i8"), ("finish", "<i1"))

# Columns a read may leave out for a command that never reads them (traceview.app.reading's
# ``unused``), as "group.column": each stays in its group as a Dropped column.
GPU_LAUNCH = "gpu.launch"  # the launch configurations (``unique`` alone; none interned)
RUNTIME_TS = "runtime.ts"  # the launch times: steps, gaps' host waits, the ops' links
# the fwdbwd flows: ``source``, ``report`` and ``export`` read them; summary, the frames alone
FLOWS = frozenset(f"flows.{c.name}" for c in FLOW_COLUMNS)
# the frames' Python ids: ``source`` alone checks them against the nesting (16 B a frame)
FRAME_PARENTS = frozenset({"frames.python_id", "frames.python_parent"})
DROPPABLE = frozenset({GPU_LAUNCH, RUNTIME_TS}) | FLOWS | FRAME_PARENTS


def unused_of(group: str, unused: frozenset[str]) -> frozenset[str]:
    """The names of ``group``'s columns among ``unused`` ("group.column" each)."""
    return frozenset(c.partition(".")[2] for c in unused if c.partition(".")[0] == group)


@dataclass(frozen=True)
class GpuColumns:
    """One row per GPU activity (GPU_COLUMNS)."""

    kind: np.ndarray
    name: np.ndarray
    stream: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    correlation: np.ndarray
    launch: np.ndarray


@dataclass(frozen=True)
class RuntimeColumns:
    """One row per runtime/driver call that carries a correlation id (RUNTIME_COLUMNS)."""

    correlation: np.ndarray
    ts: np.ndarray


@dataclass(frozen=True)
class CommColumns:
    """One row per kernel or CPU op carrying a collective's metadata (COMM_COLUMNS)."""

    gpu_row: np.ndarray
    thread: np.ndarray
    ts: np.ndarray
    end: np.ndarray
    key: np.ndarray
    in_nelems: np.ndarray
    out_nelems: np.ndarray
    group_size: np.ndarray
    seq: np.ndarray


@dataclass(frozen=True)
class MemoryColumns:
    """One row per ``[memory]`` event (MEMORY_COLUMNS)."""

    thread: np.ndarray
    ts: np.ndarray
    device_type: np.ndarray
    device: np.ndarray
    bytes: np.ndarray
    addr: np.ndarray
    allocated: np.ndarray
    reserved: np.ndarray


@dataclass(frozen=True)
class FrameColumns:
    """One row per python frame (FRAME_COLUMNS)."""

    thread: np.ndarray
    name: np.ndarray
    ts: np.ndarray
    end: np.ndarray
    python_id: np.ndarray
    python_parent: np.ndarray


@dataclass(frozen=True)
class FlowColumns:
    """One row per ``fwdbwd`` flow event (FLOW_COLUMNS)."""

    flow: np.ndarray
    thread: np.ndarray
    ts: np.ndarray
    finish: np.ndarray


Group = TypeVar(
    "Group", GpuColumns, RuntimeColumns, CommColumns, MemoryColumns, FrameColumns, FlowColumns
)
AnyGroup = GpuColumns | RuntimeColumns | CommColumns | MemoryColumns | FrameColumns | FlowColumns
TABLES: dict[type, tuple[Column, ...]] = {
    GpuColumns: GPU_COLUMNS,
    RuntimeColumns: RUNTIME_COLUMNS,
    CommColumns: COMM_COLUMNS,
    MemoryColumns: MEMORY_COLUMNS,
    FrameColumns: FRAME_COLUMNS,
    FlowColumns: FLOW_COLUMNS,
}


class SchemaMismatch(ValueError):
    """Columns that are not those of their table (another name, length or dtype)."""


def arrays_of(columns: AnyGroup) -> list[np.ndarray]:
    """The group's arrays, in the order of its table."""
    return [getattr(columns, c.name) for c in TABLES[type(columns)]]


def from_arrays(group: type[Group], arrays: Sequence[np.ndarray]) -> Group:
    """The group from arrays in table order; SchemaMismatch unless each has its column's dtype
    and all have one length."""
    table = TABLES[group]
    if len(arrays) != len(table) or len({len(a) for a in arrays}) > 1:
        raise SchemaMismatch(f"{group.__name__}: {len(arrays)} columns of unequal lengths")
    for column, array in zip(table, arrays, strict=True):
        if array.dtype != column.dtype:
            raise SchemaMismatch(f"column {column.name} is {array.dtype}, not {column.dtype}")
    return group(*arrays)


def empty(group: type[Group]) -> Group:
    """The group with no rows."""
    return group(*(np.empty(0, dtype=c.dtype) for c in TABLES[group]))


def join_columns(
    parts: list[tuple[np.ndarray, ...]], table: tuple[Column, ...]
) -> list[np.ndarray]:
    """Per-batch column tuples (in table order) joined into columns. ``parts`` is emptied and
    each column's batches freed once it is joined, so the peak is the rows plus one column,
    not twice."""
    batches = [list(c) for c in zip(*parts, strict=True)] or [[] for _ in table]
    parts.clear()
    columns = []
    for i, column in enumerate(table):
        if not batches[i]:
            columns.append(np.empty(0, dtype=column.dtype))
            continue
        columns.append(np.concatenate(batches[i]))
        batches[i] = []
    return columns


class ColumnDropped(TypeError):
    """A Dropped column was used for more than its length or a selection of its rows."""


class Dropped(np.ndarray):
    """A column the read left out (DROPPABLE): its dtype and length, no data (a read-only
    zero-stride view of one element). Selecting rows gives another Dropped column of their
    count (a group's rows are selected column by column); any other use raises ColumnDropped,
    so a command that reads a column it declared unused fails loudly, never on zeros."""

    def __getitem__(self, key: Any) -> Dropped:
        return dropped(self.dtype, _selected(len(self), key))

    def __setitem__(self, key: Any, value: Any) -> None:
        raise ColumnDropped("a dropped column is read-only")

    def __iter__(self) -> Any:
        raise ColumnDropped("a dropped column has no values")

    def __array_ufunc__(self, *args: Any, **kwargs: Any) -> Any:
        raise ColumnDropped("a dropped column has no values")

    def __array_function__(self, *args: Any, **kwargs: Any) -> Any:
        raise ColumnDropped("a dropped column has no values")

    def astype(self, *args: Any, **kwargs: Any) -> Any:
        raise ColumnDropped("a dropped column has no values")

    def tolist(self) -> Any:
        raise ColumnDropped("a dropped column has no values")

    def __repr__(self) -> str:
        return f"Dropped({self.dtype}, {len(self)})"


def dropped(dtype: np.dtype, rows: int) -> Dropped:
    """A Dropped column of ``rows`` rows."""
    return np.broadcast_to(np.zeros(1, dtype=dtype), (rows,)).view(Dropped)


def _selected(n: int, key: Any) -> int:
    """How many of ``n`` rows ``key`` selects (a slice, a mask or an array of positions)."""
    if isinstance(key, slice):
        return len(range(*key.indices(n)))
    if isinstance(key, np.ndarray) and not isinstance(key, Dropped) and key.ndim == 1:
        if key.dtype == np.bool_:
            if len(key) != n:
                raise IndexError(f"a mask of {len(key)} rows for {n}")
            return int(np.count_nonzero(key))
        if key.dtype.kind in "iu":
            return len(key)
    raise ColumnDropped(f"a dropped column has no values (indexed by {type(key).__name__})")


def _check_dataclasses() -> None:
    for group, table in TABLES.items():
        declared = tuple(f.name for f in fields(group))
        if declared != tuple(c.name for c in table):
            raise TypeError(f"{group.__name__} declares {declared}, its table {table}")


_check_dataclasses()
