"""The op calls taken a block of CPU rows at a time (analyses.core.opcalls.OpCallsByBlock) are
exactly those of every op held at once, whatever the blocks' size: calls in each thread's
order, calls out of it (held after all), nestings deeper than the open calls carried, sums
past int64 (refused both ways)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest

from traceview.aggregate.sums import SumOverflow
from traceview.analyses.core import opcalls
from traceview.columns.cpu_rows import OP, ArrayRows, CpuRows, rows
from traceview.columns.model import TraceEvents

FIELDS = ("name", "shape", "calls", "cpu_ns", "self_ns")


def _events(seed: int, n: int, in_order: bool) -> TraceEvents:
    """``n`` CPU rows on a few threads (a few runtime calls among the ops), each thread's
    ops nested (and some ties, instants, siblings that touch), in (ts, −end) order per
    thread when ``in_order``."""
    rng = np.random.default_rng(seed)
    thread = rng.integers(0, 1 + seed % 3, n).astype(np.int32)
    ts = np.sort(rng.integers(0, 40 * n, n)).astype(np.int64)
    end = ts + rng.integers(0, 120, n)
    end[:: max(n // 6, 1)] += 30 * n  # outer calls reaching past many later ones
    end[::9] = ts[::9]  # instants
    ts[1::7] = ts[::7][: len(ts[1::7])]  # ties on ts
    end[1::7] = np.maximum(end[1::7], ts[1::7])
    order = np.lexsort((-end, ts)) if in_order else rng.permutation(n)
    thread, ts, end = thread[order], ts[order], end[order]
    correlation = np.where(rng.random(n) < 0.1, rng.integers(1, 99, n), OP).astype(np.int64)
    name = rng.integers(0, 5, n).astype(np.int32)
    shape = rng.integers(-1, 4, n).astype(np.int32)
    table = rows(thread=thread, name=name, ts=ts, end=end, correlation=correlation, shape=shape)
    shapes = [(b"", b"", b"")] * 4
    cpu = CpuRows((ArrayRows(table),))
    names = ["a", "b", "c", "d", "e"]
    return cast(TraceEvents, SimpleNamespace(names=names, shapes=shapes, cpu=cpu))


def _by_blocks(events: TraceEvents, size: int) -> opcalls.OpCallsByBlock:
    found = opcalls.OpCallsByBlock(events)
    for block in events.cpu.blocks(size):
        found.add(block)
    return found


@pytest.mark.parametrize("in_order", [True, False])
@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("size", [1, 2, 7, 50, 1 << 16])
def test_blocks_give_the_op_calls_of_every_op_at_once(seed: int, size: int, in_order: bool) -> None:
    events = _events(seed, 400, in_order)
    found = _by_blocks(events, size)
    got, want = found.result(), opcalls._whole(events)
    assert found.in_order == in_order
    for field in FIELDS:
        a, b = getattr(got, field), getattr(want, field)
        assert a.dtype == b.dtype and a.tolist() == b.tolist(), field


def test_a_nesting_deeper_than_the_open_calls_carried_holds_every_op(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events = _events(1, 400, in_order=True)
    monkeypatch.setattr(opcalls.OpCallsByBlock, "_MAX_OPEN", 2)
    found = _by_blocks(events, 16)
    assert not found.in_order
    got, want = found.result(), opcalls._whole(events)
    for field in FIELDS:
        assert getattr(got, field).tolist() == getattr(want, field).tolist(), field


def test_without_the_key_table_the_keys_are_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    events = _events(2, 300, in_order=True)
    monkeypatch.setattr(opcalls.OpCallsByBlock, "_TABLE", 0)
    found = _by_blocks(events, 32)
    assert found.table is None
    got, want = found.result(), opcalls._whole(events)
    for field in FIELDS:
        assert getattr(got, field).tolist() == getattr(want, field).tolist(), field


@pytest.mark.parametrize("size", [1, 3, 100])
def test_sums_past_int64_are_refused_both_ways(size: int) -> None:
    big = 2**62
    table = rows(
        thread=np.zeros(3, dtype=np.int32),
        name=np.zeros(3, dtype=np.int32),
        ts=np.array([0, 1, big], dtype=np.int64),
        end=np.array([big, big - 1, 2 * big - 1], dtype=np.int64),
        correlation=np.full(3, OP, dtype=np.int64),
    )
    events = cast(
        TraceEvents, SimpleNamespace(names=["a"], shapes=[], cpu=CpuRows((ArrayRows(table),)))
    )
    with pytest.raises(SumOverflow):
        opcalls._whole(events)
    with pytest.raises(SumOverflow):
        _by_blocks(events, size).result()
