"""The top level of a trace file: header keys, where the event array starts, trailing keys."""

from __future__ import annotations

from typing import Any

import orjson

from traceview.read.jsonscan import Resume, Text, skip_ws, string_at, value_end

EXECUTION_TRACE_KEYS = frozenset({"nodes", "schema"})
UTF8_BOM = b"\xef\xbb\xbf"
# Header values the analyses read, kept whatever their size; others only up to this size.
ALWAYS_KEPT = frozenset(
    {"deviceProperties", "distributedInfo", "schemaVersion", "displayTimeUnit", "traceName"}
)
_MAX_KEPT_VALUE = 1 << 20


class NeedMore(Exception):
    """The buffer ends before the structure being parsed does."""


class NotATrace(Exception):
    """The text is not a Chrome trace; the message says what it is instead, and ``pos``
    where in the text, when a place can be named (see ``message``)."""

    def __init__(self, why: str, pos: int | None = None) -> None:
        super().__init__(why)
        self.why = why
        self.pos = pos

    def message(self, base: int) -> str:
        """The message, with the place as a file offset (``base``: where the text starts)."""
        return self.why if self.pos is None else f"{self.why} at byte {base + self.pos}"


def content_start(buf: Text) -> int:
    """Where the JSON text starts: after a UTF-8 byte order mark, if there is one."""
    return len(UTF8_BOM) if buf[: len(UTF8_BOM)] == UTF8_BOM else 0


def find_events_start(
    buf: Text, header: dict[str, Any], at_eof: bool, resume: Resume | None = None
) -> int:
    """Parse the top level up to the event array; return the offset just after its ``[``.

    Fills ``header`` with the keys met before ``traceEvents``. Raises NeedMore when the
    buffer ends first, NotATrace when the text is not a Chrome trace. ``resume`` keeps the
    scan of an unfinished value for the next call, with the same text and more after it.
    """
    pos = skip_ws(buf, content_start(buf))
    if pos >= len(buf):
        raise NeedMore if not at_eof else NotATrace("no JSON content (only whitespace)")
    first = buf[pos : pos + 1]
    if first == b"[":
        return pos + 1
    if first != b"{":
        raise NotATrace(f"not JSON: starts with {_show(buf[pos : pos + 16])}")
    return _object_until_events(buf, pos + 1, header, at_eof, resume)


def _object_until_events(
    buf: Text, pos: int, header: dict[str, Any], at_eof: bool, resume: Resume | None
) -> int:
    """Walk key/value pairs of the top-level object until the key ``traceEvents``."""
    while True:
        pos = skip_ws(buf, pos)
        key, pos = _key(buf, pos, at_eof)
        if key is None:
            raise NotATrace(_no_events_message(header))
        pos = skip_ws(buf, pos)
        if key == "traceEvents":
            if buf[pos : pos + 1] == b"[":
                return pos + 1
            _need(buf, pos, at_eof)
            raise NotATrace('"traceEvents" is not a list')
        if _other_format(header, key):  # said at once, not after walking a value of many MB
            header[key] = None
            raise NotATrace(_no_events_message(header))
        end = value_end(buf, pos, at_eof=at_eof, resume=resume)
        if end is None:
            _need(buf, len(buf), at_eof)
            raise NotATrace(f"the value of {key!r} is cut off")
        header[key] = _header_value(key, buf, pos, end)
        pos = _after_member(buf, end, at_eof)


def parse_trailer(buf: Text, pos: int, header: dict[str, Any], is_object: bool) -> int:
    """Parse what follows the event array's ``]`` (the whole rest of the file is in ``buf``).

    Returns how many more ``traceEvents`` keys it holds (a repeated key): their values are
    skipped, not decoded into the header.
    """
    pos = skip_ws(buf, pos)
    repeated = 0
    if is_object:
        while pos < len(buf) and buf[pos : pos + 1] == b",":
            key, pos = _key(buf, skip_ws(buf, pos + 1), False)
            if key is None:
                raise NotATrace("malformed keys after traceEvents")
            pos = skip_ws(buf, pos)
            end = value_end(buf, pos, at_eof=True)
            if end is None:
                raise NeedMore
            if key == "traceEvents":
                repeated += 1
            else:
                header.setdefault(key, _header_value(key, buf, pos, end))
            pos = skip_ws(buf, end)
        if buf[pos : pos + 1] != b"}":
            raise NeedMore if pos >= len(buf) else NotATrace("malformed text after traceEvents")
        pos = skip_ws(buf, pos + 1)
    if pos < len(buf):
        raise NotATrace("unexpected text after the trace", pos)
    return repeated


def without_event_arrays(buf: Text) -> bytes:
    """The text after the event array's ``]`` (of an object, checked by parse_trailer)
    without its members that repeat the key ``traceEvents``: their events are not read."""
    parts, kept_from = [], 0
    pos = skip_ws(buf, 0)
    while buf[pos : pos + 1] == b",":
        key, after = _key(buf, skip_ws(buf, pos + 1), True)
        end = value_end(buf, skip_ws(buf, after), at_eof=True)
        if key is None or end is None:
            break
        if key == "traceEvents":
            parts.append(bytes(buf[kept_from:pos]))
            kept_from = end
        pos = skip_ws(buf, end)
    parts.append(bytes(buf[kept_from:]))
    return b"".join(parts)


def _key(buf: Text, pos: int, at_eof: bool) -> tuple[str | None, int]:
    """Read ``"key":`` at ``pos``; (None, pos) at the object's closing brace."""
    if buf[pos : pos + 1] == b"}":
        return None, pos
    _need(buf, pos, at_eof)
    if buf[pos : pos + 1] != b'"':
        raise NotATrace("malformed JSON object", pos)
    found = string_at(buf, pos)
    if found is None:
        _need(buf, len(buf), at_eof)
        raise NotATrace("unterminated string", pos)
    raw, pos = found
    pos = skip_ws(buf, pos)
    _need(buf, pos, at_eof)
    if buf[pos : pos + 1] != b":":
        raise NotATrace("malformed JSON object", pos)
    return str(_loads(raw)), pos + 1


def _after_member(buf: Text, pos: int, at_eof: bool) -> int:
    """Skip the comma after a member; at ``}`` leave pos there for _key to see."""
    pos = skip_ws(buf, pos)
    _need(buf, pos, at_eof)
    ch = buf[pos : pos + 1]
    if ch == b",":
        return pos + 1
    if ch == b"}":
        return pos
    raise NotATrace("malformed JSON object", pos)


def _need(buf: Text, pos: int, at_eof: bool) -> None:
    """Raise NeedMore if ``pos`` is past the buffer and more input may come."""
    if pos >= len(buf):
        if at_eof:
            raise NotATrace("JSON ends early", len(buf))
        raise NeedMore


def _header_value(key: str, buf: Text, pos: int, end: int) -> Any:
    """A header value, decoded; one traceview does not read and longer than 1 MB (such as a
    big ``stackFrames`` object: 50 MB took 1 GB decoded) is kept only as its size."""
    if end - pos > _MAX_KEPT_VALUE and key not in ALWAYS_KEPT:
        return f"<{end - pos} bytes, not kept>"
    return _loads(buf[pos:end])


def _loads(raw: bytes | bytearray) -> Any:
    """Decode a header value; values orjson rejects (NaN, huge ints) are kept as text."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", errors="replace")


def _other_format(header: dict[str, Any], key: str) -> bool:
    """A top-level key that shows the file is not a Chrome trace: a rocprofiler file, or the
    ``nodes`` after the ``schema`` of a PyTorch Execution Trace."""
    return key.startswith("rocprofiler") or header.keys() | {key} >= EXECUTION_TRACE_KEYS


def _no_events_message(header: dict[str, Any]) -> str:
    """Explain a JSON object that has no traceEvents, naming what it looks like."""
    keys = ", ".join(list(header)[:8]) or "none"
    if header.keys() >= EXECUTION_TRACE_KEYS:
        return f'a PyTorch Execution Trace, not a Chrome trace (no "traceEvents"; keys: {keys})'
    if any(k.startswith("rocprofiler") for k in header):
        return f'a rocprofiler JSON file, not a Chrome trace (no "traceEvents"; keys: {keys})'
    return f'JSON object without "traceEvents": not a Chrome trace (keys: {keys})'


def _show(raw: bytes | bytearray) -> str:
    """A short printable rendering of raw bytes for error messages."""
    return repr(raw.decode("utf-8", errors="replace"))
