"""Use both cores on a big trace: a forked worker reads the event array from its start while
this process skips to the middle, finds an event boundary there and tells the worker to stop
at it, then reads the rest; the parts merge into one TraceEvents. The worker writes its
columns into an in-memory file (memfd) that this process maps and reads them from, without
a copy through a pipe (elsewhere they come through the pipe as raw bytes).

The split is an optimisation only: if either part cannot be read exactly as it was cut, the
whole file is read again serially, which gives the same result or the precise error.
"""

from __future__ import annotations

import functools
import mmap
import multiprocessing
import os
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

from traceview.columns.collect import EventCollector
from traceview.columns.cpu_rows import CpuRows, SpillFile
from traceview.columns.model import TraceEvents
from traceview.columns.numbers import NeedsExactTimes
from traceview.columns.schema import (
    GPU_COLUMNS,
    RUNTIME_COLUMNS,
    GpuColumns,
    RuntimeColumns,
    arrays_of,
    empty,
    from_arrays,
)
from traceview.errors import TraceviewError
from traceview.read.reader import MainPart, SplitFailed, TraceReader, WorkerPart

PARALLEL_MIN_BYTES = 256 << 20


def collect_events(reader: TraceReader, keep_cpu: bool = False) -> TraceEvents:
    """Read the whole trace through ``reader`` into TraceEvents (CPU activity if asked): in
    two processes when it is big and the CPU allows (each part by its own reader, made by
    ``reader.for_part``; ``reader`` itself reads the file only if the split fails)."""
    split = reader.plan_split(_min_bytes()) if (os.cpu_count() or 1) > 1 else None
    if split is None:
        return _serial(reader, keep_cpu)
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    boundary_in, boundary_out = context.Pipe(duplex=False)
    memfd = _memfd()
    spill = SpillFile.made_now() if keep_cpu else None  # the worker's CPU rows
    args = (sender, boundary_in, reader.path, split, reader.block_size, reader.stats.exact_times)
    worker = context.Process(target=_worker, args=(*args, keep_cpu, memfd, spill), daemon=True)
    worker.start()
    sender.close()
    boundary_in.close()
    part = None
    try:
        # This process skips to the middle, finds the boundary and tells the worker where
        # to stop, while the worker is already reading from the start.
        main = reader.for_part(MainPart(split_at=split[1], on_boundary=boundary_out.send))
        collector = _collect(main, keep_cpu)
        part = _receive(receiver, memfd, spill)
    except SplitFailed:
        pass
    finally:
        receiver.close()
        boundary_out.close()
        if memfd is not None:
            os.close(memfd)
        if worker.is_alive():  # a half failed: the worker's result is not wanted
            worker.kill()
        worker.join()
    if part is None:
        return _serial(reader, keep_cpu)
    collector.absorb_before(part)
    _merge_stats(main, part)
    del part  # what was not absorbed as it is (remapped ids) is freed before joining
    return collector.finish(main)


def _worker(
    conn: Connection,
    boundary: Connection,
    path: Path,
    split: tuple[int, int],
    block_size: int,
    exact_times: bool,
    keep_cpu: bool,
    memfd: int | None,
    spill: SpillFile | None,
) -> None:
    """In the forked worker: read from the first event to the boundary the main process
    finds (at or after the middle), and send the part back."""
    try:
        final_end = functools.partial(_recv_boundary, boundary)
        spec = WorkerPart(*split, final_end=final_end, exact_times=exact_times)
        part = TraceReader(path, block_size=block_size, part=spec)
        events = _serial(part, keep_cpu, spill)
    except TraceviewError as e:
        conn.send(("error", str(e)))
        return
    except Exception:  # e.g. SplitFailed: the serial read gives the answer
        conn.send(("split failed", None))
        return
    _send(conn, events, memfd)


def _memfd() -> int | None:
    """An anonymous in-memory file shared with the worker (None where there is none)."""
    try:
        return os.memfd_create("traceview-part")
    except (AttributeError, OSError):
        return None


def _recv_boundary(boundary: Connection) -> int | None:
    try:
        return boundary.recv()  # type: ignore[no-any-return]
    except EOFError:  # the main process gave up on the split
        return None


def _send(conn: Connection, part: TraceEvents, memfd: int | None) -> None:
    """The part without its columns (pickled), then the columns: written one after another
    into ``memfd`` (each at a multiple of 8 bytes), else sent through the pipe as bytes."""
    columns = [*arrays_of(part.gpu), *arrays_of(part.runtime)]  # CPU rows: in the spill file
    skeleton = replace(part, cpu=CpuRows(), gpu=empty(GpuColumns), runtime=empty(RuntimeColumns))
    in_memfd = memfd is not None and _write_columns(memfd, columns)
    shapes = [(c.dtype.str, len(c)) for c in columns]
    conn.send(("part", (skeleton, shapes, in_memfd, len(part.cpu))))
    if not in_memfd:
        for column in columns:
            conn.send_bytes(np.ascontiguousarray(column).data.cast("B"))


def _write_columns(memfd: int, columns: list[np.ndarray]) -> bool:
    """Write the columns into the memfd, 8-byte aligned; False if it cannot be written."""
    try:
        with open(memfd, "wb", closefd=False) as f:
            for column in columns:
                f.write(np.ascontiguousarray(column).data.cast("B"))
                f.write(bytes(-column.nbytes % 8))
    except OSError:  # e.g. no memory left for it: the pipe is slower but needs none
        return False
    return True


def _receive(conn: Connection, memfd: int | None, spill: SpillFile | None) -> TraceEvents:
    """The worker's part; SplitFailed if it could not read it (or died)."""
    try:
        kind, payload = conn.recv()
    except EOFError:
        raise SplitFailed from None
    if kind == "error":
        raise TraceviewError(payload)
    if kind != "part":
        raise SplitFailed
    skeleton, shapes, in_memfd, cpu_count = payload
    if in_memfd and memfd is not None:
        arrays = _map_columns(memfd, shapes)
    else:
        arrays = [_receive_array(conn, dtype, n) for dtype, n in shapes]
    columns = iter(arrays)
    gpu = from_arrays(GpuColumns, [next(columns) for _ in GPU_COLUMNS])
    runtime = from_arrays(RuntimeColumns, [next(columns) for _ in RUNTIME_COLUMNS])
    cpu = CpuRows()
    if spill is not None and cpu_count:
        spill.count = cpu_count  # what the worker wrote into the file
        cpu = CpuRows((spill,))
    part: TraceEvents = replace(skeleton, cpu=cpu, gpu=gpu, runtime=runtime)
    return part


def _map_columns(memfd: int, shapes: list[tuple[str, int]]) -> list[np.ndarray]:
    """Read-only arrays over the worker's columns in the memfd (the map lives as long as
    they do, and its pages are freed with the last of them)."""
    size = os.fstat(memfd).st_size
    mapping = mmap.mmap(memfd, size, access=mmap.ACCESS_READ) if size else b""
    arrays, offset = [], 0
    for dtype, n in shapes:
        array = np.frombuffer(mapping, dtype=dtype, count=n, offset=offset)
        arrays.append(array)
        offset += array.nbytes + (-array.nbytes % 8)
    return arrays


def _receive_array(conn: Connection, dtype: str, length: int) -> np.ndarray:
    array = np.empty(length, dtype=dtype)
    if array.nbytes:
        conn.recv_bytes_into(array)
    else:
        conn.recv_bytes()
    return array


def _serial(reader: TraceReader, keep_cpu: bool, spill: SpillFile | None = None) -> TraceEvents:
    return _collect(reader, keep_cpu, spill).finish(reader)


def _collect(reader: TraceReader, keep_cpu: bool, spill: SpillFile | None = None) -> EventCollector:
    collector = EventCollector(keep_cpu, spill)
    for events in reader.batches():
        try:
            collector.add(events)
        except NeedsExactTimes:
            collector.add(reader.redecode_exact())
    return collector


def _merge_stats(reader: TraceReader, part: TraceEvents) -> None:
    stats = reader.stats
    stats.events += part.read.events
    stats.chunks += part.read.chunks
    stats.repaired_chunks += part.read.repaired_chunks
    stats.exact_times = stats.exact_times or part.read.exact_times
    stats.skipped.update(part.read.skipped)


def _min_bytes() -> int:
    """The size from which a trace is read in two processes (env override for tests)."""
    value = os.environ.get("TRACEVIEW_PARALLEL_MIN_BYTES")
    return int(value) if value else PARALLEL_MIN_BYTES
