"""The cache's Parquet files: written through pyarrow's own writer class (pyarrow._parquet,
without pyarrow.parquet's import), they are the bytes pyarrow.parquet's public writer makes."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow._parquet
import pyarrow.parquet  # imported before pyarrow._parquet is hidden below
import pytest
from conftest import ROOT, SHARED_TRACES

from traceview.app.reading import read_trace
from traceview.cache import store
from traceview.columns.cpu_rows import CpuRows
from traceview.columns.packed_names import PackedNames
from traceview.columns.schema import Dropped
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
