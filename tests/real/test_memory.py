"""``traceview memory`` on every real trace against the simple loop of tests/memory_reference.py,
and the reader's [memory] table the same from a read in two processes, the cache, or a read
without CPU rows."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import memory_reference
import numpy as np
import pytest
from conftest import SHARED_TRACES, RealTrace
from test_memory_analysis import figures as device_figures

from traceview.analyses.memory import analyse_memory
from traceview.columns.model import TraceEvents, without_cpu
from traceview.columns.parallel import collect_events
from traceview.columns.schema import MEMORY_COLUMNS
from traceview.read.reader import TraceReader

H100 = SHARED_TRACES / "tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz"
needs_h100 = pytest.mark.skipif(not H100.is_file(), reason="../shared/traces is absent")


def test_every_figure_equals_the_reference(real_trace: RealTrace) -> None:
    want = real_trace.derived("memory", lambda: memory_reference.figures(real_trace.raw))
    report = analyse_memory(real_trace.events)
    assert report.events == want["events"] == len(real_trace.events.memory.ts)
    assert {d.device: device_figures(d) for d in report.devices} == want["devices"]
    assert (None if report.cpu is None else device_figures(report.cpu)) == want["cpu"]


def test_the_peak_is_the_highest_level_and_the_holders_fit_in_it(real_trace: RealTrace) -> None:
    report = analyse_memory(real_trace.events)
    table = real_trace.events.memory
    for d in (*report.devices, *([report.cpu] if report.cpu else [])):
        rows = (table.device == d.device) & (table.device_type == d.device_type)
        assert d.peak_allocated_bytes >= int(table.allocated[rows].max())
        assert 0 <= sum(h.bytes for h in d.holders) <= d.peak_allocated_bytes
        assert max(a for _, a, _ in d.timeline) == d.peak_allocated_bytes or (
            d.peak_allocated_bytes == d.start_allocated_bytes
        )
        assert len(d.timeline) <= 200


def test_without_cpu_rows_the_same_rows_threads_unknown(real_trace: RealTrace) -> None:
    full, alone = real_trace.events.memory, real_trace.gpu_events.memory
    for c in MEMORY_COLUMNS[1:]:
        assert (getattr(full, c.name) == getattr(alone, c.name)).all(), c.name
    assert (alone.thread == -1).all()
    assert (full.thread >= 0).all()


def _rows(events: TraceEvents) -> list[tuple[Any, ...]]:
    """Every row with its thread resolved (ids may differ between two reads)."""
    m = events.memory
    columns = [getattr(m, c.name).tolist() for c in MEMORY_COLUMNS[1:]]
    threads = [events.threads[t] if t >= 0 else None for t in m.thread.tolist()]
    return sorted(zip(threads, *columns, strict=True), key=repr)


@needs_h100
def test_a_read_in_two_processes_keeps_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "h100.json"
    plain.write_bytes(gzip.decompress(H100.read_bytes()))
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", str(1 << 60))
    serial = collect_events(TraceReader(plain, block_size=16 << 10), keep_cpu=True)
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", "1")
    parallel = collect_events(TraceReader(plain, block_size=16 << 10), keep_cpu=True)
    assert parallel.read.resume_at is not None  # really read in two parts
    assert _rows(parallel) == _rows(serial)
    assert len(serial.memory.ts) == 236


@needs_h100
def test_the_cache_keeps_the_rows(tmp_path: Path) -> None:
    from traceview.cache.store import read_entry, read_meta, write_entry

    events = collect_events(TraceReader(H100), keep_cpu=True)
    write_entry(tmp_path, events, keep_cpu=True)
    back = read_entry(tmp_path, read_meta(tmp_path), keep_cpu=True)
    assert _rows(back) == _rows(events)
    alone = read_entry(tmp_path, read_meta(tmp_path), keep_cpu=False)
    fresh = collect_events(TraceReader(H100), keep_cpu=False)
    assert _rows(alone) == _rows(without_cpu(events)) == _rows(fresh)


def test_the_summary_s_peaks_are_the_memory_command_s(real_trace: RealTrace) -> None:
    """``summary`` works the figures out without holders (no pass over the CPU rows)."""
    full, quick = analyse_memory(real_trace.events), analyse_memory(real_trace.events, False)
    assert [replace(d, holders=()) for d in full.devices] == list(quick.devices)
    assert (full.cpu is None) == (quick.cpu is None)
    if full.cpu is not None:
        assert replace(full.cpu, holders=()) == quick.cpu


def test_total_allocated_is_the_level_after_each_event(real_trace: RealTrace) -> None:
    """What the definitions rest on: on each device, in time order, an event's Total
    Allocated less its Bytes is the previous event's Total Allocated."""
    table = real_trace.events.memory
    for device, kind in set(zip(table.device.tolist(), table.device_type.tolist(), strict=True)):
        rows = np.flatnonzero((table.device == device) & (table.device_type == kind))
        rows = rows[np.argsort(table.ts[rows], kind="stable")]
        level, size = table.allocated[rows], table.bytes[rows]
        assert (level[1:] - size[1:] == level[:-1]).all(), (device, kind)


@needs_h100
def test_the_command_reads_no_launch_time_and_says_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``memory`` leaves the runtime calls' starts out of its read: its output is that of a
    read that keeps them."""
    from typer.testing import CliRunner

    from traceview.app import commands
    from traceview.cli import app
    from traceview.columns.schema import Dropped

    args = ["memory", str(H100), "-q", "--no-cache", "-f", "json"]
    read, seen = commands.read_trace, []

    def lean(*a: Any, **k: Any) -> TraceEvents:
        events = read(*a, **k)
        seen.append(isinstance(events.runtime.ts, Dropped))
        return events

    monkeypatch.setattr(commands, "read_trace", lean)
    dropped = CliRunner().invoke(app, args)
    monkeypatch.setattr(
        commands, "read_trace", lambda *a, **k: read(*a, **{**k, "unused": frozenset()})
    )
    whole = CliRunner().invoke(app, args)
    assert dropped.exit_code == whole.exit_code == 0, dropped.output
    assert seen == [True] and json.loads(whole.output)["devices"][0]["holders"]
    assert dropped.output == whole.output
