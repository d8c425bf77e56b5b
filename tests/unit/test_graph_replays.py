"""audit's graph replays (the kernels each graph launch ran), taken a pass of GPU rows at a
time, against a plain grouping of every row: each replay's kernels, their time, start, and
first and last kernel by (start, row)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceview.analyses import audit
from traceview.columns.schema import KERNEL, GpuColumns


def _plain(gpu: GpuColumns, graph_ids: np.ndarray) -> list[tuple[int, ...]]:
    by: dict[int, list[int]] = {}
    for row in range(len(gpu.ts)):
        c = int(gpu.correlation[row])
        if int(gpu.kind[row]) == KERNEL and c in set(graph_ids.tolist()):
            by.setdefault(c, []).append(row)
    out: list[tuple[int, ...]] = []
    for c in sorted(by):
        rows = sorted(by[c], key=lambda r: (int(gpu.ts[r]), r))
        dur = sum(int(gpu.dur[r]) for r in rows)
        out.append((c, len(rows), dur, int(gpu.ts[rows[0]]), rows[0], rows[-1]))
    return out


@st.composite
def _gpu(draw: Any) -> tuple[GpuColumns, np.ndarray]:
    n = draw(st.integers(0, 80))
    ids = st.integers(-1, 12)

    def column(values: st.SearchStrategy[int]) -> list[int]:
        drawn: list[int] = draw(st.lists(values, min_size=n, max_size=n))
        return drawn

    gpu = GpuColumns(
        kind=np.array(column(st.integers(0, 2)), dtype=np.int8),
        name=np.zeros(n, dtype=np.int32),
        stream=np.zeros(n, dtype=np.int32),
        ts=np.array(column(st.integers(0, 30)), dtype=np.int64),  # ties: several at a start
        dur=np.array(column(st.integers(0, 10**6)), dtype=np.int64),
        correlation=np.array(column(ids), dtype=np.int64),
        launch=np.zeros(n, dtype=np.int32),
    )
    graph_ids = np.array(sorted(set(draw(st.lists(st.integers(0, 14), max_size=8)))))
    return gpu, graph_ids.astype(np.int64)


@settings(max_examples=300, deadline=None)
@given(case=_gpu(), rows_a_pass=st.sampled_from([1, 3, 7, 1 << 16]))
def test_replays_by_pass_are_the_plain_grouping(
    case: tuple[GpuColumns, np.ndarray], rows_a_pass: int
) -> None:
    gpu, graph_ids = case
    with pytest.MonkeyPatch.context() as m:
        m.setattr(audit, "_PASS", rows_a_pass)  # a replay's kernels across passes
        r = audit._replays(gpu, graph_ids)
    got = list(
        zip(
            *(
                a.tolist()
                for a in (r.correlation, r.count, r.kernel_ns, r.started, r.first, r.last)
            ),
            strict=True,
        )
    )
    assert got == _plain(gpu, graph_ids)
