"""CUDA-graph replays: which GPU activities a graph launch (``cudaGraphLaunch``,
``cuGraphLaunch``, ``hipGraphLaunch``) ran. Every kernel of a replay carries the correlation id
of its one launch call, so a replay's kernels are the GPU rows whose correlation is a graph
launch's (docs/metrics.md, "CUDA graphs")."""

from __future__ import annotations

import re

import numpy as np

from traceview.aggregate.order import first_of_runs
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
    """Which of the GPU ``rows`` a graph launch (of ``launches``, sorted ids) ran."""
    if not len(launches):
        return np.zeros(len(rows), dtype=bool)
    return np.isin(events.gpu.correlation[rows], launches)


def launch_counted(events: TraceEvents, rows: np.ndarray, launches: np.ndarray) -> np.ndarray:
    """Of the GPU ``rows``: which stand for their launch call in launch figures — every row a
    graph launch did not run, and of each replay only its first kernel (earliest start, then
    first row), so a graph launch is counted once, not once per kernel it ran."""
    graph = replayed(events, rows, launches)
    counted = ~graph
    at = np.flatnonzero(graph)
    if len(at):
        corr = events.gpu.correlation[rows[at]]
        order = np.lexsort((at, events.gpu.ts[rows[at]], corr))
        counted[at[order[first_of_runs(corr[order])]]] = True
    return counted
