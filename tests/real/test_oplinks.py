"""Kernel → launching operator (leaf and top) on every real trace, against tests/reference.py."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import reference as ref
from conftest import RealTrace
from hypothesis import given
from hypothesis import strategies as st

from traceview.analyses.core import oplinks
from traceview.analyses.core.devices import NO_LAUNCH
from traceview.analyses.core.opcalls import OP_FIELDS, OpColumns
from traceview.analyses.core.oplinks import NO_OP, link_ops
from traceview.analyses.core.prelaunch import PRELAUNCH_ROW
from traceview.analyses.ops.view import GRAPH_NO_OP_ROW, NO_OP_ROW, OpOptions, analyse_ops
from traceview.columns.cpu_rows import NO_SHAPE, OP, ROW, ArrayRows, CpuRows, rows
from traceview.columns.model import TraceEvents
from traceview.columns.schema import KERNEL


def _load(trace: RealTrace) -> tuple[list[dict[str, Any]], TraceEvents]:
    return trace.raw, trace.events


def test_leaf_and_top_ops_match_reference(real_trace: RealTrace) -> None:
    raw, events = _load(real_trace)
    want = ref.op_links(raw)
    if not want:
        pytest.skip("no kernels")
    links = link_ops(events)
    kernels = events.gpu.kind == KERNEL

    def op_time(ops: Any) -> Counter[tuple[str | None, str]]:
        out: Counter[tuple[str | None, str]] = Counter()
        for row in map(int, ops[0]):
            name = None if ops[1][row] == NO_OP else events.names[int(ops[1][row])]
            out[(name, events.names[int(events.gpu.name[row])])] += int(events.gpu.dur[row])
        return out

    rows = np.flatnonzero(kernels)
    for level, index in (("leaf", 1), ("top", 2)):
        expected: Counter[tuple[str | None, str]] = Counter()
        for k, *ops in want:
            expected[(ops[index - 1], ref.event_name(k))] += ref.dur_ns(k)
        got = op_time((rows, links.leaf if level == "leaf" else links.top))
        assert got == expected, level
    linked = sum(1 for _, leaf, _ in want if leaf is not None)
    assert int((links.leaf[rows] != NO_OP).sum()) == linked


@pytest.mark.parametrize("level", ["leaf", "top"])
def test_ops_table_matches_reference(real_trace: RealTrace, level: str) -> None:
    raw, events = _load(real_trace)
    want = ref.op_links(raw)
    replayed = ref.graph_replayed(raw)
    report = analyse_ops(events, OpOptions(level=level, top=0))
    before = ref.launched_before(raw)
    expected: dict[str, list[int]] = {}
    for i, (k, leaf, top) in enumerate(want):
        no_op = GRAPH_NO_OP_ROW if i in replayed else NO_OP_ROW
        no_op = PRELAUNCH_ROW if id(k) in before else no_op
        name = (leaf if level == "leaf" else top) or no_op
        entry = expected.setdefault(name, [0, 0])
        entry[0] += 1
        entry[1] += ref.dur_ns(k)
    got = {r.name: [r.kernels, r.gpu_time_ns] for r in report.rows}
    assert got == expected
    assert report.gpu_time_ns == sum(ref.dur_ns(k) for k, _, _ in want)
    assert sum(r.gpu_time_ns for r in report.rows) == report.gpu_time_ns
    calls: Counter[str] = Counter()
    cpu: Counter[str] = Counter()
    for e in raw:
        if (
            e.get("ph") == "X"
            and str(e.get("cat", "")).lower() in ref.CPU_OP_CATEGORIES
            and ref.ts_ns(e) is not None
            and not ref.event_name(e).startswith("ProfilerStep#")
        ):
            calls[ref.event_name(e)] += 1
            cpu[ref.event_name(e)] += ref.dur_ns(e)
    for r in report.rows:
        if r.name not in (NO_OP_ROW, GRAPH_NO_OP_ROW):
            assert (r.calls, r.cpu_time_ns) == (calls[r.name], cpu[r.name]), r.name


@given(
    st.lists(st.lists(st.tuples(st.integers(-3, 2), st.integers(0, 9)), max_size=9), max_size=6),
    st.integers(0, 20),
)
def test_op_columns_are_the_ops_of_every_block_in_order(
    blocks: list[list[tuple[int, int]]], capacity: int
) -> None:
    tables = [
        rows(
            thread=np.array([t for _, t in b], dtype=np.int32),
            name=np.array([t + 1 for _, t in b], dtype=np.int32),
            ts=np.array([10 * t for _, t in b], dtype=np.int64),
            end=np.array([10 * t + 5 for _, t in b], dtype=np.int64),
            correlation=np.array([c for c, _ in b], dtype=np.int64),
        )
        for b in blocks
    ]
    gathered = OpColumns(capacity)  # too small or large enough: grown when need be
    for table in tables:
        gathered.add(table)
    every = np.concatenate([np.zeros(0, dtype=ROW), *tables])
    ops = every[every["correlation"] == OP]
    got = gathered.columns()
    assert [c.tolist() for c in got] == [ops[field].tolist() for field in OP_FIELDS]
    assert [c.dtype for c in got] == [ROW[field] for field in OP_FIELDS]


def test_links_without_the_orders_the_fast_paths_use(real_trace: RealTrace) -> None:
    """The CPU rows backwards: their calls are no longer events.runtime's in order, nor a
    thread's ops in start order, so link_ops takes its searches by (correlation, start) and
    per op; the links are the same (ties between equal ops aside: none in these traces)."""
    events = real_trace.events
    if len(events.cpu) < 2 or not len(events.gpu.ts):
        pytest.skip("no CPU rows to reorder")
    table = np.concatenate([np.zeros(0, dtype=ROW), *events.cpu.blocks()])
    backwards = replace(events, cpu=CpuRows((ArrayRows(table[::-1].copy()),)))
    want, got = link_ops(events), link_ops(backwards)
    for field in ("leaf", "top", "thread", "launch", "launch_ns"):
        assert getattr(got, field).tolist() == getattr(want, field).tolist(), field


@given(
    st.lists(st.integers(0, 40), max_size=40),
    st.lists(st.integers(-2, 45), max_size=30),
    st.integers(0, 40),
)
def test_last_reaching_is_the_last_end_at_or_after_the_point(
    ends: list[int], points: list[int], steps: int
) -> None:
    """Stepping back and the halving that takes over after ``steps`` steps find the same."""
    end = np.array(ends, dtype=np.int64)
    point = np.array(points, dtype=np.int64)
    rng = np.random.default_rng(len(ends) * 41 + len(points))
    last = rng.integers(-1, len(ends), len(points)) if len(ends) else np.full(len(points), -1)
    want = [
        max((i for i in range(int(j) + 1) if ends[i] >= p), default=-1)
        for j, p in zip(last.tolist(), points, strict=True)
    ]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(oplinks, "_STEPS", steps)
        assert oplinks._last_reaching(end, last, point).tolist() == want


def test_leaf_only_links_are_the_full_links_leaf(real_trace: RealTrace) -> None:
    """``with_top=False`` (steps) keeps less, not other values: the leaf ops, their shapes,
    the launches and their threads are those of the full links, also from the CPU rows
    backwards (the searches by (correlation, start) and per op)."""
    events = real_trace.events
    if not len(events.gpu.ts):
        pytest.skip("no GPU rows")
    table = np.concatenate([np.zeros(0, dtype=ROW), *events.cpu.blocks()])
    backwards = replace(events, cpu=CpuRows((ArrayRows(table[::-1].copy()),)))
    for trace in (events, backwards):
        want, got = link_ops(trace), link_ops(trace, with_top=False)
        for field in ("leaf", "leaf_shape", "thread", "launch"):
            assert getattr(got, field).tolist() == getattr(want, field).tolist(), field
        n = len(events.gpu.ts)
        assert got.top.tolist() == [NO_OP] * n
        assert got.top_shape is not None and got.top_shape.tolist() == [NO_SHAPE] * n
        assert got.launch_ns.tolist() == [NO_LAUNCH] * n


def test_launch_durations_are_the_launching_calls_own(real_trace: RealTrace) -> None:
    """Per GPU row, its launching call's end − start (the earliest call with its id, the
    first in the file among equal starts), worked out call by call; ``no_call`` where none.
    The same from the CPU rows backwards (the search by (correlation, start))."""
    events = real_trace.events
    if not len(events.gpu.ts):
        pytest.skip("no GPU rows")
    table = np.concatenate([np.zeros(0, dtype=ROW), *events.cpu.blocks()])
    first: dict[int, tuple[int, int]] = {}
    for ts, end, correlation in zip(
        table["ts"].tolist(), table["end"].tolist(), table["correlation"].tolist(), strict=True
    ):
        if correlation >= 0 and (correlation not in first or ts < first[correlation][0]):
            first[correlation] = (ts, end)
    want = [
        (first[c][1] - first[c][0]) if c in first else None for c in events.gpu.correlation.tolist()
    ]
    backwards = replace(events, cpu=CpuRows((ArrayRows(table[::-1].copy()),)))
    for trace in (events, backwards):
        got = link_ops(trace, with_top=False, with_end=True).launch_ns
        none = oplinks.no_call(got)
        assert [None if v == none else v for v in got.tolist()] == want
        assert got.dtype == np.int32  # every call here is shorter than 2.1 s


def test_launch_durations_are_int32_only_where_every_one_fits() -> None:
    """int32 with its least value for none where every duration fits above it; else the
    int64 durations as they were (NO_LAUNCH for none)."""
    fits = np.array([5, NO_LAUNCH, 2**31 - 1, -(2**31) + 1, 0], dtype=np.int64)
    got = oplinks._durations(fits)
    assert got.dtype == np.int32
    assert got.tolist() == [5, -(2**31), 2**31 - 1, -(2**31) + 1, 0]
    assert oplinks.no_call(got) == -(2**31)
    for wide in (2**31, -(2**31)):
        values = np.array([5, NO_LAUNCH, wide], dtype=np.int64)
        got = oplinks._durations(values)
        assert got.dtype == np.int64 and got.tolist() == values.tolist()
        assert oplinks.no_call(got) == NO_LAUNCH
    assert oplinks._durations(np.full(3, NO_LAUNCH)).tolist() == [-(2**31)] * 3


def test_launch_threads_are_int16_only_where_every_thread_fits(real_trace: RealTrace) -> None:
    """The launches' threads are int16 where the trace's thread ids all fit (2 B a GPU row
    held through summary), else int32: the same ids either way."""
    events = real_trace.events
    links = link_ops(events)
    assert links.thread.dtype == np.int16
    many = replace(events, threads=[*events.threads, *[("", -1)] * 2**15])
    wide = link_ops(many)
    assert wide.thread.dtype == np.int32
    assert wide.thread.tolist() == links.thread.tolist()
