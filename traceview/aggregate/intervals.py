"""Lengths of unions of time intervals."""

from __future__ import annotations

import numpy as np


def union_length(start: np.ndarray, end: np.ndarray) -> int:
    """Total length covered by the intervals [start[i], end[i]] (int64 ns)."""
    if len(start) == 0:
        return 0
    order = np.argsort(start, kind="stable")  # near-linear: trace times are nearly sorted
    s = start[order]
    reach = np.maximum.accumulate(end[order])
    # An interval opens a new covered run when it starts after everything before it ended;
    # the run then ends at the reach of its last interval.
    opens = np.flatnonzero(s[1:] > reach[:-1]) + 1
    firsts = np.concatenate(([0], opens))
    lasts = np.concatenate((opens - 1, [len(s) - 1]))
    return int((reach[lasts] - s[firsts]).sum())
