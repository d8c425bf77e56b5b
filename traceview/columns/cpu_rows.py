"""CPU activity kept for the gaps' CPU context: on disk while a trace is read, not in memory.

A big trace holds millions of CPU ops and runtime calls, and ``gaps`` needs them only to
explain its few largest gaps, which are known only once every GPU activity is read. So the
rows (36 bytes each) are appended to an unnamed temporary file as they are read, and scanned
block by block afterwards: memory stays flat whatever the trace size. A read from the cache
scans its Parquet table the same way (see cache.store).
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import IO, Protocol

import numpy as np

from traceview.columns.schema import CPU_COLUMNS
from traceview.errors import TraceviewError

# One CPU row as a record; its columns are declared in traceview.columns.schema.
ROW = np.dtype([(c.name, c.dtype) for c in CPU_COLUMNS])
FIELDS = tuple(c.name for c in CPU_COLUMNS)
OP, UNCORRELATED, ANNOTATION, FRAME = -1, -2, -3, -4  # FRAME: a step-marker python frame
NO_SHAPE = -1


def is_op(correlation: np.ndarray) -> np.ndarray:
    """Mask: the rows that are CPU ops or user annotations (not runtime calls)."""
    mask: np.ndarray = (correlation == OP) | (correlation == ANNOTATION)
    return mask


BLOCK_ROWS = 1 << 16
_PREADV = hasattr(os, "preadv")  # not on every platform: then a block is read afresh


@dataclass(frozen=True)
class Windows:
    """Sorted, disjoint closed time windows ``[lo[i], hi[i]]`` (ns); an instant is a window
    with lo = hi."""

    lo: np.ndarray
    hi: np.ndarray

    @classmethod
    def union_of(cls, lo: np.ndarray, hi: np.ndarray) -> Windows:
        """The windows covering the union of the closed intervals [lo[i], hi[i]]."""
        order = np.argsort(lo, kind="stable")
        lo, hi = lo[order], np.maximum.accumulate(hi[order]) if len(lo) else hi
        new = np.r_[True, lo[1:] > hi[:-1]] if len(lo) else np.zeros(0, dtype=bool)
        last = np.r_[np.flatnonzero(new)[1:] - 1, len(lo) - 1] if len(lo) else new
        return cls(lo[new], hi[last])

    def hits(self, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Mask: [ts[i], end[i]] overlaps one of the windows."""
        if len(self.lo) == 0:
            return np.zeros(len(ts), dtype=bool)
        first = np.minimum(np.searchsorted(self.hi, ts), len(self.hi) - 1)
        return (self.hi[first] >= ts) & (self.lo[first] <= end)


class RowSource(Protocol):
    """Rows that can be read block by block, in order.

    With ``windows``, a source may leave out blocks in which no row overlaps any of them:
    only those rows are wanted.
    """

    def __len__(self) -> int: ...

    def blocks(self, size: int, windows: Windows | None = None) -> Iterator[np.ndarray]: ...


@dataclass(frozen=True)
class CpuRows:
    """The CPU rows of a trace, in file order, from one or more sources (read in turn)."""

    parts: tuple[RowSource, ...] = ()

    def __len__(self) -> int:
        return sum(len(part) for part in self.parts)

    def blocks(
        self, size: int = BLOCK_ROWS, windows: Windows | None = None
    ) -> Iterator[np.ndarray]:
        """Structured arrays of ``ROW``, about ``size`` rows each (may be read-only); see
        RowSource for ``windows``."""
        for part in self.parts:
            yield from part.blocks(size, windows)

    def passing_blocks(self, size: int = BLOCK_ROWS) -> Iterator[np.ndarray]:
        """``blocks()`` (read-only), each valid only until the next is asked for: a spill
        file's rows are read into one buffer, reused (a block read into fresh memory costs
        its pages' faults: 0.7 against 0.3 ms a block of 2.4 MB)."""
        buffer = bytearray(size * ROW.itemsize)
        for part in self.parts:
            if isinstance(part, SpillFile):
                yield from part.blocks(size, into=buffer)
            else:
                yield from part.blocks(size)


def rows(
    *,
    thread: np.ndarray,
    name: np.ndarray,
    ts: np.ndarray,
    end: np.ndarray,
    correlation: np.ndarray,
    shape: np.ndarray | None = None,
) -> np.ndarray:
    """Columns of equal length, in the order of CPU_COLUMNS, as one structured array of
    ``ROW`` (shape: NO_SHAPE if None)."""
    out = np.empty(len(ts), dtype=ROW)
    shape = np.full(len(ts), NO_SHAPE, dtype=np.int32) if shape is None else shape
    for field, column in zip(FIELDS, (thread, name, ts, end, correlation, shape), strict=True):
        out[field] = column
    return out


@dataclass(frozen=True)
class ArrayRows:
    """Rows held in memory (small inputs, tests)."""

    table: np.ndarray

    def __len__(self) -> int:
        return len(self.table)

    def blocks(self, size: int, windows: Windows | None = None) -> Iterator[np.ndarray]:
        for start in range(0, len(self.table), size):
            yield self.table[start : start + size]


class SpillFile:
    """Rows appended to an unnamed temporary file in ``$TMPDIR`` (else /tmp), made on the
    first append; it is closed, and so gone, with this object, or when a crash ends the
    process. Made before a fork, the file is shared with the worker that fills it.

    Of each append it notes the first row, the least ts and the greatest end (``spans``,
    24 bytes an append: a chunk's rows), so that a pass wanting only the rows overlapping
    some windows reads the appends that may hold them (gaps' CPU context: a tenth)."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self.count = 0
        self.spans: Spans | None = Spans()  # None: not known (rows written elsewhere)
        # what to finish before the rows are read (a worker mapping them: see pending_on)
        self._pending: Callable[[SpillFile], SpillFile | None] | None = None
        self._kept: SpillFile | None = None  # the file now read, where it is another's
        # ``_pending`` is run once, by the first thread to read (a cache writer's thread may
        # read the rows while the analysis does); the others wait for it, then read the rows.
        self._finishing = threading.RLock()

    @classmethod
    def made_now(cls) -> SpillFile:
        """A SpillFile whose file exists already (to share it with a forked worker)."""
        spill = cls()
        spill._open()
        return spill

    def pending_on(self, finish: Callable[[SpillFile], SpillFile | None]) -> None:
        """The rows are not to be read until ``finish(self)`` has run (once, before the
        first read or the next fork): it returns another SpillFile holding them from then on,
        or None (this file holds them)."""
        self._pending = finish
        from traceview.forked import finish_before_fork

        finish_before_fork(self._finish_for_fork)

    def _finish_for_fork(self) -> None:
        """``_finish`` before a fork, which goes on if it fails: the rows then stay
        unreadable (their read says why), here and in the child."""
        with contextlib.suppress(Exception):
            self._finish()

    def _finish(self) -> None:
        if self._pending is None:
            return
        with self._finishing:  # another thread finishing it: waited for
            finish = self._pending
            if finish is None or finish is _being_finished:  # done, or by this thread (its reads)
                return
            self._pending = _being_finished
            try:
                other = finish(self)
            except BaseException as e:  # the rows may be half mapped: not to be read
                self._pending = partial(_unreadable, e)
                raise
            if other is not None and other._file is not None:
                if self._file is not None:
                    self._file.close()  # its space freed now
                self._file, self._kept = other._file, other
            self._pending = None

    def _open(self) -> IO[bytes]:
        self._finish()
        if self._file is None:
            import tempfile  # only here: most commands keep no CPU rows (start-up)

            try:
                self._file = tempfile.TemporaryFile(prefix="traceview-cpu-")  # noqa: SIM115
            except OSError as e:
                raise TraceviewError(_cannot_write(e)) from None
            weakref.finalize(self, self._file.close)
        return self._file

    def append(self, table: np.ndarray) -> None:
        """Append a structured array of ``ROW``."""
        if len(table) == 0:
            return
        try:
            self._open().write(table.view(np.uint8).data)
        except OSError as e:
            raise TraceviewError(_cannot_write(e)) from None
        if self.spans is not None:
            self.spans.note(self.count, table)
        self.count += len(table)

    def flush(self) -> None:
        """Make what was appended visible to other processes sharing the file."""
        if self._file is not None:
            try:
                self._file.flush()
            except OSError as e:
                raise TraceviewError(_cannot_write(e)) from None

    def __len__(self) -> int:
        return self.count

    def give_back(self) -> None:
        """Free the file's space now, its rows no longer wanted (by any process sharing it):
        the last close of a big file costs its pages' freeing, ~2 ms for 22 MB."""
        if self._file is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._file.fileno(), 0)

    def blocks(
        self, size: int, windows: Windows | None = None, into: bytearray | None = None
    ) -> Iterator[np.ndarray]:
        """See RowSource (with ``windows``, the appends that cannot overlap them are not
        read); ``into``: a buffer of ``size`` rows each block is read into (a block is then
        valid only until the next is asked for)."""
        self._finish()
        if self._file is None or self.count == 0:
            return
        self.flush()
        fd = self._file.fileno()  # pread: the file's offset may be shared with a worker
        runs = [(0, self.count)]
        if windows is not None and self.spans is not None:
            runs = self.spans.runs(windows, self.count)
        for first, stop in runs:
            for start in range(first, stop, size):
                n = min(size, stop - start)
                if into is None or not _PREADV:
                    data: bytes | memoryview = os.pread(fd, n * ROW.itemsize, start * ROW.itemsize)
                    got = len(data)
                else:
                    data = memoryview(into)[: n * ROW.itemsize]
                    got = os.preadv(fd, [data], start * ROW.itemsize)
                if got != n * ROW.itemsize:
                    raise TraceviewError("the temporary file of CPU rows was cut short")
                block = np.frombuffer(data, dtype=ROW)
                block.flags.writeable = False
                yield block

    def renumber(
        self,
        threads: np.ndarray,
        names: np.ndarray,
        shapes: np.ndarray | None,
        into: SpillFile | None = None,
    ) -> bool:
        """Map the rows' thread, name and shape ids in the file itself, once (what Renumbered
        does on every pass: on a 519 MB trace, 0.017 s a pass over 0.6 M rows, ~10 passes),
        or into the file of ``into`` (this one left as it was); whether any row was written.
        Each block is read into one buffer, mapped there and written back (a fresh block's
        pages cost their faults: 15 ms against 8 for 0.6 M rows)."""
        self._finish()
        if self._file is None or self.count == 0:
            return False
        if _identity(threads) and _identity(names) and (shapes is None or _identity(shapes)):
            return False
        self.flush()
        fd = self._file.fileno()
        out = fd if into is None else into._open().fileno()
        buffer = bytearray(min(BLOCK_ROWS, self.count) * ROW.itemsize)
        for start in range(0, self.count, BLOCK_ROWS):
            n = min(BLOCK_ROWS, self.count - start)
            data = memoryview(buffer)[: n * ROW.itemsize]
            if _PREADV:
                got = os.preadv(fd, [data], start * ROW.itemsize)
            else:
                read = os.pread(fd, len(data), start * ROW.itemsize)
                got = len(read)
                data[:got] = read
            if got != len(data):
                raise TraceviewError("the temporary file of CPU rows was cut short")
            _renumber(np.frombuffer(data, dtype=ROW), threads, names, shapes)
            try:
                written = os.pwrite(out, data, start * ROW.itemsize)
            except OSError as e:
                raise TraceviewError(_cannot_write(e)) from None
            if written != len(data):  # a regular file writes all unless it is full
                raise TraceviewError(_cannot_write(OSError("a short write")))
        return True


def _unreadable(error: BaseException, spill: SpillFile) -> SpillFile | None:
    raise error


def _being_finished(spill: SpillFile) -> SpillFile | None:
    """SpillFile._pending while its finishing runs (in the thread that holds its lock)."""
    raise AssertionError("never called")


class Spans:
    """Per append to a SpillFile: its first row, least ts and greatest end."""

    def __init__(self) -> None:
        self.first, self.lo, self.hi = array("q"), array("q"), array("q")

    def note(self, first: int, table: np.ndarray) -> None:
        self.first.append(first)
        self.lo.append(int(table["ts"].min()))
        self.hi.append(int(table["end"].max()))

    def runs(self, windows: Windows, count: int) -> list[tuple[int, int]]:
        """The [first, stop) row ranges of the appends whose [least ts, greatest end]
        overlaps one of ``windows`` (adjacent ones joined), of ``count`` rows in all."""
        if len(self.first) == 0:
            return [(0, count)]  # none noted: every row
        first = np.frombuffer(self.first, dtype=np.int64)
        hits = windows.hits(np.frombuffer(self.lo, np.int64), np.frombuffer(self.hi, np.int64))
        stop = np.r_[first[1:], count]
        starts = np.flatnonzero(hits & ~np.r_[False, hits[:-1]])
        ends = np.flatnonzero(hits & ~np.r_[hits[1:], False])
        return list(zip(first[starts].tolist(), stop[ends].tolist(), strict=True))


def _cannot_write(e: OSError) -> str:
    return (
        f"cannot write the temporary file of CPU rows ({e.strerror or e}); "
        "set TMPDIR to a writable directory with space, or use --no-context"
    )


@dataclass(frozen=True)
class Renumbered:
    """Another source's rows with its thread, name and shape ids mapped to this trace's."""

    source: RowSource
    threads: np.ndarray
    names: np.ndarray
    shapes: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.source)

    def blocks(self, size: int, windows: Windows | None = None) -> Iterator[np.ndarray]:
        for block in self.source.blocks(size, windows):
            block = block.copy()
            _renumber(block, self.threads, self.names, self.shapes)
            yield block


@dataclass(frozen=True)
class KindOrdered:
    """Another source's rows grouped: runtime calls, then CPU ops and annotations, then
    step-marker frames, each group in the source's order. A read adds a chunk's rows as its
    calls, then its ops, then its frames, so the rows' order in a read depends on where the
    text was cut into chunks; this one does not."""

    source: RowSource

    def __len__(self) -> int:
        return len(self.source)

    def blocks(self, size: int, windows: Windows | None = None) -> Iterator[np.ndarray]:
        for group in range(3):
            for block in self.source.blocks(size, windows):
                mark = block["correlation"]
                if group == 0:
                    keep = ~is_op(mark) & (mark != FRAME)
                else:
                    keep = is_op(mark) if group == 1 else mark == FRAME
                if keep.any():
                    yield block[keep]


def _renumber(
    block: np.ndarray, threads: np.ndarray, names: np.ndarray, shapes: np.ndarray | None
) -> None:
    """Map a writable block's thread, name and shape ids to another trace's (an identity
    map skipped; each column gathered into itself, as 4-byte words of the rows)."""
    words = block.view(np.int32).reshape(len(block), ROW.itemsize // 4)
    for field, table in (("thread", threads), ("name", names)):
        if not _identity(table):
            column = words[:, _word(field)]
            np.take(table.astype(np.int32, copy=False), column, out=column)
    if shapes is not None and len(shapes) and not _identity(shapes):
        column = words[:, _word("shape")]
        column += 1  # NO_SHAPE (−1) at 0
        np.take(np.r_[np.int32(NO_SHAPE), shapes.astype(np.int32)], column, out=column)


def _word(field: str) -> int:
    """Where an int32 column is in a row seen as 4-byte words."""
    fields = ROW.fields
    assert fields is not None
    return int(fields[field][1]) // 4


def _identity(table: np.ndarray) -> bool:
    """Whether an id map maps each id to itself."""
    return bool((table == np.arange(len(table))).all())


def renumbered(
    source: RowSource, threads: np.ndarray, names: np.ndarray, shapes: np.ndarray | None = None
) -> RowSource:
    """``source``'s rows with their ids mapped: a spill file's rewritten in place at once,
    others mapped block by block as they are read (Renumbered)."""
    parts = source.parts if isinstance(source, CpuRows) else (source,)
    spills = [part for part in parts if isinstance(part, SpillFile)]
    if spills and len(spills) == len(parts):
        for spill in spills:
            spill.renumber(threads, names, shapes)
        return source
    return Renumbered(source, threads, names, shapes)


def from_parts(parts: Sequence[RowSource]) -> CpuRows:
    """CpuRows of the non-empty sources."""
    return CpuRows(tuple(part for part in parts if len(part)))
