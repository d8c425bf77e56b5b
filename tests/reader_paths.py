"""The two readers side by side: a trace read by the compiled scanner and by the Python path
(``TRACEVIEW_READER=python``), as plain values that compare equal when the reads agree."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from traceview.columns.model import TraceEvents
from traceview.columns.parallel import collect_events
from traceview.columns.schema import arrays_of
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


def _arrays(arrays: list[np.ndarray]) -> list[tuple[str, bytes]]:
    return [(str(a.dtype), a.tobytes()) for a in arrays]


def snapshot(events: TraceEvents) -> dict[str, Any]:
    """Everything a read gives, as comparable values (arrays as dtype and bytes)."""
    stats = events.read
    cpu = [block.tobytes() for block in events.cpu.blocks()]
    return {
        "stats": (
            stats.events,
            stats.chunks,
            stats.repaired_chunks,
            stats.exact_times,
            dict(stats.skipped),
            stats.truncated_at,
        ),
        "header": events.header,
        "names": list(events.names),
        "streams": list(events.streams),
        "threads": list(events.threads),
        "launches": list(events.launches),
        "shapes": list(events.shapes),
        "comm_keys": list(events.comm_keys),
        "gpu": _arrays(arrays_of(events.gpu)),
        "runtime": _arrays(arrays_of(events.runtime)),
        "comms": _arrays(arrays_of(events.comms)),
        "memory": _arrays(arrays_of(events.memory)),
        "frames": _arrays(arrays_of(events.frames)),
        "flows": _arrays(arrays_of(events.flows)),
        "cpu": b"".join(cpu),
        "steps": list(events.steps),
        "span": events.span_ns,
        "quality": dict(events.quality),
        "cpu_quality": dict(events.cpu_quality),
    }


def read_once(
    path: Path, keep_cpu: bool, partial: bool = False, keep_frames: bool = False
) -> dict[str, Any] | str:
    """The read's snapshot, or its error's message."""
    try:
        reader = TraceReader(path, partial=partial)
        return snapshot(collect_events(reader, keep_cpu, keep_frames=keep_frames))
    except TraceviewError as e:
        return f"error: {e}"


def both_reads(
    path: Path, keep_cpu: bool, partial: bool = False, keep_frames: bool = False
) -> tuple[dict[str, Any] | str, dict[str, Any] | str]:
    """(compiled, python) reads of one file (``keep_frames``: with frames and flows)."""
    compiled = read_once(path, keep_cpu, partial, keep_frames)
    with python_reader():
        python = read_once(path, keep_cpu, partial, keep_frames)
    return compiled, python


def differences(a: dict[str, Any] | str, b: dict[str, Any] | str) -> list[str]:
    """The parts of two snapshots that differ (empty when equal)."""
    if isinstance(a, str) or isinstance(b, str):
        return [] if a == b else [f"{a!r:.200} != {b!r:.200}"]
    return [key for key in a if a[key] != b[key]]


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
