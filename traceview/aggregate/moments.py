"""Count, exact total, min, max, mean and M2 per group: Welford/Chan updates, mergeable.

Groups are dense integer ids. ``Moments`` of two batches (or two ranks, or two worker
processes) merge with Chan et al.'s pairwise formula, so statistics never need all values
in one place; the batch step is Welford's update written for a whole numpy batch.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from traceview.aggregate import sums


@dataclass(frozen=True)
class Moments:
    """Per-group statistics of integer values (ns): arrays indexed by group id."""

    count: np.ndarray  # int64
    total: np.ndarray  # int64, exact sum
    minimum: np.ndarray  # int64 (undefined where count == 0)
    maximum: np.ndarray  # int64 (undefined where count == 0)
    mean: np.ndarray  # float64
    m2: np.ndarray  # float64, sum of squared deviations from the mean

    @property
    def groups(self) -> int:
        return len(self.count)

    def std(self) -> np.ndarray:
        """Sample standard deviation (n − 1); 0 where count ≤ 1."""
        count = self.count
        out = np.zeros(len(count), dtype=np.float64)
        many = count > 1
        out[many] = np.sqrt(np.maximum(self.m2[many], 0.0) / (count[many] - 1))
        return out


def empty(groups: int) -> Moments:
    """Moments of no values for ``groups`` groups."""
    i64 = np.iinfo(np.int64)
    return Moments(
        count=np.zeros(groups, dtype=np.int64),
        total=np.zeros(groups, dtype=np.int64),
        minimum=np.full(groups, i64.max, dtype=np.int64),
        maximum=np.full(groups, i64.min, dtype=np.int64),
        mean=np.zeros(groups, dtype=np.float64),
        m2=np.zeros(groups, dtype=np.float64),
    )


def of_batch(group: np.ndarray, values: np.ndarray, groups: int) -> Moments:
    """Moments of one batch: ``values[i]`` belongs to group ``group[i]``."""
    return accumulate(group, values, groups, batch=max(len(values), 1))


def merge(a: Moments, b: Moments) -> Moments:
    """Moments of the union of two value sets (Chan et al. 1979)."""
    groups = max(a.groups, b.groups)
    a, b = _grow(a, groups), _grow(b, groups)
    count = a.count + b.count
    delta = b.mean - a.mean
    safe = np.maximum(count, 1)
    mean = a.mean + delta * (b.count / safe)
    m2 = a.m2 + b.m2 + delta * delta * (a.count * b.count / safe)
    return Moments(
        count=count,
        total=sums.added(a.total, b.total),
        minimum=np.minimum(a.minimum, b.minimum),
        maximum=np.maximum(a.maximum, b.maximum),
        mean=mean,
        m2=m2,
    )


def regroup(moments: Moments, mapping: np.ndarray, groups: int) -> Moments:
    """Merge groups: old group ``g`` becomes new group ``mapping[g]``.

    The k-way form of Chan's formula: M2 = Σ (M2ᵢ + nᵢ·(meanᵢ − mean)²).
    """
    count = np.bincount(mapping, weights=moments.count, minlength=groups).astype(np.int64)
    total = sums.by_group(mapping, moments.total, groups)
    minimum = empty(groups).minimum
    maximum = empty(groups).maximum
    np.minimum.at(minimum, mapping, moments.minimum)
    np.maximum.at(maximum, mapping, moments.maximum)
    mean = np.divide(total, count, out=np.zeros(groups), where=count > 0)
    shift = moments.mean - mean[mapping]
    spread = moments.m2 + moments.count * shift * shift
    m2 = np.bincount(mapping, weights=spread, minlength=groups)
    return Moments(count, total, minimum, maximum, mean, m2)


def accumulate(
    group: np.ndarray,
    values: np.ndarray,
    groups: int,
    batch: int = 1 << 20,
    positions: np.ndarray | None = None,
    counted: np.ndarray | None = None,
) -> Moments:
    """Moments of all values: count, total, min and max in one pass, then M2 about the exact
    means batch by batch (row-sized temporaries stay a batch long; merging batches' Moments
    instead would cost a dozen group-sized arrays a batch, 100 MB at 10^6 names).

    ``positions``: where each value is in a longer column (ascending) when ``values`` are a
    part of it: the batches are cut where the whole column's are, so every group's M2 is
    summed in the same order, and equal to the last bit, as from the whole column.
    ``counted``: a mask of the values that stand for that whole column, the others in groups
    of their own: the batches are cut as over the counted values alone (without a row-sized
    array of their positions)."""
    if len(values) == 0:
        return empty(groups)
    count, total, minimum, maximum = extremes(group, values, groups)
    mean = np.divide(total, count, out=np.zeros(groups), where=count > 0)
    m2 = np.zeros(groups)
    if counted is not None:
        bounds = _counted_batches(counted, batch)
    else:
        bounds = _batches(len(values), batch, positions)
    for start, stop in bounds:
        m2 += _batch_m2(group, values, mean, start, stop)
    return Moments(count, total, minimum, maximum, mean, m2)


_PIECE = 1 << 16  # values squared at a time inside a batch


def _batch_m2(
    group: np.ndarray, values: np.ndarray, mean: np.ndarray, start: int, stop: int
) -> np.ndarray:
    """Per group, the summed squared distances to ``mean`` of values[start:stop], each
    group's added in the values' order: what ``np.bincount(..., weights=)`` over the batch
    gives, to the last bit (np.add.at adds in the same order), with _PIECE values' squares
    at a time, not the batch's (16 B a value)."""
    out = np.zeros(len(mean))
    for lo in range(start, stop, _PIECE):
        hi = min(lo + _PIECE, stop)
        part = group[lo:hi]
        squares = values[lo:hi] - mean[part]
        squares *= squares
        np.add.at(out, part, squares)
    return out


def extremes(
    group: np.ndarray, values: np.ndarray, groups: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per group: count, exact total, minimum and maximum (int64; min and max undefined where
    the count is 0)."""
    count = np.bincount(group, minlength=groups).astype(np.int64, copy=False)
    total = sums.by_group(group, values, groups)
    i64 = np.iinfo(np.int64)
    minimum = np.full(groups, i64.max, dtype=np.int64)
    maximum = np.full(groups, i64.min, dtype=np.int64)
    np.minimum.at(minimum, group, values)
    np.maximum.at(maximum, group, values)
    return count, total, minimum, maximum


def _batches(n: int, batch: int, positions: np.ndarray | None) -> list[tuple[int, int]]:
    """[start, stop) of each batch of ``n`` values, cut every ``batch`` positions."""
    if positions is None:
        return [(start, min(start + batch, n)) for start in range(0, n, batch)]
    cuts = np.searchsorted(positions, np.arange(batch, int(positions[-1]) + 1, batch))
    bounds = [0, *cuts.tolist(), n]
    return [(a, b) for a, b in itertools.pairwise(bounds) if b > a]


def _counted_batches(counted: np.ndarray, batch: int) -> list[tuple[int, int]]:
    """[start, stop) of each batch of the rows of a mask, cut at each ``batch``-th row counted
    (the cuts of ``_batches`` over those rows' positions), a block of the mask at a time."""
    cuts = []
    seen = 0  # counted rows before the block
    for lo in range(0, len(counted), batch):
        block = counted[lo : lo + batch]
        found = int(np.count_nonzero(block))
        # the counted rows whose position among them is a multiple of ``batch`` (not 0)
        first = -(-max(seen, 1) // batch) * batch
        if first < seen + found:
            at = np.flatnonzero(block)[first - seen :: batch]
            cuts.extend((at + lo).tolist())
        seen += found
    bounds = [0, *cuts, len(counted)]
    return [(a, b) for a, b in itertools.pairwise(bounds) if b > a]


def _grow(m: Moments, groups: int) -> Moments:
    if m.groups == groups:
        return m
    extra = empty(groups - m.groups)
    return Moments(
        *(np.concatenate([getattr(m, f), getattr(extra, f)]) for f in Moments.__dataclass_fields__)
    )
