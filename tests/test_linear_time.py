"""Time linear in the input (issue #21): doubling a case at most ~2.5x the time.

Generous ratio checks measured in one run (best of 3 each), at sizes where a per-group or
per-step pass over all rows, or a step range expanded into a set, would be far over.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from conftest import load_generator

from traceview import run
from traceview.analyses.kernels import KernelOptions, analyse_kernels
from traceview.analyses.names import short_name
from traceview.events import TraceEvents

MAX_RATIO = 2.5
gen = load_generator()


N = 100_000  # kernels, all names distinct; and twice as many


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[int, TraceEvents]:
    """Traces of N and 2N kernel launches, every launch under its own name."""
    out = {}
    for n in (N, 2 * N):
        path = tmp_path_factory.mktemp("linear") / "t.json"
        gen.write_scale_trace(path, kernels=n, names=n)
        out[n] = run.read_trace(path, run.ReadOptions(quiet=True, cache=False))
    return out


def _best(action: Callable[[], object]) -> float:
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        action()
        times.append(time.perf_counter() - t0)
    return min(times)


def _ratio(traces: dict[int, TraceEvents], action: Callable[[TraceEvents], object]) -> float:
    """Time of the action on 2N launches over its time on N."""
    return _best(lambda: action(traces[2 * N])) / _best(lambda: action(traces[N]))


@pytest.mark.parametrize("sort", ["duration-percentage", "count", "name"])
def test_kernels_with_all_names_distinct_is_linear(
    traces: dict[int, TraceEvents], sort: str
) -> None:
    """All rows tie on count; the top 10 need neither a row per name nor a full sort."""
    assert _ratio(traces, lambda e: analyse_kernels(e, KernelOptions(sort=sort))) <= MAX_RATIO


def test_kernels_group_by_short_with_many_names_is_linear(
    traces: dict[int, TraceEvents],
) -> None:
    def action(events: TraceEvents) -> object:
        short_name.cache_clear()  # each run pays for its short names
        return analyse_kernels(events, KernelOptions(group_by="short", top=0))

    assert _ratio(traces, action) <= MAX_RATIO
