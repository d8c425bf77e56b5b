"""Outlier steps: a step whose time is far from the median step time, in robust units.

A step is an outlier when |t − median| > ``THRESHOLD`` × 1.4826 × max(MAD, 2% of the median),
MAD being the median of |t − median| (1.4826 × MAD estimates the standard deviation of normal
data; the 2% floor keeps steps that are all alike from flagging the smallest jitter).
Definition in docs/metrics.md ("Outlier steps").
"""

from __future__ import annotations

import numpy as np

from traceview.aggregate.percentiles import median

THRESHOLD = 3.0
_NORMAL = 1.4826
_FLOOR = 0.02


def outliers(times: list[float]) -> list[bool]:
    """For each step time, whether it is an outlier (none with fewer than 3 steps)."""
    if len(times) < 3:
        return [False] * len(times)
    t = np.asarray(times, dtype=np.float64)
    middle = median(t)
    mad = median(np.abs(t - middle))
    limit = THRESHOLD * _NORMAL * max(mad, _FLOOR * abs(middle))
    flags: list[bool] = (np.abs(t - middle) > limit).tolist()
    return flags
