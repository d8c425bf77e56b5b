"""Columns appended batch by batch into fixed-size segments, joined once at the end.

A read makes a few hundred rows per 2 MB chunk: kept as one small array per batch, the batches
are spread over the heap among everything else the read allocates, and joining them makes each
column again while the batches still hold their pages (freed heap pages are seldom given back):
at the join the rows are in memory twice. Here each segment is an anonymous mapping of its own,
written as batches come, and the join copies each column into one array, dropping each segment
as it is copied: its pages go back to the system at once, so the join costs one segment, not
the rows again. A column the read leaves out (``unused``, schema.DROPPABLE) is never copied:
it is joined as a Dropped column of the rows' count.

Joined ``shared``, each column is a shared mapping of its own, for a read whose cache entry a
forked process writes (cache.publish_in_background): a fork copies the page tables of private
memory, so the writer would start mapping every column, and map them all to its end; a shared
mapping's pages it maps only once it reads them, and lets go of once written (``let_go``).
"""

from __future__ import annotations

import mmap
import weakref

import numpy as np

from traceview.columns.schema import Column, SchemaMismatch, dropped

SEGMENT_ROWS = 1 << 16  # rows a segment holds: 512 KB of an int64 column


class Segments:
    """The rows of one column group (a schema table), in order: parts put before them
    (``prepend``: a worker's rows, read earlier in the file), then those appended."""

    def __init__(
        self,
        table: tuple[Column, ...],
        rows: int = SEGMENT_ROWS,
        unused: frozenset[str] = frozenset(),
        shared: bool = False,
    ) -> None:
        """``unused``: the names of the columns left out (given, then dropped unread);
        ``shared``: each column joined into a shared mapping (see the module's doc)."""
        self.table = table
        self.rows = rows
        self.shared = shared
        self.kept = [i for i, c in enumerate(table) if c.name not in unused]
        self._count = 0  # rows held
        self._before: list[list[np.ndarray]] = []
        self._full: list[list[np.ndarray]] = []  # filled segments, each one array per column
        self._open: list[np.ndarray] | None = None
        self._fill = 0

    def append(self, columns: tuple[np.ndarray, ...]) -> None:
        """Append a batch: one array per column of the table, all of one length (an unused
        column's is not read)."""
        if len(columns) != len(self.table):
            raise SchemaMismatch(f"{len(columns)} columns for {len(self.table)}")
        kept = [columns[i] for i in self.kept]
        for i, array in zip(self.kept, kept, strict=True):
            if array.dtype != self.table[i].dtype:  # the segment would cast it silently
                raise SchemaMismatch(
                    f"column {self.table[i].name} is {array.dtype}, not {self.table[i].dtype}"
                )
        n, start = _rows(columns, self.kept), 0
        self._count += n
        if not kept:  # every column left out: the rows are only counted
            return
        while start < n:
            if self._open is None or self._fill == self.rows:
                if self._open is not None:
                    self._full.append(self._open)
                self._open = [_mapped(self.table[i].dtype, self.rows) for i in self.kept]
                self._fill = 0
            k = min(self.rows - self._fill, n - start)
            for segment, column in zip(self._open, kept, strict=True):
                segment[self._fill : self._fill + k] = column[start : start + k]
            self._fill += k
            start += k

    def prepend(self, columns: tuple[np.ndarray, ...]) -> None:
        """Put rows before all those held (their arrays are kept as they are until the join;
        those of unused columns are not kept, and may be None)."""
        self._count += _rows(columns, self.kept)
        if self.kept:
            self._before.insert(0, [columns[i] for i in self.kept])

    def join(self) -> list[np.ndarray]:
        """The columns, one array each in table order; everything held is dropped (each part
        as soon as it is copied)."""
        parts = self._before + self._full
        if self._open is not None and self._fill:
            parts.append([segment[: self._fill] for segment in self._open])
        self._before, self._full, self._open, self._fill = [], [], None, 0
        count, self._count = self._count, 0
        columns: list[np.ndarray] = [dropped(c.dtype, count) for c in self.table]
        for i, at_column in enumerate(self.kept):
            dtype, rows = self.table[at_column].dtype, sum(len(part[i]) for part in parts)
            out = _shared(dtype, rows) if self.shared else np.empty(rows, dtype=dtype)
            at = 0
            for part in parts:
                n = len(part[i])
                out[at : at + n] = part[i]
                at += n
                part[i] = _RELEASED  # a segment's mapping goes with its last reference
            columns[at_column] = out
        return columns


_RELEASED = np.empty(0, dtype=np.uint8)


def _rows(columns: tuple[np.ndarray | None, ...], kept: list[int]) -> int:
    """The rows of a batch: its first kept column's length, else its first given column's."""
    for i in kept or range(len(columns)):
        column = columns[i]
        if column is not None:
            return len(column)
    return 0


# Private where the system has it: mmap's default, a shared mapping, faults each page in
# through shared memory (64 × 512 KB mapped and written: 23.6 against 16.5 ms CPU).
_PRIVATE = {"flags": mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS} if hasattr(mmap, "MAP_PRIVATE") else {}


def _mapped(dtype: np.dtype, rows: int) -> np.ndarray:
    """A writable array of ``rows`` over an anonymous mapping of its own (its pages are given
    back to the system when the array and its views are dropped)."""
    size = max(dtype.itemsize * rows, 1)
    return np.frombuffer(mmap.mmap(-1, size, **_PRIVATE), dtype=dtype, count=rows)


_SHARED_MAPS: weakref.WeakSet[mmap.mmap] = weakref.WeakSet()  # every shared column's mapping

_SHARED: dict[str, int] | None = None  # no such mapping, nor letting go of one: private
if hasattr(mmap, "MAP_SHARED") and hasattr(mmap, "MADV_DONTNEED"):
    _SHARED = {"flags": mmap.MAP_SHARED | mmap.MAP_ANONYMOUS}


def _shared(dtype: np.dtype, rows: int) -> np.ndarray:
    """An array of ``rows`` over a shared anonymous mapping of its own, for let_go."""
    if _SHARED is None:
        return np.empty(rows, dtype=dtype)
    mapping = mmap.mmap(-1, max(dtype.itemsize * rows, 1), **_SHARED)
    _SHARED_MAPS.add(mapping)  # the mapping itself: an array's base is a view of it
    return np.frombuffer(mapping, dtype=dtype, count=rows)


def let_go() -> None:
    """Unmap from this process the pages of every column joined ``shared`` (MADV_DONTNEED):
    they stay in memory for the processes that map them, and a read maps them again, with
    their values (a shared mapping's pages are not this process's to drop, as a private
    mapping's would be: those would read as zeros)."""
    for mapping in list(_SHARED_MAPS):
        if not mapping.closed:
            mapping.madvise(mmap.MADV_DONTNEED)
