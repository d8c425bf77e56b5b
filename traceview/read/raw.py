"""Events as their raw bytes, with the few fields that decide where they belong: what
``traceview trim`` copies, byte for byte, without decoding numbers it does not compare.

A span is decoded twice at C speed: into the raw text of each event and into ``RawEvent``
(ts, dur and id kept as raw text). A span msgspec rejects (NaN tokens, invalid UTF-8, an
element that is not an object) is checked like the reader's (a wrong cut raises ChunkError)
and then taken event by event with the stdlib's more lenient parser.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec

from traceview.read.decode import ChunkError, decode_chunk, loads_leniently
from traceview.read.jsonscan import iter_values
from traceview.read.reader import TraceReader

RAW_NULL = msgspec.Raw(b"null")
UNREADABLE = "events that could not be decoded (left out)"


class RawEvent(msgspec.Struct, gc=False):
    """The fields trim looks at; any JSON type is accepted, numbers stay raw text."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: msgspec.Raw = RAW_NULL
    dur: msgspec.Raw = RAW_NULL
    id: msgspec.Raw = RAW_NULL
    args: msgspec.Raw = RAW_NULL


class RawArgs(msgspec.Struct, gc=False):
    """The ``args`` fields that place a GPU activity: its device and correlation id."""

    device: Any = None
    correlation: Any = None


# (the event's raw JSON text, its fields)
Piece = tuple[bytes | msgspec.Raw, RawEvent]
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_EVENTS = msgspec.json.Decoder(list[RawEvent])
_EVENT = msgspec.json.Decoder(RawEvent)
_ARGS = msgspec.json.Decoder(RawArgs)


def raw_args(event: RawEvent) -> RawArgs:
    """The event's device and correlation (empty when args is absent or not an object)."""
    try:
        return _ARGS.decode(event.args)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return RawArgs()


def decode_raw_span(
    data: bytes | bytearray,
    start: int,
    end: int,
    exact: bool,
    skipped: Counter[str],
    shapes: bool = True,
) -> list[Piece]:
    """The events of ``data[start:end]`` with their raw text (a TraceReader ``decode``)."""
    text = b"[" + bytes(data[start:end]) + b"]"
    try:
        return list(zip(_RAWS.decode(text), _EVENTS.decode(text), strict=True))
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        pass
    body = text[1:-1]
    decode_chunk(body, exact, Counter(), False)  # ChunkError when the cut or the text is bad
    pieces = []
    for first, last in iter_values(body):
        raw = body[first:last]
        event = _lenient(raw)
        if event is None:
            skipped[UNREADABLE] += 1
        else:
            pieces.append((raw, event))
    return pieces


def _lenient(raw: bytes) -> RawEvent | None:
    """One event msgspec rejects, through the stdlib (NaN, Infinity, lone surrogates)."""
    try:
        return _EVENT.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        pass
    try:
        (value,) = loads_leniently(raw)  # bare NaN and inf as text, invalid UTF-8 replaced
    except (ChunkError, ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    args = value.get("args")
    kept = {}
    if isinstance(args, dict):
        kept = {k: args[k] for k in ("device", "correlation") if isinstance(args.get(k), int)}
    return RawEvent(
        value.get("ph"), value.get("cat"), value.get("name"), value.get("pid"),
        value.get("tid"), _number(value.get("ts")), _number(value.get("dur")),
        _number(value.get("id")), msgspec.Raw(json.dumps(kept).encode()),
    )  # fmt: skip


def _number(value: Any) -> msgspec.Raw:
    """A number of the lenient path as raw text (null when it is not one)."""
    if isinstance(value, int | Decimal) and not isinstance(value, bool):
        return msgspec.Raw(str(value).encode())
    return RAW_NULL


def raw_pieces(
    path: Path, partial: bool, on_progress: Callable[[int, int | None], None] | None = None
) -> tuple[TraceReader, Iterator[list[Piece]]]:
    """A reader keeping the text around the event array, and its batches of pieces."""
    reader = TraceReader(
        path, partial=partial, on_progress=on_progress, decode=decode_raw_span, keep_text=True
    )
    return reader, reader.batches()
