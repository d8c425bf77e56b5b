"""Read a big trace in one process on two cores: the chunks are cut as a serial read cuts
them (read.reader), and each is scanned by the compiled core on threads of its own
(traceview._core.ChunkScanner, the GIL released) while this thread decodes the events the
scanner left and collects the chunks before it. A gzip trace is inflated on a third thread
(read.source): no part of the file is inflated twice, as the fork split must
(columns.parallel), and nothing is forked, sent or merged.

The chunks are taken back in the order they were cut, so the read is the serial read:
the same events, names interned in the same order, the same stats. At most ``ahead``
chunks are in flight (their text and scanned rows: memory stays flat). What the pipeline
cannot take as a serial read would is a SplitFailed (the caller reads the file serially,
which gives the same result or the precise error): a chunk that does not decode as cut
(a wrong cut, damaged JSON). A failing source (corrupt gzip, a file that shrinks) fails
only after the chunks before it are taken, as in a serial read.
"""

from __future__ import annotations

import os
import re
from collections import deque
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from traceview.errors import TraceviewError
from traceview.read.compiled import accepted, event_count, scanner
from traceview.read.decode import ChunkError, decode_span
from traceview.read.jsonscan import skip_ws
from traceview.read.reader import SplitFailed, TraceReader, _Buffer
from traceview.read.source import TraceSource

# Two scan threads (with this one and the inflater's, more than the two cores of a small
# machine: they take turns), and as many chunks in flight as keep both busy while this
# thread decodes the one before.
SCAN_THREADS = 2
SCAN_AHEAD = 4


def threads_win(reader: TraceReader) -> bool:
    """Whether a big trace is read on threads rather than split in two processes: where the
    compiled reader runs, for gzip, whose fork split inflates the worker's part twice (a plain
    file keeps the fork: not clearly faster on threads as measured, see RESULTS-rust-43c.md);
    TRACEVIEW_SPLIT=threads or fork forces either."""
    forced = os.environ.get("TRACEVIEW_SPLIT", "").strip().lower()
    if scanner() is None or reader.decode is not None or reader.info.stream:
        return False
    if forced in ("threads", "fork"):
        return forced == "threads"
    return reader.info.compressed


class ThreadedReader(TraceReader):
    """A TraceReader whose chunks are scanned ahead on the compiled core's threads."""

    threads = SCAN_THREADS
    ahead = SCAN_AHEAD

    @classmethod
    def of(cls, reader: TraceReader) -> ThreadedReader:
        """A reader of the same file with the same settings (nothing read yet)."""
        threaded = cls.__new__(cls)
        threaded.__dict__.update(reader.__dict__)
        threaded._start()
        return threaded

    def _start(self) -> None:
        super()._start()
        self._core: ModuleType | None = None
        self._scanner: Any = None
        self._exacts: deque[bool] = deque()  # of the chunks in flight: exact times asked?
        # ... and where each ends, its length, its first and last 32 bytes (stats.index)
        self._places: deque[tuple[int, int, bytes, bytes]] = deque()
        self._text_in_scanner = False  # the last chunk taken: its text is the scanner's

    def batches(self) -> Iterator[list[Any]]:
        core = scanner()
        if core is None or self.part is not None or self.decode is not None:
            raise SplitFailed  # only the compiled reader's whole-file read runs here
        self._core = core
        self._scanner = core.ChunkScanner(
            self.threads, self.ahead, self.shapes, self.scan_rule, self.frames, self.index
        )
        try:
            yield from super().batches()
        finally:
            self._scanner.close()
            self._exacts.clear()
            self._places.clear()

    def _cut_chunks(
        self, buf: _Buffer, blocks: Iterator[bytes], source: TraceSource
    ) -> Iterator[list[Any]]:
        try:
            yield from super()._cut_chunks(buf, blocks, source)
        except TraceviewError:  # the source failed: after the chunks before, as serially
            yield from self._drain()
            raise
        yield from self._drain()

    def _chunk_between(self, buf: _Buffer, cut: re.Match[bytes]) -> Iterator[list[Any]]:
        """Scan the events from ``buf.pos`` to the cut ahead; give the oldest chunk back
        when ``ahead`` are in flight."""
        text = buf.data
        start = skip_ws(text, buf.pos)
        if text[start : start + 1] == b",":
            start = skip_ws(text, start + 1)
        end = cut.start() + 1
        if len(self._exacts) >= self.ahead:
            yield self._take()
        with memoryview(text) as view, view[start:end] as span:
            if not self._scanner.submit(span, self.stats.exact_times):
                raise SplitFailed  # cannot happen: one was taken
        self._exacts.append(self.stats.exact_times)
        head, tail = bytes(text[start : start + 32]), bytes(text[max(start, end - 32) : end])
        self._places.append((buf.base + end, end - start, head, tail))
        buf.pos = cut.end() - 1
        buf.want = 0
        self._last_event_end = buf.base + end

    def _drain(self) -> Iterator[list[Any]]:
        while self._exacts:
            yield self._take()

    def _take(self) -> list[Any]:
        """The oldest chunk in flight, decoded as a serial read decodes it."""
        exact = self._exacts.popleft()
        self._last_event_end, length, head, tail = self._places.popleft()
        try:
            result = self._scanner.next()
        except RuntimeError:  # its scan was lost (a bug): the serial read reads it
            raise SplitFailed from None
        if exact != self.stats.exact_times:  # cut before exact times were asked for
            return self._decode_counted(self._scanner.last_text())
        self._note = (length, head, tail, result.get("seen"))
        assert self._core is not None  # set by batches()
        events: list[Any] | None = accepted(result, self._core, exact, self.shapes, self.frames)
        if events is None:
            text = self._scanner.last_text()
            try:
                events = decode_span(
                    text, 0, len(text), exact, self.stats.skipped, self.shapes, self.frames
                )
            except ChunkError:  # cut at the wrong place, or damaged
                raise SplitFailed from None
        self._last_chunk = (b"", 0, None)
        self._text_in_scanner = True
        self._last_count = event_count(events)
        self.stats.events += self._last_count
        self.stats.chunks += 1
        return events

    def _decode_counted(
        self, data: bytes | bytearray, start: int = 0, end: int | None = None
    ) -> list[Any]:
        self._text_in_scanner = False
        return super()._decode_counted(data, start, end)

    def redecode_exact(self) -> list[Any]:
        self._text_from_scanner()
        return super().redecode_exact()

    def redecode_slow(self) -> list[Any]:
        self._text_from_scanner()
        return super().redecode_slow()

    def _text_from_scanner(self) -> None:
        """The last chunk's text, where the reader decodes it again (kept by the scanner
        till then: no copy of every chunk's text)."""
        if self._text_in_scanner:
            self._last_chunk = (self._scanner.last_text(), 0, None)
            self._text_in_scanner = False
