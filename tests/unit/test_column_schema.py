"""The column schema is declared once (traceview.columns.schema) and everything is checked
against it: the dataclasses, the worker's transport and the cache's tables."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from traceview.cache import store
from traceview.columns import schema
from traceview.columns.cpu_rows import ROW
from traceview.columns.schema import GpuColumns, RuntimeColumns, SchemaMismatch


def _gpu(n: int = 3) -> list[np.ndarray]:
    return [np.zeros(n, dtype=c.dtype) for c in schema.GPU_COLUMNS]


def test_groups_are_built_only_from_their_table() -> None:
    columns = schema.from_arrays(GpuColumns, _gpu())
    assert [a.dtype for a in schema.arrays_of(columns)] == [c.dtype for c in schema.GPU_COLUMNS]
    wrong = _gpu()
    wrong[3] = wrong[3].astype(np.float64)  # ts as floats
    with pytest.raises(SchemaMismatch, match="column ts is float64"):
        schema.from_arrays(GpuColumns, wrong)
    with pytest.raises(SchemaMismatch, match="unequal lengths"):
        schema.from_arrays(GpuColumns, [*_gpu(3)[:-1], np.zeros(2, np.int32)])
    with pytest.raises(SchemaMismatch):
        schema.from_arrays(RuntimeColumns, _gpu())
    assert len(schema.empty(RuntimeColumns).ts) == 0


def test_a_dataclass_that_drifts_from_its_table_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclass(frozen=True)
    class Drifted:
        correlation: np.ndarray

    monkeypatch.setitem(schema.TABLES, Drifted, schema.RUNTIME_COLUMNS)
    with pytest.raises(TypeError, match="Drifted declares"):
        schema._check_dataclasses()


def test_cpu_rows_follow_the_table() -> None:
    assert ROW.names == tuple(c.name for c in schema.CPU_COLUMNS) == store.CPU_COLUMNS
    assert [ROW[c.name] for c in schema.CPU_COLUMNS] == [c.dtype for c in schema.CPU_COLUMNS]


def test_a_cached_table_of_other_types_is_damaged(tmp_path: Path) -> None:
    path = tmp_path / "runtime.parquet"
    pq.write_table(pa.table({"correlation": [1, 2], "ts": [0.5, 1.5]}), path)
    with pytest.raises(store.DamagedEntry, match="column ts is float64"):
        store._group(path, RuntimeColumns)
    pq.write_table(pa.table({"ts": [1, 2], "correlation": [0, 1]}), path)
    with pytest.raises(store.DamagedEntry, match="has the columns ts, correlation"):
        store._group(path, RuntimeColumns)
