"""Collectives and stragglers across the ranks of a run, in two mergeable passes.

A collective is matched across ranks by a label and an index (docs/metrics.md): a kernel the
trace says the collective of (process group + collective name, traceview.analyses.runs.comm_meta)
by (collective, group, sequence number) when it has one, else by the order of the group's
collectives of that name on the rank; any other communication kernel by (kernel name, k), the
k-th instance (start order) of that name. Several kernels of one (label, index) on a rank are
one instance, from the first start to the last end.

Pass 1 reduces, per (label, index), over ranks: how many ranks ran it, the earliest and latest
start, the rank of the latest start (smallest rank on ties), the smallest duration, the earliest
and latest end, the size in bytes and the group's size (the largest a rank says). A collective
counts when every rank of its group ran it (the group's size when the trace says it, else all
ranks of the run). Pass 2 takes that small table to each rank: wait = Σ (latest start − own
start), times_last = how many collectives it started last.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from traceview.aggregate import sums
from traceview.analyses.runs import bandwidth
from traceview.analyses.runs.rank_summary import CommKernels

# Median spread of collective end times across ranks above which clocks look misaligned: a
# collective ends on every rank at about the same moment (1–7 µs on the 8-rank DLRM run).
CLOCK_SPREAD_WARN_NS = 100_000
_I64 = np.iinfo(np.int64)
BY_NAME, BY_SEQ, BY_ORDER = "name", "seq", "order"
# (kernel or collective name, process group or None, BY_NAME / BY_SEQ / BY_ORDER)
Label = tuple[str, str | None, str]


@dataclass(frozen=True)
class Instances:
    """Pass-1 state of one label: a row per index (sorted, each once)."""

    index: np.ndarray
    ranks: np.ndarray  # how many ranks ran it
    first_start: np.ndarray
    last_start: np.ndarray
    last_rank: np.ndarray  # the rank with the latest start (smallest on ties)
    min_dur: np.ndarray
    first_end: np.ndarray
    last_end: np.ndarray
    bytes: np.ndarray  # −1: unknown
    members: np.ndarray  # ranks in the group, −1: unknown

    def __len__(self) -> int:
        return len(self.index)


CollectiveState = dict[Label, Instances]
# What is neutral in a merge, per Instances column (``index`` aside).
_NEUTRAL = {
    "ranks": 0, "first_start": _I64.max, "last_start": _I64.min, "last_rank": _I64.max,
    "min_dur": _I64.max, "first_end": _I64.max, "last_end": _I64.min, "bytes": -1,
    "members": -1,
}  # fmt: skip


@dataclass(frozen=True)
class _Mine:
    """One rank's instances of one label (duplicates merged), and its kernels' positions."""

    index: np.ndarray
    start: np.ndarray
    end: np.ndarray
    bytes: np.ndarray
    members: np.ndarray


def labelled(comm: CommKernels) -> Iterator[tuple[Label, _Mine]]:
    """The rank's kernels by label, each (label, index) once."""
    group = comm.group
    by = np.where(group < 0, 0, np.where(comm.seq >= 0, 1, 2))
    span = max(len(comm.names), len(comm.groups)) + 1
    used, label = np.unique(by * span + np.where(group < 0, comm.name, group), return_inverse=True)
    label = label.reshape(-1)
    for i, pair in enumerate(used.tolist()):
        mine = np.flatnonzero(label == i)  # in start order
        kind, at = divmod(pair, span)
        if kind == 0:
            name: Label = (comm.names[at], None, BY_NAME)
        else:
            pg, collective = comm.groups[at]
            name = (collective, pg, BY_SEQ if kind == 1 else BY_ORDER)
        index = comm.seq[mine] if kind == 1 else np.arange(len(mine), dtype=np.int64)
        yield name, _instances(comm, mine, index)


def _instances(comm: CommKernels, rows: np.ndarray, index: np.ndarray) -> _Mine:
    """Per distinct index: the first start, the last end, the largest size and group."""
    order = np.lexsort((rows, index))
    index, rows = index[order], rows[order]
    first = np.flatnonzero(np.concatenate([[True], index[1:] != index[:-1]]))
    start, end = comm.start[rows], comm.start[rows] + comm.dur[rows]
    return _Mine(
        index=index[first],
        start=np.minimum.reduceat(start, first),
        end=np.maximum.reduceat(end, first),
        bytes=np.maximum.reduceat(comm.bytes[rows], first),
        members=np.maximum.reduceat(comm.members[rows], first),
    )


def of_rank(rank: int, comm: CommKernels) -> CollectiveState:
    """Pass-1 state of one rank's communication kernels."""
    state: CollectiveState = {}
    for label, mine in labelled(comm):
        n = len(mine.index)
        state[label] = Instances(
            index=mine.index,
            ranks=np.ones(n, np.int64),
            first_start=mine.start,
            last_start=mine.start,
            last_rank=np.full(n, rank, np.int64),
            min_dur=mine.end - mine.start,
            first_end=mine.end,
            last_end=mine.end,
            bytes=mine.bytes,
            members=mine.members,
        )
    return state


def merge(a: CollectiveState, b: CollectiveState) -> CollectiveState:
    """The pass-1 state of both sets of ranks."""
    out = dict(a)
    for label, theirs in b.items():
        mine = out.get(label)
        out[label] = theirs if mine is None else _merge_instances(mine, theirs)
    return out


def _merge_instances(a: Instances, b: Instances) -> Instances:
    index = np.union1d(a.index, b.index)
    a, b = _spread(a, index), _spread(b, index)
    later = (b.last_start > a.last_start) | (
        (b.last_start == a.last_start) & (b.last_rank < a.last_rank)
    )
    return Instances(
        index=index,
        ranks=a.ranks + b.ranks,
        first_start=np.minimum(a.first_start, b.first_start),
        last_start=np.maximum(a.last_start, b.last_start),
        last_rank=np.where(later, b.last_rank, a.last_rank),
        min_dur=np.minimum(a.min_dur, b.min_dur),
        first_end=np.minimum(a.first_end, b.first_end),
        last_end=np.maximum(a.last_end, b.last_end),
        bytes=np.maximum(a.bytes, b.bytes),
        members=np.maximum(a.members, b.members),
    )


def _spread(x: Instances, index: np.ndarray) -> Instances:
    """``x`` over ``index`` (a superset of its own); the new rows ran on no rank."""
    if len(index) == len(x.index):
        return x
    at = np.searchsorted(index, x.index)
    columns = {"index": index}
    for f in fields(Instances):
        if f.name != "index":
            column = np.full(len(index), _NEUTRAL[f.name], np.int64)
            column[at] = getattr(x, f.name)
            columns[f.name] = column
    return Instances(**columns)


def _full(x: Instances, ranks: int) -> np.ndarray:
    """Which instances every rank of their group ran."""
    full: np.ndarray = x.ranks == np.where(x.members > 0, x.members, ranks)
    return full


@dataclass(frozen=True)
class Collective:
    """One collective that every rank of its group ran (ns)."""

    name: str  # the kernel name (matched by name), else the trace's collective name
    index: int  # k, or the sequence number (matched_by "seq")
    skew_ns: int  # latest start − earliest start
    last: int  # the rank that started last
    latency_ns: int  # the smallest duration
    end_spread_ns: int  # latest end − earliest end
    process_group: str | None = None
    matched_by: str = BY_NAME
    ranks: int = 0  # ranks that ran it
    bytes: int | None = None  # the size S (traceview.analyses.runs.bandwidth)

    @property
    def kind(self) -> str | None:
        """The nccl-tests kind, for a collective the trace names."""
        return None if self.matched_by == BY_NAME else bandwidth.kind_of(self.name)

    @property
    def algbw_gbps(self) -> float | None:
        return None if self.bytes is None else bandwidth.gbps(self.bytes, self.latency_ns)

    @property
    def busbw_gbps(self) -> float | None:
        factor = bandwidth.bus_factor(self.kind, self.ranks)
        algbw = self.algbw_gbps
        return None if factor is None or algbw is None else algbw * factor

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "index": self.index,
            "skew_us": self.skew_ns / 1000,
            "last": self.last,
            "latency_us": self.latency_ns / 1000,
            "end_spread_us": self.end_spread_ns / 1000,
            "process_group": self.process_group,
            "matched_by": self.matched_by,
            "ranks": self.ranks,
            "bytes": self.bytes,
            "algbw_gbps": self.algbw_gbps,
            "busbw_gbps": self.busbw_gbps,
        }


def complete(state: CollectiveState, ranks: int) -> list[Collective]:
    """The collectives every rank of their group ran, by label then index."""
    out: list[Collective] = []
    for label in sorted(state, key=lambda lab: (lab[0], lab[1] or "", lab[2])):
        x = state[label]
        name, group, by = label
        for k in np.flatnonzero(_full(x, ranks)).tolist():
            size = int(x.bytes[k])
            out.append(
                Collective(
                    name=name,
                    index=int(x.index[k]),
                    skew_ns=int(x.last_start[k] - x.first_start[k]),
                    last=int(x.last_rank[k]),
                    latency_ns=int(x.min_dur[k]),
                    end_spread_ns=int(x.last_end[k] - x.first_end[k]),
                    process_group=group,
                    matched_by=by,
                    ranks=int(x.ranks[k]),
                    bytes=size if size >= 0 else None,
                )
            )
    return out


@dataclass(frozen=True)
class Waits:
    """Pass 2 for one rank: how often it started a collective last, and its total wait."""

    rank: int
    times_last: int
    wait_ns: int


WaitTable = dict[Label, tuple[np.ndarray, np.ndarray, np.ndarray]]


def latest_starts(state: CollectiveState, ranks: int) -> WaitTable:
    """The small table pass 2 needs: per label, the complete collectives' index, latest start
    and last rank."""
    table = {}
    for label, x in state.items():
        full = _full(x, ranks)
        if full.any():
            table[label] = (x.index[full], x.last_start[full], x.last_rank[full])
    return table


def rank_waits(rank: int, comm: CommKernels, table: WaitTable) -> Waits:
    """Pass 2: one rank's waits against the table of latest starts."""
    times_last = wait = 0
    for label, mine in labelled(comm):
        found = table.get(label)
        if found is None:
            continue
        index, latest, last = found
        at = np.minimum(np.searchsorted(index, mine.index), len(index) - 1)
        hit = index[at] == mine.index
        wait += sums.total(latest[at][hit] - mine.start[hit])
        times_last += int((last[at][hit] == rank).sum())
    return Waits(rank, times_last, wait)


def clock_spread_ns(collectives: list[Collective]) -> int | None:
    """The median (nearest rank) spread of end times over the collectives; None without any."""
    if not collectives:
        return None
    spreads = sorted(c.end_spread_ns for c in collectives)
    return spreads[(len(spreads) + 1) // 2 - 1]
