"""The cache's Parquet files: written through pyarrow's own writer class (pyarrow._parquet,
without pyarrow.parquet's import), they are the bytes pyarrow.parquet's public writer makes."""

from __future__ import annotations

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
