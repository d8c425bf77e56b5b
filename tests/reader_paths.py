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
        "cpu": b"".join(cpu),
        "steps": list(events.steps),
        "span": events.span_ns,
        "quality": dict(events.quality),
        "cpu_quality": dict(events.cpu_quality),
    }


def read_once(path: Path, keep_cpu: bool, partial: bool = False) -> dict[str, Any] | str:
    """The read's snapshot, or its error's message."""
    try:
        return snapshot(collect_events(TraceReader(path, partial=partial), keep_cpu))
    except TraceviewError as e:
        return f"error: {e}"


def both_reads(
    path: Path, keep_cpu: bool, partial: bool = False
) -> tuple[dict[str, Any] | str, dict[str, Any] | str]:
    """(compiled, python) reads of one file."""
    compiled = read_once(path, keep_cpu, partial)
    with python_reader():
        python = read_once(path, keep_cpu, partial)
    return compiled, python


def differences(a: dict[str, Any] | str, b: dict[str, Any] | str) -> list[str]:
    """The parts of two snapshots that differ (empty when equal)."""
    if isinstance(a, str) or isinstance(b, str):
        return [] if a == b else [f"{a!r:.200} != {b!r:.200}"]
    return [key for key in a if a[key] != b[key]]
