"""The roll-up of a run: rank summaries merged into one mergeable state.

``of_rank`` turns a RankSummary into a Rollup of one rank; ``merge`` is the one merge (of any
two roll-ups, in any grouping); ``tree_merge`` merges a list pairwise in rank order, the
shape both engines use, so local and Dask results are identical to the last bit.
Per kernel name over every instance of every rank: exact count, total, min, max, mean and
M2 (Moments), the duration sketch (p50/p90/p99 within sketch.ALPHA), how many ranks ran it,
and the spread of the per-rank totals (exact min and max with their ranks, median from a
sketch of the per-rank totals).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from traceview.aggregate import moments, sketch
from traceview.analyses.runs import collectives
from traceview.analyses.runs.rank_summary import GapFigures, KernelStats, RankSummary, merge_gaps
from traceview.errors import TraceviewError

_T = TypeVar("_T")
_I64 = np.iinfo(np.int64)
NO_GAPS = GapFigures(moments.empty(1), sketch.empty(), 0)


@dataclass(frozen=True)
class Rollup:
    """Mergeable state of a set of ranks (ns)."""

    ranks: int
    size_bytes: int
    kernels: int
    kernel_time_ns: int
    stats: KernelStats  # per name over every selected instance
    rank_count: np.ndarray  # per name: ranks that ran it
    low_total: np.ndarray  # per name: the smallest per-rank total, and its rank
    low_rank: np.ndarray
    high_total: np.ndarray  # per name: the largest per-rank total, and its rank
    high_rank: np.ndarray
    totals: sketch.Sketch  # per name: the sketch of the per-rank totals
    collectives: collectives.CollectiveState
    steps: dict[int, tuple[tuple[int, int], ...]]  # step → (rank, CPU duration ns) per rank
    gaps: GapFigures  # the device gaps of every rank

    @property
    def distinct(self) -> int:
        return len(self.stats.names)


def of_rank(summary: RankSummary) -> Rollup:
    """The roll-up of one rank."""
    stats = summary.stats
    n = len(stats.names)
    total = stats.moments.total
    rank = np.full(n, summary.rank, np.int64)
    return Rollup(
        ranks=1,
        size_bytes=summary.size_bytes,
        kernels=summary.kernels,
        kernel_time_ns=summary.kernel_time_ns,
        stats=stats,
        rank_count=np.ones(n, np.int64),
        low_total=total,
        low_rank=rank,
        high_total=total,
        high_rank=rank,
        totals=sketch.of_values(np.arange(n), total),
        collectives=collectives.of_rank(summary.rank, summary.comm),
        steps={step: ((summary.rank, dur),) for step, dur, _ in summary.steps},
        gaps=summary.gaps or NO_GAPS,
    )


def merge(a: Rollup, b: Rollup) -> Rollup:
    """The roll-up of the ranks of both (names of ``b`` not in ``a`` come after a's)."""
    if a.kernel_time_ns + b.kernel_time_ns > _I64.max:  # Python ints: exact
        # Each rank's times fit int64 (checked as it is read); their sum, which bounds every
        # per-name total merged below in int64, must too.
        raise TraceviewError(
            f"the kernel times of the run's ranks ({a.ranks + b.ranks} merged so far) add up "
            "to more than int64 ns hold (292 years): the run cannot be summed exactly"
        )
    names, to_new = _union(a.stats.names, b.stats.names)
    n = len(names)
    low_b, lowr_b = _place(b.low_total, to_new, n, _I64.max), _place(b.low_rank, to_new, n, 0)
    high_b, highr_b = _place(b.high_total, to_new, n, _I64.min), _place(b.high_rank, to_new, n, 0)
    low_a, lowr_a = _grown(a.low_total, n, _I64.max), _grown(a.low_rank, n, 0)
    high_a, highr_a = _grown(a.high_total, n, _I64.min), _grown(a.high_rank, n, 0)
    take_low = (low_b < low_a) | ((low_b == low_a) & (lowr_b < lowr_a))
    take_high = (high_b > high_a) | ((high_b == high_a) & (highr_b < highr_a))
    stats = KernelStats(
        names=names,
        moments=moments.merge(a.stats.moments, moments.regroup(b.stats.moments, to_new, n)),
        sketch=sketch.merge(a.stats.sketch, sketch.regroup(b.stats.sketch, to_new)),
    )
    return Rollup(
        ranks=a.ranks + b.ranks,
        size_bytes=a.size_bytes + b.size_bytes,
        kernels=a.kernels + b.kernels,
        kernel_time_ns=a.kernel_time_ns + b.kernel_time_ns,
        stats=stats,
        rank_count=_grown(a.rank_count, n, 0) + _place(b.rank_count, to_new, n, 0),
        low_total=np.where(take_low, low_b, low_a),
        low_rank=np.where(take_low, lowr_b, lowr_a),
        high_total=np.where(take_high, high_b, high_a),
        high_rank=np.where(take_high, highr_b, highr_a),
        totals=sketch.merge(a.totals, sketch.regroup(b.totals, to_new)),
        collectives=collectives.merge(a.collectives, b.collectives),
        steps={s: a.steps.get(s, ()) + b.steps.get(s, ()) for s in sorted({*a.steps, *b.steps})},
        gaps=merge_gaps(a.gaps, b.gaps),
    )


def tree_merge(items: Sequence[_T], merge_two: Callable[[_T, _T], _T]) -> _T:
    """Merge a non-empty list pairwise, level by level, in order: ((0 1) (2 3)) ((4 5) 6)."""
    level = list(items)
    while len(level) > 1:
        pairs = [merge_two(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        level = pairs + ([level[-1]] if len(level) % 2 else [])
    return level[0]


def _union(a: list[str], b: list[str]) -> tuple[list[str], np.ndarray]:
    """a's names then b's new ones; and the new id of each of b's names."""
    index = {name: i for i, name in enumerate(a)}
    names = list(a)
    to_new = np.empty(len(b), np.int64)
    for j, name in enumerate(b):
        i = index.get(name)
        if i is None:
            i = index[name] = len(names)
            names.append(name)
        to_new[j] = i
    return names, to_new


def _place(values: np.ndarray, to_new: np.ndarray, n: int, fill: int) -> np.ndarray:
    out = np.full(n, fill, np.int64)
    out[to_new] = values
    return out


def _grown(values: np.ndarray, n: int, fill: int) -> np.ndarray:
    return np.concatenate([values, np.full(n - len(values), fill, np.int64)])
