"""Lengths of unions of time intervals."""

from __future__ import annotations

import numpy as np


def union_length(start: np.ndarray, end: np.ndarray) -> int:
    """Total length covered by the intervals [start[i], end[i]] (int64 ns)."""
    if len(start) == 0:
        return 0
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    # An interval opens a new covered run when it starts after everything before it ended.
    new_run = np.empty(len(s), dtype=bool)
    new_run[0] = True
    new_run[1:] = s[1:] > reach[:-1]
    run_start = s[new_run]
    run_end = np.maximum.reduceat(e, np.flatnonzero(new_run))
    return int((run_end - run_start).sum())
