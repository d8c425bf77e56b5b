"""unique's activities figured a pass of GPU rows at a time: the most frequent value per
activity (``_Tally``, ``_mode``) against a plain count, and whole reports the same whatever
the pass size, on the demo trace and every real trace; sums over an activity's rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, trace_params
from hypothesis import given, settings
from hypothesis import strategies as st

from traceview.analyses import unique
from traceview.columns.parallel import collect_events
from traceview.read.reader import TraceReader
from traceview.render.unique import records


def _plain_mode(pairs: list[tuple[int, int]], groups: int, rank: list[int] | None) -> list[int]:
    out = []
    for g in range(groups):
        counts: dict[int, int] = {}
        for pg, value in pairs:
            if pg == g:
                counts[value] = counts.get(value, 0) + 1
        if not counts:
            out.append(-1)
            continue
        key = (lambda v: rank[v]) if rank is not None else (lambda v: v)
        out.append(min(counts, key=lambda v: (-counts[v], key(v))))
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 9)), max_size=60),
    st.integers(1, 7),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_mode_of_pairs_counted_in_passes(
    pairs: list[tuple[int, int]], size: int, ranked: bool, random: Any
) -> None:
    rank = list(range(10))
    random.shuffle(rank)
    tally = unique._Tally()
    keys = np.array([g * 16 + v for g, v in pairs], dtype=np.int64)
    for lo in range(0, len(keys), size):
        tally.add(keys[lo : lo + size])
    got = unique._mode(tally, 16, 6, np.array(rank) if ranked else None)
    assert got.tolist() == _plain_mode(pairs, 6, rank if ranked else None)


def _traces() -> list[object]:
    return [pytest.param(ROOT / "fixtures" / "demo.json.gz", id="demo"), *trace_params()]


@pytest.mark.parametrize("path", _traces())
def test_report_the_same_whatever_the_pass(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = collect_events(TraceReader(path), keep_cpu=True)
    whole = unique.unique_kernels(events)
    for size in (1, 7, 1000):
        monkeypatch.setattr(unique, "_PASS", size)
        monkeypatch.setattr(unique._Tally, "add", _merging_often(unique._Tally.add))
        report = unique.unique_kernels(events)
        assert records(report) == records(whole)
        assert report.group.tolist() == whole.group.tolist()
        monkeypatch.undo()
    # every row in one activity, and its sums over them
    group = whole.group
    assert len(group) == whole.activities
    ones = np.ones(len(group), dtype=np.int64)
    assert unique.kernel_sums(whole, ones) == [k.count for k in whole.kernels]
    dur = events.gpu.dur
    assert [int(s) for s in unique.kernel_sums(whole, dur)] == [k.total_ns for k in whole.kernels]
    for k in whole.kernels:
        rows = np.flatnonzero(group == k.group)
        assert int(rows[0]) >= 0 and len(rows) == k.count
        assert int(dur[rows].min()) == k.min_ns and int(dur[rows].max()) == k.max_ns


def _merging_often(add: Any) -> Any:
    """``_Tally.add`` merging after every pass (the merge's own path on a small trace)."""

    def merged(self: Any, keys: np.ndarray) -> None:
        add(self, keys)
        self._merge()

    return merged


def test_sums_of_python_ints_are_exact() -> None:
    report = unique.UniqueReport(
        3,
        [_kernel(0), _kernel(1)],
        np.array([1, 0, 1], dtype=np.int32),
    )
    values = np.array([2**70, 5, 2**70 + 1], dtype=object)
    assert unique.kernel_sums(report, values) == [5, 2**71 + 1]


def _kernel(group: int) -> unique.UniqueKernel:
    return unique.UniqueKernel(
        kind="kernel", name="k", launch=(), count=1, total_ns=1, min_ns=1, max_ns=1,
        devices=(), streams=(), category="other", op="", tier=3, group=group,
    )  # fmt: skip
