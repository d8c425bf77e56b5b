"""The cache's Parquet files: written through pyarrow's own writer class (pyarrow._parquet,
without pyarrow.parquet's import), they are the bytes pyarrow.parquet's public writer makes."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pyarrow._parquet
import pyarrow.parquet  # imported before pyarrow._parquet is hidden below
import pytest
from conftest import ROOT, SHARED_TRACES

from traceview.app.reading import read_trace
from traceview.cache import store
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
