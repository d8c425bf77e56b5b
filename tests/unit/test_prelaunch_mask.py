"""launched_mask remembers its last answer only for the very same columns."""

from __future__ import annotations

import gc
from types import SimpleNamespace
from typing import Any

import numpy as np

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
