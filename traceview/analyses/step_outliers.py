"""Outlier steps: a step whose time is far from the median step time, in robust units.

A step is an outlier when |t − median| > ``THRESHOLD`` × 1.4826 × max(MAD, 2% of the median),
MAD being the median of |t − median| (1.4826 × MAD estimates the standard deviation of normal
data; the 2% floor keeps steps that are all alike from flagging the smallest jitter).
Definition in docs/metrics.md ("Outlier steps").
"""

from __future__ import annotations

import numpy as np

THRESHOLD = 3.0
_NORMAL = 1.4826
_FLOOR = 0.02


def outliers(times: list[float]) -> list[bool]:
    """For each step time, whether it is an outlier (none with fewer than 3 steps)."""
    if len(times) < 3:
        return [False] * len(times)
    t = np.asarray(times, dtype=np.float64)
    median = _median(t)
    mad = _median(np.abs(t - median))
    limit = THRESHOLD * _NORMAL * max(mad, _FLOOR * abs(median))
    flags: list[bool] = (np.abs(t - median) > limit).tolist()
    return flags


def _median(values: np.ndarray) -> float:
    """``np.median`` of a 1-D float64 array, to the last bit (the mean of the two middle
    values is their sum halved, as np.mean computes it), without the 8 ms import of
    numpy.ma that np.median makes."""
    half = len(values) // 2
    if len(values) % 2:
        return float(np.partition(values, half)[half])
    part = np.partition(values, (half - 1, half))
    return (float(part[half - 1]) + float(part[half])) / 2
