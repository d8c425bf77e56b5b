"""The report's timeline: busy ns per bin against a per-bin walk over each segment's union,
and on the demo trace against the devices' busy time of the summary."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import RealTrace
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.reference import union_length_ns
from traceview.analyses import timeline
from traceview.analyses.core import devices
from traceview.analyses.core.devices import device_gaps, first_launch, name_rank
from traceview.analyses.timeline import (
    bin_edges,
    busy_per_bin,
    pick_step,
    step_work,
    utilisation,
)
from traceview.errors import TraceviewError

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo.json.gz"


def _reference(
    intervals: list[tuple[int, int, int]], segments: int, edges: list[int]
) -> list[list[int]]:
    """Per segment and bin: the union of the segment's intervals clipped to the bin."""
    out = []
    for s in range(segments):
        mine = [(a, b) for seg, a, b in intervals if seg == s]
        row = []
        for lo, hi in pairwise(edges):
            clipped = [(max(a, lo), min(b, hi)) for a, b in mine if min(b, hi) > max(a, lo)]
            row.append(union_length_ns(clipped))
        out.append(row)
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1000), st.integers(0, 300)), max_size=40),
    st.integers(1, 30),
)
def test_busy_per_bin_equals_a_walk_per_bin(raw: list[tuple[int, int, int]], bins: int) -> None:
    intervals = [(s, a, a + d) for s, a, d in raw]
    edges = bin_edges(0, 1300, bins)
    seg = np.array([i[0] for i in intervals], dtype=np.int64)
    a = np.array([i[1] for i in intervals], dtype=np.int64)
    b = np.array([i[2] for i in intervals], dtype=np.int64)
    got = busy_per_bin(seg, a, b, 4, edges)
    assert got.tolist() == _reference(intervals, 4, edges.tolist())


def test_bins_cover_the_span_in_near_equal_parts() -> None:
    edges = bin_edges(10, 10 + 1003, 10)
    assert edges[0] == 10 and edges[-1] == 1013
    assert set(np.diff(edges).tolist()) <= {100, 101}


def test_demo_device_rows_add_up_to_the_summary_busy_time() -> None:
    from traceview.analyses.core.trace import summarize
    from traceview.app.commands import ReadOptions, read_trace

    events = read_trace(DEMO, ReadOptions(quiet=True))
    util = utilisation(events)
    busy = {d.device: d.busy_ns for d in summarize(events).devices}
    rows = {r.device: int(r.busy.sum()) for r in util.rows if r.stream is None}
    assert rows == busy
    assert len(util.edges) == 1001
    streams = [r for r in util.rows if r.stream is not None]
    assert streams and all(int(r.busy.sum()) > 0 for r in streams)


def test_step_work_is_the_steps_gpu_work_and_capped_when_asked() -> None:
    from traceview.analyses.core.steps import step_table
    from traceview.app.commands import ReadOptions, read_trace

    events = read_trace(DEMO, ReadOptions(quiet=True))
    rows = step_table(events)
    median = sorted(r.step for r in rows)[(len(rows) + 1) // 2 - 1]
    assert pick_step(events, None) == median
    work = step_work(events, median)
    row = next(r for r in rows if r.step == median)
    assert work.total >= row.kernels and not work.capped
    assert work.start_ns == min(d.start_ns for d in row.devices)
    small = step_work(events, median, cap=10)
    assert small.capped and len(small.ts) == 10 and small.total == work.total
    assert sorted(small.dur.tolist()) == sorted(work.dur.tolist())[-10:]
    with pytest.raises(TraceviewError, match="no such step"):
        pick_step(events, 999)


def test_device_rows_from_the_device_gaps_are_those_of_the_unions(real_trace: RealTrace) -> None:
    events = real_trace.events
    if not (events.gpu.dur > 0).any():
        pytest.skip("no GPU activity")
    launch, rank = first_launch(events), name_rank(events.names)
    usage, gaps = device_gaps(events, np.arange(len(events.gpu.ts)), launch, rank)
    alone, shared = utilisation(events, 300), utilisation(events, 300, usage, gaps)
    assert [(r.device, r.stream) for r in shared.rows] == [(r.device, r.stream) for r in alone.rows]
    assert all(
        a.busy.tolist() == b.busy.tolist() for a, b in zip(alone.rows, shared.rows, strict=True)
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 1000), st.integers(-20, 300)), max_size=40
    ),
    st.integers(1, 30),
    st.sampled_from([1, 2, 5, 1 << 16]),
)
def test_union_bins_in_passes_equal_a_walk_per_bin(
    raw: list[tuple[int, int, int]], bins: int, size: int
) -> None:
    """Each stream's union cut into bins, its rows taken a pass at a time in (stream, start)
    order (the open piece carried from pass to pass); rows of no positive length left out."""
    edges = bin_edges(0, 1300, bins)
    gpu = SimpleNamespace(
        stream=np.array([r[0] for r in raw], dtype=np.int32),
        ts=np.array([r[1] for r in raw], dtype=np.int64),
        dur=np.array([r[2] for r in raw], dtype=np.int64),
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(devices, "_PASS", size)  # busy_in_order's passes
        got = timeline._union_bins(SimpleNamespace(gpu=gpu), None, 4, edges)  # type: ignore[arg-type]
    busy = [(s, a, a + d) for s, a, d in raw if d > 0]
    assert got.tolist() == _reference(busy, 4, edges.tolist())
