"""The cache's Parquet files: written through pyarrow's own writer class (pyarrow._parquet,
without pyarrow.parquet's import), they are the bytes pyarrow.parquet's public writer makes."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import sys
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow._parquet
import pyarrow.parquet  # imported before pyarrow._parquet is hidden below
import pytest
from conftest import ROOT, SHARED_TRACES
from mappings import mapping_of

from traceview import forked
from traceview.app.reading import _ingest, read_trace
from traceview.cache import entry_child, store
from traceview.columns import schema
from traceview.columns.cpu_rows import CpuRows, SpillFile
from traceview.columns.packed_names import PackedNames
from traceview.columns.schema import DROPPABLE, Dropped
from traceview.options import ReadOptions

TRACES = [
    ROOT / "fixtures" / "demo.json.gz",
    SHARED_TRACES / "tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz",  # frames
]


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.name)
def test_the_entry_is_the_public_writers_bytes(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not trace.is_file():
        pytest.skip(f"{trace} is absent")
    events = read_trace(trace, ReadOptions(cache=False, quiet=True), frames=True, remember=False)
    real = pyarrow._parquet.ParquetWriter
    opened: list[str] = []

    def counted(where: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(where))
        return real(where, *args, **kwargs)

    (tmp_path / "private").mkdir()
    (tmp_path / "public").mkdir()
    with monkeypatch.context() as patched:
        patched.setattr(pyarrow._parquet, "ParquetWriter", counted)
        store.write_entry(tmp_path / "private", events, keep_cpu=True)
    with monkeypatch.context() as patched:
        patched.setitem(sys.modules, "pyarrow._parquet", None)  # its import fails: the public one
        store.write_entry(tmp_path / "public", events, keep_cpu=True)
    files = sorted(p.name for p in (tmp_path / "private").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "public").iterdir())
    assert "cpu.parquet" in files and "frames.parquet" in files
    assert sorted(Path(p).name for p in opened) == [f for f in files if f.endswith(".parquet")]
    for name in files:
        assert (tmp_path / "private" / name).read_bytes() == (
            tmp_path / "public" / name
        ).read_bytes(), name


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")
@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.name)
def test_a_writer_that_lets_go_writes_the_same_entry_and_maps_no_column(
    trace: Path, tmp_path: Path
) -> None:
    """A read for a forked writer joins its columns shared; the writer, letting go of each
    table's once written, ends mapping none of them and writes the entry's very bytes."""
    if not trace.is_file():
        pytest.skip(f"{trace} is absent")
    options = ReadOptions(cache=False, quiet=True)
    events = _ingest(trace, options, keep_cpu=True, frames=True, shared=True)
    groups = [getattr(events, f) for f in ("gpu", "runtime", "frames", "flows")]
    columns = [a for group in groups for a in schema.arrays_of(group) if a.nbytes]
    assert len(columns) >= 10 and all(mapping_of(a).shared for a in columns)
    (tmp_path / "kept").mkdir()
    (tmp_path / "let_go").mkdir()
    store.write_entry(tmp_path / "kept", events, keep_cpu=True)
    assert all(mapping_of(a).rss_kib > 0 for a in columns)
    store.write_entry(tmp_path / "let_go", events, keep_cpu=True, let_go=True)
    assert [mapping_of(a).rss_kib for a in columns] == [0] * len(columns)
    files = sorted(p.name for p in (tmp_path / "kept").iterdir())
    assert "frames.parquet" in files and files == sorted(
        p.name for p in (tmp_path / "let_go").iterdir()
    )
    for name in files:
        kept, let_go = (tmp_path / "kept" / name), (tmp_path / "let_go" / name)
        assert kept.read_bytes() == let_go.read_bytes(), name
    private = _ingest(trace, options, keep_cpu=True, frames=True)
    assert _plain(private) == _plain(events)  # the values, whole after the writer's let-go
    assert not mapping_of(private.gpu.ts).shared


_POOLS = """
import os
import sys
from pathlib import Path

import numpy as np

if sys.argv[1] == "store":
    from traceview.cache import store

    pa = store._arrow()
else:  # as before: pyarrow imported first, its own pool set to the system's afterwards
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    from traceview.cache import store
table = pa.table({"a": np.arange(1 << 20), "b": np.arange(1 << 20) * 3})
path = Path(sys.argv[2]) / "t.parquet"
store._write(path, table)
assert store._read_table(path).equals(table)
print("variable_left", int("ARROW_DEFAULT_MEMORY_POOL" in os.environ))
for name in ("mimalloc", "jemalloc"):
    try:
        print(name, getattr(pa, f"{name}_memory_pool")().max_memory())
    except (AttributeError, NotImplementedError):  # a pyarrow built without it
        pass
"""


def test_arrow_decodes_in_the_system_allocator_alone(tmp_path: Path) -> None:
    """Once the cache imports pyarrow, Arrow's own default pool (the Parquet reader's, set by
    $ARROW_DEFAULT_MEMORY_POOL at pyarrow's import) is the system's too: a table written and
    read leaves mimalloc and jemalloc unused (their freed pages serve no numpy array). Without
    it, the read decodes in mimalloc."""
    import subprocess

    def peaks(how: str) -> dict[str, int]:
        env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
        out = subprocess.run(
            [sys.executable, "-c", _POOLS, how, str(tmp_path)],
            capture_output=True, text=True, check=True, env=env,
        ).stdout  # fmt: skip
        return {name: int(peak) for name, peak in (line.split() for line in out.splitlines())}

    ours = peaks("store")
    assert ours.pop("variable_left") == 0  # the process's environment as it was
    if not ours:
        pytest.skip("pyarrow has neither mimalloc nor jemalloc")
    assert ours == dict.fromkeys(ours, 0)
    before = peaks("plain")
    del before["variable_left"]
    assert sum(before.values()) > 0


def _plain(value: Any) -> Any:
    """TraceEvents (or any of its fields) as plain, comparable values (the CPU rows read)."""
    if isinstance(value, Dropped):
        return ("dropped", value.dtype.str, len(value))
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.tobytes())
    if isinstance(value, CpuRows):
        return [_plain(block) for block in value.blocks()]
    if isinstance(value, PackedNames):
        return list(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.name)
def test_the_entry_reads_as_pyarrow_parquet_reads_it(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read through pyarrow's own reader class (pyarrow._parquet.ParquetReader), an entry gives
    what ParquetFile gives; the CPU rows' file, opened once, stays open for every pass."""
    if not trace.is_file():
        pytest.skip(f"{trace} is absent")
    events = read_trace(trace, ReadOptions(cache=False, quiet=True), frames=True, remember=False)
    store.write_entry(tmp_path, events, keep_cpu=True)
    meta = store.read_meta(tmp_path)
    real = pyarrow._parquet.ParquetReader
    opened: list[Any] = []

    def counted() -> Any:
        opened.append(real())
        return opened[-1]

    with monkeypatch.context() as patched:
        patched.setattr(pyarrow._parquet, "ParquetReader", counted)
        back = store.read_entry(tmp_path, meta, keep_cpu=True, frames=True)
        ours = _plain(back)
        assert _plain(back.cpu) == ours["cpu"]  # a second pass: its file still open
    assert len(opened) > len(meta["files"]) // 2
    with monkeypatch.context() as patched:
        patched.setitem(sys.modules, "pyarrow._parquet", None)  # its import fails: ParquetFile
        public = _plain(store.read_entry(tmp_path, meta, keep_cpu=True, frames=True))
    assert ours == public
    assert len(ours["cpu"]) > 0 and len(ours["gpu"]["ts"][1]) > 0


_READ_ALONE = """
import sys
from pathlib import Path

from traceview.cache import store

entry = Path(sys.argv[1])
events = store.read_entry(entry, store.read_meta(entry), keep_cpu=True)
assert len(list(events.cpu.blocks())) > 0
print(sorted(m for m in ("pyarrow.parquet", "pyarrow.fs", "ssl") if m in sys.modules))
"""


def test_an_entry_is_read_without_pyarrow_parquet_imported(tmp_path: Path) -> None:
    """pyarrow.parquet imports pyarrow.fs, ssl and the cloud filesystems (~9 MB of a warm
    run's memory, ~13 ms): an entry's read takes pyarrow's reader class alone."""
    import subprocess

    trace = ROOT / "fixtures" / "demo.json.gz"
    options = ReadOptions(cache=False, quiet=True)
    events = read_trace(trace, options, keep_cpu=True, remember=False)
    store.write_entry(tmp_path, events, keep_cpu=True)
    out = subprocess.run(
        [sys.executable, "-c", _READ_ALONE, str(tmp_path)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert out.strip() == "[]"


# What a warm run asks of an entry: with the CPU rows and the frames; without the CPU rows;
# with columns left out (Dropped) and the frames shorter than 10 µs too.
_ASKED = [
    {"keep_cpu": True, "frames": True},
    {"keep_cpu": False},
    {"keep_cpu": True, "frames": True, "unused": DROPPABLE, "frames_from_ns": 10_000},
]


def _entry(trace: Path, directory: Path) -> dict[str, Any]:
    if not trace.is_file():
        pytest.skip(f"{trace} is absent")
    events = read_trace(trace, ReadOptions(cache=False, quiet=True), frames=True, remember=False)
    store.write_entry(directory, events, keep_cpu=True)
    return store.read_meta(directory)


@dataclasses.dataclass
class _Counted:
    forks: int = 0  # children forked to read an entry
    here: int = 0  # entries read by this process (a child's reads are not counted here)


@pytest.fixture
def command_line(monkeypatch: pytest.MonkeyPatch) -> _Counted:
    """This process taken for the command line (its entries read by a child); the children
    forked for them and the reads done here, counted."""
    monkeypatch.setattr(forked, "_fork_cache_writes", True)
    monkeypatch.setattr(entry_child, "single_threaded", lambda: True)  # numpy's threads idle
    counted = _Counted()
    fork, read = entry_child.Child, entry_child.read_entry

    def forking(*args: Any, **kwargs: Any) -> Any:
        counted.forks += 1
        return fork(*args, **kwargs)

    def reading(*args: Any, **kwargs: Any) -> Any:
        counted.here += 1
        return read(*args, **kwargs)

    monkeypatch.setattr(entry_child, "Child", forking)
    monkeypatch.setattr(entry_child, "read_entry", reading)
    return counted


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.name)
def test_an_entry_read_by_a_child_is_the_entry_read_here(
    trace: Path, tmp_path: Path, command_line: _Counted
) -> None:
    """Columns mapped from the child's memfd (Dropped ones made anew), names, the CPU rows in a
    spill file with each row group's span, everything else pickled: the same events."""
    meta = _entry(trace, tmp_path)
    for asked in _ASKED:
        here = _plain(store.read_entry(tmp_path, meta, **asked))
        there = entry_child.read_entry_aside(tmp_path, meta, **asked)
        assert _plain(there) == here, asked
        if asked["keep_cpu"]:
            assert len(here["cpu"]) > 0
            (spill,) = there.cpu.parts
            assert isinstance(spill, SpillFile) and spill.spans is not None
            assert (
                len(spill.spans.first)
                == pyarrow.parquet.ParquetFile(tmp_path / "cpu.parquet").metadata.num_row_groups
            )  # a span a row group, as its statistics give
        else:
            assert there.cpu.parts == ()
    assert (command_line.forks, command_line.here) == (len(_ASKED), 0)
    assert any(isinstance(a, Dropped) for a in schema.arrays_of(there.gpu))


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.name)
def test_each_group_is_given_to_the_sink_once_read_and_held_by_it_alone(
    trace: Path, tmp_path: Path
) -> None:
    """read_entry gives each column group to its sink as soon as it is read (the entry child
    writes it away there): what the sink returns is kept instead, and nothing else holds the
    group, so the memory of one is free before the next is read. A read without CPU rows of
    an entry that has them needs the other groups after (without_cpu): it gives the runtime
    calls alone."""
    meta = _entry(trace, tmp_path)
    for asked in _ASKED:
        here = store.read_entry(tmp_path, meta, **asked)
        sink = _Sink()
        there = store.read_entry(tmp_path, meta, **asked, sink=sink)
        assert sink.live() == []
        if not asked["keep_cpu"]:
            assert list(sink.given) == ["runtime"]
            assert sink.given["runtime"] == _plain(here.runtime)
            assert _plain(dataclasses.replace(here, runtime=there.runtime)) == _plain(there)
            continue
        fields = _GROUP_FIELDS if meta.get("has_frames") else _GROUP_FIELDS[:4]
        assert list(sink.given) == list(fields), asked
        for field in fields:
            assert sink.given[field] == _plain(getattr(here, field)), field
            assert len(schema.arrays_of(getattr(there, field))[0]) == 0
        assert _plain(dataclasses.replace(here, **{f: getattr(there, f) for f in fields})) == (
            _plain(there)
        )


class _Sink:
    """Each group given (as plain values), weak references to its arrays, and an empty
    group kept instead; each group given must find the ones before it let go of."""

    def __init__(self) -> None:
        self.given: dict[str, Any] = {}
        self.held: list[weakref.ref[np.ndarray]] = []

    def live(self) -> list[weakref.ref[np.ndarray]]:
        return [ref for ref in self.held if ref() is not None]

    def __call__(self, field: str, group: Any) -> Any:
        assert self.live() == []
        self.given[field] = _plain(group)
        self.held.extend(weakref.ref(a) for a in schema.arrays_of(group))
        return schema.empty(type(group))


def test_a_damaged_entry_is_said_as_read_here(tmp_path: Path, command_line: _Counted) -> None:
    meta = _entry(ROOT / "fixtures" / "demo.json.gz", tmp_path)
    cpu = tmp_path / "cpu.parquet"
    data = bytearray(cpu.read_bytes())
    data[len(data) // 2] ^= 0xFF  # its size as the meta says, its content not
    cpu.write_bytes(bytes(data))
    with pytest.raises(store.DamagedEntry) as here:
        store.read_entry(tmp_path, meta, keep_cpu=True)
    with pytest.raises(store.DamagedEntry) as there:
        entry_child.read_entry_aside(tmp_path, meta, keep_cpu=True)
    assert str(there.value) == str(here.value) and "cpu.parquet" in str(here.value)
    assert (command_line.forks, command_line.here) == (1, 0)  # the child said it


def _dies(*args: Any) -> None:
    os._exit(3)


def _stuck(*args: Any) -> None:
    import time

    time.sleep(60)


@pytest.mark.parametrize("child", [_dies, _stuck])
def test_an_entry_the_child_does_not_send_is_read_here(
    child: Any, tmp_path: Path, command_line: _Counted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child that dies, or does not answer in time (it is stopped): the read is done here."""
    import time

    meta = _entry(ROOT / "fixtures" / "demo.json.gz", tmp_path)
    monkeypatch.setattr(entry_child, "_read_and_send", child)
    monkeypatch.setattr(entry_child, "patience", lambda started: 0.5)
    started = time.monotonic()
    there = entry_child.read_entry_aside(tmp_path, meta, keep_cpu=True)
    assert time.monotonic() - started < 30
    assert (command_line.forks, command_line.here) == (1, 1)
    assert _plain(there) == _plain(store.read_entry(tmp_path, meta, keep_cpu=True))


def test_cpu_rows_the_child_does_not_write_are_read_here(
    tmp_path: Path, command_line: _Counted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The columns sent, the child dies while it writes the CPU rows: they are read here,
    from the entry, into a spill file of their own."""
    meta = _entry(ROOT / "fixtures" / "demo.json.gz", tmp_path)
    here = _plain(store.read_entry(tmp_path, meta, keep_cpu=True))
    parent, blocks = os.getpid(), store.ParquetRows.blocks

    def dying(self: store.ParquetRows, *args: Any, **kwargs: Any) -> Any:
        if os.getpid() != parent:
            os._exit(3)  # the child, its columns sent
        yield from blocks(self, *args, **kwargs)

    monkeypatch.setattr(store.ParquetRows, "blocks", dying)
    there = entry_child.read_entry_aside(tmp_path, meta, keep_cpu=True)
    assert (command_line.forks, command_line.here) == (1, 0)  # its columns came
    assert _plain(there) == here
    (spill,) = there.cpu.parts
    assert spill._kept is not None  # the rows read here, into a file of their own


def test_the_python_api_reads_an_entry_itself(tmp_path: Path, command_line: _Counted) -> None:
    """A process that is not the command line (it may run threads of its own) forks none."""
    meta = _entry(ROOT / "fixtures" / "demo.json.gz", tmp_path)
    forked._fork_cache_writes = False  # the fixture's monkeypatch restores it
    there = entry_child.read_entry_aside(tmp_path, meta, keep_cpu=True)
    assert (command_line.forks, command_line.here) == (0, 1)
    assert _plain(there) == _plain(store.read_entry(tmp_path, meta, keep_cpu=True))


def _memfds() -> tuple[int, int, int]:
    """This process's mappings of memfds, its descriptors of them (mmap keeps one of its
    own) and the bytes the memfds hold."""
    maps = Path("/proc/self/maps").read_text().count("/memfd:traceview-part")
    fds, files = 0, {}
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):
            if "/memfd:traceview-part" in os.readlink(fd):
                fds += 1
                found = os.stat(fd)
                files[found.st_ino] = found.st_blocks * 512
    return maps, fds, sum(files.values())


def test_a_column_let_go_of_frees_its_memory(tmp_path: Path, command_line: _Counted) -> None:
    """Each column comes in a memfd of its own, held by its mapping alone: a column let go of
    (the runtime calls, after without_runtime) frees its pages, as an Arrow buffer's did."""
    meta = _entry(ROOT / "fixtures" / "demo.json.gz", tmp_path)
    before = _memfds()
    events = entry_child.read_entry_aside(tmp_path, meta, keep_cpu=False)
    runtime = [a for a in schema.arrays_of(events.runtime) if a.nbytes]
    assert runtime and not runtime[0].flags.writeable  # mapped
    maps, fds, held = _memfds()
    assert held >= sum(
        a.nbytes for f in _GROUP_FIELDS for a in schema.arrays_of(getattr(events, f))
    )
    events = dataclasses.replace(events, runtime=schema.empty(type(events.runtime)))
    freed, unmapped = sum(a.nbytes for a in runtime), len(runtime)
    del runtime
    gc.collect()
    after = _memfds()
    assert after[:2] == (maps - unmapped, fds - unmapped)
    assert after[2] <= held - freed  # their pages gone from the memfds
    assert len(events.gpu.ts) > 0
    del events
    gc.collect()
    assert _memfds() == before


_GROUP_FIELDS = ("gpu", "runtime", "comms", "memory", "frames", "flows")
