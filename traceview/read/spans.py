"""Trim's reading through the compiled core: each chunk of whole events as columns (each
event's byte span and the fields trim judges by, see rust/src/spans.rs), never an object an
event, and the kept events' text joined by the core.

A chunk the core refuses (one the Python path would not read whole with its fast decoder, or
whose values it might read otherwise) is read by ``read.raw.decode_raw_span``, as is every
chunk with ``TRACEVIEW_READER=python``: a batch is then a list of ``Piece``.

A second read of the same file cuts the same chunks in the same order: each chunk has a key
(its place in that order, its length and its ends), by which a second read may leave a chunk
the first one read as columns unread (``skip``: trim's second pass, for a chunk whose
events the first pass showed are all left out). Where the first read took every chunk as
columns, a second may instead read only the chunks it needs at their places (``spans_at``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import numpy as np

from traceview.errors import TraceviewError
from traceview.read.compiled import scanner
from traceview.read.raw import Piece, decode_raw_span
from traceview.read.reader import BLOCK_SIZE, TraceReader
from traceview.read.source import TraceSource, check_path

_VALUES = msgspec.json.Decoder(list[Any])


@dataclass(frozen=True)
class SpanColumns:
    """One chunk's events: ``start``/``end`` their bytes in ``data[offset:]`` (the reader's
    buffer, valid until its next batch is asked for); ``ph``, ``cat``,
    ``pid`` ids into ``phs``, ``cats``, ``pids`` (decoded values; an absent field is None);
    ``ts``/``dur`` exact ns where ``has_ts``/``has_dur``; ``correlation`` as trim reads
    args.correlation (−1: none); ``device`` an id into ``devices`` (−1: none); ``flow`` the
    hash of the raw ``id`` text (``flow_id_hash``)."""

    data: bytes | bytearray
    offset: int
    start: np.ndarray
    end: np.ndarray
    ph: np.ndarray
    cat: np.ndarray
    pid: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    has_ts: np.ndarray
    has_dur: np.ndarray
    correlation: np.ndarray
    device: np.ndarray
    flow: np.ndarray
    phs: list[Any]
    cats: list[Any]
    pids: list[Any]
    devices: list[Any]

    def joined(self, keep: np.ndarray) -> bytes:
        """The kept events' text joined by ``,\\n`` (as trim writes them)."""
        spans = np.column_stack([self.start[keep], self.end[keep]]).astype("<i8")
        last = int(spans[-1, 1]) if len(spans) else 0
        with memoryview(self.data) as view, view[self.offset : self.offset + last] as text:
            return bytes(_core().join_spans(text, spans.tobytes()))


ChunkKey = tuple[int, int, bytes, bytes]
# A chunk a first read cut: its key, and where its text starts and ends in the trace's
# (decompressed) text.
ChunkPlace = tuple[ChunkKey, int, int]


class SpanChunk(list[Any]):
    """A chunk read as columns, or left unread (``columns`` None); an empty list: ``total``
    counts its events."""

    __slots__ = ("columns", "key", "total")

    def __init__(self, columns: SpanColumns | None, key: ChunkKey, total: int) -> None:
        super().__init__()
        self.columns = columns
        self.key = key
        self.total = total


def _core() -> ModuleType:
    core = scanner()
    if core is None:  # only called after a chunk was read by it
        raise RuntimeError("the compiled core is not in use")
    return core


def flow_id_hasher() -> Any:
    """The core's hash of a raw flow id (what ``SpanColumns.flow`` holds), None without it."""
    core = scanner()
    return None if core is None else core.flow_id_hash


class SpanDecoder:
    """A TraceReader ``decode``: the events of ``data[start:end]`` as a SpanChunk, or as
    ``decode_raw_span`` gives them where the core is not used or refuses the chunk.
    ``skip``: a chunk's event count when it need not be read (by its key), else None."""

    def __init__(self, skip: Callable[[ChunkKey], int | None] | None = None) -> None:
        self.skip = skip
        self.calls = 0

    def __call__(
        self,
        data: bytes | bytearray,
        start: int,
        end: int,
        exact: bool,
        skipped: Counter[str],
        shapes: bool = True,
    ) -> list[Piece] | SpanChunk:
        key = (
            self.calls,
            end - start,
            bytes(data[start : start + 32]),
            bytes(data[max(start, end - 32) : end]),
        )
        self.calls += 1
        if self.skip is not None and (count := self.skip(key)) is not None:
            return SpanChunk(None, key, count)
        return decode_spans(data, start, end, exact, skipped, shapes, key)


def decode_spans(
    data: bytes | bytearray,
    start: int,
    end: int,
    exact: bool,
    skipped: Counter[str],
    shapes: bool = True,
    key: ChunkKey = (0, 0, b"", b""),
) -> list[Piece] | SpanChunk:
    """The events of ``data[start:end]`` as a SpanChunk (with ``key``), or as
    ``decode_raw_span`` gives them where the core is not used or refuses the chunk."""
    core = scanner()
    if core is None:
        return decode_raw_span(data, start, end, exact, skipped, shapes)
    with memoryview(data) as view, view[start:end] as span:
        result = core.trim_spans(span)
    if "refused" in result:
        return decode_raw_span(data, start, end, exact, skipped, shapes)
    cols = {name: np.frombuffer(result[name], dtype) for name, dtype in core.SPAN_COLUMNS}
    has = cols.pop("has")
    columns = SpanColumns(
        data=data,
        offset=start,
        **cols,
        has_ts=(has & 1).astype(bool),
        has_dur=(has & 2).astype(bool),
        phs=_VALUES.decode(result["phs"]),
        cats=_VALUES.decode(result["cats"]),
        pids=_VALUES.decode(result["pids"]),
        devices=_VALUES.decode(result["devices"]),
    )
    return SpanChunk(columns, key, result["events"])


def span_pieces(
    path: Path,
    partial: bool,
    on_progress: Any = None,
    skip: Callable[[ChunkKey], int | None] | None = None,
) -> tuple[TraceReader, Any]:
    """``read.raw.raw_pieces`` whose batches are SpanChunks where the core reads them
    (``skip``: see SpanDecoder)."""
    reader = TraceReader(
        path, partial=partial, on_progress=on_progress, decode=SpanDecoder(skip), keep_text=True
    )
    return reader, reader.batches()


def place_of(reader: TraceReader, key: ChunkKey) -> ChunkPlace:
    """Where the chunk ``reader`` has just given (with ``key``) lies in the trace's text."""
    end = reader._last_event_end  # the end of the text it decoded last
    return key, end - key[1], end


def spans_at(
    path: Path,
    places: Sequence[ChunkPlace],
    skip: Callable[[ChunkKey], int | None],
    exact: bool,
    skipped: Counter[str],
    on_progress: Any = None,
    held: dict[ChunkKey, bytes] | None = None,
) -> Iterator[list[Piece] | SpanChunk]:
    """The chunks a first read of ``path`` cut (``places``, in order): each left unread by
    ``skip`` as SpanDecoder does, taken from ``held`` (its text, kept by the first read), or
    read again at its place (a plain file seeks there, gzip inflates once and hands over only
    what is wanted; the file is opened only if a chunk is read from it)."""
    info = check_path(path)
    with ExitStack() as stack:
        source: TraceSource | None = None
        blocks: Iterator[bytes] = iter(())
        text, text_at = bytearray(), 0  # read from offset ``text_at`` and not yet used
        for key, start, end in places:
            if (count := skip(key)) is not None:
                yield SpanChunk(None, key, count)
                continue
            data: bytes | bytearray | None = None if held is None else held.get(key)
            if data is None:
                if source is None or start >= text_at + len(text):
                    text, text_at = bytearray(), start
                    if source is None:
                        source = stack.enter_context(TraceSource(info, BLOCK_SIZE))
                        source.seek(start)
                        blocks = source.blocks()
                    else:
                        source.seek(start)  # (forward only: the places are in order)
                else:
                    del text[: start - text_at]
                    text_at = start
                while len(text) < end - start and (block := next(blocks, None)) is not None:
                    text += block
                data = text[: end - start]
            if (len(data), data[:32], data[-32:]) != key[1:]:
                raise TraceviewError(f"{path}: the file changed while it was read")
            if on_progress is not None and source is not None:
                total = source.estimated_size()
                on_progress(min(end, total), total)
            yield decode_spans(data, 0, len(data), exact, skipped, True, key)
