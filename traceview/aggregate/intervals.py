"""Lengths of unions of time intervals."""

from __future__ import annotations

import numpy as np


def union_length(start: np.ndarray, end: np.ndarray) -> int:
    """Total length covered by the intervals [start[i], end[i]] (int64 ns)."""
    if len(start) == 0:
        return 0
    s = start
    if not (s[1:] >= s[:-1]).all():  # the rows of one stream come sorted: nothing to do
        order = np.argsort(s, kind="stable")  # near-linear: trace times are nearly sorted
        s, end = s[order], end[order]
    reach = np.maximum.accumulate(end)
    # Each interval adds what it covers beyond everything before it: from the later of its
    # start and the reach so far, up to the new reach.
    added = reach[1:] - np.maximum(s[1:], reach[:-1])
    return int(reach[0] - s[0]) + int(added.sum())
