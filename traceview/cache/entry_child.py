"""A cache entry read in a forked child, so that the command line never loads pyarrow.

pyarrow's libraries add 28-54 MiB to a process's resident memory (by how much of them the
page cache holds), and decoding an entry leaves Arrow's buffers behind: a warm run held its
cold run's memory plus those (benchmarks/RESULTS-rust-43c.md). Here a child reads the entry
(store.read_entry), writes each column into an in-memory file (memfd) of its own, as soon as
its group is read where the read needs it no more, which this process maps, as a split read's
worker does (columns.parallel), and sends the rest: a column let go of during the analysis
frees its memory, as it did when it was Arrow's. Then, while this process starts its
analysis, it writes the CPU rows into a spill file, as a cold read keeps them, and ends, its
memory with it; the rows are read once it is done (SpillFile.pending_on).

A child that cannot be forked, dies or does not answer in time leaves the read to this
process; a damaged entry is said as such (store.DamagedEntry), as an entry read here is.
"""

from __future__ import annotations

import gc
import os
import time
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from traceview.cache import single_threaded
from traceview.cache.store import DamagedEntry, ParquetRows, read_entry
from traceview.columns.cpu_rows import BLOCK_ROWS, CpuRows, SpillFile
from traceview.columns.model import TraceEvents
from traceview.columns.packed_names import PackedNames
from traceview.columns.parallel import map_columns, new_memfd, write_columns
from traceview.columns.schema import (
    TABLES,
    CommColumns,
    Dropped,
    FlowColumns,
    FrameColumns,
    GpuColumns,
    MemoryColumns,
    RuntimeColumns,
    arrays_of,
    dropped,
    empty,
    from_arrays,
)
from traceview.forked import Channel, Child, cache_writes_forked, patience

# The column groups of TraceEvents, by field: each is sent as its arrays, a memfd each (and
# the names' two arrays).
_GROUPS = ("gpu", "runtime", "comms", "memory", "frames", "flows")
_TYPES = (GpuColumns, RuntimeColumns, CommColumns, MemoryColumns, FrameColumns, FlowColumns)
_ARRAYS = 2 + sum(len(TABLES[group]) for group in _TYPES)
# Each group's first memfd.
_FIRST = {field: sum(len(TABLES[group]) for group in _TYPES[:i]) for i, field in enumerate(_GROUPS)}
_ENTRY, _DAMAGED, _CPU = "entry", "damaged", "cpu rows"


def read_entry_aside(
    directory: Path,
    meta: dict[str, Any],
    keep_cpu: bool,
    frames: bool = False,
    unused: frozenset[str] = frozenset(),
    frames_from_ns: int = 0,
) -> TraceEvents:
    """``store.read_entry(...)``, read by a forked child where this process is the command
    line and runs one thread (a fork copies no other thread, nor the locks they hold); else,
    and when the child gives no answer, read here."""
    args = (directory, meta, keep_cpu, frames, unused, frames_from_ns)
    if not (cache_writes_forked() and single_threaded()):
        return read_entry(*args)
    memfds = [new_memfd() for _ in range(_ARRAYS)]
    try:
        if None in memfds:  # none here, or no file descriptor left
            return read_entry(*args)
        spill = SpillFile.made_now() if keep_cpu and meta["has_cpu"] else None
        events = _from_child(args, memfds, spill)  # type: ignore[arg-type]
    finally:
        for memfd in memfds:
            if memfd is not None:
                os.close(memfd)  # each mapping keeps its column
    return read_entry(*args) if events is None else events


def _from_child(
    args: tuple[Any, ...], memfds: list[int], spill: SpillFile | None
) -> TraceEvents | None:
    """The entry as the child sent it; None if it gave no answer (it is stopped then)."""
    try:
        receiver, sender = Channel.pipe()
    except OSError:  # no file descriptor left
        return None
    started = time.monotonic()
    try:
        child = Child(_read_and_send, (args, memfds, spill, sender), (receiver,), says_done=True)
    except Exception:  # e.g. no process left
        receiver.close()
        return None
    finally:
        sender.close()
    answer = _answer(receiver, started)
    if answer is None or answer[0] != _ENTRY or spill is None:
        receiver.close()
        if answer is None:
            child.stop()  # killed if it has not ended
            return None
        child.join()
        if answer[0] == _DAMAGED:
            raise DamagedEntry(answer[1])
        return _received(answer[1], memfds) if answer[0] == _ENTRY else None
    events = _received(answer[1], memfds)
    directory, meta = args[:2]
    spill.count = meta["cpu_rows"]  # being written by the child
    spill.pending_on(_CpuRows(child, receiver, directory / "cpu.parquet").finish)
    weakref.finalize(spill, child.stop)  # the rows never read: it is not waited for
    return replace(events, cpu=CpuRows((spill,)))


def _answer(receiver: Channel, started: float) -> tuple[str, Any] | None:
    """The child's answer; None if it died before or while answering, or is stuck (e.g. on
    a lock held at the fork): it has not answered within forked.patience."""
    try:
        if not receiver.poll(patience(started)):
            return None
        answer = receiver.recv()
    except (EOFError, OSError):
        return None
    return answer if isinstance(answer, tuple) and len(answer) == 2 else None


def _read_and_send(
    args: tuple[Any, ...], memfds: list[int], spill: SpillFile | None, sender: Channel
) -> None:
    """In the child: read the entry, send it (or why it is damaged), then write the CPU rows
    into ``spill`` and say so."""
    gc.disable()  # a short life: no collection copies the pages of objects shared with the parent
    written = _Written(memfds)
    try:
        directory, meta, keep_cpu, frames, unused, frames_from_ns = args
        events = read_entry(
            directory, meta, keep_cpu, frames, unused, frames_from_ns, sink=written.group
        )
        cpu = events.cpu
        payload = written.rest(replace(events, cpu=CpuRows()))
    except _NoMemory:
        return  # no memory for the columns: this process reads the entry itself
    except Exception as e:  # the entry is damaged: as read_entry's caller says it
        sender.send((_DAMAGED, str(e)))
        return
    sender.send((_ENTRY, payload))
    del events, payload  # the columns' memory given back before the rows are read
    if spill is not None:
        for block in cpu.blocks():  # a row group (BLOCK_ROWS rows) at a time
            spill.append(block)
        spill.flush()
        sender.send((_CPU, (spill.count, spill.spans)))


class _NoMemory(Exception):
    """A column could not be written into its memfd."""


class _Written:
    """Each array of the events written into its memfd of ``memfds`` (the groups' in the
    order of _GROUPS, then the names' two), a group as soon as read_entry reads it (its
    sink) where it can: the child then holds one group's arrays at a time, not all of them
    (a warm export of 7.83 GB: the child's peak 288 -> 191 MB, benchmarks/RESULTS-rust-43c.md)."""

    def __init__(self, memfds: list[int]) -> None:
        self.memfds = memfds
        self.shapes: dict[str, list[tuple[str, int, bool]]] = {}

    def group(self, field: str, group: Any) -> Any:
        """The group written, and emptied."""
        arrays = arrays_of(group)
        first = _FIRST[field]
        self.shapes[field] = _write(arrays, self.memfds[first : first + len(arrays)])
        return empty(type(group))

    def rest(self, events: TraceEvents) -> tuple[TraceEvents, list[Any]]:
        """The groups not written yet and the names written; the events without their
        arrays (each group emptied, the names too), and each array's (dtype, length,
        whether dropped), in the order of the memfds."""
        for field in _GROUPS:
            if field not in self.shapes:
                events = replace(events, **{field: self.group(field, getattr(events, field))})
        names = PackedNames.of(events.names)
        shapes = [shape for field in _GROUPS for shape in self.shapes[field]]
        shapes += _write([np.frombuffer(names.data, dtype=np.uint8), names.ends], self.memfds[-2:])
        return replace(events, names=PackedNames()), shapes


def _write(arrays: list[np.ndarray], memfds: list[int]) -> list[tuple[str, int, bool]]:
    """Each array (but a dropped one) written into its memfd; each one's (dtype, length,
    whether dropped). _NoMemory if one cannot be written."""
    for array, memfd in zip(arrays, memfds, strict=True):
        if not (isinstance(array, Dropped) or write_columns(memfd, [[array]])):
            raise _NoMemory
    return [(a.dtype.str, len(a), isinstance(a, Dropped)) for a in arrays]


def _received(payload: tuple[Any, ...], memfds: list[int]) -> TraceEvents:
    """The events from the child's answer, each array mapped from its memfd (a dropped one
    made anew)."""
    skeleton: TraceEvents = payload[0]
    shapes: list[tuple[str, int, bool]] = payload[1]
    arrays = iter(
        dropped(np.dtype(d), n) if gone else map_columns(memfd, [[(d, n)]])[0][0][0]
        for (d, n, gone), memfd in zip(shapes, memfds, strict=True)
    )
    groups = {
        field: from_arrays(
            type(getattr(skeleton, field)),
            [next(arrays) for _ in arrays_of(getattr(skeleton, field))],
        )
        for field in _GROUPS
    }
    data, ends = next(arrays), next(arrays)
    return replace(skeleton, names=PackedNames(data, ends), **groups)


class _CpuRows:
    """The CPU rows the child writes into a spill file once the columns are sent: waited for
    when first read (or before a fork); read here from the entry if it does not write them
    all (it died, or did not say so in time: it is stopped)."""

    def __init__(self, child: Child, receiver: Channel, path: Path) -> None:
        self.child, self.receiver, self.path = child, receiver, path
        self.asked = time.monotonic()

    def finish(self, spill: SpillFile) -> SpillFile | None:
        try:
            answer = _answer(self.receiver, self.asked)
        finally:
            self.receiver.close()
        if answer is None or answer[0] != _CPU or answer[1][0] != spill.count:
            self.child.stop()
            rows = self._read_here(spill.count)
            spill.spans = rows.spans
            return rows
        self.child.join()
        spill.spans = answer[1][1]
        return None

    def _read_here(self, count: int) -> SpillFile:
        """The rows in a spill file of their own (the child's may be half written)."""
        rows = SpillFile()
        for block in ParquetRows.opened(self.path, count).blocks(BLOCK_ROWS):
            rows.append(block)
        if rows.count != count:
            raise DamagedEntry(f"{self.path.name}: {rows.count} CPU rows, expected {count}")
        return rows
