"""A mergeable quantile sketch with a relative-error guarantee (DDSketch-style), per group.

Values are integer ns ≥ 0. A positive value x goes to bucket i = ⌈log_γ x⌉ (so
γ^(i−1) < x ≤ γ^i), with γ = (1 + α)/(1 − α); 0 has a bucket of its own. A bucket answers
with 2γ^i/(γ + 1), which is within a relative error α of every value in it. The
nearest-rank p-th percentile of a group (as traceview.aggregate.percentiles computes it
exactly) is the value at rank ⌈p·n/100⌉; buckets are ordered like their values, so the bucket
holding that rank holds the exact percentile, and the answer is within α of it.

The state is three columns (group, bucket, count), sorted by (group, bucket): merging two
sketches is a bucket-wise sum, so the sketch of a concatenation equals the merge of the
sketches, whatever the order or grouping of the merges. ALPHA = 0.5% (≤ 1% promised in
docs/metrics.md, with margin for the float logarithm at bucket edges).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

ALPHA = 0.005
GAMMA = (1 + ALPHA) / (1 - ALPHA)
_LOG_GAMMA = math.log(GAMMA)
ZERO_BUCKET = np.iinfo(np.int32).min  # the bucket of the value 0, before every other


@dataclass(frozen=True)
class Sketch:
    """Bucket counts of many groups: (group, bucket) pairs sorted, each once."""

    group: np.ndarray  # int64
    bucket: np.ndarray  # int32
    count: np.ndarray  # int64

    @property
    def size(self) -> int:
        return len(self.count)


def empty() -> Sketch:
    """A sketch of no values."""
    return Sketch(np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int64))


def bucket_of(values: np.ndarray) -> np.ndarray:
    """The bucket of each value (ns ≥ 0)."""
    values = np.asarray(values, dtype=np.float64)
    out = np.full(len(values), ZERO_BUCKET, dtype=np.int32)
    positive = values > 0
    out[positive] = np.ceil(np.log(values[positive]) / _LOG_GAMMA).astype(np.int32)
    return out


def value_of(bucket: np.ndarray) -> np.ndarray:
    """The value a bucket answers with (ns, float): 2γ^i/(γ + 1); 0 for the zero bucket."""
    bucket = np.asarray(bucket)
    zero = bucket == ZERO_BUCKET
    exponent = np.where(zero, 0, bucket).astype(np.float64)
    return np.where(zero, 0.0, 2.0 * np.exp(exponent * _LOG_GAMMA) / (GAMMA + 1))


def of_values(group: np.ndarray, values: np.ndarray) -> Sketch:
    """The sketch of ``values[i]`` in group ``group[i]``."""
    return _summed(np.asarray(group, np.int64), bucket_of(values), np.ones(len(values), np.int64))


def merge(a: Sketch, b: Sketch) -> Sketch:
    """The sketch of both sketches' values: bucket counts added."""
    return _summed(
        np.concatenate([a.group, b.group]),
        np.concatenate([a.bucket, b.bucket]),
        np.concatenate([a.count, b.count]),
    )


def regroup(sketch: Sketch, mapping: np.ndarray) -> Sketch:
    """Old group g becomes group ``mapping[g]`` (groups mapped together merge)."""
    return _summed(np.asarray(mapping, np.int64)[sketch.group], sketch.bucket, sketch.count)


def quantiles(sketch: Sketch, groups: int, pcts: tuple[int, ...]) -> dict[int, np.ndarray]:
    """Per percentile p, per group: the estimate of the nearest-rank p-th percentile (ns,
    float; 0 for a group without values)."""
    total = np.bincount(sketch.group, weights=sketch.count, minlength=groups).astype(np.int64)
    running = np.cumsum(sketch.count)
    before = np.concatenate([[0], np.cumsum(total)[:-1]])  # values of earlier groups
    estimate = value_of(sketch.bucket)
    out: dict[int, np.ndarray] = {}
    for p in pcts:
        wanted = before + np.maximum((p * total + 99) // 100, 1)  # rank in the whole sketch
        at = np.searchsorted(running, wanted, side="left")
        result = np.zeros(groups, dtype=np.float64)
        present = total > 0
        result[present] = estimate[at[present]]
        out[p] = result
    return out


def _summed(group: np.ndarray, bucket: np.ndarray, count: np.ndarray) -> Sketch:
    """Counts of equal (group, bucket) pairs added, the pairs sorted."""
    if len(count) == 0:
        return empty()
    order = np.lexsort((bucket, group))
    group, bucket, count = group[order], bucket[order], count[order]
    new = np.ones(len(count), dtype=bool)
    new[1:] = (group[1:] != group[:-1]) | (bucket[1:] != bucket[:-1])
    starts = np.flatnonzero(new)
    return Sketch(group[starts], bucket[starts], np.add.reduceat(count, starts))
