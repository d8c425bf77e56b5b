"""The Parquet cache: hits, misses, invalidation, recovery, eviction, and cold == warm output."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, SHARED_TRACES
from typer.testing import CliRunner

from traceview import cache
from traceview.cache import manage, store
from traceview.cli import app

DEMO = ROOT / "fixtures" / "demo.json.gz"
REAL = [
    "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.json.gz",
    "tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz",
    "hta__large_integer_trace__rank-70.json.gz",
]
COMMANDS = (["kernels", "--top", "0"], ["gaps"], ["gaps", "--largest", "0"], ["steps"])
runner = CliRunner()


def _root() -> Path:
    return Path(os.environ["TRACEVIEW_CACHE_DIR"])


def _entries() -> list[manage.Entry]:
    return manage.entries(_root())


def _json(command: list[str], trace: Path, *extra: str) -> str:
    r = runner.invoke(app, [command[0], str(trace), *command[1:], "-f", "json", "-q", *extra])
    assert r.exit_code == 0, r.output
    return r.stdout


def test_miss_then_hit(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cold = _json(["kernels"], demo)
    assert len(_entries()) == 1
    monkeypatch.setattr("traceview.app.reading._ingest", _no_read)
    assert _json(["kernels"], demo) == cold


def _no_read(*args: object) -> None:
    raise AssertionError("the trace was read despite a cache hit")


@pytest.mark.parametrize("trace", [DEMO], ids=["demo"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c))
def test_cold_equals_warm_demo(trace: Path, command: list[str]) -> None:
    cold = _json(command, trace, "--no-cache")
    assert _json(command, trace) == cold  # fills the cache
    assert _json(command, trace) == cold  # from the cache


@pytest.mark.parametrize("name", REAL, ids=lambda n: n[:30])
def test_cold_equals_warm_real(name: str) -> None:
    trace = SHARED_TRACES / name
    if not trace.is_file():
        pytest.skip(f"{trace} is absent")
    colds = {tuple(c): _json(c, trace, "--no-cache") for c in COMMANDS}
    for _ in range(2):  # the first pass fills (and upgrades) the entry, the second reads it
        for command in COMMANDS:
            assert _json(command, trace) == colds[tuple(command)], command


def test_content_change_is_a_new_entry(demo: Path) -> None:
    _json(["kernels"], demo)
    data = demo.read_bytes()
    demo.write_bytes(data + b"\n")  # the same events, other bytes
    _json(["kernels"], demo)
    assert len(_entries()) == 2


def test_rename_and_copy_hit_the_same_entry(demo: Path, tmp_path: Path) -> None:
    cold = _json(["steps"], demo)
    moved = tmp_path / "renamed.json"
    demo.rename(moved)
    copy = tmp_path / "copy.json"
    shutil.copy(moved, copy)
    assert _json(["steps"], moved) == cold.replace(str(demo), str(moved))
    _json(["steps"], copy)
    (entry,) = _entries()
    assert sorted(entry.paths) == sorted([str(demo), str(moved), str(copy)])


def test_no_cache_writes_nothing(demo: Path) -> None:
    _json(["kernels"], demo, "--no-cache")
    assert not (_root() / cache.ENTRIES).exists()


def test_cache_dir_option(demo: Path, tmp_path: Path) -> None:
    _json(["kernels"], demo, "--cache-dir", str(tmp_path / "elsewhere"))
    assert len(manage.entries(tmp_path / "elsewhere")) == 1
    assert not _entries()


def test_refresh_rebuilds(demo: Path) -> None:
    cold = _json(["kernels"], demo)
    (entry,) = _entries()
    (entry.directory / "gpu.parquet").write_bytes(b"garbage")  # refresh must not read this
    r = runner.invoke(app, ["kernels", str(demo), "-f", "json", "-q", "--refresh"])
    assert r.exit_code == 0, r.output
    assert r.stdout == cold
    assert store.read_meta(entry.directory)  # replaced: the sizes match again


def test_truncated_parquet_is_rebuilt_with_a_warning(demo: Path) -> None:
    cold = _json(["kernels"], demo)
    (entry,) = _entries()
    gpu = entry.directory / "gpu.parquet"
    gpu.write_bytes(gpu.read_bytes()[: gpu.stat().st_size // 2])
    r = runner.invoke(app, ["kernels", str(demo), "-f", "json", "-q"])
    assert r.exit_code == 0, r.output
    assert r.stdout == cold
    assert "cache entry" in r.stderr and "rebuilding" in r.stderr
    assert _json(["kernels"], demo) == cold
    assert store.read_meta(entry.directory)["files"]["gpu.parquet"] == gpu.stat().st_size


def test_schema_bump_rebuilds(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cold = _json(["kernels"], demo)
    monkeypatch.setattr(store, "CACHE_SCHEMA", store.CACHE_SCHEMA + 1)
    r = runner.invoke(app, ["kernels", str(demo), "-f", "json", "-q"])
    assert r.exit_code == 0, r.output
    assert r.stdout == cold
    assert "cache schema" in r.stderr
    (entry,) = _entries()
    assert store.read_meta(entry.directory)["cache_schema"] == store.CACHE_SCHEMA


def test_entry_without_a_cpu_column_rebuilds(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry of the same schema number whose cpu.parquet lacks a column (another build wrote
    it) is rebuilt, not an internal error when the CPU rows are read."""
    cold = _json(["ops"], demo, "--no-cache")
    with monkeypatch.context() as m:
        m.setattr(store, "CPU_COLUMNS", tuple(c for c in store.CPU_COLUMNS if c != "shape"))
        _json(["ops"], demo)  # writes the entry without the shape column
    r = runner.invoke(app, ["ops", str(demo), "-f", "json", "-q"])
    assert r.exit_code == 0, r.output
    assert r.stdout == cold
    assert "cpu.parquet has no column shape" in r.stderr and "rebuilding" in r.stderr
    assert _json(["ops"], demo) == cold


def test_one_ingest_serves_every_command(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command that reads the CPU rows stores them: every command then reads no more."""
    cold = {c[0] + str(i): _json(c, demo, "--no-cache") for i, c in enumerate(COMMANDS)}
    _json(["gaps"], demo)
    _served_without_reading(demo, cold, monkeypatch)


def test_kernels_stores_what_it_read_and_gaps_completes_it(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command without CPU rows stores the read it made (a filling run costs about what a
    --no-cache one does); one that needs them reads the trace again and completes the entry."""
    cold = {c[0] + str(i): _json(c, demo, "--no-cache") for i, c in enumerate(COMMANDS)}
    assert _json(["kernels", "--top", "0"], demo) == cold["kernels0"]
    (entry,) = _entries()
    assert not store.read_meta(entry.directory)["has_cpu"]
    assert _json(["kernels", "--top", "0"], demo) == cold["kernels0"]  # from that entry
    assert _json(["gaps"], demo) == cold["gaps1"]
    _served_without_reading(demo, cold, monkeypatch)


def _served_without_reading(
    demo: Path, cold: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one entry has CPU rows, and every command gets its cold output without a read."""
    (entry,) = _entries()
    assert store.read_meta(entry.directory)["has_cpu"]

    def no_second_read(*args: object) -> None:
        raise AssertionError("the trace was read again")

    monkeypatch.setattr("traceview.app.reading._ingest", no_second_read)
    for i, command in enumerate(COMMANDS):
        assert _json(command, demo) == cold[command[0] + str(i)], command


def test_entry_without_cpu_rows_is_upgraded(demo: Path) -> None:
    cold = _json(["gaps"], demo, "--no-cache")
    _json(["kernels"], demo)
    (entry,) = _entries()
    for name in ("cpu.parquet", "threads.parquet"):  # as an entry made without CPU rows
        (entry.directory / name).unlink(missing_ok=True)
    meta = json.loads((entry.directory / store.META).read_text())
    meta["has_cpu"] = False
    cpu_files = ("cpu.parquet", "threads.parquet")
    meta["files"] = {k: v for k, v in meta["files"].items() if k not in cpu_files}
    meta["digests"] = {}
    (entry.directory / store.META).write_text(json.dumps(meta))
    assert _json(["gaps"], demo) == cold  # read again, and the entry completed
    (entry,) = _entries()
    assert store.read_meta(entry.directory)["has_cpu"]
    assert _json(["gaps"], demo) == cold


def test_eviction_keeps_the_newest(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEVIEW_CACHE_MAX_SIZE", "1KB")
    _json(["kernels"], demo)
    first = _entries()[0].key
    demo.write_bytes(demo.read_bytes() + b" ")
    _json(["kernels"], demo)
    keys = [e.key for e in _entries()]
    assert len(keys) == 1 and keys[0] != first


def test_prune_least_recently_used(tmp_path: Path) -> None:
    traces = []
    for i in range(3):
        path = tmp_path / f"t{i}.json"
        path.write_bytes(gzip.decompress(DEMO.read_bytes()) + b" " * i)
        _json(["kernels"], path)
        traces.append(path)
    oldest = _entries()[0]
    os.utime(oldest.directory / manage.USED, (1, 1))
    size = sum(e.size for e in _entries())
    r = runner.invoke(app, ["cache", "prune", "--max-size", f"{size - 1}B"])
    assert r.exit_code == 0, r.output
    assert oldest.key not in [e.key for e in _entries()]
    assert len(_entries()) == 2


def test_cache_commands(demo: Path) -> None:
    _json(["kernels"], demo)
    info = runner.invoke(app, ["cache", "info"])
    assert info.exit_code == 0 and "entries    1" in info.stdout
    listed = runner.invoke(app, ["cache", "list"])
    assert listed.exit_code == 0 and str(demo) in listed.stdout
    cleared = runner.invoke(app, ["cache", "clear"])
    assert cleared.exit_code == 0 and not _entries()


def test_unwritable_cache_dir_falls_back(demo: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    cold = _json(["kernels"], demo, "--no-cache")
    r = runner.invoke(
        app, ["kernels", str(demo), "-f", "json", "-q", "--cache-dir", str(blocker / "sub")]
    )
    assert r.exit_code == 0, r.output
    assert r.stdout == cold
    assert "reading without the cache" in r.stderr


def test_partial_reads_are_not_cached(tmp_path: Path) -> None:
    text = gzip.decompress(DEMO.read_bytes())
    cut = tmp_path / "cut.json"
    cut.write_bytes(text[: len(text) * 2 // 3])
    r = runner.invoke(app, ["kernels", str(cut), "-f", "json", "-q", "--partial"])
    assert r.exit_code == 0, r.output
    assert "TRUNCATED" in r.stderr
    assert not _entries()
    assert runner.invoke(app, ["kernels", str(cut), "-q"]).exit_code == 1


def test_warnings_repeat_on_a_hit(tmp_path: Path) -> None:
    trace = tmp_path / "bad.json"
    events = [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": 30,
         "args": {"device": 0, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 60},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5},
    ]  # fmt: skip
    trace.write_text(json.dumps({"traceEvents": events}))
    options = (
        ["--no-cache"], [], [], ["--largest", "0"], ["--largest", "0", "--no-cache"],
        ["--largest", "0"], ["--largest", "0"], ["--largest", "2"],
    )  # fmt: skip
    runs = [runner.invoke(app, ["gaps", str(trace), "-q", "-f", "json", *a]) for a in options]
    assert all(r.exit_code == 0 for r in runs), [r.output for r in runs]
    assert runs[0].stderr == runs[1].stderr == runs[2].stderr
    assert "without dur" in runs[0].stderr
    # CPU-only problems are not shown when CPU rows are not read (--largest 0)
    assert runs[3].stderr == runs[4].stderr == runs[5].stderr == runs[6].stderr
    assert runs[3].stdout == runs[4].stdout == runs[6].stdout
    assert runs[7].stderr == runs[0].stderr
    (entry,) = _entries()
    meta = store.read_meta(entry.directory)
    assert meta["has_cpu"] and meta["cpu_quality"] and meta["cpu_quality"] != meta["quality"]


def test_export_writes_parquet(demo: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    out = tmp_path / "tables"
    r = runner.invoke(app, ["export", str(demo), "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    gpu = pq.read_table(out / "gpu.parquet").schema  # as docs/export.md documents it
    assert [(f.name, str(f.type)) for f in gpu] == [
        ("kind", "int8"), ("name", "int32"), ("stream", "int32"), ("ts", "int64"),
        ("dur", "int64"), ("correlation", "int64"), ("launch", "int32"),
    ]  # fmt: skip
    meta = json.loads((out / "meta.json").read_text())
    assert meta["read"]["events"] > 0 and "cpu_quality" not in meta
    assert runner.invoke(app, ["export", str(demo), "-o", str(out)]).exit_code == 2


def test_concurrent_ingest(demo: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    command = [sys.executable, "-m", "traceview", "gaps", str(demo), "-f", "json", "-q"]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
             for _ in range(2)]  # fmt: skip
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert outs[0][0] == outs[1][0]
    assert not any(out[1] for out in outs)  # no warnings
    assert len(_entries()) == 1
    assert _json(["gaps"], demo) == outs[0][0].decode()
    assert not list((_root() / cache.TMP).iterdir())


def test_flipped_byte_is_detected(demo: Path) -> None:
    cold = _json(["kernels", "--top", "0"], demo)
    (entry,) = _entries()
    gpu = entry.directory / "gpu.parquet"
    data = bytearray(gpu.read_bytes())
    data[len(data) // 3] ^= 0xFF  # same size: only the page checksums can tell
    gpu.write_bytes(bytes(data))
    r = runner.invoke(app, ["kernels", str(demo), "--top", "0", "-f", "json", "-q"])
    assert r.exit_code == 0, r.output
    assert r.stdout == cold
    assert "rebuilding" in r.stderr


@pytest.mark.parametrize("size", [0, 1, 4095, (64 << 20) + 3])
def test_content_hash_is_xxh3_of_the_bytes(tmp_path: Path, size: int) -> None:
    """The mapped hash equals the hash of the whole file read at once, across map steps."""
    import xxhash

    from traceview.cache.key import content_hash

    path = tmp_path / "blob"
    path.write_bytes(os.urandom(size))
    assert content_hash(path) == xxhash.xxh3_128(path.read_bytes()).hexdigest()


def test_flipped_byte_in_cpu_rows_is_detected(demo: Path) -> None:
    """cpu.parquet is streamed during the analysis, so its digest is checked on opening."""
    cold = _json(["gaps"], demo)
    (entry,) = _entries()
    cpu = entry.directory / "cpu.parquet"
    data = bytearray(cpu.read_bytes())
    data[len(data) // 2] ^= 0xFF
    cpu.write_bytes(bytes(data))
    r = runner.invoke(app, ["gaps", str(demo), "-f", "json", "-q"])
    assert r.exit_code == 0, r.output
    assert r.stdout == cold
    assert "cpu.parquet: its content changed" in r.stderr and "rebuilding" in r.stderr


def test_cpu_row_groups_are_skipped_by_their_time_range(tmp_path: Path) -> None:
    """Only row groups that can hold a row in flight at an instant are read, and every
    such row is found."""
    import numpy as np

    from traceview.columns.cpu_rows import BLOCK_ROWS, ArrayRows, CpuRows, Windows, rows

    n = 5 * BLOCK_ROWS
    start = np.arange(n, dtype=np.int64) * 10  # in time order, 10 ns apart, 5 ns long
    zeros = np.zeros(n, np.int64)
    table = rows(thread=zeros, name=zeros, ts=start, end=start + 5, correlation=np.full(n, -1))
    path = tmp_path / "cpu.parquet"
    store._write_cpu(path, CpuRows((ArrayRows(table),)))
    parquet = store.ParquetRows(path, n)
    instants = np.array([12, 10 * (3 * BLOCK_ROWS + 7) + 2], dtype=np.int64)
    blocks = list(parquet.blocks(BLOCK_ROWS, Windows(instants, instants)))
    assert len(blocks) == 2  # of 5 row groups
    got = np.concatenate(blocks)
    live = got[
        [any(s <= t <= e for t in instants) for s, e in zip(got["ts"], got["end"], strict=True)]
    ]
    assert live["ts"].tolist() == [10, 10 * (3 * BLOCK_ROWS + 7)]
    assert np.concatenate(list(parquet.blocks(BLOCK_ROWS))).tobytes() == table.tobytes()


def test_a_hit_leaves_the_unused_columns_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command's unused columns (schema.DROPPABLE) are not read from an entry either: Dropped
    of the entry's row count, every other column as stored; nor the frames shorter than
    summary keeps; summary (flows and short frames left out) and lean kernels (launch ids and
    times left out) say from the entry what they say cold."""
    from traceview.analyses.core.stall import STALL_FRAME_MIN_NS
    from traceview.app.commands import _unused
    from traceview.app.reading import read_trace
    from traceview.columns import schema
    from traceview.options import ReadOptions

    trace = SHARED_TRACES / "tracelens__mi300__resnet_act_checkpoint.json.gz"  # frames, flows
    if not trace.is_file():
        pytest.skip(f"{trace} is absent")
    colds = {c: _json([c], trace, "--no-cache") for c in ("summary", "kernels", "source")}
    monkeypatch.setattr(store, "FRAME_ROW_GROUP", 1000)  # the long frames read group by group
    assert _json(["source"], trace) == colds["source"]  # fills the entry, every frame in it
    (entry,) = _entries()
    frames_file = store._parquet().ParquetFile(entry.directory / "frames.parquet")
    assert frames_file.metadata.num_row_groups > 1
    options = ReadOptions(quiet=True)
    full = read_trace(trace, options, keep_cpu=True, frames=True, remember=False)
    unused = _unused(launch_times=True, flows=True)
    floor = STALL_FRAME_MIN_NS  # only the frames as long, as summary's read keeps them
    lean = read_trace(
        trace, options, keep_cpu=True, frames=True, remember=False, unused=unused,
        frames_from_ns=floor,
    )  # fmt: skip
    long = np.flatnonzero(full.frames.end - full.frames.ts >= floor)
    assert 0 < len(long) < len(full.frames.ts)
    for column in schema.FRAME_COLUMNS:
        got, want = getattr(lean.frames, column.name), getattr(full.frames, column.name)
        if f"frames.{column.name}" in unused:  # the Python ids: source alone reads them
            assert isinstance(got, schema.Dropped) and len(got) == len(long)
        else:
            assert np.array_equal(got, want[long]), column.name
    for group in ("gpu", "runtime", "flows"):
        for column in schema.TABLES[type(getattr(full, group))]:
            want = getattr(getattr(full, group), column.name)
            got = getattr(getattr(lean, group), column.name)
            assert len(got) == len(want) > 0 and got.dtype == want.dtype
            if f"{group}.{column.name}" in unused:
                assert isinstance(got, schema.Dropped) and not isinstance(want, schema.Dropped)
            else:
                assert not isinstance(got, schema.Dropped) and (got == want).all(), column
    # the launch configurations: none without their ids, as a cold read interns none
    fresh = read_trace(trace, replace(options, cache=False), remember=False, unused=unused)
    assert full.launches and lean.launches == fresh.launches == []
    for command, cold in colds.items():
        assert _json([command], trace) == cold, command


def test_a_filling_read_lets_go_of_the_unused_columns() -> None:
    """The first run writes every column into the entry, then keeps of them what a
    --no-cache read keeps: its unused ones Dropped (of their length), and no launch
    configuration without the launch ids."""
    from traceview.app.commands import _unused
    from traceview.app.reading import read_trace
    from traceview.columns import schema
    from traceview.options import ReadOptions

    trace = SHARED_TRACES / "tracelens__mi300__resnet_act_checkpoint.json.gz"  # frames, flows
    if not trace.is_file():
        pytest.skip(f"{trace} is absent")
    options = ReadOptions(quiet=True)
    unused = _unused(launch_times=True, flows=True)
    asked = {"keep_cpu": True, "frames": True, "remember": False, "unused": unused}
    fresh = read_trace(trace, replace(options, cache=False), **asked)
    filled = read_trace(trace, options, **asked)
    cache.wait_for_writes()
    assert len(_entries()) == 1
    full = read_trace(trace, options, keep_cpu=True, frames=True, remember=False)  # the entry
    assert full.launches and filled.launches == fresh.launches == []
    for group in ("gpu", "runtime", "frames", "flows"):
        for column in schema.TABLES[type(getattr(full, group))]:
            got = getattr(getattr(filled, group), column.name)
            want = getattr(getattr(full, group), column.name)
            assert len(got) == len(want) > 0 and got.dtype == want.dtype, column
            if f"{group}.{column.name}" in unused:
                assert isinstance(got, schema.Dropped) and not isinstance(want, schema.Dropped)
            else:
                assert not isinstance(got, schema.Dropped) and (got == want).all(), column


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")
def test_a_read_a_forked_writer_stores_joins_its_columns_shared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A filling read whose entry a forked process writes joins its columns shared: that
    writer maps each only while writing it (columns.segments). Its entry reads back as the
    trace reads."""
    from mappings import mapping_of

    from traceview import forked
    from traceview.app.reading import read_trace
    from traceview.columns import schema
    from traceview.options import ReadOptions

    monkeypatch.setattr(forked, "_fork_cache_writes", True)
    monkeypatch.setattr(cache, "single_threaded", lambda: True)  # numpy's threads idle
    options = ReadOptions(quiet=True)
    asked = {"keep_cpu": True, "remember": False}
    fresh = read_trace(DEMO, replace(options, cache=False), **asked)
    filled = read_trace(DEMO, options, **asked)
    assert any(isinstance(w, cache._ForkedWrite) for w in cache._writing)
    cache.wait_for_writes()
    assert len(_entries()) == 1
    for group in ("gpu", "runtime"):
        for column in schema.arrays_of(getattr(filled, group)):
            assert mapping_of(column).shared
        for column in schema.arrays_of(getattr(fresh, group)):
            assert not mapping_of(column).shared
    monkeypatch.setattr(forked, "_fork_cache_writes", False)  # the entry read here
    hit = read_trace(DEMO, options, **asked)
    for group in ("gpu", "runtime"):
        got, want = (schema.arrays_of(getattr(e, group)) for e in (hit, fresh))
        for a, b in zip(got, want, strict=True):
            assert len(b) > 0 and (a == b).all()


def test_summary_s_entry_holds_its_long_frames_alone() -> None:
    """summary's first run reads only the frames it can name (and no flow), and its entry
    says so: it serves summary, and source, which wants every frame and flow, reads the
    trace again once and completes the entry. Each says what it says cold."""
    from traceview.analyses.core.stall import STALL_FRAME_MIN_NS
    from traceview.app.reading import read_trace
    from traceview.options import ReadOptions

    trace = SHARED_TRACES / "tracelens__mi300__resnet_act_checkpoint.json.gz"  # frames, flows
    if not trace.is_file():
        pytest.skip(f"{trace} is absent")
    colds = {c: _json([c], trace, "--no-cache") for c in ("summary", "source")}
    every = read_trace(trace, ReadOptions(quiet=True, cache=False), frames=True, remember=False)
    assert _json(["summary"], trace) == colds["summary"]  # fills the entry
    (entry,) = _entries()
    meta = store.read_meta(entry.directory)
    assert meta["has_frames"] and meta["frames_from_ns"] == STALL_FRAME_MIN_NS
    parquet = store._parquet()
    frames = parquet.read_table(entry.directory / "frames.parquet")
    long = every.frames.end - every.frames.ts >= STALL_FRAME_MIN_NS
    assert 0 < frames.num_rows == int(long.sum()) < len(every.frames.ts)
    assert parquet.read_table(entry.directory / "flows.parquet").num_rows == 0
    assert len(every.flows.ts) > 0
    assert _json(["summary"], trace) == colds["summary"]  # from the entry
    assert _json(["source"], trace) == colds["source"]  # reads the trace, completes the entry
    (entry,) = _entries()
    assert store.read_meta(entry.directory)["frames_from_ns"] == 0
    assert parquet.read_table(entry.directory / "frames.parquet").num_rows == len(every.frames.ts)
    assert _json(["source"], trace) == colds["source"]  # from the entry
    assert _json(["summary"], trace) == colds["summary"]
