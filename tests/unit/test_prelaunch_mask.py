"""launched_mask remembers its last answer only for the very same columns."""

from __future__ import annotations

import gc
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from traceview.analyses.core import prelaunch


def _events(gpu: np.ndarray, runtime: np.ndarray) -> Any:
    return SimpleNamespace(
        gpu=SimpleNamespace(correlation=gpu), runtime=SimpleNamespace(correlation=runtime)
    )


def test_same_columns_same_mask_other_columns_worked_out_anew() -> None:
    gpu, runtime = np.array([5, 1, 7, 3]), np.array([3, 5])
    first = prelaunch.launched_mask(_events(gpu, runtime))
    assert first.tolist() == [True, False, False, True]
    assert prelaunch.launched_mask(_events(gpu, runtime)) is first  # remembered
    assert not first.flags.writeable  # shared: no caller may change it
    other = np.array([1, 7])  # same gpu column, other launches: not the remembered mask
    assert prelaunch.launched_mask(_events(gpu, other)).tolist() == [False, True, True, False]


def test_the_mask_goes_with_its_columns() -> None:
    gpu, runtime = np.array([2, 4]), np.array([4])
    prelaunch.launched_mask(_events(gpu, runtime))
    del gpu
    gc.collect()
    assert prelaunch._last_mask is None


def test_unordered_launches_searched_a_pass_of_rows_at_a_time_as_isin() -> None:
    rng = np.random.default_rng(7)
    runtime = rng.permutation(3 * prelaunch._PASS)[: 2 * prelaunch._PASS]  # no increasing runs
    gpu = rng.integers(-2, 3 * prelaunch._PASS + 2, size=2 * prelaunch._PASS + 5)
    mask = prelaunch.launched_mask(_events(gpu, runtime))
    assert mask.tolist() == np.isin(gpu, runtime).tolist()


def test_without_runtime_keeps_the_mask_whatever_is_asked_in_between() -> None:
    """The calls Dropped (their count kept) and freed once nothing else holds them; the
    mask the same, served for the new columns after look-ups of other columns; no mask
    worked out anew from no values; gone with the columns."""
    import weakref

    from conftest import ROOT

    from traceview.app.reading import read_trace
    from traceview.columns.schema import ColumnDropped, Dropped, RuntimeColumns
    from traceview.options import ReadOptions

    options = ReadOptions(quiet=True, cache=False)
    events = read_trace(ROOT / "fixtures" / "demo.json.gz", options, remember=False, warn=False)
    half = len(events.runtime.ts) // 2  # half the calls: some GPU rows without theirs
    runtime = RuntimeColumns(
        *(c[:half].copy() for c in (events.runtime.correlation, events.runtime.ts))
    )
    events = replace(events, runtime=runtime)
    del runtime
    want = prelaunch.launched_mask(events).tolist()
    count = len(events.runtime.correlation)
    assert count and any(want) and not all(want)
    calls = weakref.ref(events.runtime.correlation)
    lean = prelaunch.without_runtime(events)
    del events
    gc.collect()
    assert calls() is None
    assert isinstance(lean.runtime.correlation, Dropped) and len(lean.runtime.ts) == count
    prelaunch.launched_mask(_events(np.array([9, 9]), np.array([9])))  # another look-up
    assert prelaunch.launched_mask(lean).tolist() == want
    assert prelaunch.without_runtime(lean) is lean
    with pytest.raises(ColumnDropped):  # other rows against no values: never a guess
        prelaunch.launched_mask(_events(np.array([5]), lean.runtime.correlation))
    del lean
    gc.collect()
    assert not prelaunch._kept
