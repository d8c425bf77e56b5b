"""Exact nearest-rank percentiles per group."""

from __future__ import annotations

import numpy as np


def nearest_rank(
    group: np.ndarray, values: np.ndarray, groups: int, pcts: tuple[int, ...]
) -> dict[int, np.ndarray]:
    """For each percentile p: per group ``sorted(values)[ceil(p/100·n) − 1]`` (0 if empty)."""
    order = np.lexsort((values, group))
    sorted_values = values[order]
    count = np.bincount(group, minlength=groups)
    first = np.concatenate([[0], np.cumsum(count)[:-1]])
    present = count > 0
    out: dict[int, np.ndarray] = {}
    for p in pcts:
        rank = (p * count + 99) // 100  # ceil(p·n/100) in exact integer arithmetic
        index = first + np.maximum(rank, 1) - 1
        result = np.zeros(groups, dtype=values.dtype)
        result[present] = sorted_values[index[present]]
        out[p] = result
    return out
