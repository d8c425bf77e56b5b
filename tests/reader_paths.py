"""The two readers side by side: a trace read by the compiled scanner and by the Python path
(``TRACEVIEW_READER=python``), as plain values that compare equal when the reads agree."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np

from traceview.columns.cpu_rows import CpuRows
from traceview.columns.model import TraceEvents
from traceview.columns.parallel import collect_events
from traceview.columns.schema import TABLES
from traceview.errors import TraceviewError
from traceview.read.compiled import READER_ENV, reader_name
from traceview.read.reader import TraceReader

COMPILED = reader_name().startswith("compiled")


@contextmanager
def python_reader() -> Iterator[None]:
    """The Python reader inside the block (the environment as it was after it)."""
    before = os.environ.get(READER_ENV)
    os.environ[READER_ENV] = "python"
    try:
        yield
    finally:
        if before is None:
            del os.environ[READER_ENV]
        else:
            os.environ[READER_ENV] = before


def snapshot(events: TraceEvents) -> dict[str, Any]:
    """Every field of ``events`` as comparable values (a column as its dtype and bytes; counters
    and tables in their order, which the outputs follow). A field of a kind it does not know is
    an error, so that a field added to TraceEvents is compared too, not silently left out.
    How the text was cut into chunks (how many, how many repaired) is left out: no output
    shows it, and each reader may cut the text its own way."""
    values = {f.name: _plain(getattr(events, f.name), f.name) for f in fields(events)}
    name, read = values["read"]
    values["read"] = (name, {k: v for k, v in read.items() if k not in _HOW_CUT})
    return values


_HOW_CUT = {"chunks", "repaired_chunks"}


def _plain(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, np.ndarray):
        return (str(value.dtype), value.shape, value.tobytes())
    if type(value) in TABLES:  # a column group: its columns by name, in the schema's order
        return {
            c.name: _plain(getattr(value, c.name), f"{where}.{c.name}") for c in TABLES[type(value)]
        }
    if isinstance(value, CpuRows):
        return b"".join(block.tobytes() for block in value.blocks())
    if isinstance(value, Counter | dict):
        return [(_plain(k, where), _plain(v, f"{where}[{k!r}]")) for k, v in value.items()]
    if isinstance(value, list | tuple | Sequence):
        return [_plain(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if is_dataclass(value) and not isinstance(value, type):
        return (
            type(value).__name__,
            {f.name: _plain(getattr(value, f.name), f"{where}.{f.name}") for f in fields(value)},
        )
    raise TypeError(f"{where}: a {type(value).__name__}, which the snapshot cannot compare")


def read_once(
    path: Path, keep_cpu: bool, partial: bool = False, frames: bool = False
) -> dict[str, Any] | str:
    """The read's snapshot (``frames``: with the python frames and flows, as ``source`` reads
    it), or its error's message."""
    try:
        return snapshot(collect_events(TraceReader(path, partial=partial), keep_cpu, frames))
    except TraceviewError as e:
        return f"error: {e}"


def both_reads(
    path: Path, keep_cpu: bool, partial: bool = False, frames: bool = False
) -> tuple[dict[str, Any] | str, dict[str, Any] | str]:
    """(compiled, python) reads of one file."""
    compiled = read_once(path, keep_cpu, partial, frames)
    with python_reader():
        python = read_once(path, keep_cpu, partial, frames)
    return compiled, python


def differences(a: dict[str, Any] | str, b: dict[str, Any] | str) -> list[str]:
    """What differs between two snapshots (empty when equal): each field that does, with the
    first column and row where it does."""
    if isinstance(a, str) or isinstance(b, str):
        return [] if a == b else [f"{a!r:.200} != {b!r:.200}"]
    return [f"{key}: {_first_difference(a[key], b[key])}" for key in a if a[key] != b[key]]


def _first_difference(a: Any, b: Any) -> str:
    """Where two plain values first differ (a column: its name and the first differing row)."""
    if isinstance(a, dict) and isinstance(b, dict):
        key = next((k for k in a if a[k] != b.get(k)), None)
        return f"{key}: {_first_difference(a[key], b.get(key))}" if key is not None else "keys"
    if isinstance(a, tuple) and len(a) == 3 and isinstance(a[2], bytes) and a[:2] != b[:2]:
        return f"dtype/shape {a[:2]} != {b[:2]}"
    if isinstance(a, tuple) and len(a) == 3 and isinstance(a[2], bytes):  # a column
        size = max(1, np.dtype(a[0]).itemsize)
        at = next((i for i, (x, y) in enumerate(zip(a[2], b[2], strict=False)) if x != y), None)
        at = min(len(a[2]), len(b[2])) if at is None else at
        return f"row {at // size} (rows: {len(a[2]) // size} vs {len(b[2]) // size})"
    if isinstance(a, list) and isinstance(b, list):
        at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
        if at is None:
            return f"lengths {len(a)} != {len(b)}"
        return f"item {at}: {a[at]!r:.160} != {b[at]!r:.160}"
    return f"{a!r:.160} != {b!r:.160}"


# --- damaged inputs: the seam itself (a chunk of events through both decoders) ----------------


def read_chunk(
    chunk: bytes, exact: bool, keep_cpu: bool, keep_frames: bool = False
) -> dict[str, Any] | str:
    """One chunk of events through the reader's decode and the collector, as TraceReader and
    columns.parallel do it (redecoded exactly or by the slow path when the collector asks):
    the snapshot of what it gives, or the error (``keep_frames``: with frames and flows)."""
    from collections import Counter

    from traceview.columns.collect import EventCollector, scan_rule
    from traceview.columns.numbers import NeedsExactTimes, NeedsSlowDecode
    from traceview.read.compiled import decode_scanned, event_count
    from traceview.read.decode import ChunkError, decode_slow
    from traceview.read.reader import ReadStats

    data = bytearray(b"[" + chunk + b"]")  # a byte of room each side, as in the reader
    skipped: Counter[str] = Counter()
    keep_cpu = keep_cpu or keep_frames
    collector = EventCollector(keep_cpu, keep_frames=keep_frames)
    rule = scan_rule(keep_cpu)
    span = (data, 1, len(data) - 1)
    try:
        events = decode_scanned(*span, exact, skipped, keep_cpu, rule, keep_frames)
        try:
            collector.add(events)
        except NeedsExactTimes:
            exact = True
            events = decode_scanned(*span, exact, skipped, keep_cpu, rule, keep_frames)
            collector.add(events)
        except NeedsSlowDecode:
            events = decode_slow(chunk, exact, skipped)
            collector.add(events)
    except ChunkError as e:
        return f"ChunkError at {e.pos}: {e.why} ({e.cut_short})"
    stats = ReadStats(events=event_count(events), exact_times=exact, skipped=skipped)
    return snapshot(collector.finish_as("chunk", len(chunk), {}, stats))


def both_chunk_reads(
    chunk: bytes, exact: bool, keep_cpu: bool, keep_frames: bool = False
) -> tuple[dict[str, Any] | str, dict[str, Any] | str]:
    """(compiled, python) reads of one chunk."""
    compiled = read_chunk(chunk, exact, keep_cpu, keep_frames)
    with python_reader():
        python = read_chunk(chunk, exact, keep_cpu, keep_frames)
    return compiled, python


def event_spans(text: bytes) -> list[tuple[int, int]]:
    """(start, end) of each event of a trace's event array (the text of a whole file)."""
    from traceview.read.jsonscan import iter_values

    start = text.index(b"[", text.index(b'"traceEvents"')) + 1
    return [(start + a, start + b) for a, b in iter_values(text[start:])]


def seed_chunks(text: bytes, size: int = 40) -> list[bytes]:
    """Chunks of ``size`` consecutive events (as the file has them, separators and all) that
    hold GPU activities or runtime calls, from a trace's text."""
    spans = event_spans(text)
    chunks = []
    for i in range(0, len(spans), size):
        part = spans[i : i + size]
        chunk = text[part[0][0] : part[-1][1]]
        if b'"kernel"' in chunk.lower() or b"runtime" in chunk:
            chunks.append(chunk)
    return chunks


def small_trace(text: bytes, keep: int = 8) -> bytes:
    """A small whole trace: the header and trailer of ``text`` around a few of its events (the
    first GPU activities, runtime calls and others)."""
    spans = event_spans(text)
    picked: list[tuple[int, int]] = []
    for needle in (b'"kernel"', b"runtime", b'"cpu_op"', b'"X"', b""):
        picked += [s for s in spans if needle in text[s[0] : s[1]].lower() and s not in picked][:2]
    picked = sorted(picked)[:keep]
    head = text[: spans[0][0]]
    tail = text[spans[-1][1] :]
    return head + b",\n  ".join(text[a:b] for a, b in picked) + tail


def mutations(seed: bytes, count: int, rng: Any) -> list[bytes]:
    """``count`` damaged copies of ``seed``: bytes flipped, inserted or deleted (JSON's own
    characters among them), some inside ``args`` values the scanner skips."""
    tokens = [b"{", b"}", b"[", b"]", b'"', b"\\", b",", b":", b"\n", b"NaN", b"-", b"\xff",
              b"\\ud800", b"1e400", b"99999999999999999999", b"null", b".", b"e", b"0",
              b"\x00", b"\\u00", b"]]]]"]  # fmt: skip
    args_at = [i + 9 for i in range(len(seed)) if seed.startswith(b'"args": {', i)]
    out = []
    for _ in range(count):
        data = bytearray(seed)
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            if args_at and rng.random() < 0.4:  # inside args: values the scanner skips
                at = min(len(data) - 1, rng.choice(args_at) + rng.randrange(40))
            else:
                at = rng.randrange(len(data))
            op = rng.randrange(4)
            if op == 0:
                data[at] = rng.randrange(256)
            elif op == 1:
                data[at:at] = rng.choice(tokens)
            elif op == 2:
                del data[at : at + rng.randint(1, 3)]
            else:
                data[at : at + 1] = rng.choice(tokens)
        out.append(bytes(data))
    return out


# Damage aimed at the values inside ``args`` (the scanner skips most of them unread).
NUMBER_DAMAGE = [b"1e400", b"-1e-400", b"-0", b"01", b"1.", b".5", b"1e", b"-", b"+1", b"NaN",
                 b"Infinity", b"99999999999999999999999", b"0x1F", b"1 2", b"tru", b"nul",
                 b'"7"', b"[]", b"{}", b"[1,]", b"1.5E+3", b"-9223372036854775809"]  # fmt: skip
STRING_DAMAGE = [b"\\u00", b"\\uZZZZ", b"\\ud800", b"\\udc00x", b"\\ud83d\\ude00", b"\\u0000",
                 b"\\", b"\\x", b"\x00", b"\x01", b"\x1f", b"\t", b"\n", b"\x7f", b"\xff",
                 b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82", b'"', b'\\"', b"\\/"]  # fmt: skip
_ARGS_VALUE = re.compile(rb'[:\[,]\s*(-?[0-9][0-9.eE+-]*|"(?:[^"\\]|\\.)*")')


def args_values(chunk: bytes) -> list[tuple[int, int]]:
    """(start, end) of each number and string inside the chunk's ``"args": {...}`` objects
    (array items and the keys after the first among them)."""
    from traceview.read.jsonscan import value_end

    found = []
    for match in re.finditer(rb'"args":\s*\{', chunk):
        end = value_end(chunk, match.end() - 1, at_eof=True) or len(chunk)
        for value in _ARGS_VALUE.finditer(chunk, match.end(), end):
            found.append((value.start(1), value.end(1)))
    return found


def args_damage(chunk: bytes) -> list[bytes]:
    """Every damaged copy of ``chunk`` with one args value replaced by each NUMBER_DAMAGE (a
    number) or with each STRING_DAMAGE put in its middle (a string)."""
    out = []
    for start, end in args_values(chunk):
        if chunk[start] == 0x22:  # a string: the damage inside it
            middle = (start + end) // 2
            out += [chunk[:middle] + bad + chunk[middle:] for bad in STRING_DAMAGE]
        else:
            out += [chunk[:start] + bad + chunk[end:] for bad in NUMBER_DAMAGE]
    return out
