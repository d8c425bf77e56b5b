"""A phase's median host wait sums, per step, the host wait of the device gaps that start in
the step's CPU window [start, end): worked out a pass of gaps at a time, each pass sorted on
its own; checked against the plain sum over every gap, with passes of a few gaps, windows
that overlap, hold no gap or end before they start, and gaps in no particular order."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from traceview.analyses.core import phase_figures
from traceview.analyses.core.devices import GapSet


def _plain(gaps: list[tuple[int, int]], window: tuple[int, int]) -> int:
    lo, hi = window
    return sum(wait for start, wait in gaps if lo <= start < hi) if lo <= hi else -sum(
        wait for start, wait in gaps if hi <= start < lo
    )  # fmt: skip


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("size", [1, 3, 1000])
@pytest.mark.parametrize("derived", [True, False])
def test_host_waits_by_pass_are_the_plain_sums(
    seed: int, size: int, derived: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    monkeypatch.setattr(phase_figures, "_PASS", size)
    gaps = [(rng.randrange(0, 1000), rng.randrange(0, 50)) for _ in range(rng.randrange(0, 40))]
    gaps += gaps[:3]  # equal starts
    windows = [(rng.randrange(-10, 1010), rng.randrange(-10, 1010)) for _ in range(12)]
    windows += [(100, 100), (0, 1000), (500, 10)]  # empty, all, ending before it starts
    n = len(gaps)
    start = np.array([s for s, _ in gaps], dtype=np.int64)
    # the starts derived from the rows before the gaps (their ts + dur), or held
    ts = start - np.arange(n, dtype=np.int64) % 7
    rows_of = np.arange(n, dtype=np.int32)
    gap_set = GapSet(
        device=np.zeros(n, dtype=np.int32),
        before=rows_of if derived else rows_of[:0],
        after=rows_of,
        host_wait=np.array([w for _, w in gaps], dtype=np.int64),
        ts=ts,
        dur=start - ts,
        starts=None if derived else start,
    )
    rows: Any = [SimpleNamespace(cpu_start_ns=lo, cpu_end_ns=hi) for lo, hi in windows]
    assert phase_figures._host_waits(gap_set, rows) == [_plain(gaps, w) for w in windows]
