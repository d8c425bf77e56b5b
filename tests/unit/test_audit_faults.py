"""The audit's pass-at-a-time numbers (analyses.core.faults) against their definitions worked
out row by row on random columns (passes of a few rows, so that groups and ties cross them);
its runtime calls against the CPU rows' own."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from conftest import ROOT

from traceview.analyses.core import faults
from traceview.analyses.core.faults import (
    NO_END,
    carried,
    earlier_ends,
    group_order,
    order_faults,
    runtime_calls,
)
from traceview.app.reading import read_trace
from traceview.columns.schema import RuntimeColumns
from traceview.options import ReadOptions


def _columns(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Group, start, duration and id columns with many ties and a few groups."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 120))
    group = rng.integers(0, int(rng.integers(1, 5)), n).astype(np.int32)
    ts = rng.integers(0, 40, n).astype(np.int64) * int(rng.choice([1, 1000]))
    dur = rng.integers(0, 30, n).astype(np.int64)
    correlation = rng.integers(-1, 50, n).astype(np.int64)
    return group, ts, dur, correlation


def _earlier_end(group: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> list[int]:
    """Per row: the latest end of the rows of its group starting before it (or at its start
    and earlier in the column), NO_END when none."""
    out = []
    for i in range(len(ts)):
        ends = [
            int(ts[j] + dur[j])
            for j in range(len(ts))
            if group[j] == group[i] and (ts[j] < ts[i] or (ts[j] == ts[i] and j < i))
        ]
        out.append(max(ends, default=NO_END))
    return out


def _order_faults(group: np.ndarray, ts: np.ndarray, correlation: np.ndarray) -> list[int]:
    """Rows with an id (> 0) lower than the one before them in their group, taken by start,
    id and row; in that order."""
    rows = sorted(
        (i for i in range(len(ts)) if correlation[i] > 0),
        key=lambda i: (int(group[i]), int(ts[i]), int(correlation[i]), i),
    )
    return [
        b for a, b in itertools.pairwise(rows)
        if group[a] == group[b] and correlation[b] < correlation[a]
    ]  # fmt: skip


@pytest.mark.parametrize("seed", range(60))
def test_earlier_ends_and_order_faults_match_their_definitions(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(faults, "_PASS", 7)
    group, ts, dur, correlation = _columns(seed)
    one = len(np.unique(group)) <= 1
    for key in (group, None) if one else (group,):
        got = np.full(len(ts), NO_END, dtype=np.int64)
        for at, before in earlier_ends(group_order(key, ts), key, ts, dur):
            got[at] = before
        assert got.tolist() == _earlier_end(group, ts, dur)
    assert order_faults(group, ts, correlation).tolist() == _order_faults(group, ts, correlation)


def test_earlier_ends_take_the_previous_row_alone_where_offsets_do_not_fit() -> None:
    """Ends spread over more than 2^62 / groups: the previous row's end of the group only
    (what the whole-column running maximum did)."""
    group = np.array([0, 1, 0, 1, 0], dtype=np.int32)
    ts = np.array([0, 0, 2**61, 2**61, 2**61 + 5], dtype=np.int64)
    dur = np.array([2**61 + 100, 1, 1, 1, 1], dtype=np.int64)
    got = np.full(5, NO_END, dtype=np.int64)
    for at, before in earlier_ends(group_order(group, ts), group, ts, dur):
        got[at] = before
    assert got.tolist() == [NO_END, NO_END, 2**61 + 100, 1, 2**61 + 1]


def test_runtime_calls_are_the_cpu_rows_calls_whether_or_not_the_runtime_columns_match() -> None:
    """The calls' columns equal the CPU rows' calls taken directly, sharing the runtime
    columns when they hold the same calls, copied when they do not (ids changed)."""
    options = ReadOptions(quiet=True, cache=False)
    demo = ROOT / "fixtures" / "demo.json.gz"
    events = read_trace(demo, options, keep_cpu=True, remember=False, warn=False)
    every = np.concatenate(list(events.cpu.blocks()))
    rows = every[every["correlation"] >= 0]
    changed = RuntimeColumns(events.runtime.correlation + 1, events.runtime.ts)
    for trace, shared in ((events, True), (replace(events, runtime=changed), False)):
        calls = runtime_calls(trace)
        assert (calls.correlation is trace.runtime.correlation) == shared
        assert calls.correlation.tolist() == rows["correlation"].tolist()
        assert calls.ts.tolist() == rows["ts"].tolist()
        assert calls.dur.tolist() == (rows["end"] - rows["ts"]).tolist()
        assert calls.name.tolist() == rows["name"].tolist()
        assert calls.thread.tolist() == rows["thread"].tolist()
        assert calls.cpu_span == (int(every["ts"].min()), int(every["end"].max()))


def test_carried_is_isin_over_the_known_keys() -> None:
    """The bit table (a range of keys) and the search (a range too wide for it) against
    np.isin: keys < 0 carry nothing, ids outside the keys' range, every bit of a byte."""
    rng = np.random.default_rng(43)
    for width in (1, 8, 9, 1000, 10**9):
        for _ in range(20):
            n = int(rng.integers(0, 200))
            keys = rng.integers(-3, width, n) + int(rng.integers(0, 100))
            ids = rng.integers(-5, width + 110, int(rng.integers(0, 300)))
            want = np.isin(ids, keys[keys >= 0])
            assert carried(keys, ids).tolist() == want.tolist()
