"""The compiled reader: each chunk of whole events the reader cuts is scanned by traceview's
compiled core (traceview._core, built from rust/), which converts the GPU activities and
runtime calls into columns itself (in reads that keep them, the CPU ops, python frames and
fwdbwd flows too) and leaves every other event to the Python decoder.

The seam: a chunk comes back as a ``Scanned`` list, the other events decoded by the same
msgspec decoder the Python path would use for the whole chunk (so the collector sees them
exactly as before: steps, memory, anything it learns to read), with the scanner's rows
beside it (``scanned``), whose names, streams, launches, threads and shapes are ids
into the chunk's own small tables, decoded here by the same decoder. The scanner refuses
any chunk it cannot convert exactly as the Python path would (a damaged one, numbers its
batch conversion would not take, ...): that chunk is decoded by the Python path, and so is
any chunk whose parts the decoder rejects. In a chunk holding a collective's metadata, the
rows carrying fields the collectives' decoder reads as any value are decoded here too
(``comm_events``), which is where the collector finds the metadata.

``TRACEVIEW_READER=python`` (or a missing extension) selects the Python reader.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import numpy as np

from traceview.read.decode import COMM, SHAPE_KEY, _decoder, _extra, _has_frames, decode_span

READER_ENV = "TRACEVIEW_READER"
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError)
_NAMES = msgspec.json.Decoder(list[str])
_KEYS = msgspec.json.Decoder(list[tuple[int | str | None, int | str | None]])
# A launch raw key (launches.raw_key): null or its parts, each a scalar or a flat array
# (the scanner refuses any other), decoded straight into the tuples raw_key makes.
_Scalar = int | float | str | bool | None
_LAUNCHES = msgspec.json.Decoder(list[tuple[tuple[_Scalar, ...] | _Scalar, ...] | None])
# scan_chunk's ``comm_rows`` of a runtime call (traceview._core.COMM_CHECKED; a test checks)
COMM_CHECKED = -(2**63)
_RAW_SEPARATOR = b"\x1e"  # between the shape keys of a chunk (scan.rs Table, raw)


def scanner() -> ModuleType | None:
    """The compiled core, unless the Python reader is asked for or it is not installed."""
    if os.environ.get(READER_ENV, "").strip().lower() == "python":
        return None
    try:
        from traceview import _core as core
    except ImportError:
        return None
    return core


def gzip_reader(path: Path, read_size: int, block_size: int, ahead: int) -> Any | None:
    """The compiled core's gzip reader of ``path``: it inflates on a thread of its own,
    ``ahead`` blocks in front (see traceview.read.source); None: the Python path inflates."""
    core = scanner()
    if core is None or not hasattr(core, "GzipReader"):
        return None
    return core.GzipReader(path, read_size, block_size, ahead)


def reader_name() -> str:
    """Which reader runs, and why (``traceview --version`` says it)."""
    if os.environ.get(READER_ENV, "").strip().lower() == "python":
        return f"python ({READER_ENV}=python)"
    if scanner() is None:
        return "python (the compiled core is not installed)"
    return "compiled (Rust)"


@dataclass(frozen=True)
class ScannedRows:
    """The rows the scanner converted from one chunk (see traceview._core.scan_chunk).

    GPU rows: kind, ts, dur, correlation as the collector's columns; name, stream, launch
    as ids into ``gpu_names``, ``streams`` (device, stream) and ``launches`` (launch raw
    keys, traceview.columns.launches). Runtime calls: correlation, ts, dur; with CPU rows,
    name and thread ids into ``rt_names`` and ``threads`` (pid, tid).

    With ``cpu`` (a read that keeps CPU rows) every CPU op and step-marker python frame of
    the chunk is an ``op_`` row (CPU_COLUMNS; thread, name and shape ids into
    ``op_threads``, ``op_names`` and ``shapes``, the shape keys columns.collect interns);
    with ``frames`` every python frame and fwdbwd flow is a ``frame_`` or ``flow_`` row
    (FRAME_COLUMNS, FLOW_COLUMNS; ids into ``frame_threads``, ``frame_names``,
    ``flow_threads``). None of them is then among the chunk's other events."""

    gpu_kind: np.ndarray
    gpu_name: np.ndarray
    gpu_stream: np.ndarray
    gpu_ts: np.ndarray
    gpu_dur: np.ndarray
    gpu_correlation: np.ndarray
    gpu_launch: np.ndarray
    rt_correlation: np.ndarray
    rt_ts: np.ndarray
    rt_dur: np.ndarray
    rt_name: np.ndarray
    rt_thread: np.ndarray
    op_thread: np.ndarray
    op_name: np.ndarray
    op_ts: np.ndarray
    op_end: np.ndarray
    op_correlation: np.ndarray
    op_shape: np.ndarray
    frame_thread: np.ndarray
    frame_name: np.ndarray
    frame_ts: np.ndarray
    frame_end: np.ndarray
    frame_python_id: np.ndarray
    frame_python_parent: np.ndarray
    flow_flow: np.ndarray
    flow_thread: np.ndarray
    flow_ts: np.ndarray
    flow_finish: np.ndarray
    gpu_names: list[str]
    streams: list[tuple[Any, Any]]
    launches: list[Any]
    rt_names: list[str]
    threads: list[tuple[Any, Any]]
    op_threads: list[tuple[Any, Any]]
    op_names: list[str]
    shapes: list[bytes]
    frame_threads: list[tuple[Any, Any]]
    frame_names: list[str]
    flow_threads: list[tuple[Any, Any]]
    cpu: bool
    frames: bool
    # In a chunk holding a collective's metadata: the rows with fields the collectives'
    # decoder reads as any value, decoded, and their rows (scan_chunk's ``comm_rows``).
    comm_events: list[Any]
    comm_rows: np.ndarray


class Scanned(list[Any]):
    """The events of a chunk the scanner did not convert, decoded; ``total``: all its events;
    ``scanned``: the rows it converted; ``seen``: what it saw for trim, when asked (see
    scan_chunk)."""

    __slots__ = ("scanned", "seen", "total")

    def __init__(
        self, others: list[Any], count: int, scanned: ScannedRows, seen: list[int] | None = None
    ) -> None:
        super().__init__(others)
        self.total = count
        self.scanned = scanned
        self.seen = seen


def event_count(events: list[Any]) -> int:
    """How many events a decoded chunk held (a Scanned one: with those converted; trim's
    read.spans.SpanChunk: all, as columns)."""
    total = getattr(events, "total", None)
    return len(events) if total is None else int(total)


def decode_scanned(
    data: bytes | bytearray,
    start: int,
    end: int,
    exact: bool,
    skipped: Counter[str],
    shapes: bool = True,
    drop: dict[str, list[bytes]] | None = None,
    frames: bool = False,
    seen: bool = False,
) -> list[Any]:
    """``read.decode.decode_span`` through the scanner (``shapes``: a read that keeps CPU
    rows, whose runtime calls need names and threads; ``drop``: the events the collector
    never keeps, which the scanner counts without decoding, see columns.collect.scan_rule;
    ``frames``: a read that keeps the python frames and flows, which the scanner converts
    with the CPU rows; ``seen``: what trim's copy needs of the chunk, see Scanned)."""
    core = scanner()
    if core is None:
        return decode_span(data, start, end, exact, skipped, shapes, frames)
    if isinstance(data, bytes):  # scanned where it lies (a bytes object cannot change)
        result = core.scan_chunk(data, exact, shapes, drop, frames, seen, start, end)
    else:
        with memoryview(data) as view, view[start:end] as span:
            result = core.scan_chunk(span, exact, shapes, drop, frames, seen)
    scanned = accepted(result, core, exact, shapes, frames)
    if scanned is not None:
        return scanned
    return decode_span(data, start, end, exact, skipped, shapes, frames)


def accepted(
    result: dict[str, Any], core: ModuleType, exact: bool, shapes: bool, frames: bool
) -> Scanned | None:
    """A scan's result (scan_chunk's dict) as a Scanned chunk; None: the Python path decodes
    the chunk (the scanner refused it, or the decoder rejects its parts)."""
    if "refused" in result:
        return None
    try:
        return _assembled(result, core, exact, shapes, frames)
    except _DECODE_ERRORS:
        return None  # the Python path says what is wrong with it


def _assembled(
    result: dict[str, Any],
    core: ModuleType,
    exact: bool,
    shapes: bool,
    frames: bool,
) -> Scanned:
    others_text = result["others"]
    others: list[Any] = []
    # A chunk holding a collective's metadata is decoded with its types (as the Python path
    # decodes the whole chunk): a value they read, and a smaller type skips, is checked.
    comm = result["comm_chunk"] == b"\x01"
    if len(others_text) > 2:
        # The decoder the Python path would pick for these events alone (see
        # decode.decode_span; which one decodes an event does not depend on the chunk around
        # it): the keys are searched in their text, not the whole chunk's. The frames'
        # fields only serve the frames and flows, which the scanner takes with the CPU rows.
        shaped = shapes and others_text.find(SHAPE_KEY) >= 0
        framed = frames and not shapes and _has_frames(others_text, 0, len(others_text))
        extra = COMM if comm else _extra(others_text)
        others = _decoder(exact, extra, shaped, framed).decode(others_text)
    comm_text = result["comm_events"]
    # the fields of the frames are the scanner's own (with CPU rows), as in the others
    comm_events = _decoder(exact, COMM, shapes, False).decode(comm_text) if comm else []
    tables = (
        ("gpu", core.GPU_COLUMNS),
        ("rt", core.RUNTIME_COLUMNS),
        ("op", core.OP_COLUMNS),
        ("frame", core.FRAME_COLUMNS),
        ("flow", core.FLOW_COLUMNS),
    )
    columns = {
        key: np.frombuffer(result[key], dtype)
        for prefix, table in tables
        for name, dtype in table
        if (key := f"{prefix}_{name}")
    }
    rows = ScannedRows(
        **columns,
        gpu_names=_NAMES.decode(result["gpu_names"]),
        streams=_KEYS.decode(result["streams"]),
        launches=_LAUNCHES.decode(result["launches"]),
        rt_names=_NAMES.decode(result["rt_names"]),
        threads=_KEYS.decode(result["threads"]),
        op_threads=_KEYS.decode(result["op_threads"]),
        op_names=_NAMES.decode(result["op_names"]),
        shapes=result["shapes"].split(_RAW_SEPARATOR) if result["shapes"] else [],
        frame_threads=_KEYS.decode(result["frame_threads"]),
        frame_names=_NAMES.decode(result["frame_names"]),
        flow_threads=_KEYS.decode(result["flow_threads"]),
        cpu=shapes,
        frames=frames and shapes,
        comm_events=comm_events,
        comm_rows=np.frombuffer(result["comm_rows"], np.int64),
    )
    return Scanned(others, result["events"], rows, result.get("seen"))
