"""The report's per-step breakdown, its unions made a pass of rows at a time, against a plain
reading of its definition (docs/metrics.md "Steps: where each step's time went"): per step
window and device, the union of the compute rows, of all but the copies and of every busy
row inside the window, and the union of the gaps' host-wait stretches."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.reference import union_length_ns
from traceview.analyses import step_breakdown as breakdown
from traceview.analyses.core import devices
from traceview.analyses.core.categories import CATEGORIES
from traceview.analyses.core.devices import GapSet
from traceview.columns.model import StreamKey
from traceview.columns.schema import KERNEL, MEMCPY, MEMSET

COMM = CATEGORIES.index("communication")
STREAMS = [StreamKey(0, 7), StreamKey(0, 9), StreamKey(1, 7)]


def _inside(intervals: list[tuple[int, int]], a: int, b: int) -> int:
    return union_length_ns([(max(s, a), min(e, b)) for s, e in intervals if min(e, b) > max(s, a)])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),  # stream
            st.integers(0, 500),  # start
            st.integers(-5, 80),  # duration
            st.sampled_from([KERNEL, KERNEL, MEMCPY, MEMSET]),
            st.sampled_from([0, COMM]),  # category
        ),
        max_size=30,
    ),
    st.lists(st.tuples(st.integers(0, 1), st.integers(0, 500), st.integers(0, 60)), max_size=8),
    st.lists(st.tuples(st.integers(0, 500), st.integers(0, 200)), min_size=1, max_size=4),
    st.sampled_from([1, 3, 1 << 16]),
)
def test_breakdown_against_each_window(
    rows: list[tuple[int, ...]],
    waits: list[tuple[int, int, int]],
    windows: list[tuple[int, int]],
    size: int,
) -> None:
    gpu = SimpleNamespace(
        stream=np.array([r[0] for r in rows], dtype=np.int32),
        ts=np.array([r[1] for r in rows], dtype=np.int64),
        dur=np.array([r[2] for r in rows], dtype=np.int64),
        kind=np.array([r[3] for r in rows], dtype=np.int8),
    )
    category = np.array([r[4] for r in rows], dtype=np.int8)
    events: Any = SimpleNamespace(gpu=gpu, streams=STREAMS)
    waits = sorted(waits)  # as device_gaps makes them: by device, then start
    n = len(waits)
    gaps = GapSet(
        np.array([w[0] for w in waits], dtype=np.int32),
        np.zeros(0, dtype=np.int32),
        np.zeros(n, dtype=np.int32),
        np.array([w[2] for w in waits], dtype=np.int64),
        gpu.ts,
        gpu.dur,
        None,
        np.array([w[1] for w in waits], dtype=np.int64),
    )
    steps: Any = [
        SimpleNamespace(step=i, cpu_start_ns=a, cpu_end_ns=a + d, devices=[])
        for i, (a, d) in enumerate(windows)
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(breakdown, "_PASS", size)
        patch.setattr(devices, "_PASS", size)  # busy_in_order's passes
        got = breakdown.step_breakdown(events, steps, category, gaps).rows
    want = []
    for i, (a, d) in enumerate(windows):
        b = a + d
        for device in (0, 1):
            busy = [r for r in rows if STREAMS[r[0]].device == device and r[2] > 0]
            copy = [r for r in busy if r[3] != KERNEL]
            compute = [(r[1], r[1] + r[2]) for r in busy if r not in copy and r[4] != COMM]
            not_copy = [(r[1], r[1] + r[2]) for r in busy if r not in copy]
            every = [(r[1], r[1] + r[2]) for r in busy]
            host = [(w[1], w[1] + w[2]) for w in waits if w[0] == device]
            c, nc, e = (_inside(x, a, b) for x in (compute, not_copy, every))
            h = _inside(host, a, b)
            want.append((i, device, d, c, nc - c, e - nc, h, d - e - h))
    # each step shows the devices it ran on; with none listed, none (two devices here)
    assert [tuple(vars(r).values()) for r in got] == []
    table = {(i, dev): parts for i, dev, *parts in want}
    assert table  # the reference itself made
    for i in range(len(windows)):
        for device in (0, 1):
            steps[i].devices.append(SimpleNamespace(device=device))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(breakdown, "_PASS", size)
        patch.setattr(devices, "_PASS", size)  # busy_in_order's passes
        got = breakdown.step_breakdown(events, steps, category, gaps).rows
    assert [(r.step, r.device, r.window_ns, r.compute_ns, r.communication_ns,
             r.memcpy_memset_ns, r.host_wait_ns, r.other_idle_ns) for r in got] == [
        (i, dev, *parts) for (i, dev), parts in table.items()
    ]  # fmt: skip


def test_host_waits_out_of_order_are_merged_per_device() -> None:
    """Gaps not by (device, start): each device's stretches sorted and merged instead."""
    ts = np.zeros(0, dtype=np.int64)
    gaps = GapSet(
        np.array([1, 0, 1], dtype=np.int32),
        np.zeros(0, dtype=np.int32),
        np.zeros(3, dtype=np.int32),
        np.array([10, 5, 10], dtype=np.int64),
        ts,
        ts,
        None,
        np.array([50, 0, 55], dtype=np.int64),
    )
    assert not breakdown._in_order(gaps)
    seen: list[tuple[int, list[int], list[int], list[int]]] = []
    breakdown._host_waits(gaps, lambda part, p: seen.append((part, *(x.tolist() for x in p))))
    assert seen == [(3, [0], [0], [5]), (3, [1], [50], [65])]


def test_gaps_of_one_device_out_of_start_order_are_not_in_order() -> None:
    ts = np.zeros(0, dtype=np.int64)
    none = np.zeros(0, dtype=np.int32)
    starts = np.array([50, 0], dtype=np.int64)
    gaps = GapSet(np.zeros(2, dtype=np.int32), none, np.zeros(2, dtype=np.int32),
                  np.array([1, 1], dtype=np.int64), ts, ts, None, starts)  # fmt: skip
    assert not breakdown._in_order(gaps)
    assert breakdown._in_order(gaps.take(np.array([1, 0])))
