"""Reading in two processes gives exactly what reading serially gives."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from conftest import ROOT, load_generator

from traceview.analyses.core.steps import step_table
from traceview.analyses.gaps import GapOptions, analyse_gaps
from traceview.analyses.kernels import KernelOptions, analyse_kernels
from traceview.columns.model import TraceEvents
from traceview.columns.parallel import collect_events
from traceview.errors import TraceviewError
from traceview.read.reader import TraceReader
from traceview.read.source import TraceSource, check_path
from traceview.render.kernels import as_json

generate = load_generator()


def read(path: Path, parallel: bool, monkeypatch: pytest.MonkeyPatch) -> TraceEvents:
    return read_with(path, parallel, monkeypatch)[0]


def read_with(
    path: Path, parallel: bool, monkeypatch: pytest.MonkeyPatch
) -> tuple[TraceEvents, bool]:
    """The events, and whether they were really read in two parts."""
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", "1" if parallel else str(1 << 60))
    reader = TraceReader(path, block_size=64 << 10)
    events = collect_events(reader, keep_cpu=True)
    return events, events.read.resume_at is not None  # None after a fallback to a serial read


def summary(events: TraceEvents) -> tuple:
    kernels = as_json(analyse_kernels(events, KernelOptions(top=0)))
    gaps = analyse_gaps(events, GapOptions(top=0)).as_json()
    steps = [row.as_dict() for row in step_table(events)]
    return json.dumps(kernels, sort_keys=True), json.dumps(gaps, sort_keys=True), steps


@pytest.mark.parametrize("layout", ["kineto", "lines"])
@pytest.mark.parametrize("ts_mode", ["int", "ns"])
@pytest.mark.parametrize("hostile", [False, True])
def test_parallel_equals_serial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str, ts_mode: str, hostile: bool
) -> None:
    path = tmp_path / "t.json"
    generate.write_trace(
        path, steps=8, seed=3, layout=layout, ts_mode=ts_mode, hostile_names=hostile
    )
    serial = read(path, False, monkeypatch)
    parallel, split = read_with(path, True, monkeypatch)
    assert parallel.read.events == serial.read.events
    if not hostile:  # hostile names may make a part fall back to serial reading: also fine
        assert split
    assert summary(parallel) == summary(serial)


@pytest.mark.parametrize("members", [1, 3])
def test_gzip_is_split_too_and_equals_serial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, members: int
) -> None:
    plain = tmp_path / "t.json"
    generate.write_trace(plain, steps=8, seed=5, layout="kineto")
    data = plain.read_bytes()
    path = tmp_path / "t.json.gz"
    step = len(data) // members + 1
    path.write_bytes(b"".join(gzip.compress(data[i : i + step]) for i in range(0, len(data), step)))
    monkeypatch.setenv("TRACEVIEW_SPLIT", "fork")  # not on threads (test_threaded_read.py)
    reader = TraceReader(path, block_size=64 << 10)
    start, middle = reader.plan_split(1) or (0, 0)
    assert data[start : start + 1] == b"{"
    assert 0.3 < middle / len(data) < 0.7  # near the middle, from the compression ratio
    serial = read(path, False, monkeypatch)
    parallel, split = read_with(path, True, monkeypatch)
    assert split
    assert summary(parallel) == summary(serial)


def test_columns_come_back_through_the_pipe_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without an in-memory file (not Linux) the worker's columns come through the pipe."""
    path = tmp_path / "t.json"
    generate.write_trace(path, steps=8, seed=4, layout="kineto")
    serial = read(path, False, monkeypatch)
    monkeypatch.setattr("traceview.columns.parallel._memfd", lambda: None)
    through_pipe, split = read_with(path, True, monkeypatch)
    assert split
    assert summary(through_pipe) == summary(serial)


def test_a_bad_split_falls_back_to_serial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "nested.json"
    shutil.copy(ROOT / "fixtures" / "edge" / "nested_args_arrays.json", path)
    assert summary(read(path, True, monkeypatch)) == summary(read(path, False, monkeypatch))


def test_compact_files_without_newlines_are_read_serially(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "compact.json"
    generate.write_trace(path, steps=3, seed=1, layout="compact")
    parallel, split = read_with(path, True, monkeypatch)
    assert not split  # no newline-anchored boundary near the middle: read serially
    assert summary(parallel) == summary(read(path, False, monkeypatch))


@pytest.mark.parametrize("compressed", [False, True])
def test_source_seeks_by_decompressed_offset(tmp_path: Path, compressed: bool) -> None:
    data = bytes(range(256)) * 4000  # 1 MB
    path = tmp_path / "blob"
    members = [gzip.compress(data[i : i + 300_000]) for i in range(0, len(data), 300_000)]
    path.write_bytes(b"".join(members) if compressed else data)
    with TraceSource(check_path(path), 50_000) as source:
        for offset, size in [(0, 10), (299_990, 20), (123_456, 400_000), (len(data) - 5, 100)]:
            assert source.read_at(offset, size) == data[offset : offset + size]
        source.seek(0)
        blocks = source.blocks()
        assert next(blocks) == data[:50_000]
        source.seek(700_000, limit=900_000)  # while blocks() is suspended
        assert b"".join(blocks) == data[700_000:900_000]


@pytest.mark.parametrize("where", [0.25, 0.75])
def test_malformed_json_in_either_half_gives_the_serial_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: float
) -> None:
    path = tmp_path / "t.json"
    generate.write_trace(path, steps=8, seed=3, layout="kineto")
    data = path.read_bytes()
    at = data.index(b'"dur"', int(len(data) * where))
    path.write_bytes(data[:at] + b'"dur": @' + data[at + 6 :])
    errors = []
    for parallel in (False, True):
        with pytest.raises(TraceviewError) as e:
            read(path, parallel, monkeypatch)
        errors.append(str(e.value))
    assert errors[0] == errors[1] and "malformed JSON at byte" in errors[0]
