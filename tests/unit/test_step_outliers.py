"""Outlier steps (docs/metrics.md): checked against the definition written out by hand."""

from __future__ import annotations

import statistics

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from traceview.aggregate.percentiles import median
from traceview.analyses.step_outliers import outliers


def test_one_slow_step_among_steady_ones() -> None:
    assert outliers([100, 101, 99, 100, 180, 100]) == [False] * 4 + [True, False]


def test_alike_steps_flag_nothing_and_few_steps_never() -> None:
    assert outliers([50.0] * 8) == [False] * 8
    assert outliers([1.0, 1000.0]) == [False, False]


@given(st.lists(st.floats(0, 1e6), min_size=3, max_size=30))
def test_matches_the_definition(times: list[float]) -> None:
    median = statistics.median(times)
    mad = statistics.median([abs(t - median) for t in times])
    limit = 3 * 1.4826 * max(mad, 0.02 * median)
    assert outliers(times) == [abs(t - median) > limit for t in times]


@given(st.lists(st.floats(-1e300, 1e300) | st.integers(0, 5).map(float), min_size=1, max_size=30))
def test_median_is_numpys_to_the_last_bit(values: list[float]) -> None:
    t = np.asarray(values, dtype=np.float64)
    assert median(t) == float(np.median(t))
