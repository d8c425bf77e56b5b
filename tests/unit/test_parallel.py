"""Reading in two processes gives exactly what reading serially gives."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, load_generator

from traceview import forked
from traceview.analyses.core.steps import step_table
from traceview.analyses.gaps import GapOptions, analyse_gaps
from traceview.analyses.kernels import KernelOptions, analyse_kernels
from traceview.columns import parallel as two_parts
from traceview.columns import schema
from traceview.columns.cpu_rows import ROW, SpillFile, Windows
from traceview.columns.model import TraceEvents
from traceview.columns.parallel import collect_events
from traceview.errors import TraceviewError
from traceview.forked import Channel, Child
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


def _cpu_rows(events: TraceEvents) -> list[tuple]:
    """The CPU rows with their ids as the names and threads they stand for, sorted (each
    batch's rows are in an order of its own: the batches differ between the two reads)."""
    rows = np.concatenate([*events.cpu.blocks(), np.zeros(0, dtype=ROW)])
    shapes = list(events.shapes)
    return sorted(
        (events.threads[t], events.names[n], ts, end, c, shapes[s] if s >= 0 else ())
        for t, n, ts, end, c, s in rows.tolist()
    )


def test_the_workers_cpu_rows_are_renumbered_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's CPU rows (in its spill file, ids of its own) read as a serial read's,
    however many times they are read."""
    path = tmp_path / "t.json"
    generate.write_trace(path, steps=8, seed=3, layout="kineto")
    serial = read(path, False, monkeypatch)
    parallel, split = read_with(path, True, monkeypatch)
    assert split
    assert len(serial.cpu) > 0
    assert _cpu_rows(parallel) == _cpu_rows(serial)
    assert _cpu_rows(parallel) == _cpu_rows(serial)  # a second pass: not mapped again


@pytest.mark.parametrize("fails", ["dies", "refuses", "dies writing", "hangs"])
def test_a_worker_that_cannot_map_its_rows_leaves_them_to_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: str
) -> None:
    """The worker maps its CPU rows to the main process's ids into a file of their own once
    its part is sent; if it dies first (or cannot, or dies half way), this process maps its
    file, left as it was, when the rows are first read: the same result."""
    path = tmp_path / "t.json"
    generate.write_trace(path, steps=8, seed=3, layout="kineto")
    serial = read(path, False, monkeypatch)

    def cannot(boundary: Channel, spill: object, mapped: SpillFile, conn: Channel) -> None:
        boundary.recv()
        if fails in ("dies writing", "hangs"):  # some rows of the mapped file written, wrongly
            mapped.append(np.zeros(3, dtype=ROW))
            mapped.flush()
        if fails == "hangs":  # e.g. a lock held at the fork: stopped once out of patience
            time.sleep(600)
        if fails != "refuses":
            os._exit(1)
        conn.send("failed")

    monkeypatch.setattr(two_parts, "_renumber_when_asked", cannot)
    monkeypatch.setattr(forked, "PATIENCE_S", 0.5)
    again, split = read_with(path, True, monkeypatch)
    assert split  # the maps were sent before it failed: the parts are kept
    assert _cpu_rows(again) == _cpu_rows(serial)
    assert summary(again) == summary(serial)


def test_a_worker_that_does_not_send_its_part_in_time_leaves_the_read_serial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker stuck before it sends its part (e.g. on a lock held at the fork) is stopped
    once out of patience, and the trace read serially: the same events."""
    path = tmp_path / "t.json"
    generate.write_trace(path, steps=8, seed=3, layout="kineto")
    serial = read(path, False, monkeypatch)

    def stuck(*args: object, **kwargs: object) -> None:
        time.sleep(600)

    monkeypatch.setattr(two_parts, "_send", stuck)
    monkeypatch.setattr(forked, "PATIENCE_S", 0.5)
    monkeypatch.setattr(forked, "PATIENCE_FACTOR", 0.0)
    again, split = read_with(path, True, monkeypatch)
    assert not split
    assert _cpu_rows(again) == _cpu_rows(serial)
    assert summary(again) == summary(serial)


class _Given:
    """A channel whose one message was received already."""

    def __init__(self, message: object) -> None:
        self.message = message

    def recv(self) -> object:
        return self.message


def test_threads_reading_the_rows_at_once_wait_for_the_one_mapping_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread (a cache writer's) reads the worker's rows first and waits for its mapping;
    a second thread reading them meanwhile waits too, not reading them unmapped."""
    path = tmp_path / "t.json"
    generate.write_trace(path, steps=8, seed=3, layout="kineto")
    serial = read(path, False, monkeypatch)
    renumber = two_parts._renumber_when_asked

    def slow(boundary: Channel, spill: SpillFile, mapped: SpillFile, conn: Channel) -> None:
        maps = boundary.recv()
        time.sleep(0.5)  # the other thread asks for the rows meanwhile
        renumber(_Given(maps), spill, mapped, conn)  # type: ignore[arg-type]

    entered = threading.Event()
    finish = two_parts._WorkerRenumbers.finish

    def noted(self: two_parts._WorkerRenumbers, spill: SpillFile) -> SpillFile | None:
        entered.set()
        return finish(self, spill)

    monkeypatch.setattr(two_parts, "_renumber_when_asked", slow)
    monkeypatch.setattr(two_parts._WorkerRenumbers, "finish", noted)
    parallel, split = read_with(path, True, monkeypatch)
    assert split
    first: list[list[tuple]] = []
    reader = threading.Thread(target=lambda: first.append(_cpu_rows(parallel)))
    reader.start()
    assert entered.wait(60)
    second = _cpu_rows(parallel)
    reader.join()
    expected = _cpu_rows(serial)
    assert second == expected
    assert first == [expected]


def test_rows_whose_mapping_failed_here_are_never_read_half_mapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker refuses, and this process cannot map its file either (e.g. a full disk):
    each read of the rows says why, none reads them half mapped."""
    path = tmp_path / "t.json"
    generate.write_trace(path, steps=8, seed=3, layout="kineto")

    def refuses(boundary: Channel, spill: object, mapped: SpillFile, conn: Channel) -> None:
        boundary.recv()
        conn.send("failed")

    def full(*args: object, **kwargs: object) -> bool:
        raise TraceviewError("cannot write the temporary file of CPU rows (full)")

    monkeypatch.setattr(two_parts, "_renumber_when_asked", refuses)
    events, split = read_with(path, True, monkeypatch)
    assert split
    monkeypatch.setattr(SpillFile, "renumber", full)
    for _ in range(2):
        with pytest.raises(TraceviewError, match="full"):
            _cpu_rows(events)


def test_the_rows_are_mapped_before_a_fork(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process forked while the worker still maps the CPU rows (e.g. a cache writer) does
    not inherit that wait: the rows are ready before the fork, and it reads them as mapped."""
    path = tmp_path / "t.json"
    generate.write_trace(path, steps=8, seed=3, layout="kineto")
    serial = read(path, False, monkeypatch)
    parallel, split = read_with(path, True, monkeypatch)
    assert split
    receiver, sender = Channel.pipe()
    child = Child(lambda: sender.send(_cpu_rows(parallel)), (), (receiver,))
    sender.close()
    in_child = receiver.recv()
    child.join()
    receiver.close()
    assert in_child == _cpu_rows(serial)
    assert _cpu_rows(parallel) == _cpu_rows(serial)


def test_a_windowed_pass_reads_only_the_appends_near_the_windows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass wanting the rows that overlap some windows (gaps' CPU context) gets every such
    row of both parts, as a serial read's, from fewer rows read: the worker's spill file
    comes with the time span of each of its appends."""
    path = tmp_path / "t.json"
    generate.write_trace(path, steps=8, seed=3, layout="kineto")
    serial = read(path, False, monkeypatch)
    parallel, split = read_with(path, True, monkeypatch)
    assert split
    ts = np.concatenate([block["ts"] for block in serial.cpu.blocks()])
    lo, hi = np.percentile(ts, [20, 22]).astype(np.int64)
    windows = Windows(np.array([lo]), np.array([hi]))

    def live(events: TraceEvents) -> list[tuple]:
        rows = np.concatenate([*events.cpu.blocks(windows=windows), np.zeros(0, dtype=ROW)])
        rows = rows[windows.hits(rows["ts"], rows["end"])]
        return sorted((events.names[n], t, e) for n, t, e in rows[["name", "ts", "end"]].tolist())

    assert live(parallel) == live(serial) != []
    read_rows = [sum(map(len, part.blocks(1 << 16, windows))) for part in parallel.cpu.parts]
    assert len(read_rows) == 2 and sum(read_rows) > 0  # the worker's part, then this one's
    assert all(n < len(part) / 2 for n, part in zip(read_rows, parallel.cpu.parts, strict=True))


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
    monkeypatch.setattr("traceview.columns.parallel.new_memfd", lambda: None)
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


@pytest.mark.parametrize("as_guessed", [True, False])
def test_an_early_worker_is_adopted_only_by_the_read_it_guessed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_guessed: bool
) -> None:
    """start_early forks the worker before the command knows its read; the read adopts it
    when it reads that file as guessed, else stops it and splits anew: the same events."""
    path = tmp_path / "t.json"
    generate.write_trace(path, steps=8, seed=3, layout="kineto")
    serial = read(path, False, monkeypatch)
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", "1")
    two_parts.start_early(path, keep_cpu=as_guessed)
    assert two_parts._early is not None
    early_pid = two_parts._early[0].child.pid
    events = collect_events(TraceReader(path, block_size=64 << 10), keep_cpu=True)
    assert two_parts._early is None
    with pytest.raises(ChildProcessError):  # adopted and done, or stopped: reaped either way
        os.waitpid(early_pid, os.WNOHANG)
    assert events.read.resume_at is not None  # read in two parts
    assert summary(events) == summary(serial)


def test_an_early_worker_no_read_adopts_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.json"
    generate.write_trace(path, steps=8, seed=3, layout="kineto")
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", "1")
    two_parts.start_early(path, keep_cpu=True)
    assert two_parts._early is not None
    early_pid = two_parts._early[0].child.pid
    two_parts.stop_early()
    assert two_parts._early is None
    with pytest.raises(ChildProcessError):
        os.waitpid(early_pid, os.WNOHANG)
    two_parts.start_early(tmp_path / "missing.json", keep_cpu=True)  # the read will say why
    assert two_parts._early is None


@pytest.mark.parametrize(
    "extra", [["--no-cache"], ["--no-cache", "--group-by", "op"], ["--top", "3"]]
)
def test_the_command_line_reads_a_trace_early_as_it_would_late(
    tmp_path: Path, extra: list[str]
) -> None:
    """``kernels TRACE`` forks its worker before typer is imported; a wrong guess (CPU rows
    wanted) is read anew; with the cache, the run that fills it adopts the worker and the run
    that hits it stops it. The output is the same as a serial read's, every time."""
    path = tmp_path / "t.json"
    generate.write_trace(path, steps=8, seed=3, layout="kineto")
    outputs = []
    for min_bytes in ("1", str(1 << 60)):
        env = {
            **os.environ,
            "TRACEVIEW_PARALLEL_MIN_BYTES": min_bytes,
            "TRACEVIEW_CACHE_DIR": str(tmp_path / f"cache-{min_bytes}"),
            "PYTHONPATH": str(ROOT),
        }
        for _ in range(1 if "--no-cache" in extra else 2):  # with the cache: fill, then hit
            r = subprocess.run(
                [sys.executable, "-m", "traceview", "kernels", str(path), "-f", "json", *extra],
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
            )
            assert r.returncode == 0, r.stderr
            outputs.append(r.stdout)
    assert len(set(outputs)) == 1 and len(outputs) in (2, 4)


def _adopts(conn: Channel, path: Path) -> None:
    conn.send(two_parts._adopt_early(TraceReader(path, block_size=64 << 10), False, False))


def test_a_process_forked_later_leaves_the_early_worker_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process forked after start_early (a run's rank reader) inherits the global, not the
    worker: it neither adopts nor stops it; its own process still can."""
    path = tmp_path / "t.json"
    generate.write_trace(path, steps=8, seed=3, layout="kineto")
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", "1")
    two_parts.start_early(path, keep_cpu=False)
    assert two_parts._early is not None
    receiver, sender = Channel.pipe()
    child = Child(_adopts, (sender, path), close=(receiver,))
    sender.close()
    assert receiver.recv() is None
    child.stop()
    receiver.close()
    assert two_parts._early is not None  # still this process's to adopt
    events = collect_events(TraceReader(path, block_size=64 << 10))
    assert events.read.resume_at is not None and two_parts._early is None


@pytest.mark.parametrize("parallel", [False, True])
def test_unused_columns_are_left_out_and_the_rest_read_as_ever(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parallel: bool
) -> None:
    """A read told a column is unused (schema.DROPPABLE) gives every other column as a full
    read does, and the unused one Dropped (its length, no values), serially and in two
    processes (whose worker keeps every column)."""
    path = tmp_path / "t.json"
    generate.write_trace(path, steps=8, seed=5)
    full, _ = read_with(path, parallel, monkeypatch)
    unused = frozenset({schema.GPU_LAUNCH, schema.RUNTIME_TS})
    lean = collect_events(TraceReader(path, block_size=64 << 10), keep_cpu=True, unused=unused)
    assert lean.read.events == full.read.events
    assert (lean.read.resume_at is not None) == parallel
    for group in ("gpu", "runtime"):
        for column in schema.TABLES[type(getattr(full, group))]:
            got, want = (
                getattr(getattr(lean, group), column.name),
                getattr(getattr(full, group), column.name),
            )
            assert len(got) == len(want) > 0 and got.dtype == want.dtype
            if f"{group}.{column.name}" in unused:
                assert isinstance(got, schema.Dropped)
            else:
                assert not isinstance(got, schema.Dropped)
                assert np.array_equal(got, want), column.name
    assert lean.launches == [] and full.launches
    assert as_json(analyse_kernels(lean, KernelOptions(top=0))) == as_json(
        analyse_kernels(full, KernelOptions(top=0))
    )
