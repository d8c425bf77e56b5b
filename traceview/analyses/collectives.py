"""Collectives and stragglers across the ranks of a run, in two mergeable passes.

A collective is the k-th instance (start order) of one communication kernel name on each
rank, matched across ranks by (name, k). Pass 1 reduces, per (name, k), over ranks: how many
ranks ran it, the earliest and latest start, the rank of the latest start (smallest rank on
ties), the smallest duration, the earliest and latest end. Only collectives present on every
rank count. Pass 2 takes that small table to each rank: wait = Σ (latest start − own start),
times_last = how many collectives it started last. Definitions in docs/metrics.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from traceview.analyses.rank_summary import CommKernels

# Median spread of collective end times across ranks above which clocks look misaligned: a
# collective ends on every rank at about the same moment (1–7 µs on the 8-rank DLRM run).
CLOCK_SPREAD_WARN_NS = 100_000
_I64 = np.iinfo(np.int64)


@dataclass(frozen=True)
class Instances:
    """Pass-1 state of one communication kernel name, indexed by k."""

    ranks: np.ndarray  # how many ranks ran the k-th instance
    first_start: np.ndarray
    last_start: np.ndarray
    last_rank: np.ndarray  # the rank with the latest start (smallest on ties)
    min_dur: np.ndarray
    first_end: np.ndarray
    last_end: np.ndarray

    def __len__(self) -> int:
        return len(self.ranks)


CollectiveState = dict[str, Instances]


def of_rank(rank: int, comm: CommKernels) -> CollectiveState:
    """Pass-1 state of one rank's communication kernels."""
    k = comm.instance()
    state: CollectiveState = {}
    for i, name in enumerate(comm.names):
        mine = comm.name == i
        order = np.argsort(k[mine])
        start, dur = comm.start[mine][order], comm.dur[mine][order]
        n = len(start)
        state[name] = Instances(
            ranks=np.ones(n, np.int64),
            first_start=start,
            last_start=start,
            last_rank=np.full(n, rank, np.int64),
            min_dur=dur,
            first_end=start + dur,
            last_end=start + dur,
        )
    return state


def merge(a: CollectiveState, b: CollectiveState) -> CollectiveState:
    """The pass-1 state of both sets of ranks."""
    out = dict(a)
    for name, theirs in b.items():
        mine = out.get(name)
        out[name] = theirs if mine is None else _merge_instances(mine, theirs)
    return out


def _merge_instances(a: Instances, b: Instances) -> Instances:
    n = max(len(a), len(b))
    a, b = _padded(a, n), _padded(b, n)
    later = (b.last_start > a.last_start) | (
        (b.last_start == a.last_start) & (b.last_rank < a.last_rank)
    )
    return Instances(
        ranks=a.ranks + b.ranks,
        first_start=np.minimum(a.first_start, b.first_start),
        last_start=np.maximum(a.last_start, b.last_start),
        last_rank=np.where(later, b.last_rank, a.last_rank),
        min_dur=np.minimum(a.min_dur, b.min_dur),
        first_end=np.minimum(a.first_end, b.first_end),
        last_end=np.maximum(a.last_end, b.last_end),
    )


def _padded(x: Instances, n: int) -> Instances:
    """``x`` grown to n instances; the new ones ran on no rank (neutral in a merge)."""
    extra = n - len(x)
    if extra == 0:
        return x

    def pad(column: np.ndarray, value: int) -> np.ndarray:
        return np.concatenate([column, np.full(extra, value, np.int64)])

    return Instances(
        ranks=pad(x.ranks, 0),
        first_start=pad(x.first_start, _I64.max),
        last_start=pad(x.last_start, _I64.min),
        last_rank=pad(x.last_rank, _I64.max),
        min_dur=pad(x.min_dur, _I64.max),
        first_end=pad(x.first_end, _I64.max),
        last_end=pad(x.last_end, _I64.min),
    )


@dataclass(frozen=True)
class Collective:
    """One collective present on every rank (ns)."""

    name: str
    index: int
    skew_ns: int  # latest start − earliest start
    last: int  # the rank that started last
    latency_ns: int  # the smallest duration
    end_spread_ns: int  # latest end − earliest end

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "index": self.index,
            "skew_us": self.skew_ns / 1000,
            "last": self.last,
            "latency_us": self.latency_ns / 1000,
            "end_spread_us": self.end_spread_ns / 1000,
        }


def complete(state: CollectiveState, ranks: int) -> list[Collective]:
    """The collectives present on every one of ``ranks`` ranks, by name then index."""
    out: list[Collective] = []
    for name in sorted(state):
        x = state[name]
        for k in np.flatnonzero(x.ranks == ranks).tolist():
            out.append(
                Collective(
                    name=name,
                    index=k,
                    skew_ns=int(x.last_start[k] - x.first_start[k]),
                    last=int(x.last_rank[k]),
                    latency_ns=int(x.min_dur[k]),
                    end_spread_ns=int(x.last_end[k] - x.first_end[k]),
                )
            )
    return out


@dataclass(frozen=True)
class Waits:
    """Pass 2 for one rank: how often it started a collective last, and its total wait."""

    rank: int
    times_last: int
    wait_ns: int


def latest_starts(state: CollectiveState, ranks: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The small table pass 2 needs: per name, the latest start and last rank per k (−1 where
    the collective is not on every rank)."""
    table = {}
    for name, x in state.items():
        full = x.ranks == ranks
        table[name] = (np.where(full, x.last_start, 0), np.where(full, x.last_rank, -1))
    return table


def rank_waits(
    rank: int, comm: CommKernels, table: dict[str, tuple[np.ndarray, np.ndarray]]
) -> Waits:
    """Pass 2: one rank's waits against the table of latest starts."""
    k = comm.instance()
    times_last = wait = 0
    for i, name in enumerate(comm.names):
        latest, last = table.get(name, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        mine = comm.name == i
        ks, start = k[mine], comm.start[mine]
        counted = ks < len(last)
        ks, start = ks[counted], start[counted]
        full = last[ks] >= 0
        wait += int((latest[ks][full] - start[full]).sum())
        times_last += int((last[ks][full] == rank).sum())
    return Waits(rank, times_last, wait)


def clock_spread_ns(collectives: list[Collective]) -> int | None:
    """The median (nearest rank) spread of end times over the collectives; None without any."""
    if not collectives:
        return None
    spreads = sorted(c.end_spread_ns for c in collectives)
    return spreads[(len(spreads) + 1) // 2 - 1]
