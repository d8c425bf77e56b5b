"""CUDA-graph replays: which GPU activities a graph launch (``cudaGraphLaunch``,
``cuGraphLaunch``, ``hipGraphLaunch``) ran. Every kernel of a replay carries the correlation id
of its one launch call, so a replay's kernels are the GPU rows whose correlation is a graph
launch's (docs/metrics.md, "CUDA graphs")."""

from __future__ import annotations

import re

import numpy as np

from traceview.aggregate.sorted_runs import in_sorted
from traceview.columns.model import TraceEvents

# The runtime and driver calls that replay a graph (their versioned names: cudaGraphLaunch_v10000).
GRAPH_LAUNCH = re.compile(r"^(?:cuda|cu|hip)GraphLaunch(?:_v\d+|_ptsz)?$")


def graph_launch_ids(events: TraceEvents) -> np.ndarray:
    """The sorted correlation ids of the trace's graph launch calls (from its CPU rows: a
    trace read without them, or without such calls, gives none)."""
    names = [i for i, name in enumerate(events.names) if GRAPH_LAUNCH.match(name)]
    if not names or not len(events.cpu):
        return np.empty(0, dtype=np.int64)
    wanted = np.array(names, dtype=np.int64)
    found = [
        block["correlation"][np.isin(block["name"], wanted) & (block["correlation"] >= 0)]
        for block in events.cpu.blocks()
    ]
    return np.unique(np.concatenate(found)) if found else np.empty(0, dtype=np.int64)


def replayed(events: TraceEvents, rows: np.ndarray, launches: np.ndarray) -> np.ndarray:
    """Which of the GPU ``rows`` a graph launch (of ``launches``, sorted ids) ran: each row's
    correlation looked up among them, a pass of rows at a time (np.isin sorts the rows'
    ids with them, ~20 bytes a row at once; no array of every row's id either)."""
    out = np.zeros(len(rows), dtype=bool)
    if not len(launches):
        return out
    for lo in range(0, len(rows), _PASS):
        out[lo : lo + _PASS] = in_sorted(launches, events.gpu.correlation[rows[lo : lo + _PASS]])
    return out


def launch_counted(events: TraceEvents, rows: np.ndarray, launches: np.ndarray) -> np.ndarray:
    """Of the GPU ``rows``: which stand for their launch call in launch figures — every row a
    graph launch did not run, and of each replay only its first kernel (earliest start, then
    first row), so a graph launch is counted once, not once per kernel it ran. Two passes
    over the replayed rows, holding per graph launch its earliest start, then its first row
    at that start (not a sort of every replayed row)."""
    graph = replayed(events, rows, launches)
    counted = ~graph
    if not graph.any():
        return counted
    gpu = events.gpu
    never = np.iinfo(np.int64).max
    first_ts = np.full(len(launches), never, dtype=np.int64)
    first_at = np.full(len(launches), never, dtype=np.int64)
    for earliest in (True, False):
        for lo in range(0, len(rows), _PASS):
            at = np.flatnonzero(graph[lo : lo + _PASS])
            at += lo
            slot = np.searchsorted(launches, gpu.correlation[rows[at]])
            ts = gpu.ts[rows[at]]
            if earliest:
                np.minimum.at(first_ts, slot, ts)
            else:  # of the rows at their launch's earliest start, the first
                tie = ts == first_ts[slot]
                np.minimum.at(first_at, slot[tie], at[tie])
    counted[first_at[first_at != never]] = True
    return counted


_PASS = 1 << 16  # rows at a time
