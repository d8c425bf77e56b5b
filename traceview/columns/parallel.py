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
import gc
import mmap
import os
import time
import weakref
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from stat import S_ISREG
from typing import TYPE_CHECKING

import numpy as np

from traceview.columns.collect import EventCollector, scan_rule
from traceview.columns.cpu_rows import CpuRows, RowSource, SpillFile, renumbered
from traceview.columns.model import TraceEvents
from traceview.columns.numbers import NeedsExactTimes, NeedsSlowDecode
from traceview.columns.packed_names import PackedNames
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
from traceview.forked import Channel, Child, patience
from traceview.read.blockhash import BlockHashes
from traceview.read.reader import MainPart, SplitFailed, TraceReader, WorkerPart
from traceview.read.threaded import ThreadedReader, threads_win

if TYPE_CHECKING:
    from multiprocessing.connection import Connection  # columns.nsys's worker sends by one

PARALLEL_MIN_BYTES = 256 << 20
# An early worker (start_early) starts reading while this process still starts: it gets more
# of the array, (reads without CPU rows, with them, with them and python frames). H200
# big.json, CPU ms from the fork to each part's read end (worker, main; 3 runs each): kernels
# at 0.05 404-412 and 437-494, at 0.07 424-435 and 428-442. Main minus worker, medians of 5
# runs: steps at 0.05 -28, 0.04 +1, 0.03 +21; gaps -22, -6, +20; summary (frames, 4 runs)
# at 0.05 -10, 0.04 +23.
_EARLY_LEAD = (0.07, 0.04, 0.05)
_RELEASE_EVERY = 4 << 20  # bytes of a worker's names read before their pages are given back


def collect_events(
    reader: TraceReader,
    keep_cpu: bool = False,
    keep_frames: bool = False,
    unused: frozenset[str] = frozenset(),
    frames_from_ns: int = 0,
    shared: bool = False,
) -> TraceEvents:
    """Read the whole trace through ``reader`` into TraceEvents (CPU activity if asked,
    python frames and flows if asked, the ``unused`` columns left out, only the frames at
    least ``frames_from_ns`` long, the columns ``shared``: see EventCollector): in two
    processes when it is big and the CPU allows (each part by its own reader, made by
    ``reader.for_part``; ``reader`` itself reads the file only if the split fails). The
    worker keeps every column (and the frames it was told to); this process leaves the
    unused ones of its part unread."""
    keep_cpu = keep_cpu or keep_frames
    reader.shapes = keep_cpu  # only CPU rows have shapes
    reader.frames = keep_frames
    forked = _adopt_early(reader, keep_cpu, keep_frames, frames_from_ns)
    serial = functools.partial(
        _serial,
        keep_cpu=keep_cpu,
        keep_frames=keep_frames,
        unused=unused,
        frames_from_ns=frames_from_ns,
        shared=shared,
    )
    handed = False  # the worker left mapping the CPU rows (stopped once they are read)
    if forked is None:
        split = reader.plan_split(split_min_bytes()) if (os.cpu_count() or 1) > 1 else None
        if split is None:
            return serial(reader)
        if threads_win(reader):  # one process, the chunks scanned on threads (read.threaded)
            try:
                threaded = ThreadedReader.of(reader)
                return serial(threaded)
            except SplitFailed:
                return serial(reader)
        if gc.get_freeze_count():  # the command line froze its start-up: so what came since
            gc.freeze()  # (the worker touches none of it; the collection after the read skips it)
        hashes = reader.hashes is not None
        forked = _Forked(reader, split, keep_cpu, keep_frames, hashes, frames_from_ns)
    try:
        # This process skips to the middle, finds the boundary and tells the worker where
        # to stop, while the worker is already reading from the start.
        on_boundary = forked.boundary_out.send
        main = reader.for_part(MainPart(split_at=forked.split[1], on_boundary=on_boundary))
        collector = _collect(main, keep_cpu, None, keep_frames, unused, frames_from_ns, shared)
        part = _receive(forked.receiver, forked.memfd, forked.spill, forked.started, reader.hashes)
        # The worker maps its CPU rows to this process's ids into a file of their own
        # while this one joins the rest and starts its analyses: the rows wait for it only
        # when first read (a worker that cannot: this process maps them).
        renumber = _WorkerRenumbers(forked)
        collector.absorb_before(part, renumber)
        _merge_stats(main, part)
        del part  # what was not absorbed as it is (remapped ids) is freed before joining
        events = collector.finish(main)
        handed = renumber.hand_over()
    except SplitFailed:  # a half failed: the worker's result is not wanted
        return serial(reader)
    finally:
        if not handed:
            forked.stop()
    return events


class _Forked:
    """The worker reading the first part of ``reader``'s file, from its fork to its end."""

    def __init__(
        self,
        reader: TraceReader,
        split: tuple[int, int],
        keep_cpu: bool,
        keep_frames: bool,
        hash_blocks: bool = False,
        frames_from_ns: int = 0,
    ) -> None:
        self.split, self.keep_cpu, self.keep_frames = split, keep_cpu, keep_frames
        self.frames_from_ns = frames_from_ns
        self.block_size = reader.block_size
        self.started = time.monotonic()  # its part is waited for with patience from then
        self.receiver, sender = Channel.pipe()
        boundary_in, self.boundary_out = Channel.pipe()
        self.memfd = new_memfd()
        self.spill = SpillFile.made_now() if keep_cpu else None  # the worker's CPU rows
        self.mapped = SpillFile.made_now() if keep_cpu else None  # ... with this one's ids
        exact = reader.stats.exact_times
        args = (sender, boundary_in, reader.path, split, reader.block_size, exact, keep_cpu)
        ends = (self.receiver, self.boundary_out)  # the worker closes this process's ends
        try:
            more = (self.memfd, self.spill, keep_frames, hash_blocks, reader.index, self.mapped)
            self.child = Child(_worker, (*args, *more, frames_from_ns), ends)
        except BaseException:
            self._close()
            raise
        finally:
            sender.close()
            boundary_in.close()

    def _close(self) -> None:
        self.receiver.close()
        self.boundary_out.close()
        if self.memfd is not None:
            os.close(self.memfd)
            self.memfd = None

    def stop(self) -> None:
        self._close()
        self.child.stop()


# See start_early: the worker, the file's stat, and the process that forked it (a process
# forked from that one, e.g. a run's rank reader, inherits the global, not the worker).
_early: tuple[_Forked, os.stat_result, int] | None = None


def start_early(
    path: Path,
    keep_cpu: bool,
    keep_frames: bool = False,
    hash_blocks: bool = False,
    frames_from_ns: int = 0,
) -> None:
    """Fork the worker of a split read of ``path`` now, while the command line still starts
    (parses its options, imports its analyses): the read that follows adopts it if it reads
    that file in the same way, else it is stopped (``stop_early``). ``hash_blocks``: the
    worker hashes the blocks it reads, for a cache key (a read that does not want them
    ignores them; one that does reads the blocks again without them). ``frames_from_ns``: the
    worker keeps only the frames at least this long (a read that keeps more stops it). Nothing
    when the file is
    small, not a regular file (a pipe is not opened before the command's options are checked),
    cannot be split or cannot be read (the read itself then says why)."""
    global _early
    stop_early()
    try:
        stat = os.stat(path)
        if not S_ISREG(stat.st_mode) or stat.st_size < split_min_bytes():
            return
        reader = TraceReader(path, shapes=keep_cpu or keep_frames, frames=keep_frames)
        if threads_win(reader):  # read in one process, on threads: no worker to fork
            return
        lead = _EARLY_LEAD[reader.shapes + reader.frames]  # frames: with shapes
        split = (
            reader.plan_split(split_min_bytes(), lead=lead) if (os.cpu_count() or 1) > 1 else None
        )
        if split is not None:
            keep_cpu = keep_cpu or keep_frames
            forked = _Forked(reader, split, keep_cpu, keep_frames, hash_blocks, frames_from_ns)
            _early = (forked, stat, os.getpid())
    except Exception:  # e.g. not a trace: the command says what it is
        return


def stop_early() -> None:
    """Stop the worker ``start_early`` forked if no read adopted it."""
    global _early
    if _early is not None and _early[2] == os.getpid():
        _early[0].stop()
    _early = None


def _adopt_early(
    reader: TraceReader, keep_cpu: bool, keep_frames: bool, frames_from_ns: int = 0
) -> _Forked | None:
    """The early worker, if it reads ``reader``'s file as this read does, keeping at least
    the frames this read keeps (else it is stopped)."""
    global _early
    if _early is None or _early[2] != os.getpid():
        _early = None  # not this process's worker
        return None
    forked, stat, _ = _early
    _early = None
    try:
        same_file = os.path.samestat(os.stat(reader.path), stat)
        now = os.stat(reader.path)
    except OSError:
        same_file = False
    same = (
        same_file
        and (now.st_size, now.st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
        and (forked.keep_cpu, forked.keep_frames) == (keep_cpu, keep_frames)
        and forked.frames_from_ns <= frames_from_ns
        and forked.block_size == reader.block_size
        and reader.decode is None
        and not reader.keep_text
        and not reader.index
        and reader.part is None
    )
    if not same:
        forked.stop()
        return None
    return forked


def _worker(
    conn: Channel,
    boundary: Channel,
    path: Path,
    split: tuple[int, int],
    block_size: int,
    exact_times: bool,
    keep_cpu: bool,
    memfd: int | None,
    spill: SpillFile | None,
    keep_frames: bool = False,
    hash_blocks: bool = False,
    index: bool = False,
    mapped: SpillFile | None = None,
    frames_from_ns: int = 0,
) -> None:
    """In the forked worker: read from the first event to the boundary the main process
    finds (at or after the middle), and send the part back (with the hashes of the blocks
    read if ``hash_blocks``; ``index``: with its chunks, see TraceReader; only the frames at
    least ``frames_from_ns`` long); then map its CPU rows' ids into ``mapped`` when asked."""
    try:
        final_end = functools.partial(_recv_boundary, boundary)
        spec = WorkerPart(*split, final_end=final_end, exact_times=exact_times)
        part = TraceReader(
            path,
            block_size=block_size,
            part=spec,
            shapes=keep_cpu,
            frames=keep_frames,
            index=index,
        )
        if hash_blocks:
            part.hashes = BlockHashes(part.info.size_bytes)
        events = _serial(part, keep_cpu, spill, keep_frames, frames_from_ns=frames_from_ns)
    except TraceviewError as e:
        conn.send(("error", str(e)))
        return
    except Exception:  # e.g. SplitFailed: the serial read gives the answer
        conn.send(("split failed", None))
        return
    kept_cpu = spill is not None and len(events.cpu) > 0
    _send(conn, events, memfd, part.hashes)
    del events, part  # not held while the rows are mapped
    if kept_cpu and mapped is not None:
        assert spill is not None
        _renumber_when_asked(boundary, spill, mapped, conn)


class _WorkerRenumbers:
    """A ``Renumber`` (collect.EventCollector.absorb_before) that has the worker map its own
    spill file's rows into a file of their own (it is idle once its part is sent): the rows
    read from there once it is done, or mapped here if it could not (its own file left as
    it was)."""

    def __init__(self, forked: _Forked) -> None:
        self.forked = forked
        self.maps: tuple[np.ndarray, np.ndarray, np.ndarray | None] | None = None
        self.asked = 0.0  # when the maps were sent (time.monotonic())

    def __call__(
        self, source: RowSource, threads: np.ndarray, names: np.ndarray, shapes: np.ndarray | None
    ) -> RowSource:
        spill = self.forked.spill
        if not (isinstance(source, CpuRows) and source.parts == (spill,)):
            return renumbered(source, threads, names, shapes)
        try:
            self.forked.boundary_out.send((threads, names, shapes))
        except OSError:  # it died
            raise SplitFailed from None
        self.maps = (threads, names, shapes)
        self.asked = time.monotonic()
        return source

    def hand_over(self) -> bool:
        """Whether the worker was asked: its rows then wait for it (``finish``) when first
        read, and it is stopped then (or with them, if they never are)."""
        spill = self.forked.spill
        if self.maps is None or spill is None:
            return False
        self.forked.spill = None  # nothing here holds the rows: they may go unread
        spill.pending_on(self.finish)
        weakref.finalize(spill, self.forked.stop)
        return True

    def finish(self, spill: SpillFile) -> SpillFile | None:
        """The file of the rows the worker mapped, or None: they are mapped in ``spill``."""
        receiver = self.forked.receiver
        try:
            answered = receiver.poll(patience(self.asked))
            if not answered:  # stuck: stopped (what it sent before, still read)
                self.forked.child.stop()
            done = receiver.recv() if answered or receiver.poll(0) else None
        except (EOFError, OSError, ValueError):  # it died before it was done (or was stopped)
            done = None
        finally:
            self.forked.stop()
        if done == "renumbered":
            return self.forked.mapped
        if done != "unchanged":
            assert self.maps is not None
            spill.renumber(*self.maps)
        return None


def _renumber_when_asked(
    boundary: Channel, spill: SpillFile, mapped: SpillFile, conn: Channel
) -> None:
    """In the worker, its part sent: map its CPU rows' ids into ``mapped`` as the main
    process asks, once it has joined the parts (nothing if it closes the pipe first)."""
    try:
        maps = boundary.recv()
    except EOFError:
        return
    try:
        threads, names, shapes = maps
        written = spill.renumber(threads, names, shapes, into=mapped)
    except TraceviewError:
        conn.send("failed")
        return
    conn.send("renumbered" if written else "unchanged")
    if written:  # its space freed here, on the idle core, not by the main process's close
        spill.give_back()


def new_memfd() -> int | None:
    """An anonymous in-memory file shared with the worker (None where there is none)."""
    try:
        return os.memfd_create("traceview-part")
    except (AttributeError, OSError):
        return None


def _recv_boundary(boundary: Channel) -> int | None:
    try:
        return boundary.recv()  # type: ignore[no-any-return]
    except EOFError:  # the main process gave up on the split
        return None


def _send(
    conn: Channel | Connection,
    part: TraceEvents,
    memfd: int | None,
    hashes: BlockHashes | None = None,
) -> None:
    """The part without its columns and names (pickled, with the digests of the blocks
    ``hashes`` holds), then the columns, and the names as two flat arrays (their bytes, where
    each ends): written into ``memfd`` (each column, and the names, from a page boundary:
    mapped on their own, each is unmapped once used), else sent through the pipe."""
    names = PackedNames.of(part.names)
    columns = [*arrays_of(part.gpu), *arrays_of(part.runtime)]  # CPU rows: in the spill file
    named = [np.frombuffer(names.data, dtype=np.uint8), names.ends]
    skeleton = replace(
        part,
        names=PackedNames(),
        cpu=CpuRows(),
        gpu=empty(GpuColumns),
        runtime=empty(RuntimeColumns),
    )
    sections = [*([column] for column in columns), named]  # each column mapped on its own
    in_memfd = memfd is not None and write_columns(memfd, sections)
    shapes = [(c.dtype.str, len(c)) for c in (*columns, *named)]
    digests = None if hashes is None else (hashes.size, hashes.digests)
    spills = [p.spans for p in part.cpu.parts if isinstance(p, SpillFile)]
    cpu = (len(part.cpu), spills[0] if len(spills) == 1 else None)  # the rows' spans
    conn.send(("part", (skeleton, shapes, in_memfd, cpu, digests)))
    if not in_memfd:
        for column in (*columns, *named):
            conn.send_bytes(np.ascontiguousarray(column).data.cast("B"))


def write_columns(memfd: int, sections: list[list[np.ndarray]]) -> bool:
    """Write the arrays into the memfd, 8-byte aligned, each section from a page boundary
    (mapped on its own); False if it cannot be written."""
    try:
        with open(memfd, "wb", closefd=False) as f:
            for section in sections:
                f.write(bytes(-f.tell() % mmap.ALLOCATIONGRANULARITY))
                for column in section:
                    f.write(np.ascontiguousarray(column).data.cast("B"))
                    f.write(bytes(-column.nbytes % 8))
    except OSError:  # e.g. no memory left for it: the pipe is slower but needs none
        return False
    return True


def _receive(
    conn: Channel | Connection,
    memfd: int | None,
    spill: SpillFile | None,
    started: float,
    hashes: BlockHashes | None = None,
) -> TraceEvents:
    """The worker's part; SplitFailed if it could not read it (or died, or has not sent it
    in time: forked.patience from ``started``, its fork; the caller stops it). Its names are
    over a mapping of their own, unmapped once the part is dropped (after its names are
    interned), not when the columns are. The digests of the blocks it hashed (of a file of
    the same size) go into ``hashes``."""
    if not conn.poll(patience(started)):  # stuck (e.g. on a lock held at the fork)
        raise SplitFailed
    try:
        kind, payload = conn.recv()
    except (EOFError, OSError):  # died before or while sending ("end of file during message")
        raise SplitFailed from None
    if kind == "error":
        raise TraceviewError(payload)
    if kind != "part":
        raise SplitFailed
    skeleton, shapes, in_memfd, (cpu_count, spans), digests = payload
    if hashes is not None and digests is not None and digests[0] == hashes.size:
        hashes.digests.update(digests[1])
    n_columns = len(GPU_COLUMNS) + len(RUNTIME_COLUMNS)
    names_mapping = None
    if in_memfd and memfd is not None:
        sections = map_columns(memfd, [*([s] for s in shapes[:n_columns]), shapes[n_columns:]])
        arrays = [array for arrays, _ in sections for array in arrays]
        names_mapping = sections[-1][1]
    else:
        try:
            arrays = [_receive_array(conn, dtype, n) for dtype, n in shapes]
        except (EOFError, OSError):  # died while sending its columns
            raise SplitFailed from None
    columns = iter(arrays)
    gpu = from_arrays(GpuColumns, [next(columns) for _ in GPU_COLUMNS])
    runtime = from_arrays(RuntimeColumns, [next(columns) for _ in RUNTIME_COLUMNS])
    data, ends = next(columns), next(columns)
    cpu = CpuRows()
    if spill is not None and cpu_count:
        spill.count = cpu_count  # what the worker wrote into the file
        spill.spans = spans
        cpu = CpuRows((spill,))
    names = (
        PackedNames(data, ends)
        if names_mapping is None
        else _MappedNames(data, ends, names_mapping)
    )
    part: TraceEvents = replace(skeleton, names=names, cpu=cpu, gpu=gpu, runtime=runtime)
    return part


def map_columns(
    memfd: int, sections: list[list[tuple[str, int]]]
) -> list[tuple[list[np.ndarray], mmap.mmap | None]]:
    """Read-only arrays over the worker's arrays in the memfd, section by section, each
    section a mapping of its own (it lives as long as its arrays do, and its pages are
    freed with the last of them); the arrays and the mapping of each section."""
    out, start = [], 0
    for shapes in sections:
        start += -start % mmap.ALLOCATIONGRANULARITY
        size = sum(np.dtype(dtype).itemsize * n + (-np.dtype(dtype).itemsize * n % 8)
                   for dtype, n in shapes)  # fmt: skip
        mapping = mmap.mmap(memfd, size, access=mmap.ACCESS_READ, offset=start) if size else None
        arrays, offset = [], 0
        for dtype, n in shapes:
            array = np.frombuffer(mapping or b"", dtype=dtype, count=n, offset=offset)
            arrays.append(array)
            offset += array.nbytes + (-array.nbytes % 8)
        out.append((arrays, mapping))
        start += size
    return out


class _MappedNames(PackedNames):
    """A worker's names over their own mapping of the memfd. Interning them reads each name
    once, in order: the pages read are given back as it goes (the memfd keeps them), so the
    worker's names never all count in this process's resident memory."""

    __slots__ = ("_mapping",)

    def __init__(self, data: np.ndarray, ends: np.ndarray, mapping: mmap.mmap) -> None:
        super().__init__(data, ends)
        self._mapping = mapping

    def __iter__(self) -> Iterator[str]:
        released = 0
        for name, end in zip(super().__iter__(), self.ends.tolist(), strict=True):
            yield name
            if end - released >= _RELEASE_EVERY:
                behind = end - end % mmap.PAGESIZE
                self._mapping.madvise(mmap.MADV_DONTNEED, released, behind - released)
                released = behind


def _receive_array(conn: Channel | Connection, dtype: str, length: int) -> np.ndarray:
    array = np.empty(length, dtype=dtype)
    if array.nbytes:
        conn.recv_bytes_into(array)
    else:
        conn.recv_bytes()
    return array


def _serial(
    reader: TraceReader,
    keep_cpu: bool,
    spill: SpillFile | None = None,
    keep_frames: bool = False,
    unused: frozenset[str] = frozenset(),
    frames_from_ns: int = 0,
    shared: bool = False,
) -> TraceEvents:
    collector = _collect(reader, keep_cpu, spill, keep_frames, unused, frames_from_ns, shared)
    return collector.finish(reader)


def _collect(
    reader: TraceReader,
    keep_cpu: bool,
    spill: SpillFile | None = None,
    keep_frames: bool = False,
    unused: frozenset[str] = frozenset(),
    frames_from_ns: int = 0,
    shared: bool = False,
) -> EventCollector:
    collector = EventCollector(keep_cpu, spill, keep_frames, unused, frames_from_ns, shared)
    # What the compiled scanner may drop unread: nothing when frames and flows are kept
    # but the scanner does not convert them (it does with the CPU ops' shapes).
    takes_frames = reader.frames and reader.shapes
    reader.scan_rule = None if keep_frames and not takes_frames else scan_rule(keep_cpu)
    for events in reader.batches():
        try:
            collector.add(events)
        except NeedsExactTimes:
            collector.add(reader.redecode_exact())
        except NeedsSlowDecode:
            collector.add(reader.redecode_slow())
    return collector


def _merge_stats(reader: TraceReader, part: TraceEvents) -> None:
    stats = reader.stats
    stats.events += part.read.events
    stats.chunks += part.read.chunks
    stats.repaired_chunks += part.read.repaired_chunks
    stats.exact_times = stats.exact_times or part.read.exact_times
    stats.skipped.update(part.read.skipped)
    if stats.index is not None and part.read.index is not None:  # the part's chunks first
        stats.index.chunks[:0] = part.read.index.chunks
    else:
        stats.index = None  # not every chunk noted


def split_min_bytes() -> int:
    """The size from which a trace is read in two processes (env override for tests)."""
    from traceview.parsing import env_count

    return env_count("TRACEVIEW_PARALLEL_MIN_BYTES", PARALLEL_MIN_BYTES)
