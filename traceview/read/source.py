"""Open a trace file read-only, plain or gzip (detected by magic bytes, not by suffix).

Files are read with plain reads, never through a memory map: a mapped file that another
program shortens kills the reading process (SIGBUS, which Python cannot catch), while a
read just comes back short, which is reported as "the file changed while it was read".
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from io import BufferedReader
from pathlib import Path
from typing import Any

from traceview.errors import TraceviewError
from traceview.read.blockhash import BlockHashes
from traceview.read.compiled import gzip_reader
from traceview.read.stream import SQLITE_MAGIC, PipeInput, is_pipe, pipe_input

GZIP_MAGIC = b"\x1f\x8b"
_GZIP_READ = 1 << 20
# Blocks the compiled inflater keeps ready in front of the reader: enough to ride out the
# scan's uneven pace, few enough that memory stays flat (each is a block_size buffer).
_INFLATE_AHEAD = 4


@dataclass(frozen=True)
class SourceInfo:
    """What we know about the file before reading it."""

    path: Path
    size_bytes: int  # a pipe: 0 until it has been read, then the bytes read
    compressed: bool
    stream: bool = False  # a pipe (see read.stream): read once, from the start, not cached


def check_path(path: Path) -> SourceInfo:
    """Fail with one clear line if ``path`` cannot be read as a trace file.

    Opened without blocking, so a named pipe without a writer cannot hang the command.
    A pipe (``-``, ``/dev/stdin``, ``<(...)``, a named pipe) is a stream: its first bytes
    tell gzip from plain text.
    """
    if is_pipe(path):
        return _pipe_info(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise TraceviewError(f"{path}: {_open_error(e)}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise TraceviewError(f"{path}: is a directory, not a trace file")
        if not stat.S_ISREG(st.st_mode):
            raise TraceviewError(
                f"{path}: is {_kind(st.st_mode)}, not a regular file: traceview reads traces "
                "from files only (save it to a file first)"
            )
        magic = os.read(fd, 2)
    except OSError as e:
        raise TraceviewError(f"{path}: cannot read: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if st.st_size == 0:
        raise TraceviewError(f"{path}: empty file, not a trace")
    return SourceInfo(path=path, size_bytes=st.st_size, compressed=magic == GZIP_MAGIC)


def text_size_hint(path: str | Path, size_bytes: int) -> int:
    """About how many bytes of text the trace file at ``path`` (``size_bytes`` on disk)
    holds, for choices of speed only: ``size_bytes`` for a plain file; for gzip, the larger
    of that and the inflated size in its last member's trailer (ISIZE, modulo 2^32: a hint,
    never trusted for more). ``size_bytes`` for a pipe, or a file not there or not regular."""
    if is_pipe(Path(path)):
        return size_bytes  # opened again, it would give away (or wait for) the stream's bytes
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return size_bytes
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or os.pread(fd, 2, 0) != GZIP_MAGIC:
            return size_bytes
        trailer = os.pread(fd, 4, max(st.st_size - 4, 0))
    except OSError:
        return size_bytes
    finally:
        os.close(fd)
    inflated = int.from_bytes(trailer, "little") if len(trailer) == 4 else 0
    return max(size_bytes, inflated)


def _pipe_info(path: Path) -> SourceInfo:
    """What the first bytes of a pipe say; an SQLite database cannot be read from one."""
    head = pipe_input(path).peek(1 << 16)
    if not head:
        raise TraceviewError(f"{path}: empty input, not a trace")
    compressed = head.startswith(GZIP_MAGIC)
    if (_inflated(head) if compressed else head).startswith(SQLITE_MAGIC):
        raise TraceviewError(
            f"{path}: an SQLite database (an Nsight Systems export?) cannot be read from a "
            "pipe: SQLite reads a file in place; save it to a file and pass its path"
        )
    return SourceInfo(path=path, size_bytes=0, compressed=compressed, stream=True)


def _inflated(head: bytes) -> bytes:
    """The first inflated bytes of a gzip stream's start (b"" if they do not inflate)."""
    inflater, error = _inflater()
    try:
        return inflater.decompress(head, 1 << 10)  # type: ignore[no-any-return]
    except error:
        return b""


def _inflater() -> tuple[Any, type[Exception]]:
    """A new gzip stream inflater, and zlib-ng's error. zlib-ng (and the stdlib gzip it
    imports, ~1 ms) is imported by gzip's reads only: a plain file's read forks its worker
    without it."""
    from zlib_ng import zlib_ng

    # zlib-ng's stub declares ``error`` as an instance; it is the exception class.
    return zlib_ng.decompressobj(wbits=31), zlib_ng.error  # type: ignore[return-value]


def _open_error(error: OSError) -> str:
    """Why a path cannot be opened, in a few words."""
    if error.errno == errno.ENOENT:
        return "no such file"
    if error.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if error.errno == errno.ELOOP:
        return "too many levels of symbolic links (a symlink loop?)"
    return f"cannot read: {error.strerror or error}"


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, for messages."""
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    return "a block device" if stat.S_ISBLK(mode) else "a special file"


class TraceSource:
    """Decompressed bytes of a trace, read in blocks, with progress in file bytes.

    Offsets are decompressed offsets. A gzip source seeks by inflating from the start and
    dropping the bytes before the target: inflating runs at GB/s, so skipping half of a
    trace costs a fraction of reading it.
    """

    def __init__(self, info: SourceInfo, block_size: int) -> None:
        self.info = info
        self.block_size = block_size
        self._raw: BufferedReader | PipeInput = (
            pipe_input(info.path).take() if info.stream else info.path.open("rb")
        )
        self.decompressed_bytes = 0  # gzip: inflated so far, including any dropped bytes
        self.compressed_consumed = 0  # gzip: file bytes the inflater has consumed
        self._start = 0  # gzip: the next offset to yield
        self._inflater: Any = None  # gzip: the compiled core's reader in use, if any
        self._in_place: Any = None  # gzip: the one read_into inflates through, if any
        self._in_place_done = False  # it has ended (or failed)
        self._limit: int | None = None  # stop reading at this offset
        # At the limit: asked once for the real one (which may block until it is known).
        self.final_limit: Callable[[], int] | None = None
        # A plain file's blocks hashed as they are read (the cache key, read.blockhash).
        self.hashes: BlockHashes | None = None

    @property
    def position(self) -> int:
        """Decompressed bytes read so far: the file offset of a plain file."""
        return self.decompressed_bytes if self.info.compressed else self._raw.tell()

    @property
    def file_position(self) -> int:
        """Bytes of the file consumed so far (compressed bytes for gzip)."""
        return self._raw.tell()

    def blocks(self) -> Iterator[bytes]:
        """Yield decompressed blocks; corrupt gzip is a TraceviewError, early end TruncatedInput."""
        if self.info.compressed and self._in_place is not None:  # go on where read_into is
            room = bytearray(self.block_size)
            with memoryview(room) as into:
                while read := self._inflate_into(into):
                    yield bytes(room[:read])
            return
        if self.info.compressed:
            yield from self._gzip_blocks()
            return
        for block in self._plain():
            self.decompressed_bytes += len(block)
            yield block

    def _plain(self) -> Iterator[bytes]:
        while True:
            size = self._room(self.block_size)
            at = self._raw.tell() if self.hashes is not None else 0
            block = self._raw.read(size) if size > 0 else b""
            if not block:
                self._check_not_shorter()
                return
            if self.hashes is not None:
                self.hashes.feed(at, block)
            yield block

    def _room(self, size: int) -> int:
        """How many bytes of a plain file to read next, at most ``size``: 0 at the limit
        (moved by ``final_limit`` first if it can be)."""
        while self._limit is not None:
            left = self._limit - self._raw.tell()
            if left > 0 or not self._extend_limit():
                return max(0, min(size, left))
        return size

    def inflates_in_place(self) -> bool:
        """Whether read_into can inflate a gzip file (read from its start to its end, never
        seeked: the compiled core's reader writes the text straight into the buffer)."""
        if self._in_place is not None:
            return True
        if not self.info.compressed or self.info.stream or self._inflater is not None:
            return False
        inflater = gzip_reader(self.info.path, _GZIP_READ, self.block_size, _INFLATE_AHEAD)
        if inflater is None:
            return False
        self._in_place = self._inflater = inflater
        return True

    def read_into(self, into: memoryview) -> int:
        """A plain file's next bytes into ``into`` (as blocks() would give them, up to the
        limit), or a gzip file's (see inflates_in_place); 0 at the end."""
        if self.info.compressed:
            return self._inflate_into(into)
        size, read = self._room(len(into)), 0
        if size > 0 and isinstance(self._raw, BufferedReader):  # a pipe has no readinto
            at = self._raw.tell() if self.hashes is not None else 0
            with into[:size] as part:
                read = self._raw.readinto(part)
                if read and self.hashes is not None:
                    with part[:read] as piece:
                        self.hashes.feed(at, piece)
        if not read:
            self._check_not_shorter()
            return 0
        self.decompressed_bytes += read
        return read

    def reread(self, offset: int, size: int) -> tuple[bytes, int]:
        """A plain file's bytes from ``offset`` (at or before the position) to the position,
        then its next ones as read_into reads them (at most ``size``, up to the limit), in one
        new bytes object read straight from the file; with how many are new (0 at the end)."""
        at = self._raw.tell()
        want = at - offset + self._room(size)
        fd = self._raw.fileno()
        data = os.pread(fd, want, offset)
        while 0 < len(data) < want:  # a short read (a signal): read on
            more = os.pread(fd, want - len(data), offset + len(data))
            if not more:
                break
            data += more
        read = len(data) - (at - offset)
        if read <= 0:
            self._check_not_shorter()
            if read < 0:  # the file is as long, but not here: it changed
                raise TraceviewError(
                    f"{self.info.path}: the file changed while it was read (it got shorter: "
                    f"{at} bytes read, {offset + len(data)} there now)"
                )
            return data, 0
        if self.hashes is not None:
            with memoryview(data) as view, view[at - offset :] as piece:
                self.hashes.feed(at, piece)
        self._raw.seek(at + read)
        self.decompressed_bytes += read
        return data, read

    def _inflate_into(self, into: memoryview) -> int:
        """The next inflated bytes into ``into`` (inflates_in_place): what blocks() gives,
        the same errors; 0 at the end, and after it."""
        if self._in_place is None or self._in_place_done:
            return 0
        status, read, end, consumed, why = self._in_place.read_into(into)
        self.decompressed_bytes, self.compressed_consumed = end, consumed
        if status == "":
            return int(read)
        self._in_place_done = True
        self._ended(status, end, why)
        return 0

    def _ended(self, status: str, end: int, why: str) -> None:
        """The compiled inflater's end of the stream (``status`` not ""): a clean "end"
        returns, any other raises as the Python path's inflater would."""
        if status == "end":
            return
        if status == "corrupt":
            raise self._corrupt(why)
        if status == "trailing":
            raise self._trailing()
        if status == "truncated":
            self._check_not_shorter()
            raise TruncatedInput(end, "gzip stream ends early")
        raise OSError(why)

    def _check_not_shorter(self) -> None:
        """At the end of the input: fail if the file is shorter than when reading began."""
        if self.info.stream:
            return
        now = os.fstat(self._raw.fileno()).st_size
        if now < self.info.size_bytes:
            raise TraceviewError(
                f"{self.info.path}: the file changed while it was read (it got shorter: "
                f"{self.info.size_bytes} bytes when reading began, {now} now)"
            )

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

    def estimated_size(self) -> int:
        """Decompressed size: exact for plain files; for gzip, extrapolated from the
        compression ratio of what has been inflated so far. A pipe: what has been read."""
        if self.info.stream:
            return self.position
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
        """Decompress gzip member after member, keeping what a truncated stream holds: on a
        thread of the compiled core when it is there (the same steps, the same messages)."""
        if self.info.stream:
            return self._gunzip_python()
        inflater = gzip_reader(self.info.path, _GZIP_READ, self.block_size, _INFLATE_AHEAD)
        return self._gunzip_python() if inflater is None else self._gunzip_compiled(inflater)

    def _gunzip_compiled(self, inflater: Any) -> Iterator[bytes]:
        """The compiled core's blocks; those wholly before the offset wanted stay unsent."""
        self._inflater = inflater
        try:
            while True:
                inflater.skip_before(self._start)
                status, block, end, consumed, why = inflater.read()
                self.decompressed_bytes, self.compressed_consumed = end, consumed
                if status != "":
                    self._ended(status, end, why)
                    return
                yield block
        finally:
            inflater.close()
            self._inflater = None

    def _gunzip_python(self) -> Iterator[bytes]:
        inflater, inflate_error = _inflater()
        pending = b""
        while True:
            if not pending:
                pending = self._raw.read(_GZIP_READ)
                if not pending:
                    break
            try:
                out = inflater.decompress(pending, self.block_size)
            except inflate_error as e:
                raise self._corrupt(str(e)) from None
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
                inflater, _ = _inflater()
        self._check_not_shorter()
        raise TruncatedInput(self.decompressed_bytes, "gzip stream ends early")

    def _corrupt(self, why: str) -> TraceviewError:
        return TraceviewError(
            f"{self.info.path}: corrupt gzip data after {self.decompressed_bytes} "
            f"decompressed bytes ({why})"
        )

    def _trailing(self) -> TraceviewError:
        return TraceviewError(
            f"{self.info.path}: unexpected data after the end of the gzip stream "
            f"(after {self.decompressed_bytes} decompressed bytes)"
        )

    def _next_member(self, rest: bytes) -> bytes | None:
        """The start of the next gzip member, or None at a clean end of file."""
        rest = rest or self._raw.read(_GZIP_READ)
        if not rest or (rest.strip(b"\0") == b"" and not self._raw.read(1)):
            return None
        if not rest.startswith(GZIP_MAGIC):
            raise self._trailing()
        return rest

    def close(self) -> None:
        """Close the file (and stop the inflate thread)."""
        if self._inflater is not None:
            self._inflater.close()
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
