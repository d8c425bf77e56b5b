"""The checked int64 sums (aggregate.sums) against Python ints: exact or refused, never
wrapped."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceview.aggregate import moments, sums
from traceview.aggregate.intervals import sums_by_run

_END = 2**63
_values = st.lists(st.integers(-(2**62), 2**62), max_size=40)


@settings(max_examples=300, deadline=None)
@given(_values, st.integers(1, 5))
def test_group_sums_are_exact_or_refused(values: list[int], groups: int) -> None:
    array = np.array(values, dtype=np.int64)
    group = np.arange(len(values)) % groups
    if sum(abs(v) for v in values) >= _END:
        with pytest.raises(sums.SumOverflow):
            sums.by_group(group, array, groups)
        with pytest.raises(sums.SumOverflow):
            sums.total(array)
        return
    expected = [sum(values[g::groups]) for g in range(groups)]
    assert sums.by_group(group, array, groups).tolist() == expected
    assert sums.total(array) == sum(values)
    running = [sum(values[: i + 1]) for i in range(len(values))]
    assert sums.cumsum(array).tolist() == running
    if values:
        starts = np.arange(0, len(values), 3)
        expected = [sum(values[i : i + 3]) for i in range(0, len(values), 3)]
        assert sums.reduceat(array, starts).tolist() == expected


def test_numpy_alone_wraps_where_the_helpers_refuse() -> None:
    """The case the helpers exist for: 8 values of 2^61 ns sum to 0 in numpy's int64."""
    array = np.full(8, 2**61, dtype=np.int64)
    assert int(array.sum()) == 0  # numpy wraps silently
    for summed in (
        lambda: sums.total(array),
        lambda: sums.by_group(np.zeros(8, dtype=np.int64), array, 1),
        lambda: sums.reduceat(array, np.array([0])),
        lambda: sums.cumsum(array),
        lambda: sums_by_run(np.zeros(8, dtype=np.int64), array, 1),
        lambda: moments.extremes(np.zeros(8, dtype=np.int64), array, 1),
    ):
        with pytest.raises(sums.SumOverflow, match="more than int64 ns hold"):
            summed()


def test_a_large_value_among_small_ones_takes_the_exact_path() -> None:
    """max × n ≥ 2^63 but the exact sum fits: summed, not refused."""
    values = [2**62] + [1] * 3
    assert sums.total(np.array(values, dtype=np.int64)) == 2**62 + 3


def test_merged_moments_refuse_a_wrapped_total() -> None:
    """Two ranks' totals of 2^62 ns each: merged, 2^63, which int64 cannot hold."""
    one = moments.accumulate(np.zeros(2, dtype=np.int64), np.full(2, 2**61, np.int64), 1)
    assert int(one.total[0]) == 2**62
    with pytest.raises(sums.SumOverflow):
        moments.merge(one, one)
    small = moments.accumulate(np.zeros(1, dtype=np.int64), np.full(1, 5, np.int64), 1)
    assert int(moments.merge(one, small).total[0]) == 2**62 + 5


def test_narrow_values_are_summed_in_int64() -> None:
    """int32 values (the gaps' host waits where each fits) whose sums pass int32's range are
    summed exactly, in int64, by every helper."""
    values = np.full(6, 2**30, dtype=np.int32)
    assert sums.reduceat(values, np.array([0, 3])).tolist() == [3 * 2**30, 3 * 2**30]
    assert sums.total(values) == 6 * 2**30
    assert sums.cumsum(values).tolist()[-1] == 6 * 2**30
    for group in (np.zeros(6, dtype=np.int64), np.array([0, 1, 0, 1, 0, 1])):  # runs, or not
        together = sums.GroupSums(2)
        together.add(group, values)
        assert together.out.tolist() == sums.by_group(group, values, 2).tolist()
        assert sum(together.out.tolist()) == 6 * 2**30
