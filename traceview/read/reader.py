"""Stream a trace's events in large decoded batches.

The event array is cut into chunks at candidate boundaries ``}␣,␣{`` (the last one in a
~2 MB window) and each chunk is decoded in one call. A candidate inside a string or a
nested object makes the chunk undecodable (an unterminated string or unbalanced
brackets), so a wrong cut is always detected; it is then repaired by an exact scan.

The text is read block by block into a reused bytearray (a plain file's straight into it)
and each chunk is decoded where it lies there (see read.decode.decode_span), plain
or gzip alike.
"""

from __future__ import annotations

import copy
import functools
import os
import re
from collections import Counter
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NoReturn

from traceview.errors import TraceviewError
from traceview.read.blockhash import BlockHashes
from traceview.read.compiled import decode_scanned, event_count, scanner
from traceview.read.decode import (
    ChunkError,
    decode_chunk,
    decode_slow,
    decode_span,
    needs_exact,
)
from traceview.read.jsonscan import Resume, skip_ws, split_values, value_end
from traceview.read.layout import (
    NeedMore,
    NotATrace,
    content_start,
    find_events_start,
    parse_trailer,
)
from traceview.read.source import (
    TraceSource,
    TruncatedInput,
    check_path,
    plain_file_ends_cleanly,
)

# Small enough that a chunk and the objects decoded from it stay in the CPU caches: on the
# 100 MB benchmark trace, reading + decoding ran at ~355 MB/s with 1–4 MB chunks against
# 183 MB/s with 16 MB ones (one process, median of 5), and peak memory falls with it.
BLOCK_SIZE = 2 << 20
# A plain file's blocks (not trim's reads, whose copy reads chunks again): the compiled
# scanner's Python around each chunk (assembling and collecting its rows) is paid less often,
# while a chunk and its rows still stay in the CPU caches. H200 big.json, serial reads in one
# process alternated, CPU s medians (with _fill_bytes): kernels 2 MB 0.76, 3 MB 0.69, 4 MB 0.69,
# 6 MB 0.69, 8 MB 0.72; gaps (CPU rows) 2 MB 0.99, 3 MB 0.95, 4 MB 1.02. The Python reader
# cuts the same chunks (interning follows chunks: both readers must intern in one order).
PLAIN_BLOCK_SIZE = 3 << 20
_CUT = re.compile(rb"\}\s*,\s*\{")
_MAX_HEADER = 256 << 20
_BACKWARD_TRIES = 64  # braces tried from the end before the cut search scans forward
_BOUNDARY_WINDOW = 1 << 20
# gzip: the main process inflates the worker's part x to skip it, so the worker gets more
# than half: x where both processes use as much CPU after the fork. The Python reader (1 GB
# trace: skip 0.6 against read 3.0 ms/MB): x = 0.56. The compiled one (H200 big.json.gz,
# kernels, user CPU s of 3 runs; its inflate thread skips unsent): x = 0.56, worker 0.69-0.83
# and main 0.76-0.98; 0.60, 0.78-0.92 and 0.78-0.84; 0.64, 0.79-1.02 and 0.62-0.93. Both
# readers split at the same point, so that their reads are equal to the order names are
# interned in (tests/real/test_reader_paths.py): the compiled reader's share.
_GZIP_WORKER_SHARE = 0.60
# A plain file: half each, except in reads without CPU rows, where the compiled scanner drops
# the CPU ops unread: kineto writes them first, so the first half costs less. H200 big.json,
# kernels, CPU s of each process's read (2 runs): x = 0.5, worker 0.39-0.41 and main 0.50;
# x = 0.55, 0.44 and 0.45-0.47; with the worker forked without multiprocessing (4 runs):
# x = 0.55, worker 0.41-0.44 and main 0.43-0.47; x = 0.57, 0.41-0.44 and 0.42-0.43; x = 0.59,
# 0.44-0.50 and 0.41-0.42. With CPU rows, x = 0.5: worker 0.59-0.64, main 0.58-0.59.
# Both end together nearer 0.545: the main process starts its part ~55 ms after the fork
# (its imports), and its wait for the worker is the read's end (kernels, median wall of 7:
# x = 0.52 450 ms, 0.54 425, 0.555 426, 0.57 443; benchmarks/timeline.py with SHARE).
# The same for the Python reader: both readers split a file at the same place.
_PLAIN_WORKER_SHARE = (0.545, 0.5)  # (reads without CPU rows, with them)
# A warning: a JSON object may repeat a key; readers differ in which value they keep.
REPEATED_EVENTS_KEY = (
    '"traceEvents" arrays after the first, not analysed (the key is repeated in the '
    "trace's JSON object; only the first array is read)"
)


# A chunk as TraceReader(index=True) notes it: the file offset (of the decompressed text)
# just after its last event, its length, its first and last 32 bytes, and what the compiled
# scanner saw of it for trim (traceview._core.scan_chunk's ``seen``; None: not scanned).
IndexedChunk = tuple[int, int, bytes, bytes, list[int] | None]


@dataclass
class ChunkIndex:
    """Every chunk a read cut, in file order (trim's copy reads again only those it needs,
    at their places), with the text before and after the event array and whether the read
    began with exact times."""

    chunks: list[IndexedChunk] = field(default_factory=list)
    header_text: bytes | None = None
    trailer_text: bytes | None = None
    exact_times: bool = False


@dataclass
class ReadStats:
    """What the reader saw: event counts, skipped events, truncation."""

    events: int = 0
    chunks: int = 0
    repaired_chunks: int = 0
    exact_times: bool = False
    skipped: Counter[str] = field(default_factory=Counter)
    truncated_at: int | None = None
    # A read split in two processes: where this process's part started (not kept in the cache).
    resume_at: int | None = None
    # With TraceReader(index=True): its chunks (not kept in the cache).
    index: ChunkIndex | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class MainPart:
    """Parallel reading, this process (see traceview.columns.parallel): after the header, skip to
    ``split_at``, find the first event boundary there, report it through ``on_boundary``
    (None: there is none, the split fails) and read from it to the end."""

    split_at: int
    on_boundary: Callable[[int | None], None]


@dataclass(frozen=True)
class WorkerPart:
    """Parallel reading, the worker: the events in [start, end), no header, decoded exactly
    if ``exact_times``; ``final_end()`` gives the real end once the main process has found
    it (None: it gave up on the split)."""

    start: int
    end: int
    final_end: Callable[[], int | None]
    exact_times: bool = False


@dataclass
class _Buffer:
    """Decompressed text not yet decoded: ``data[pos:end]`` starts at file offset ``base + pos``.

    ``data`` ends at ``end`` except while chunks are cut: then it keeps its size (no
    reallocation per block) and what follows ``end`` is stale. ``file``: a plain file, read
    straight into ``data``. ``reread``: while the compiled scanner cuts chunks of a plain
    file, each block is a new bytes object read from the file with the text kept before it
    (see _fill_bytes).
    """

    data: bytearray | bytes = field(default_factory=bytearray)
    pos: int = 0
    end: int = 0
    file: TraceSource | None = None
    reread: TraceSource | None = None
    base: int = 0
    eof: bool = False
    min_cut: int = 0
    # Text wanted after ``pos`` before a cut is tried again: after a chunk that did not hold
    # one whole event, twice as much, so an event of any length is scanned O(1) times a byte.
    want: int = 0


class SplitFailed(Exception):
    """A parallel part could not be read as it was cut: read the file serially instead."""


class TraceReader:
    """Reads one trace file: ``header`` and ``stats`` fill in as ``batches()`` is consumed."""

    def __init__(
        self,
        path: Path,
        *,
        partial: bool = False,
        block_size: int | None = None,
        on_progress: Callable[[int, int | None], None] | None = None,
        part: MainPart | WorkerPart | None = None,
        shapes: bool = True,
        frames: bool = False,
        decode: Callable[..., list[Any]] | None = None,
        keep_text: bool = False,
        index: bool = False,
    ) -> None:
        self.info = check_path(path)
        # decode: what decodes a span (None: the compiled scanner's or decode_span; trim's
        # read.raw.decode_raw_span gives each event with its raw bytes). keep_text: keep the
        # raw text before and after the event array (trim writes it).
        self.decode = decode
        self.keep_text = keep_text
        self.index = index  # note each chunk in stats.index (the compiled scanner's seen too)
        self.shapes = shapes  # decode the CPU ops' shapes (reads that keep CPU rows)
        self.frames = frames  # decode the python frames' and flows' fields (``source``)
        self.path = path
        self.partial = partial
        self.block_size = block_size or self._block_size()
        self.on_progress = on_progress
        self.part = part  # parallel reading: the part of the event array this reader covers
        # The events the collector never keeps, which the compiled scanner may drop unread
        # (columns.collect.scan_rule; None: none is dropped).
        self.scan_rule: dict[str, list[bytes]] | None = None
        # A plain file's blocks hashed as they are read (the cache key; see read.blockhash).
        self.hashes: BlockHashes | None = None
        self._start()

    def _block_size(self) -> int:
        """PLAIN_BLOCK_SIZE for a plain file read for its columns, else BLOCK_SIZE."""
        plain = not (self.info.compressed or self.info.stream)
        columns = self.decode is None and not self.index
        return PLAIN_BLOCK_SIZE if plain and columns else BLOCK_SIZE

    def _start(self) -> None:
        """Nothing read yet."""
        self.header: dict[str, Any] = {}
        self.stats = ReadStats(
            exact_times=isinstance(self.part, WorkerPart) and self.part.exact_times
        )
        if self.index:
            self.stats.index = ChunkIndex()
        self._note: tuple[int, bytes, bytes, list[int] | None] = (0, b"", b"", None)
        # Valid until the next batch is asked for (the buffer changes only then).
        self._last_chunk: tuple[bytes | bytearray, int, int | None] = (b"", 0, None)
        self._last_count = 0
        self._last_event_end = 0  # file offset just after the last whole event decoded
        # With keep_text: the text up to the array's ``[`` and after its ``]`` (None until read).
        self.header_text: bytes | None = None
        self.trailer_text: bytes | None = None

    def batches(self) -> Iterator[list[Any]]:
        """Yield lists of decoded events (see read.decode.Event), in file order."""
        with TraceSource(self.info, self.block_size) as source:
            if not (self.info.compressed or self.info.stream):
                source.hashes = self.hashes
            if isinstance(self.part, WorkerPart):
                batches = self._read_range(source, self.part)
            else:
                batches = self._read(source)
            index = self.stats.index
            if index is None:
                yield from batches
            else:
                for events in batches:
                    index.chunks.append((self._last_event_end, *self._note))
                    yield events
                index.header_text, index.trailer_text = self.header_text, self.trailer_text
            if self.info.stream:  # its size is known now
                self.info = replace(self.info, size_bytes=source.file_position)

    def for_part(self, part: MainPart) -> TraceReader:
        """A new reader of the same file with the same settings, for this process's part."""
        reader = copy.copy(self)
        reader.part = part
        reader._start()
        return reader

    def plan_split(self, min_bytes: int, lead: float = 0.0) -> tuple[int, int] | None:
        """(first event offset, split point) of a file big enough to split in two parts.

        The main reader later finds the first newline-anchored ``}`` ``,`` ``{`` at or after
        the split point (it cannot be inside a string; inside a nested object the parts fail
        to decode and the caller reads serially). The split point is the middle of the event
        array for a plain file. For gzip the size is estimated from the compression ratio of
        the start, and the worker gets a bit more than half, since the main process must
        inflate the worker's part too before it reaches its own. None when the file is small.
        ``lead``: more for a worker that starts before the main process is ready to read.
        """
        # A pipe has no offsets; no trace compresses more than ~64×.
        if self.info.stream or self.info.size_bytes < min_bytes // 64:
            return None
        with TraceSource(self.info, self.block_size) as source:
            buf = _Buffer()
            try:
                self._read_header(buf, source.blocks())
            except TruncatedInput:  # the serial read reports it
                return None
            size = source.estimated_size()
        if size < min_bytes:
            return None
        start = buf.base + skip_ws(buf.data, buf.pos)
        share = _GZIP_WORKER_SHARE if self.info.compressed else _PLAIN_WORKER_SHARE[self.shapes]
        return start, start + int((size - start) * (share + lead))

    def _read_range(self, source: TraceSource, part: WorkerPart) -> Iterator[list[Any]]:
        """A worker's part: the complete events in [start, end); any doubt raises SplitFailed."""
        buf = _Buffer(base=part.start, file=_in_place(source))
        source.seek(part.start, limit=part.end)
        source.final_limit = functools.partial(_final_end, part)
        yield from self._cut_chunks(buf, self._blocks(source), source)
        rest = buf.data[buf.pos :].strip(b" \t\r\n,")
        if rest:
            self._last_event_end = buf.base + len(buf.data.rstrip(b" \t\r\n,"))
            try:
                yield self._decode_counted(rest)
            except ChunkError:
                raise SplitFailed from None

    def redecode_exact(self) -> list[Any]:
        """Decode the last chunk again with exact timestamps, and every later one too."""
        self.stats.exact_times = True
        self.stats.events -= self._last_count
        self.stats.chunks -= 1
        return self._decode_counted(*self._last_chunk)

    def redecode_slow(self) -> list[Any]:
        """Decode the last chunk again by the slow path: a raw ts or dur in it is not what
        the exact decoder's fields took (see read.decode.check_raw_numbers)."""
        self.stats.events -= self._last_count
        self.stats.chunks -= 1
        data, start, end = self._last_chunk
        chunk = data[start : len(data) if end is None else end]
        events = decode_slow(chunk, self.stats.exact_times, self.stats.skipped)
        self._last_count = len(events)
        self.stats.events += len(events)
        self.stats.chunks += 1
        return events

    def _read(self, source: TraceSource) -> Iterator[list[Any]]:
        blocks = self._blocks(source)
        buf = _Buffer(file=_in_place(source, whole=self.part is None))
        is_object = self._read_header(buf, blocks)
        if isinstance(self.part, MainPart):
            self._skip_to_boundary(buf, blocks, source, self.part)
        yield from self._cut_chunks(buf, blocks, source)
        closed = yield from self._tail(buf)
        if closed:
            self._trailer(buf, blocks, is_object)
        else:
            self._truncated(self._last_event_end)
        self._progress(source)

    def _skip_to_boundary(
        self, buf: _Buffer, blocks: Iterator[bytes], source: TraceSource, part: MainPart
    ) -> None:
        """Continue at the first newline-anchored event boundary at or after ``split_at``."""
        offset = part.split_at
        # The header's bytearray is read into again (what follows ``end`` is stale until
        # _fill trims it): a new one would take fresh pages (H200 big.json: ~1,500 faults).
        data = buf.data if isinstance(buf.data, bytearray) else bytearray()
        buf.data, buf.pos, buf.end, buf.base, buf.min_cut = data, 0, 0, offset, 0
        source.seek(offset)
        while buf.end < _BOUNDARY_WINDOW and not buf.eof:
            self._fill(buf, blocks)
        boundary = next(
            (
                m.end() - 1
                for m in _CUT.finditer(buf.data, 0, _BOUNDARY_WINDOW)
                if b"\n" in m.group()
            ),
            None,
        )
        part.on_boundary(None if boundary is None else buf.base + boundary)
        if boundary is None:
            raise SplitFailed
        buf.pos = boundary
        self.stats.resume_at = buf.base + boundary

    def _cut_chunks(
        self, buf: _Buffer, blocks: Iterator[bytes], source: TraceSource
    ) -> Iterator[list[Any]]:
        """Decode chunk after chunk while a cut can be found; the rest stays in ``buf``."""
        if buf.file is not None and self._scans_bytes(source):
            buf.reread = source
        while True:
            if not buf.eof and buf.end - buf.pos < max(self.block_size, buf.want):
                self._fill(buf, blocks, trim=False)
                continue
            cut = _last_cut(buf.data, buf.pos, buf.min_cut, buf.end)
            if cut is None:
                if buf.eof:
                    break
                # A later cut starts at the last } seen or after it: search no text twice.
                last = buf.data.rfind(b"}", max(buf.pos, buf.min_cut), buf.end)
                buf.min_cut = buf.end if last < 0 else last
                self._fill(buf, blocks, trim=False)
                continue
            yield from self._chunk_between(buf, cut)
            cut = None  # a match holds its text: the block is freed when the next is read
            self._progress(source)
        if isinstance(buf.data, bytearray):
            del buf.data[buf.end :]  # the rest is read as it ends
        buf.reread = None

    def _scans_bytes(self, source: TraceSource) -> bool:
        """Whether chunks are cut from bytes objects (see _fill_bytes): a plain file that the
        compiled scanner reads (it copies a bytearray's chunk before it scans it, and scans
        bytes where they lie) where the system can read at an offset."""
        plain = not (source.info.compressed or source.info.stream)
        return plain and self.decode is None and scanner() is not None and hasattr(os, "pread")

    def _blocks(self, source: TraceSource) -> Iterator[bytes]:
        """Source blocks; a truncated gzip stream ends the blocks and marks the truncation."""
        try:
            yield from source.blocks()
        except TruncatedInput as e:
            self.stats.truncated_at = e.offset

    def _fill(self, buf: _Buffer, blocks: Iterator[bytes], trim: bool = True) -> None:
        """Drop consumed text and append the next block (or mark the end of input).

        The text kept moves to the front and the block is written behind it, into the same
        bytearray: with ``trim`` false it keeps its size (see _Buffer), so no block costs a
        reallocation; a plain file is read straight into it (no bytes object per block)."""
        # The byte before ``pos`` stays, for decode_span's ``[``.
        drop = max(0, buf.pos - 1)
        kept = buf.end - drop
        if buf.reread is not None and kept <= self.block_size:
            self._fill_bytes(buf, buf.reread)
            return
        if not kept and trim and buf.file is None:  # nothing kept: the block is the text
            block = next(blocks, None)
            buf.data, buf.end, buf.eof = block or bytearray(), len(block or b""), block is None
            buf.base += drop
            buf.min_cut = max(0, buf.min_cut - drop)
            buf.pos -= drop
            return
        data = buf.data
        if isinstance(data, bytes):  # an event longer than a block: in place from now on
            data = buf.data = bytearray(data)
        if drop:
            data[:kept] = data[drop : buf.end]  # the same length: nothing is reallocated
        buf.base += drop
        buf.min_cut = max(0, buf.min_cut - drop)
        buf.pos -= drop
        # Room for read_into, or for blocks that keep the size (a trimmed buffer grows by
        # the block's own assignment below: no zeros written and copied over first).
        if len(data) < kept + self.block_size and (buf.file is not None or not trim):
            data.extend(bytes(kept + self.block_size - len(data)))
        if buf.file is not None:
            with memoryview(data) as view, view[kept : kept + self.block_size] as into:
                try:
                    read = buf.file.read_into(into)
                except TruncatedInput as e:  # a gzip stream ends early (as in _blocks)
                    self.stats.truncated_at, read = e.offset, 0
            buf.eof = read == 0
        else:
            block = next(blocks, None)
            buf.eof = block is None
            read = 0 if block is None else len(block)
            data[kept : kept + read] = block or b""  # grows the bytearray only if it must
        buf.end = kept + read
        if trim:
            del data[buf.end :]

    def _fill_bytes(self, buf: _Buffer, source: TraceSource) -> None:
        """_fill for the compiled scanner's chunks of a plain file, while the text kept is at
        most a block (less than an event after a chunk): it and the next block in one new
        bytes object, the text kept read again from the file. The scanner reads a bytes
        object where it lies, where it copies a bytearray's chunk (H200 big.json, kernels:
        ~0.05 CPU s). The text read again must be the same, or the file changed while it was
        read. The same blocks as _fill's: the chunks are cut at the same places."""
        drop = max(0, buf.pos - 1)
        kept = bytes(buf.data[drop : buf.end])
        # The last chunk is no longer wanted (the next one is): its block is freed before the
        # next is made, whose allocation then reuses its memory (no fresh pages each block).
        buf.data, self._last_chunk = b"", (b"", 0, None)
        new, read = source.reread(buf.base + drop, self.block_size)
        if not new.startswith(kept):
            self._fail(
                "the file changed while it was read (its bytes from "
                f"{buf.base + drop} were not the same when read again)"
            )
        buf.data, buf.end, buf.eof = new, len(new), read == 0
        buf.base += drop
        buf.min_cut = max(0, buf.min_cut - drop)
        buf.pos -= drop

    def _read_header(self, buf: _Buffer, blocks: Iterator[bytes]) -> bool:
        """Parse the top level up to the event array; True if the file is an object.

        Leading whitespace is dropped as it comes, and the header is parsed again only once
        the text has doubled, so a header of any length (a long string, a big object) is
        parsed in linear time; the scan of a big value goes on where it stopped.
        """
        resume = Resume()
        while True:
            if not buf.eof and skip_ws(buf.data, content_start(buf.data)) == len(buf.data):
                buf.base += len(buf.data)  # only whitespace so far
                buf.data = bytearray()
                buf.end = 0
                self._fill(buf, blocks)
                continue
            try:
                start = find_events_start(buf.data, self.header, buf.eof, resume)
            except NeedMore:
                if buf.base + len(buf.data) > _MAX_HEADER:
                    self._fail(f"no event array in the first {_MAX_HEADER >> 20} MB")
                for _ in range(max(1, len(buf.data) // self.block_size)):
                    self._fill(buf, blocks)
                continue
            except NotATrace as e:
                self._header_failed(e, buf)
            buf.pos = start
            if self.keep_text:
                self.header_text = bytes(buf.data[:start])
            self._check_plain_end()
            first = skip_ws(buf.data, start)
            with memoryview(buf.data) as view, view[first : first + self.block_size] as head:
                self.stats.exact_times = needs_exact(head)  # no copy of a block
            if self.stats.index is not None:
                self.stats.index.exact_times = self.stats.exact_times
            return buf.data[skip_ws(buf.data, content_start(buf.data))] == ord("{")

    def _header_failed(self, error: NotATrace, buf: _Buffer) -> NoReturn:
        """The text before the event array is not a trace's, or a gzip stream ends in it."""
        if self.stats.truncated_at is not None:
            self._fail(
                f"truncated: the gzip stream ends early, after {self.stats.truncated_at} "
                "decompressed bytes, before the event array"
            )
        self._fail(error.message(buf.base))

    def _check_plain_end(self) -> None:
        """Fail fast (before reading it all) on a plain file that ends inside the JSON."""
        if self.partial or self.info.compressed or self.info.stream:
            return
        if not plain_file_ends_cleanly(self.path):
            self._fail(
                "truncated or followed by other data: the file does not end with } or ] "
                "(use --partial to analyse the events it holds)"
            )

    def _chunk_between(self, buf: _Buffer, cut: re.Match[bytes]) -> Iterator[list[Any]]:
        """Decode the events from ``buf.pos`` to the cut; repair the cut if it was wrong."""
        text = buf.data
        start = skip_ws(text, buf.pos)
        if text[start : start + 1] == b",":
            start = skip_ws(text, start + 1)
        try:
            events = self._decode_counted(text, start, cut.start() + 1)
        except ChunkError as e:
            if isinstance(self.part, WorkerPart) or buf.base + start == self.stats.resume_at:
                raise SplitFailed from None  # a part that may start at a wrong boundary
            chunk = text[start : cut.start() + 1]
            end = self._repair(chunk, buf.base + start, e)
            buf.pos = start + end
            buf.min_cut = cut.start() + 1
            buf.want = 0 if end else 2 * (buf.end - start)
            if end:
                self._last_event_end = buf.base + start + end
                yield self._decode_or_fail(chunk[:end], buf.base + start)
            return
        buf.pos = cut.end() - 1
        buf.want = 0
        self._last_event_end = buf.base + cut.start() + 1
        yield events

    def _repair(self, chunk: bytes | bytearray, offset: int, error: ChunkError) -> int:
        """Length of the complete events at the start of a chunk cut at the wrong place.

        When not even the first event is whole, the chunk is damaged (``error``, e.g. a lost
        quote, which the exact scan cannot see) or it ends inside that event (read on).
        """
        self.stats.repaired_chunks += 1
        end, _ = split_values(chunk)
        if chunk[end:].strip(b" \t\r\n,") == b"":
            self._decode_or_fail(chunk, offset)
        if end == 0 and not error.cut_short:
            self._fail(f"malformed JSON at byte {offset + error.pos}: {error.why}")
        return end

    def _decode_or_fail(self, chunk: bytes | bytearray, offset: int) -> list[Any]:
        """Decode events known to be cut right; a failure is malformed JSON at an offset."""
        try:
            return self._decode_counted(chunk)
        except ChunkError as e:
            self._fail(f"malformed JSON at byte {offset + e.pos}: {e.why}")

    def _tail(self, buf: _Buffer) -> Generator[list[Any], None, bool]:
        """Decode the events after the last cut; True if the array's ``]`` was reached.

        When it was not (a truncated trace), ``buf.pos`` is left after the last whole event.
        """
        data, pos = buf.data, skip_ws(buf.data, buf.pos)
        if data[pos : pos + 1] == b",":
            pos = skip_ws(data, pos + 1)
        first, last_end = pos, pos
        while pos < len(data) and data[pos] != ord("]"):
            end = value_end(data, pos)
            if end is None:
                self._fail_if_damaged(data[pos:], buf.base + pos)
                break
            last_end = end
            pos = skip_ws(data, end)
            if data[pos : pos + 1] == b",":
                pos = skip_ws(data, pos + 1)
            elif pos < len(data) and data[pos] != ord("]"):
                self._fail(f"malformed JSON at byte {buf.base + pos}: expected , or ]")
        if last_end > first:
            self._last_event_end = buf.base + last_end
            yield self._decode_or_fail(data[first:last_end], buf.base + first)
        if data[pos : pos + 1] != b"]":
            buf.pos = last_end
            return False
        buf.pos = pos + 1
        return True

    def _fail_if_damaged(self, text: bytes | bytearray, offset: int) -> None:
        """Text that ends inside an event: an error at the damage if it is not only cut short
        (a lost quote makes the rest of a file look like one unfinished event)."""
        try:
            decode_chunk(text, False, Counter(), self.shapes)
        except ChunkError as e:
            if not e.cut_short:
                self._fail(f"malformed JSON at byte {offset + e.pos}: {e.why}")

    def _trailer(self, buf: _Buffer, blocks: Iterator[bytes], is_object: bool) -> None:
        """Read and parse the keys after the event array (the rest of the file)."""
        rest = b"".join([buf.data[buf.pos :], *blocks])
        if self.keep_text:
            self.trailer_text = rest
        try:
            repeated = parse_trailer(rest, 0, self.header, is_object)
            if repeated:
                self.stats.skipped[REPEATED_EVENTS_KEY] += repeated
        except NeedMore:
            self._truncated(self._last_event_end)
        except NotATrace as e:
            self._fail(e.message(buf.base + buf.pos))
        if self.stats.truncated_at is not None:
            self._truncated(self._last_event_end)

    def _decode_counted(
        self, data: bytes | bytearray, start: int = 0, end: int | None = None
    ) -> list[Any]:
        """Decode ``data[start:end]`` and count its events (kept to decode again exactly)."""
        self._last_chunk = (data, start, end)
        stop = len(data) if end is None else end
        exact, skipped = self.stats.exact_times, self.stats.skipped
        if self.decode is not None:
            decode = functools.partial(self.decode, frames=True) if self.frames else self.decode
            events = decode(data, start, stop, exact, skipped, self.shapes)
        elif scanner() is not None:  # the compiled scanner (read.compiled)
            events = decode_scanned(
                data, start, stop, exact, skipped, self.shapes, self.scan_rule, self.frames,
                self.index,
            )  # fmt: skip
        else:
            events = decode_span(data, start, stop, exact, skipped, self.shapes, self.frames)
        if self.index:
            self._note_chunk(data, start, stop, getattr(events, "seen", None))
        self._last_count = event_count(events)
        self.stats.events += self._last_count
        self.stats.chunks += 1
        return events

    def _note_chunk(
        self, data: bytes | bytearray, start: int, stop: int, seen: list[int] | None
    ) -> None:
        """What stats.index notes of the chunk ``data[start:stop]`` once it is given."""
        head, tail = bytes(data[start : start + 32]), bytes(data[max(start, stop - 32) : stop])
        self._note = (stop - start, head, tail, seen)

    def _truncated(self, offset: int) -> None:
        """Record a truncation; without --partial it is an error."""
        self.stats.truncated_at = offset
        if not self.partial:
            where = "decompressed byte" if self.info.compressed else "byte"
            self._fail(
                f"truncated: the trace ends early (last complete event ends at {where} {offset}, "
                f"{self.stats.events} events read); use --partial to analyse them"
            )

    def _progress(self, source: TraceSource) -> None:
        """Report (decompressed bytes done, estimated decompressed size). The main process of a
        parallel read starts in the middle while the worker reads the start: its own part is
        scaled to the whole, so the bar moves from 0 as both parts do."""
        if self.on_progress is None:
            return
        if self.info.stream:  # bytes read, of a size nobody knows yet
            self.on_progress(source.position, None)
            return
        total = source.estimated_size()
        done = source.position
        if isinstance(self.part, MainPart):
            start = min(self.part.split_at, total - 1)
            done = max(0, done - start) * total // (total - start)
        self.on_progress(min(done, total), total)

    def _fail(self, message: str) -> NoReturn:
        raise TraceviewError(f"{self.path}: {message}")


def _in_place(source: TraceSource, whole: bool = False) -> TraceSource | None:
    """The source, if the reader may read it into its buffer in place: a plain file, or in a
    read of the ``whole`` file a gzip one the compiled core inflates (no block copied)."""
    if source.info.stream:
        return None
    if source.info.compressed:
        return source if whole and source.inflates_in_place() else None
    return source


def _final_end(part: WorkerPart) -> int:
    """The worker's real end, once the main reader has found it (SplitFailed if not)."""
    end = part.final_end()
    if end is None:
        raise SplitFailed
    return end


def _last_cut(data: bytes | bytearray, lo: int, min_cut: int, size: int) -> re.Match[bytes] | None:
    """The last candidate event boundary in ``data[lo:size]`` at or after ``min_cut``.

    Searched backwards from the end: candidates never overlap, and a candidate's ``}`` is the
    last one before its ``{``, so the last ``{`` whose text back to the ``}`` before it
    matches is the last match (a few short searches, not a scan of the window)."""
    lo = max(lo, min_cut)
    hi = size
    for _ in range(_BACKWARD_TRIES):
        brace = data.rfind(b"{", lo, hi)
        close = data.rfind(b"}", lo, brace) if brace > lo else -1
        if close < 0:
            return None
        if cut := _CUT.fullmatch(data, close, brace + 1):
            return cut
        hi = brace
    last = None  # many braces that are no boundary (a big nested value): one forward scan
    for last in _CUT.finditer(data, lo, hi):  # noqa: B007
        pass
    return last
