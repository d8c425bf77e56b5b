"""What held a GPU gap on the CPU: the answer to "why is my GPU idle".

For the activity after a gap: its launching runtime call (same correlation id, the earliest;
the first in the file among equal starts) gives a CPU thread. On that thread, the CPU ops that
overlap the host wait [gap start, gap start + host wait] — the time the CPU had not yet asked
for the next activity — ranked by overlap (e.g. the data loader's ``__next__`` for 125.6 of
126.0 ms), and the synchronising runtime calls (``cudaStreamSynchronize``, ``cudaMemcpy``
without Async, ...) that overlap the gap, with their time inside it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from traceview.aggregate.intervals import unions
from traceview.aggregate.order import (
    concat_ranges,
    distinct,
    lex_order,
    searchsorted_pairs,
)
from traceview.analyses.core.devices import NO_LAUNCH
from traceview.columns.cpu_rows import ROW, CpuRows, Windows
from traceview.columns.cpu_rows import is_op as cpu_op_mask
from traceview.columns.model import STEP_PREFIX, TraceEvents

TOP = 3  # ops and sync calls named per gap
# Runtime calls that block the calling thread until the GPU has done something.
SYNC_CALL = re.compile(
    r"^(?:cuda|hip|cu)(?:(?:Stream|Device|Event|Ctx)Synchronize|Memcpy(?!\w*Async)\w*)"
)


@dataclass(frozen=True)
class GapQuery:
    """The gaps to explain: the correlation id of the activity after each (−1: none) and the
    start of its launch (devices.first_launch: NO_LAUNCH when none), and the gap's [start,
    end] and host wait (ns)."""

    correlation: np.ndarray
    launch: np.ndarray
    start: np.ndarray
    end: np.ndarray
    host_wait: np.ndarray


@dataclass(frozen=True)
class Holder:
    """A CPU op or runtime call and how long it overlaps the window it is named for (ns)."""

    name: str
    overlap_ns: int

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "overlap_us": self.overlap_ns / 1000}


@dataclass(frozen=True)
class CpuContext:
    """The launching thread of the activity after a gap, when it launched it (ns, the file's
    time base), the ops overlapping the host wait and the sync calls overlapping the gap."""

    thread: str | None
    launch_ns: int | None
    host_wait_ns: int
    ops: tuple[Holder, ...]
    syncs: tuple[Holder, ...]
    covered_ns: int = 0  # of the host wait, the time some CPU op or sync call was running

    def as_dict(self) -> dict[str, Any] | None:
        """The ``cpu`` object of a largest gap (None when no launch is known)."""
        if self.thread is None or self.launch_ns is None:
            return None
        return {
            "thread": self.thread,
            "launch_ts_us": self.launch_ns / 1000,
            "host_wait_us": self.host_wait_ns / 1000,
            "covered_us": self.covered_ns / 1000,
            "ops": [h.as_dict() for h in self.ops],
            "syncs": [h.as_dict() for h in self.syncs],
        }


NO_CONTEXT = CpuContext(None, None, 0, (), ())


def is_sync_call(name: str) -> bool:
    """A runtime call that makes the CPU wait for the GPU."""
    return SYNC_CALL.match(name) is not None


def cpu_contexts(events: TraceEvents, gaps: GapQuery) -> list[CpuContext]:
    """The CpuContext of each gap: one pass over the CPU rows for all gaps (sources that know
    each block's time range skip those outside the gaps and launches)."""
    n = len(gaps.start)
    launch = gaps.launch
    has = launch != NO_LAUNCH
    if len(events.cpu) == 0 or not has.any():
        return [NO_CONTEXT] * n
    windows = Windows.union_of(
        np.concatenate([gaps.start[has], launch[has]]), np.concatenate([gaps.end[has], launch[has]])
    )
    live = _scan(events.cpu, windows)
    thread = _launch_thread(live, gaps.correlation, launch)
    ops, syncs, covered = _holders(events, live, thread, gaps)
    return [
        NO_CONTEXT
        if thread[g] < 0
        else CpuContext(
            thread=_thread_label(events.threads[int(thread[g])]),
            launch_ns=int(launch[g]),
            host_wait_ns=int(gaps.host_wait[g]),
            ops=tuple(ops.get(g, ())),
            syncs=tuple(syncs.get(g, ())),
            covered_ns=int(covered[g]),
        )
        for g in range(n)
    ]


def _scan(cpu: CpuRows, windows: Windows) -> np.ndarray:
    """The rows overlapping one of ``windows``, in file order: one pass, block by block."""
    live = [np.zeros(0, dtype=ROW)]
    for block in cpu.blocks(windows=windows):
        live.append(block[windows.hits(block["ts"], block["end"])])
    return np.concatenate(live)


def _launch_thread(live: np.ndarray, correlation: np.ndarray, launch: np.ndarray) -> np.ndarray:
    """Per gap, the thread of the runtime row with its correlation starting at its launch
    (the first in the file among several), else −1."""
    runtime = live[(live["correlation"] >= 0)]
    if len(runtime) == 0:
        return np.full(len(correlation), -1, dtype=np.int64)
    order = lex_order((runtime["ts"], runtime["correlation"]))  # stable: file order in ties
    corr, ts = runtime["correlation"][order], runtime["ts"][order]
    wanted = np.maximum(correlation, 0)  # no launch: never found below (launch is NO_LAUNCH)
    at = searchsorted_pairs(corr, ts, wanted, np.maximum(launch, 0), side="left")
    at = np.minimum(at, len(order) - 1)
    found = (corr[at] == correlation) & (ts[at] == launch) & (launch != NO_LAUNCH)
    return np.where(found, runtime["thread"][order][at], -1).astype(np.int64)


def _holders(
    events: TraceEvents, live: np.ndarray, thread: np.ndarray, gaps: GapQuery
) -> tuple[dict[int, list[Holder]], dict[int, list[Holder]], np.ndarray]:
    """Per gap: the ops overlapping its host wait and the sync calls overlapping it, each
    ranked by overlap (then the innermost: latest start, earliest end; then name); and the
    time of the host wait that some op or sync call covers (the union of their overlaps)."""
    gap, row = _overlapping(live, thread, gaps.start, gaps.end)
    rows = live[row]
    ts, end, name = rows["ts"], rows["end"], rows["name"]
    start = gaps.start[gap]
    is_op = cpu_op_mask(rows["correlation"])
    step = _name_mask(events.names, distinct(name[is_op]), lambda n: n.startswith(STEP_PREFIX))
    op_overlap = np.minimum(end, start + gaps.host_wait[gap]) - np.maximum(ts, start)
    ops = is_op & ~step[name] & (op_overlap > 0)
    sync = _name_mask(events.names, distinct(name[~is_op]), is_sync_call)
    sync_overlap = np.minimum(end, gaps.end[gap]) - np.maximum(ts, start)
    syncs = ~is_op & sync[name] & (sync_overlap > 0)
    rank = _name_rank(events.names, name)
    covered = np.zeros(len(gaps.start), dtype=np.int64)
    wait_overlap = np.minimum(end, start + gaps.host_wait[gap]) - np.maximum(ts, start)
    held = (ops | (~is_op & sync[name])) & (wait_overlap > 0)
    clipped = unions(
        gap[held],
        np.maximum(ts[held], start[held]),
        np.minimum(end[held], (start + gaps.host_wait[gap])[held]),
    )
    covered[clipped.segment] = clipped.busy
    return (
        _top(events, gap[ops], op_overlap[ops], ts[ops], end[ops], name[ops], rank[ops]),
        _top(
            events, gap[syncs], sync_overlap[syncs], ts[syncs], end[syncs], name[syncs], rank[syncs]
        ),
        covered,
    )


def _overlapping(
    live: np.ndarray, thread: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Every (gap, row) pair where the row is on the gap's thread and overlaps [start, end]:
    rows starting inside the gap, and rows started before it and still running at its start.
    Enumerated by binary searches over (thread, time) keys: the work is the pairs found."""
    known = np.flatnonzero(thread >= 0)
    by_row = lex_order((live["ts"], live["thread"]))
    row_thread, row_ts = live["thread"][by_row], live["ts"][by_row]
    lo = searchsorted_pairs(row_thread, row_ts, thread[known], start[known], side="left")
    hi = searchsorted_pairs(row_thread, row_ts, thread[known], end[known], side="right")
    at, which = concat_ranges(lo, hi)
    inside = (known[which], by_row[at])
    by_gap = known[lex_order((start[known], thread[known]))]
    gap_thread, gap_start = thread[by_gap], start[by_gap]
    lo = searchsorted_pairs(gap_thread, gap_start, live["thread"], live["ts"], side="right")
    hi = searchsorted_pairs(gap_thread, gap_start, live["thread"], live["end"], side="right")
    at, row = concat_ranges(lo, hi)
    before = (by_gap[at], row)
    return np.concatenate([inside[0], before[0]]), np.concatenate([inside[1], before[1]])


def _top(
    events: TraceEvents,
    gap: np.ndarray,
    overlap: np.ndarray,
    ts: np.ndarray,
    end: np.ndarray,
    name: np.ndarray,
    rank: np.ndarray,
) -> dict[int, list[Holder]]:
    """The first ``TOP`` rows of each gap by (overlap desc, ts desc, end, name)."""
    order = np.lexsort((rank, end, -ts, -overlap, gap))
    gap = gap[order]
    head = np.r_[True, gap[1:] != gap[:-1]] if len(gap) else np.zeros(0, dtype=bool)
    position = np.arange(len(gap)) - np.maximum.accumulate(np.where(head, np.arange(len(gap)), 0))
    out: dict[int, list[Holder]] = {}
    for g, o, n in zip(
        gap[position < TOP].tolist(),
        overlap[order][position < TOP].tolist(),
        name[order][position < TOP].tolist(),
        strict=True,
    ):
        out.setdefault(g, []).append(Holder(events.names[n], o))
    return out


def _name_mask(names: Sequence[str], ids: np.ndarray, test: Any) -> np.ndarray:
    """Mask over all name ids, true for those of ``ids`` that pass ``test``."""
    mask = np.zeros(len(names), dtype=bool)
    for i in ids.tolist():
        mask[i] = bool(test(names[i]))
    return mask


def _name_rank(names: Sequence[str], ids: np.ndarray) -> np.ndarray:
    """For each id, its rank among the distinct ``ids`` by name text."""
    known = distinct(ids)
    order = sorted(range(len(known)), key=lambda i: names[int(known[i])])
    rank_of = np.empty(len(known), dtype=np.int64)
    rank_of[order] = np.arange(len(known))
    return rank_of[np.searchsorted(known, ids)] if len(ids) else ids.astype(np.int64)


def _thread_label(thread: tuple[Any, Any]) -> str:
    pid, tid = thread
    return f"{pid}/{tid}"
