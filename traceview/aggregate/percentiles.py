"""Exact nearest-rank percentiles per group."""

from __future__ import annotations

import numpy as np

from traceview.aggregate.order import packed


def nearest_rank(
    group: np.ndarray, values: np.ndarray, groups: int, pcts: tuple[int, ...]
) -> dict[int, np.ndarray]:
    """For each percentile p: per group ``sorted(values)[ceil(p/100·n) − 1]`` (0 if empty)."""
    sorted_values = _by_group(group, values)
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


def _by_group(group: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` sorted by group, then by value: one sort of packed keys when they fit."""
    key = packed(group, values)
    if key is None:
        return values[np.lexsort((values, group))]
    keys, bits, low = key
    keys.sort()
    return (keys & ((1 << bits) - 1)) + low
