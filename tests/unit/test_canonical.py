"""columns.model.canonical (what export writes): the same trace whatever the read's interning
and chunk order, its rows meaning what they meant; store.even_blocks: row groups of one size."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
from conftest import ROOT

from traceview.app.reading import read_trace
from traceview.cache.store import even_blocks
from traceview.columns.cpu_rows import FRAME, ROW, is_op
from traceview.columns.model import TraceEvents, canonical, value_key
from traceview.columns.packed_names import PackedNames
from traceview.options import ReadOptions

DEMO = ROOT / "fixtures" / "demo.json.gz"


def _read(path: Path) -> TraceEvents:
    return read_trace(path, ReadOptions(cache=False, quiet=True), keep_cpu=True)


def _cpu(events: TraceEvents) -> np.ndarray:
    return np.concatenate([*events.cpu.blocks(), np.zeros(0, ROW)])


def test_the_rows_mean_what_they_meant() -> None:
    events = _read(DEMO)
    out = canonical(events)
    names, new_names = list(events.names), list(out.names)
    assert new_names == sorted(names)
    assert [new_names[i] for i in out.gpu.name] == [names[i] for i in events.gpu.name]
    streams = [out.streams[i] for i in out.gpu.stream]
    assert streams == [events.streams[i] for i in events.gpu.stream]
    before, after = _cpu(events), _cpu(out)
    assert len(before) == len(after) > 0

    def described(rows: np.ndarray, e: TraceEvents) -> list[tuple[object, ...]]:
        return sorted(
            (e.threads[r["thread"]], list(e.names)[r["name"]], int(r["ts"]), int(r["correlation"]))
            for r in rows
        )

    assert described(before, events) == described(after, out)


def test_cpu_rows_come_calls_then_ops_then_frames() -> None:
    rows = _cpu(canonical(_read(DEMO)))
    group = np.where(is_op(rows["correlation"]), 1, np.where(rows["correlation"] == FRAME, 2, 0))
    assert (np.diff(group) >= 0).all() and set(group.tolist()) >= {0, 1}


def test_a_read_s_order_does_not_show() -> None:
    """The same trace with its names interned in another order: the same names table and
    GPU name ids once canonical."""
    events = _read(DEMO)
    flip = np.arange(len(events.names))[::-1].astype(np.int32)  # each id to its mirror
    mirrored = replace(
        events,
        names=PackedNames.of(events.names).take(flip),
        gpu=replace(events.gpu, name=flip[events.gpu.name]),
    )
    a, b = canonical(events), canonical(mirrored)
    assert list(a.names) == list(b.names) and np.array_equal(a.gpu.name, b.gpu.name)


def test_value_key_orders_mixed_values() -> None:
    values = ["7", 7, 7.0, None, True, -1, (1, "a"), (1, None)]
    ordered = sorted(values, key=value_key)
    assert ordered == [None, True, -1, 7, 7.0, "7", (1, None), (1, "a")]


def test_even_blocks_cut_and_join() -> None:
    rows = np.arange(23)
    parts = [rows[:5], rows[5:5], rows[5:17], rows[17:]]
    blocks = list(even_blocks(parts, 4))
    assert [len(b) for b in blocks] == [4, 4, 4, 4, 4, 3]
    assert np.concatenate(blocks).tolist() == rows.tolist()
