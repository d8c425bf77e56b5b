"""The step table of windows one after another, taken a pass of GPU rows at a time, equals
the one of every window's rows at once (the general path, kept for nested windows)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from traceview.analyses.core import steps as steps_module
from traceview.analyses.core.devices import device_of_stream, launch_times
from traceview.analyses.core.steps import StepRow, step_table, step_windows
from traceview.columns.model import StepWindow, StreamKey, TraceEvents
from traceview.columns.schema import GpuColumns, RuntimeColumns
from traceview.read.reader import ReadStats

STREAMS = [StreamKey(0, 7), StreamKey(0, 8), StreamKey(1, 7), StreamKey("cpu", 3)]


def _events(seed: int, rows: int, gpu_only: bool, in_order: bool) -> TraceEvents:
    """Random GPU rows on four streams of three devices, most launched by a runtime call
    (some on a step's edge, some before the trace's first launch), and steps back to back
    or apart."""
    rng = np.random.default_rng(seed)
    starts = np.cumsum(rng.integers(50, 400, 12))
    ends = starts + rng.integers(10, 400, 12)
    ends[:-1] = np.minimum(ends[:-1], starts[1:])  # one after another, some back to back
    ends[3] = starts[4]
    launch = rng.integers(int(starts[0]) - 100, int(ends[-1]) + 100, rows)
    edges = rng.choice(rows, rows // 10, replace=False)
    launch[edges] = starts[rng.integers(1, 12, len(edges))]  # on a window's edge
    if in_order:
        launch.sort()
    ts = launch + rng.integers(0, 300, rows)
    dur = rng.integers(0, 200, rows)
    dur[rng.choice(rows, rows // 8, replace=False)] = 0
    correlation = np.arange(rows, dtype=np.int64) + 10
    unlaunched = rng.choice(rows, rows // 6, replace=False)
    calls = np.setdiff1d(np.arange(rows), unlaunched)
    ts[unlaunched[: len(unlaunched) // 2]] = int(launch.min()) - 500  # before the first
    gpu = GpuColumns(
        kind=rng.integers(0, 3, rows).astype(np.int8),
        name=np.zeros(rows, dtype=np.int32),
        stream=rng.integers(0, len(STREAMS), rows).astype(np.int32),
        ts=ts.astype(np.int64),
        dur=dur.astype(np.int64),
        correlation=correlation,
        launch=np.zeros(rows, dtype=np.int32),
    )
    runtime = RuntimeColumns(correlation[calls], launch[calls].astype(np.int64))
    windows = [
        StepWindow(i + 3, int(a), int(b), gpu_only)
        for i, (a, b) in enumerate(zip(starts, ends, strict=True))
    ]
    rng.shuffle(windows)  # numbered apart from their order in time
    return TraceEvents(
        path="hand-made.json",
        size_bytes=0,
        header={},
        read=ReadStats(events=rows),
        names=["k"],
        streams=STREAMS,
        gpu=gpu,
        runtime=runtime,
        steps=windows,
        span_ns=(int(ts.min()), int((ts + dur).max())),
        quality=Counter(),
        launches=[(-1,) * 9],
    )


def _both(events: TraceEvents, monkeypatch: pytest.MonkeyPatch) -> tuple[list[StepRow], ...]:
    windows = step_windows(events)
    launch = launch_times(events)
    index, values = device_of_stream(events)
    taken = steps_module._figures_in_passes(
        events, list(windows.values()), launch, index, len(values)
    )
    assert taken is not None  # windows one after another: taken a pass at a time
    passes = step_table(events)
    with monkeypatch.context() as m:
        m.setattr(steps_module, "_figures_in_passes", lambda *_: None)
        at_once = step_table(events)
    return passes, at_once


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("gpu_only", [False, True])
@pytest.mark.parametrize("in_order", [False, True])
@pytest.mark.parametrize("keys_at_once", [1 << 19, 120, 1])
def test_passes_give_the_table_of_all_rows_at_once(
    seed: int, gpu_only: bool, in_order: bool, keys_at_once: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # small passes: rows cross passes, and a pass's points come in order or in many runs;
    # keys for all rows at once, or a group of windows (or one) at a time
    monkeypatch.setattr(steps_module, "_PASS", 64)
    monkeypatch.setattr(steps_module, "_KEYS_AT_ONCE", keys_at_once)
    events = _events(seed, 900, gpu_only, in_order)
    passes, at_once = _both(events, monkeypatch)
    assert passes == at_once
    assert sum(r.kernels for r in passes) > 0
    assert any(len(r.devices) > 1 for r in passes)


def test_nested_windows_take_the_general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    events = _events(1, 300, False, True)
    outer = StepWindow(99, events.steps[0].start_ns - 10, events.steps[0].end_ns + 10, False)
    nested = TraceEvents(**{**events.__dict__, "steps": [*events.steps, outer]})
    windows = step_windows(nested)
    index, values = device_of_stream(nested)
    launch = launch_times(nested)
    assert steps_module._figures_in_passes(nested, list(windows.values()), launch, index, 4) is None
    assert len(values) == 3
    assert [r.step for r in step_table(nested)] == sorted(windows)
