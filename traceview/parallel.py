"""Use both cores on a big plain trace: a worker process reads the first half of the event
array while this process reads the second; the parts merge into one TraceEvents.

The split is an optimisation only: if either part cannot be read exactly as it was cut, the
whole file is read again serially, which gives the same result or the precise error.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from traceview.events import EventCollector, NeedsExactTimes, TraceEvents
from traceview.read.reader import SplitFailed, TraceReader

PARALLEL_MIN_BYTES = 256 << 20


def collect(reader: TraceReader, keep_cpu: bool = False) -> TraceEvents:
    """All of a trace's events, in two processes when it is big, plain and the CPU allows."""
    split = reader.plan_split(_min_bytes()) if (os.cpu_count() or 1) > 1 else None
    if split is None:
        return _serial(reader, keep_cpu)
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        first_half = pool.submit(
            _read_part, reader.path, split, reader.block_size, reader.stats.exact_times, keep_cpu
        )
        reader.resume_at = split[1]
        try:
            collector = _collect(reader, keep_cpu)
            part = first_half.result()
        except SplitFailed:
            first_half.cancel()
            reader.reset()
            return _serial(reader, keep_cpu)
    collector.absorb_before(part)
    _merge_stats(reader, part)
    del part, first_half  # what was not absorbed as it is (remapped ids) is freed before joining
    return collector.finish(reader)


def _serial(reader: TraceReader, keep_cpu: bool) -> TraceEvents:
    return _collect(reader, keep_cpu).finish(reader)


def _collect(reader: TraceReader, keep_cpu: bool) -> EventCollector:
    collector = EventCollector(keep_cpu)
    for events in reader.batches():
        try:
            collector.add(events)
        except NeedsExactTimes:
            collector.add(reader.redecode_exact())
    return collector


def _read_part(
    path: Path, split: tuple[int, int], block_size: int, exact_times: bool, keep_cpu: bool
) -> TraceEvents:
    """In the worker: the events in [start, boundary) of the file."""
    part = TraceReader(path, block_size=block_size, byte_range=split)
    part.stats.exact_times = exact_times
    return _serial(part, keep_cpu)


def _merge_stats(reader: TraceReader, part: TraceEvents) -> None:
    stats = reader.stats
    stats.events += part.read.events
    stats.chunks += part.read.chunks
    stats.repaired_chunks += part.read.repaired_chunks
    stats.exact_times = stats.exact_times or part.read.exact_times
    stats.skipped.update(part.read.skipped)


def _min_bytes() -> int:
    """The size from which a trace is read in two processes (env override for tests)."""
    value = os.environ.get("TRACEVIEW_PARALLEL_MIN_BYTES")
    return int(value) if value else PARALLEL_MIN_BYTES
