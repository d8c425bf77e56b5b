"""Decode a chunk of comma-separated events into typed structs, keeping only needed fields.

Fast path: one msgspec call per chunk into `Event` (numbers as float/int). Traces whose
timestamps carry sub-µs digits at epoch scale (kineto ≥ 2.3: ``1712195495505582.988``)
are decoded exactly, since float64 spacing there is 0.25 µs: ``ts`` and ``dur`` as their raw
text, parsed a batch at a time (traceview.columns.raw_numbers), each checked to be what the
``Decimal`` the per-event path makes of it would accept.
Fallback for chunks the fast path rejects (NaN tokens, invalid UTF-8, lone surrogates,
wrongly typed fields): stdlib json, event by event, skipping and counting bad events.
"""

from __future__ import annotations

import functools
import json
import re
import typing
from collections import Counter
from decimal import Decimal
from typing import Any, ClassVar

import msgspec

from traceview.read.jsonscan import STRING_BODY, TRUNCATED, ends_plainly, iter_values

# A timestamp with ≥ 10 integer digits and a fraction: float64 cannot hold it to the ns.
_EXACT_TS = re.compile(rb'"ts"\s*:\s*-?\d{10,}\.\d')
# Non-standard number tokens some writers emit; stdlib json knows only NaN/Infinity. A string
# the text ends inside runs to the end (so the scan stays linear however many quotes follow).
_BAD_CONSTANT = re.compile(STRING_BODY + rb'(?:"|\Z)|(-?\b(?:inf|Infinity|NaN|nan)\b)', re.S)


# Where a CPU op's shapes are (record_shapes): kept as raw JSON text, parsed only by the
# analyses that want them, so a trace without them, or a command that ignores them, pays
# nothing but the skip msgspec does anyway.
# 2021 traces spell it "Input dims". A span holding any of these keys is decoded from a copy.
SHAPE_KEY = b'"Input '
_NO_RAW = msgspec.Raw()


class Args(msgspec.Struct, gc=False):
    """The few `args` fields traceview uses."""

    correlation: int | None = None
    device: int | str | None = None
    stream: int | str | None = None
    # Launch configuration (traceview.columns.launches): any JSON value, checked when interned, so a
    # value of an unexpected type never sends a chunk to the slow path.
    grid: Any = None
    block: Any = None
    registers: Any = msgspec.field(default=None, name="registers per thread")
    shared_memory: Any = msgspec.field(default=None, name="shared memory")
    bytes: Any = None
    shaped: ClassVar[bool] = False  # whether the shape fields below are declared


class ShapedArgs(Args, gc=False):
    """``Args`` with a CPU op's shapes, for reads that keep CPU rows."""

    shaped: ClassVar[bool] = True
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=_NO_RAW)
    input_dims_2021: msgspec.Raw = msgspec.field(name="Input dims", default=_NO_RAW)
    input_type: msgspec.Raw = msgspec.field(name="Input type", default=_NO_RAW)
    concrete_inputs: msgspec.Raw = msgspec.field(name="Concrete Inputs", default=_NO_RAW)


class Event(msgspec.Struct, gc=False):
    """One trace event, only the declared fields (numbers as float or int)."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | int | None = None
    dur: float | int | None = None
    args: Args | None = None


# A missing ts or dur of an exactly decoded event reads as null.
RAW_NULL = msgspec.Raw(b"null")


class ExactEvent(msgspec.Struct, gc=False):
    """One trace event with exact ts and dur: their raw JSON text (a number, or what
    ``Decimal | None`` accepts: checked when decoded, see _check_raw_numbers)."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str | None = None
    tid: int | str | None = None
    ts: msgspec.Raw = RAW_NULL
    dur: msgspec.Raw = RAW_NULL
    args: Args | None = None


class DecimalEvent(msgspec.Struct, gc=False):
    """An event of the slow path (stdlib json): exact (Decimal) ts and dur."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str | None = None
    tid: int | str | None = None
    ts: Decimal | None = None
    dur: Decimal | None = None
    args: Args | None = None


# The NCCL metadata kineto writes on collective kernels and ``record_param_comms`` CPU ops
# (traceview.columns.comms). A span holding this key is decoded with the Comm* types below, as
# is any span the slow paths decode; any other keeps smaller structs (each field costs every
# event with unknown args keys: the Comm* types decode 10-20% slower). So the events of one
# decoded span all have Comm* types or none does (``may_carry``).
COMM_KEY = b'"Collective name"'
# The allocator's counters of a ``[memory]`` instant event (traceview.columns.allocations): a
# span holding this text (and not COMM_KEY) is decoded with the Memory* types, which carry them.
# Without its quotes: a text ending in a quote, the commonest byte in JSON, is found ~1.6×
# slower, and a span that holds the words elsewhere only takes the bigger struct.
MEMORY_KEY = b"[memory]"  # the name of every [memory] event, older ones (Bytes alone) too


class MemoryArgs(Args, gc=False):
    """``Args`` with a ``[memory]`` event's fields: any JSON value, checked when converted."""

    device_type: Any = msgspec.field(default=None, name="Device Type")
    device_id: Any = msgspec.field(default=None, name="Device Id")
    alloc_bytes: Any = msgspec.field(default=None, name="Bytes")
    addr: Any = msgspec.field(default=None, name="Addr")
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")


class CommArgs(MemoryArgs, gc=False):
    """``MemoryArgs`` with a collective's metadata: any JSON value, checked when interned."""

    collective: Any = msgspec.field(default=None, name="Collective name")
    process_group: Any = msgspec.field(default=None, name="Process Group Name")
    in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    dtype: Any = None
    group_size: Any = msgspec.field(default=None, name="Group size")
    seq: Any = msgspec.field(default=None, name="Seq")


class ShapedMemoryArgs(MemoryArgs, gc=False):
    """``MemoryArgs`` with a CPU op's shapes (as ShapedArgs)."""

    shaped: ClassVar[bool] = True
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=_NO_RAW)
    input_dims_2021: msgspec.Raw = msgspec.field(name="Input dims", default=_NO_RAW)
    input_type: msgspec.Raw = msgspec.field(name="Input type", default=_NO_RAW)
    concrete_inputs: msgspec.Raw = msgspec.field(name="Concrete Inputs", default=_NO_RAW)


class ShapedCommArgs(CommArgs, gc=False):
    """``CommArgs`` with a CPU op's shapes (as ShapedArgs)."""

    shaped: ClassVar[bool] = True
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=_NO_RAW)
    input_dims_2021: msgspec.Raw = msgspec.field(name="Input dims", default=_NO_RAW)
    input_type: msgspec.Raw = msgspec.field(name="Input type", default=_NO_RAW)
    concrete_inputs: msgspec.Raw = msgspec.field(name="Concrete Inputs", default=_NO_RAW)


# Events whose args have the shapes (reads that keep CPU rows), the allocator's counters
# (spans holding MEMORY_KEY), the collective's metadata (spans holding COMM_KEY), or both:
# fields cost every event, so each read declares only those it may use.
class ShapedEvent(Event, gc=False):
    args: ShapedArgs | None = None


class MemoryEvent(Event, gc=False):
    args: MemoryArgs | None = None


class ShapedMemoryEvent(Event, gc=False):
    args: ShapedMemoryArgs | None = None


class CommEvent(Event, gc=False):
    args: CommArgs | None = None


class ShapedCommEvent(Event, gc=False):
    args: ShapedCommArgs | None = None


class ExactShapedEvent(ExactEvent, gc=False):
    args: ShapedArgs | None = None


class ExactMemoryEvent(ExactEvent, gc=False):
    args: MemoryArgs | None = None


class ExactShapedMemoryEvent(ExactEvent, gc=False):
    args: ShapedMemoryArgs | None = None


class ExactCommEvent(ExactEvent, gc=False):
    args: CommArgs | None = None


class ExactShapedCommEvent(ExactEvent, gc=False):
    args: ShapedCommArgs | None = None


# A python frame's args fields (traceview.columns.collect), declared only by the reads that
# keep frames (``source``): each field costs every event decoded.
_FRAME_ARGS = [
    ("python_id", Any, msgspec.field(default=None, name="Python id")),
    ("python_parent", Any, msgspec.field(default=None, name="Python parent id")),
]


def _frame_args(args: type[Any]) -> type[Any]:
    """``args`` with a python frame's fields."""
    return msgspec.defstruct(args.__name__ + "Frames", _FRAME_ARGS, bases=(args,), gc=False)


ShapedCommFrameArgs = _frame_args(ShapedCommArgs)  # every args field (the slow path's)


class DecimalCommEvent(DecimalEvent, gc=False):
    """``DecimalEvent`` with every args field and a flow's ``id`` (the slow path's)."""

    args: ShapedCommFrameArgs | None = None  # type: ignore[valid-type]
    id: Any = None


AnyEvent = Event | ExactEvent | DecimalEvent
# What a span's args may hold beyond Args: nothing, the allocator's counters, or these and
# a collective's metadata.
PLAIN, MEMORY, COMM = 0, 1, 2
# The fast decoders' event types by (exact, extra, shaped).
_EVENTS: dict[tuple[bool, int, bool], type[Any]] = {
    (False, PLAIN, False): Event,
    (False, PLAIN, True): ShapedEvent,
    (False, MEMORY, False): MemoryEvent,
    (False, MEMORY, True): ShapedMemoryEvent,
    (False, COMM, False): CommEvent,
    (False, COMM, True): ShapedCommEvent,
    (True, PLAIN, False): ExactEvent,
    (True, PLAIN, True): ExactShapedEvent,
    (True, MEMORY, False): ExactMemoryEvent,
    (True, MEMORY, True): ExactShapedMemoryEvent,
    (True, COMM, False): ExactCommEvent,
    (True, COMM, True): ExactShapedCommEvent,
}


def _with_frames(event: type[Any]) -> type[Any]:
    """``event`` with a frame's fields in its args and a flow's ``id`` (not its ``bp``: a
    string per flow event, and every kernel has a flow of its own, ``ac2g``: 4% more decode
    time for nothing, since kineto's fwdbwd finishes all bind to the enclosing slice)."""
    frame_args = _frame_args(typing.get_args(typing.get_type_hints(event)["args"])[0])
    fields = [("args", frame_args | None, None), ("id", Any, None)]
    return msgspec.defstruct(event.__name__ + "Frames", fields, bases=(event,), gc=False)


# The same with a frame's fields, by (exact, extra, shaped): the reads that keep frames.
_FRAME_EVENTS = {key: _with_frames(event) for key, event in _EVENTS.items()}
_RAW_EVENTS = tuple(
    event for events in (_EVENTS, _FRAME_EVENTS) for (exact, _, _), event in events.items() if exact
)
COMM_EVENTS = (
    *(event for (_, extra, _), event in _EVENTS.items() if extra == COMM),
    *(event for (_, extra, _), event in _FRAME_EVENTS.items() if extra == COMM),
    DecimalCommEvent,
)


def may_carry(events: list[Any]) -> bool:
    """Whether the events of one decoded span may carry a collective's metadata."""
    return bool(events) and type(events[0]) in COMM_EVENTS


_NUMBER_TYPES = (int, Decimal, type(None))
NON_FINITE = b'"<non-finite number>"'

_FAST_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError)
_SLOW_ERRORS = (RecursionError, ArithmeticError)
# What the raw ts and dur of an exact event must be: the values the per-event path converts.
RAW_NUMBER = msgspec.json.Decoder(Decimal | None)
# The bytes of JSON numbers and null: raw values made of these alone are numbers or null.
_NUMBER_BYTES = b"0123456789.-+eEnul "


@functools.cache
def _decoder(
    exact: bool, extra: int, shaped: bool = True, frames: bool = False
) -> msgspec.json.Decoder[list[Any]]:
    """The fast decoder: exact numbers or not, with the args fields of ``extra`` (PLAIN,
    MEMORY, COMM), with the CPU ops' shapes or not, with the frames' fields or not (made
    when first needed)."""
    events = _FRAME_EVENTS if frames else _EVENTS
    return msgspec.json.Decoder(list[events[exact, extra, shaped]])  # type: ignore[valid-type]


# A span holding neither is decoded without the frames' fields, even by a read that keeps
# frames: declared, they cost every event (a flow ``id`` on each kernel's ac2g flow events).
FRAME_KEYS = (b"fwdbwd", b"python_function")  # the first found early in a training trace


def _has_frames(data: bytes | bytearray, start: int, end: int) -> bool:
    """Whether ``data[start:end]`` may hold python frames or fwdbwd flows."""
    return any(data.find(key, start, end) >= 0 for key in FRAME_KEYS)


def _extra(data: bytes | bytearray, start: int = 0, end: int | None = None) -> int:
    """Which args fields the events of ``data[start:end]`` may use (PLAIN, MEMORY, COMM)."""
    stop = len(data) if end is None else end
    if data.find(COMM_KEY, start, stop) >= 0:
        return COMM
    return MEMORY if data.find(MEMORY_KEY, start, stop) >= 0 else PLAIN


# What may follow a syntax error found where the text only ends too early: a number or a
# literal cut short (``12.``, ``tru``), then nothing (or the closing bracket added here).
_UNFINISHED = re.compile(r"[\w.+-]*\s*")


class ChunkError(Exception):
    """A chunk is not a sequence of JSON values (bad syntax or a cut inside an event).

    ``cut_short``: the text is valid as far as it goes and only ends inside a value (a cut
    at the wrong place, or the end of a truncated file); otherwise it is damaged at ``pos``.
    """

    def __init__(self, pos: int, why: str, cut_short: bool = True) -> None:
        super().__init__(why)
        self.pos = pos
        self.why = why
        self.cut_short = cut_short


def needs_exact(chunk: bytes | bytearray | memoryview) -> bool:
    """True when the chunk holds epoch-scale timestamps with sub-µs digits."""
    return _EXACT_TS.search(chunk) is not None


def decode_chunk(
    chunk: bytes | bytearray,
    exact: bool,
    skipped: Counter[str],
    shapes: bool = True,
    frames: bool = False,
) -> list[Any]:
    """Decode ``chunk`` (events separated by commas, no brackets) into Event structs; with
    the CPU ops' shapes if ``shapes`` (and the span holds any), the frames' fields if
    ``frames``."""
    try:
        return _decode_fast(chunk, exact, shapes, frames)
    except _FAST_ERRORS as e:
        _check_cut_short(e, chunk)
        return _decode_slow(chunk, exact, skipped)


def _decode_slow(chunk: bytes | bytearray, exact: bool, skipped: Counter[str]) -> list[Any]:
    """The chunk the fast decoder rejected: stdlib json, else event by event."""
    try:
        return _decode_lenient(chunk, skipped)
    except _SLOW_ERRORS:
        return _decode_each(chunk, exact, skipped)


def decode_span(
    data: bytes | bytearray,
    start: int,
    end: int,
    exact: bool,
    skipped: Counter[str],
    shapes: bool = True,
    frames: bool = False,
) -> list[Any]:
    """Decode the events in ``data[start:end]`` (as decode_chunk).

    In a writable buffer (the reader's bytearray) the span is decoded where it
    lies: the bytes just before and after it (whitespace, a comma or the array's ``[``) are
    overwritten by brackets for the call and put back. What the fast path rejects takes the
    slow path, on a copy.
    """
    if isinstance(data, bytearray) and 0 < start <= end < len(data):
        shaped = shapes and data.find(SHAPE_KEY, start, end) >= 0
        frames = frames and _has_frames(data, start, end)
        before, after = data[start - 1], data[end]
        data[start - 1], data[end] = ord("["), ord("]")
        decoder = _decoder(exact, _extra(data, start, end), shaped, frames)
        try:
            with memoryview(data) as view, view[start - 1 : end + 1] as span:
                # Raw fields would keep a view of the buffer alive (it could not grow or
                # shrink any more): raw shapes or numbers are decoded from a copy.
                return decoder.decode(bytes(span) if shaped or exact else span)
        except _FAST_ERRORS as e:
            with memoryview(data) as view, view[start:end] as span:
                _check_cut_short(e, span)
        finally:
            data[start - 1], data[end] = before, after
        return _decode_slow(data[start:end], exact, skipped)
    return decode_chunk(data[start:end], exact, skipped, shapes, frames)


def _decode_fast(chunk: bytes | bytearray, exact: bool, shapes: bool, frames: bool) -> list[Any]:
    shaped = shapes and SHAPE_KEY in chunk
    frames = frames and _has_frames(chunk, 0, len(chunk))
    return _decoder(exact, _extra(chunk), shaped, frames).decode(b"[" + chunk + b"]")


def has_raw_numbers(events: list[Any]) -> bool:
    """Whether the events of one decoded span were decoded exactly by the fast path (raw ts
    and dur, not yet checked: see check_raw_numbers)."""
    return bool(events) and type(events[0]) in _RAW_EVENTS


def check_raw_numbers(events: list[Any]) -> None:
    """ValidationError unless every raw ts and dur is what a ``Decimal | None`` field takes
    (a number, null, a decimal string), as the exact decoder's fields were; where one is
    not, the old decoder rejected the chunk, which then took the slow path (so does it now:
    see read.reader.TraceReader.redecode_slow). The events whose numbers are parsed in bulk
    need no check (only plain numbers parse); event by event only where one is not a number
    or null."""
    for raws in ([e.ts for e in events], [e.dur for e in events]):
        try:
            text = b" ".join(raws)
        except TypeError:  # events of the slow path among them
            text = b"?"
        if text.translate(None, _NUMBER_BYTES):
            for raw in raws:
                if type(raw) is msgspec.Raw:
                    RAW_NUMBER.decode(raw)


def decode_slow(chunk: bytes | bytearray, exact: bool, skipped: Counter[str]) -> list[Any]:
    """``chunk`` by the slow path, as when the fast decoder rejects it."""
    return _decode_slow(chunk, exact, skipped)


def _check_cut_short(error: Exception, text: bytes | bytearray | memoryview) -> None:
    """A chunk the fast decoder read to its end without an error before it only ends too
    early: no slower decoder can read it either (and trying would cost a copy of it)."""
    if isinstance(error, msgspec.DecodeError) and str(error) == TRUNCATED and ends_plainly(text):
        raise ChunkError(len(text), "the text ends inside an event") from None


def _decode_each(chunk: bytes | bytearray, exact: bool, skipped: Counter[str]) -> list[Any]:
    """Event by event, for a chunk holding events too deeply nested or with numbers out of
    range for the slow path: those events are skipped and counted."""
    out: list[Any] = []
    last_end = 0
    for start, end in iter_values(chunk):
        last_end = end
        value = chunk[start:end]
        try:
            events = _decoder(exact, COMM, True, True).decode(b"[" + value + b"]")
            if exact:
                check_raw_numbers(events)
            out.extend(events)
        except _FAST_ERRORS:
            try:
                out.extend(_decode_lenient(value, skipped))
            except _SLOW_ERRORS:
                skipped["events skipped: nested too deeply, or a number out of range"] += 1
    if chunk[last_end:].strip():
        raise ChunkError(last_end, "malformed JSON between events")
    return out


def _decode_lenient(chunk: bytes | bytearray, skipped: Counter[str]) -> list[Any]:
    """Slow path: stdlib json (NaN-tolerant, Decimal numbers), events checked one by one."""
    text = chunk.decode("utf-8", errors="replace")
    try:
        items = json.loads("[" + text + "]", parse_float=Decimal, parse_constant=_non_finite)
    except json.JSONDecodeError:
        items = loads_leniently(chunk)
    out: list[Any] = []
    for item in items:
        event = _convert(item)
        if event is None:
            skipped["events skipped: not an object, or a field of the wrong type"] += 1
        else:
            out.append(event)
    return out


def loads_leniently(chunk: bytes | bytearray) -> list[Any]:
    """Replace bare inf/NaN tokens outside strings by a string, then parse (or ChunkError)."""
    cleaned = _BAD_CONSTANT.sub(lambda m: NON_FINITE if m.group(1) else m.group(0), chunk)
    text = cleaned.decode("utf-8", errors="replace")
    try:
        return json.loads("[" + text + "]", parse_float=Decimal)  # type: ignore[no-any-return]
    except json.JSONDecodeError as e:
        pos = len(text[: max(0, e.pos - 1)].encode("utf-8", errors="replace"))
        # Valid so far if only an unfinished token follows (``[`` shifts positions by one).
        unfinished = _UNFINISHED.fullmatch(text, max(0, e.pos - 1)) is not None
        short = unfinished or e.msg.startswith("Unterminated string")
        raise ChunkError(pos, e.msg, short) from None


def _non_finite(token: str) -> str:
    """NaN/Infinity become a string, so an event using them as a number fails validation."""
    return NON_FINITE.decode()


def _convert(item: Any) -> DecimalCommEvent | None:
    """A dict from the slow path as a DecimalEvent, or None if its fields have wrong types."""
    if not isinstance(item, dict):
        return None
    if any(type(item.get(key)) not in _NUMBER_TYPES for key in ("ts", "dur")):
        return None
    for key in ("name", "cat", "ph", "pid", "tid"):
        value = item.get(key)
        if isinstance(value, str):
            item[key] = _clean_text(value)
    args = item.get("args")
    _raw_shapes(args)
    try:
        return msgspec.convert(item, DecimalCommEvent)
    except (msgspec.ValidationError, UnicodeEncodeError):  # e.g. a lone surrogate in args
        return None


_RAW_FIELDS = ("Input Dims", "Input dims", "Input type", "Concrete Inputs")


def _raw_shapes(args: Any) -> None:
    """The shape fields of a slow-path event's args as the raw JSON text the fast path keeps
    (left out if they cannot be encoded)."""
    if not isinstance(args, dict):
        return
    for key in _RAW_FIELDS:
        if key in args:
            try:
                args[key] = msgspec.Raw(msgspec.json.encode(args[key]))
            except (TypeError, ValueError, UnicodeEncodeError):
                del args[key]


def _clean_text(value: str) -> str:
    """Replace lone surrogates (from ``\\ud800`` escapes) so the text can be printed/encoded."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in value)
    return value
