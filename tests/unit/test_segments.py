"""Columns appended in segments (traceview.columns.segments) join to exactly the rows given,
in order: prepended parts first, batches across segment boundaries whole."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from mappings import mapping_of

from traceview.columns import segments as segments_module
from traceview.columns.schema import GPU_COLUMNS, RUNTIME_COLUMNS, Dropped, SchemaMismatch
from traceview.columns.segments import Segments, let_go


def _batch(start: int, n: int) -> tuple[np.ndarray, ...]:
    values = np.arange(start, start + n)
    return (values.astype(np.int64), (values * 7 - 3).astype(np.int64))


@pytest.mark.parametrize("sizes", [[], [0], [1], [3, 4, 0, 9], [5, 5], [17, 1, 2, 30]])
def test_rows_join_in_order_across_segments(sizes: list[int]) -> None:
    segments = Segments(RUNTIME_COLUMNS, rows=5)
    start = 0
    for n in sizes:
        segments.append(_batch(start, n))
        start += n
    correlation, ts = segments.join()
    expected = _batch(0, start)
    assert correlation.dtype == np.int64 and ts.dtype == np.int64
    assert correlation.tolist() == expected[0].tolist()
    assert ts.tolist() == expected[1].tolist()
    assert [len(c) for c in segments.join()] == [0, 0]  # the join empties it


def test_prepended_parts_come_first_latest_first() -> None:
    segments = Segments(RUNTIME_COLUMNS, rows=4)
    segments.append(_batch(20, 6))
    segments.prepend(_batch(10, 10))
    segments.prepend(_batch(0, 10))
    assert segments.join()[0].tolist() == list(range(26))


def test_a_column_of_another_dtype_is_refused_not_cast() -> None:
    segments = Segments(GPU_COLUMNS)
    columns = [np.zeros(2, dtype=c.dtype) for c in GPU_COLUMNS]
    columns[1] = columns[1].astype(np.int64)  # name ids as int64: a cast would hide it
    with pytest.raises(SchemaMismatch, match="column name is int64"):
        segments.append(tuple(columns))


def test_an_unused_column_is_joined_as_dropped_of_the_rows_count() -> None:
    segments = Segments(RUNTIME_COLUMNS, rows=4, unused=frozenset({"ts"}))
    segments.append((np.arange(5, 11, dtype=np.int64), np.empty(0, dtype=np.int32)))  # unread
    segments.prepend((np.arange(5, dtype=np.int64), None))
    correlation, ts = segments.join()
    assert correlation.tolist() == list(range(11))
    assert isinstance(ts, Dropped) and len(ts) == 11 and ts.dtype == np.int64


def test_a_group_left_out_whole_counts_its_rows_and_holds_none() -> None:
    """Every column unused (summary's flows): batches and prepended parts are counted, not
    kept; the join gives each column Dropped of the rows' count."""
    segments = Segments(RUNTIME_COLUMNS, rows=4, unused=frozenset({"correlation", "ts"}))
    segments.append(_batch(0, 9))
    segments.append(_batch(9, 0))
    segments.prepend(_batch(0, 3))
    segments.prepend((None, np.arange(2, dtype=np.int64)))
    assert segments._full == [] and segments._open is None and segments._before == []
    joined = segments.join()
    assert all(isinstance(c, Dropped) and len(c) == 14 for c in joined)
    assert [c.dtype for c in joined] == [np.int64, np.int64]


_LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")


@_LINUX
def test_columns_joined_shared_are_let_go_of_and_keep_their_values() -> None:
    """Joined shared, each column is a shared mapping: let_go unmaps its pages from this
    process (a forked cache writer's, once written), and a read maps them again, values
    whole."""
    n = 300_000  # 2.4 MB a column: pages to count
    segments = Segments(RUNTIME_COLUMNS, rows=1 << 16, shared=True)
    segments.append(_batch(0, n))
    columns = segments.join()
    expected = _batch(0, n)
    for column, values in zip(columns, expected, strict=True):
        assert np.array_equal(column, values)
        assert mapping_of(column).shared and mapping_of(column).rss_kib >= column.nbytes // 1024
    let_go()
    assert [mapping_of(c).rss_kib for c in columns] == [0, 0]
    for column, values in zip(columns, expected, strict=True):
        assert np.array_equal(column, values)  # mapped again, as they were
        assert mapping_of(column).rss_kib >= column.nbytes // 1024


@_LINUX
def test_let_go_leaves_private_columns_alone() -> None:
    """A private mapping's pages dropped would read as zeros: let_go never touches the
    columns joined private, nor the segments being filled."""
    private = Segments(RUNTIME_COLUMNS, rows=1 << 16)
    private.append(_batch(0, 300_000))
    filling = Segments(RUNTIME_COLUMNS, rows=1 << 18, shared=True)
    filling.append(_batch(0, 100_000))
    shared = Segments(RUNTIME_COLUMNS, shared=True)
    shared.append(_batch(0, 10))
    held = shared.join()  # a shared mapping to let go of beside the private ones
    columns = private.join()
    assert not any(mapping_of(c).shared for c in columns)
    let_go()
    assert mapping_of(held[0]).rss_kib == 0
    assert np.array_equal(columns[1], _batch(0, 300_000)[1])
    assert np.array_equal(filling.join()[1], _batch(0, 100_000)[1])


def test_without_shared_mappings_the_join_is_private(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the system has no shared mapping to let go of, shared columns are plain arrays."""
    monkeypatch.setattr(segments_module, "_SHARED", None)
    segments = Segments(RUNTIME_COLUMNS, shared=True)
    segments.append(_batch(0, 7))
    columns = segments.join()
    assert columns[0].tolist() == list(range(7)) and columns[0].base is None
    let_go()
