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
from traceview.columns.collect import EventCollector
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


def test_a_dropped_column_has_a_length_and_selections_but_no_values() -> None:
    column = schema.dropped(np.dtype("<i8"), 5)
    columns = schema.from_arrays(RuntimeColumns, [np.arange(5, dtype=np.int64), column])
    assert len(columns.ts) == 5 and column.strides == (0,)
    mask = np.array([True, False, True, True, False])
    assert len(column[mask]) == 3 and len(column[1:4]) == 3 and len(column[np.arange(2)]) == 2
    assert isinstance(column[mask], schema.Dropped)
    with pytest.raises(IndexError):
        column[mask[:2]]
    uses = [
        lambda: column[0],
        lambda: column + 1,
        lambda: column.max(),
        lambda: np.sort(column),
        lambda: np.concatenate([column, column]),
        lambda: column.astype(np.int32),
        lambda: column.tolist(),
        lambda: list(column),
        lambda: column == 0,
    ]
    for use in uses:
        with pytest.raises(schema.ColumnDropped):
            use()


def test_only_droppable_columns_are_left_out() -> None:
    for key in schema.DROPPABLE:
        group, _, name = key.partition(".")
        table = {
            "gpu": schema.GPU_COLUMNS,
            "runtime": schema.RUNTIME_COLUMNS,
            "flows": schema.FLOW_COLUMNS,
            "frames": schema.FRAME_COLUMNS,
        }[group]
        assert name in [c.name for c in table]
    with pytest.raises(ValueError, match=r"gpu\.ts"):
        EventCollector(unused=frozenset({"gpu.ts"}))
