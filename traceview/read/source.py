"""Open a trace file read-only, plain or gzip (detected by magic bytes, not by suffix).

A plain file's event array is read through a private (copy-on-write) memory map, so its
text is decoded where the page cache holds it instead of being copied block by block; the
pages already decoded are dropped as reading goes on, so memory stays flat. Writes to a
private map never reach the file.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from zlib_ng import zlib_ng

from traceview.errors import TraceviewError

GZIP_MAGIC = b"\x1f\x8b"
# zlib-ng's stub declares ``error`` as an instance; it is the exception class.
_INFLATE_ERROR: type[Exception] = zlib_ng.error  # type: ignore[assignment]
_GZIP_READ = 1 << 20
# Decoded pages of a mapped file are dropped from memory in steps of this size.
_RELEASE_STEP = 16 << 20


@dataclass(frozen=True)
class SourceInfo:
    """What we know about the file before reading it."""

    path: Path
    size_bytes: int
    compressed: bool


def check_path(path: Path) -> SourceInfo:
    """Fail with one clear line if ``path`` cannot be read as a trace file."""
    if not path.exists():
        raise TraceviewError(f"{path}: no such file")
    if path.is_dir():
        raise TraceviewError(f"{path}: is a directory, not a trace file")
    try:
        with path.open("rb") as f:
            magic = f.read(2)
    except PermissionError:
        raise TraceviewError(f"{path}: permission denied") from None
    except OSError as e:
        raise TraceviewError(f"{path}: cannot read: {e.strerror or e}") from None
    size = path.stat().st_size
    if size == 0:
        raise TraceviewError(f"{path}: empty file, not a trace")
    return SourceInfo(path=path, size_bytes=size, compressed=magic == GZIP_MAGIC)


class TraceSource:
    """Decompressed bytes of a trace, read in blocks, with progress in file bytes.

    Offsets are decompressed offsets. A gzip source seeks by inflating from the start and
    dropping the bytes before the target: inflating runs at GB/s, so skipping half of a
    trace costs a fraction of reading it.
    """

    def __init__(self, info: SourceInfo, block_size: int) -> None:
        self.info = info
        self.block_size = block_size
        self._raw: BinaryIO = info.path.open("rb")
        self.decompressed_bytes = 0  # gzip: inflated so far, including any dropped bytes
        self.compressed_consumed = 0  # gzip: file bytes the inflater has consumed
        self._start = 0  # gzip: the next offset to yield
        self._limit: int | None = None  # stop reading at this offset
        # At the limit: asked once for the real one (which may block until it is known).
        self.final_limit: Callable[[], int] | None = None
        self._map: mmap.mmap | None = None
        self._mapped_end: int | None = None  # mapped reading: the end of the window so far
        self._released = 0  # mapped reading: pages before this offset were dropped

    def mapping(self) -> mmap.mmap | None:
        """A private, copy-on-write memory map of a plain file (None for gzip, or a file
        that cannot be mapped). Text may be written into it; the file never changes."""
        if self.info.compressed:
            return None
        if self._map is None:
            try:
                self._map = mmap.mmap(self._raw.fileno(), 0, access=mmap.ACCESS_COPY)
            except (OSError, ValueError):  # e.g. a special file: read it block by block
                return None
        return self._map

    def extend_window(self, end: int) -> int:
        """Mapped reading: the end of the window that follows one ending at ``end`` (one
        block further, up to the limit); ``end`` itself at the end of the input."""
        assert self._map is not None
        if self._limit is not None and end >= self._limit:
            self._extend_limit()
        limit = len(self._map) if self._limit is None else min(self._limit, len(self._map))
        self._mapped_end = max(end, min(end + self.block_size, limit))
        # Pages past the end of a file that shrank would stop the process (SIGBUS) when read.
        if os.fstat(self._raw.fileno()).st_size < self._mapped_end:
            raise TraceviewError(f"{self.info.path}: the file got shorter while it was read")
        return self._mapped_end

    def release(self, offset: int) -> None:
        """Mapped reading: the text before ``offset`` is done with; drop its pages."""
        page = offset - offset % mmap.PAGESIZE
        if self._map is None or page - self._released < _RELEASE_STEP:
            return
        if hasattr(mmap, "MADV_DONTNEED"):
            self._map.madvise(mmap.MADV_DONTNEED, self._released, page - self._released)
        self._released = page

    @property
    def file_position(self) -> int:
        """Bytes of the file consumed so far (compressed bytes for gzip)."""
        if self._mapped_end is not None:
            return max(self._mapped_end, self._raw.tell())
        return self._raw.tell()

    def blocks(self) -> Iterator[bytes]:
        """Yield decompressed blocks; corrupt gzip is a TraceviewError, early end TruncatedInput."""
        if self.info.compressed:
            yield from self._gzip_blocks()
            return
        for block in self._plain():
            self.decompressed_bytes += len(block)
            yield block

    def _plain(self) -> Iterator[bytes]:
        while True:
            size = self.block_size
            if self._limit is not None:
                size = min(size, self._limit - self._raw.tell())
                if size <= 0 and self._extend_limit():
                    continue
            block = self._raw.read(size) if size > 0 else b""
            if not block:
                return
            yield block

    def _extend_limit(self) -> bool:
        """At the limit: True if ``final_limit`` moved it further."""
        if self.final_limit is None:
            return False
        final, self.final_limit = self.final_limit, None
        self._limit = final()
        return True

    def _gzip_blocks(self) -> Iterator[bytes]:
        """Inflated bytes from ``self._start`` (the next offset wanted; seek() may move it
        while a block is being used) to the limit. Forward is skipped, backward starts over."""
        while True:
            self._raw.seek(0)
            self.decompressed_bytes = self.compressed_consumed = 0
            for block in self._gunzip():
                end = self.decompressed_bytes
                begin = end - len(block)
                while begin <= self._start:
                    stop = end if self._limit is None else min(end, self._limit)
                    if self._start < stop:
                        piece = block[self._start - begin : stop - begin]
                        self._start = stop
                        yield piece
                    elif self._limit is not None and self._start >= self._limit:
                        if not self._extend_limit():
                            return
                    else:
                        break  # this block is used up
                if self._start < begin:
                    break  # a seek backwards: inflate again from the start
            else:
                return

    def seek(self, offset: int, limit: int | None = None) -> None:
        """Continue reading at ``offset`` (and stop at ``limit``)."""
        self._limit = limit
        if self.info.compressed:
            self._start = offset
        else:
            self._raw.seek(offset)

    def blocks_from(self, offset: int) -> None:
        """Plain files, after mapped reading: ``blocks()`` goes on at ``offset``."""
        self._raw.seek(offset)

    def estimated_size(self) -> int:
        """Decompressed size: exact for plain files; for gzip, extrapolated from the
        compression ratio of what has been inflated so far."""
        if not self.info.compressed or self.compressed_consumed == 0:
            return self.info.size_bytes
        return self.info.size_bytes * self.decompressed_bytes // self.compressed_consumed

    def read_at(self, offset: int, size: int) -> bytes:
        """``size`` bytes at ``offset`` (or fewer at the end); then reading continues there."""
        self.seek(offset, offset + size)
        data = b"".join(self.blocks())
        self._limit = None
        return data

    def _gunzip(self) -> Iterator[bytes]:
        """Decompress gzip member after member, keeping what a truncated stream holds."""
        inflater = zlib_ng.decompressobj(wbits=31)
        pending = b""
        while True:
            if not pending:
                pending = self._raw.read(_GZIP_READ)
                if not pending:
                    break
            try:
                out = inflater.decompress(pending, self.block_size)
            except _INFLATE_ERROR as e:
                raise TraceviewError(
                    f"{self.info.path}: corrupt gzip data after {self.decompressed_bytes} "
                    f"decompressed bytes ({e})"
                ) from None
            pending = inflater.unconsumed_tail
            self.compressed_consumed = self._raw.tell() - len(pending)
            if out:
                self.decompressed_bytes += len(out)
                yield out
            if inflater.eof:
                member = self._next_member(inflater.unused_data)
                if member is None:
                    return
                pending = member
                inflater = zlib_ng.decompressobj(wbits=31)
        raise TruncatedInput(self.decompressed_bytes, "gzip stream ends early")

    def _next_member(self, rest: bytes) -> bytes | None:
        """The start of the next gzip member, or None at a clean end of file."""
        rest = rest or self._raw.read(_GZIP_READ)
        if not rest or (rest.strip(b"\0") == b"" and not self._raw.read(1)):
            return None
        if not rest.startswith(GZIP_MAGIC):
            raise TraceviewError(
                f"{self.info.path}: unexpected data after the end of the gzip stream "
                f"(after {self.decompressed_bytes} decompressed bytes)"
            )
        return rest

    def close(self) -> None:
        """Close the file (and its memory map)."""
        if self._map is not None:
            self._map.close()
        self._raw.close()

    def __enter__(self) -> TraceSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TruncatedInput(Exception):
    """The input ends before the trace is complete (at a decompressed byte offset)."""

    def __init__(self, offset: int, why: str) -> None:
        super().__init__(why)
        self.offset = offset
        self.why = why


def plain_file_ends_cleanly(path: Path) -> bool:
    """Cheap check of a plain file's last non-blank byte: a whole trace ends with } or ]."""
    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        end = f.tell()
        f.seek(max(0, end - 4096))
        tail = f.read().rstrip()
    return tail.endswith((b"}", b"]"))
