"""The quantile sketch: within ALPHA of the exact nearest-rank percentile; merge = the sketch
of the concatenation, however the values are split."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from traceview.aggregate import sketch
from traceview.aggregate.percentiles import nearest_rank

GROUPS = 5
PCTS = (1, 50, 90, 99, 100)


@st.composite
def grouped_values(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """ns values over a wide range (0 included) with group ids, plus cut points."""
    n = draw(st.integers(0, 120))
    values = draw(
        st.lists(
            st.one_of(st.integers(0, 2000), st.integers(0, 10**12), st.sampled_from([0, 1, 2])),
            min_size=n,
            max_size=n,
        )
    )
    groups = draw(st.lists(st.integers(0, GROUPS - 1), min_size=n, max_size=n))
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=6)))
    return np.array(groups, dtype=np.int64), np.array(values, dtype=np.int64), cuts


def _slow_percentile(values: list[int], p: int) -> int:
    """Nearest rank, by hand: sorted(values)[ceil(p·n/100) − 1]."""
    ordered = sorted(values)
    rank = max(1, -(-p * len(ordered) // 100))
    return ordered[rank - 1]


@settings(max_examples=80, deadline=None)
@given(data=grouped_values())
def test_error_bound(data: tuple[np.ndarray, np.ndarray, list[int]]) -> None:
    group, values, _ = data
    got = sketch.quantiles(sketch.of_values(group, values), GROUPS, PCTS)
    exact = nearest_rank(group, values, GROUPS, PCTS)
    for g in range(GROUPS):
        mine = values[group == g].tolist()
        for p in PCTS:
            want = _slow_percentile(mine, p) if mine else 0
            assert exact[p][g] == want
            assert abs(got[p][g] - want) <= sketch.ALPHA * want * (1 + 1e-9), (g, p)


@settings(max_examples=80, deadline=None)
@given(data=grouped_values(), reverse=st.booleans())
def test_merge_is_sketch_of_concatenation(
    data: tuple[np.ndarray, np.ndarray, list[int]], reverse: bool
) -> None:
    group, values, cuts = data
    parts = [
        sketch.of_values(group[lo:hi], values[lo:hi])
        for lo, hi in zip([0, *cuts], [*cuts, len(values)], strict=True)
    ]
    if reverse:
        parts.reverse()
    merged = sketch.empty()
    for part in parts:
        merged = sketch.merge(merged, part)
    whole = sketch.of_values(group, values)
    for field in ("group", "bucket", "count"):
        assert np.array_equal(getattr(merged, field), getattr(whole, field))
    assert int(merged.count.sum()) == len(values)


def test_regroup_merges_groups() -> None:
    a = sketch.of_values(np.array([0, 1, 2]), np.array([10, 10, 1000]))
    both = sketch.regroup(a, np.array([0, 0, 1]))
    assert both.count.tolist() == [2, 1]
    assert both.group.tolist() == [0, 1]


def test_zero_and_bucket_edges() -> None:
    edges = np.array([0, 1, round(sketch.GAMMA**100), round(sketch.GAMMA**1000)], np.int64)
    estimate = sketch.value_of(sketch.bucket_of(edges))
    assert estimate[0] == 0.0
    assert np.all(np.abs(estimate - edges) <= sketch.ALPHA * edges * (1 + 1e-9))
