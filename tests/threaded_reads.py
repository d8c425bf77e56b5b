"""Reads of a trace on threads (traceview.read.threaded) and serially, side by side."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from reader_paths import snapshot

import traceview.read.threaded as threaded
from traceview.columns.parallel import collect_events
from traceview.errors import TraceviewError
from traceview.read.reader import SplitFailed, TraceReader


@contextmanager
def environment(**values: str) -> Iterator[None]:
    before = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                del os.environ[key]
            else:
                os.environ[key] = value


class Watch:
    """Counts the threaded reads begun, those that ran to their end and those that gave up
    (SplitFailed), and the most chunks a scanner had in flight."""

    def __init__(self) -> None:
        self.started = self.done = self.failed = self.most_in_flight = 0

    @contextmanager
    def watching(self) -> Iterator[Watch]:
        batches, core = threaded.ThreadedReader.batches, threaded.scanner()
        watch = self

        def counted(reader: threaded.ThreadedReader) -> Iterator[list[Any]]:
            watch.started += 1
            try:
                yield from batches(reader)
            except SplitFailed:
                watch.failed += 1
                raise
            watch.done += 1

        class Scanner:
            def __init__(self, *args: Any) -> None:
                self.inner = core.ChunkScanner(*args)

            def __getattr__(self, key: str) -> Any:
                return getattr(self.inner, key)

            def submit(self, *args: Any) -> bool:
                submitted: bool = self.inner.submit(*args)
                watch.most_in_flight = max(watch.most_in_flight, self.inner.in_flight())
                return submitted

        class Core:
            ChunkScanner = Scanner

            def __getattr__(self, key: str) -> Any:
                return getattr(core, key)

        threaded.ThreadedReader.batches = counted  # type: ignore[method-assign]
        scanner = threaded.scanner
        threaded.scanner = Core  # type: ignore[assignment]
        try:
            yield self
        finally:
            threaded.ThreadedReader.batches = batches  # type: ignore[method-assign]
            threaded.scanner = scanner


def read(
    path: Path,
    keep_cpu: bool,
    frames: bool = False,
    partial: bool = False,
    on_threads: bool = True,
    block_size: int | None = None,
) -> tuple[dict[str, Any], dict[str, Any]] | str:
    """(snapshot, read stats in full: chunks too) of a read on threads (``on_threads``) or a
    serial one; or the error's message."""
    env = (
        {"TRACEVIEW_PARALLEL_MIN_BYTES": "1", "TRACEVIEW_SPLIT": "threads"}
        if on_threads
        else {"TRACEVIEW_PARALLEL_MIN_BYTES": str(1 << 60)}
    )
    sizes = {} if block_size is None else {"block_size": block_size}
    with environment(**env):
        try:
            events = collect_events(TraceReader(path, partial=partial, **sizes), keep_cpu, frames)
        except TraceviewError as e:
            return f"error: {e}"
    return snapshot(events), asdict(events.read)
