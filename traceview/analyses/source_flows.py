"""The backward pass's kernels back to the forward op's Python stack, through ``fwdbwd`` flows.

A flow's finish (``ph`` ``f``, ``bp`` ``e``) sits at the start of the backward op it binds to
(the CPU op on its thread starting at its time; of several, the longest); a kernel launched
inside that op (the innermost such op around the launch, as frames nest) belongs to the
flow; the flow's start (``ph`` ``s``, same id) sits on the forward op, whose Python stack
is the innermost frame around that start.
"""

from __future__ import annotations

import numpy as np

from traceview.aggregate.order import concat_ranges, lex_order
from traceview.aggregate.sorted_pairs import SortedPairs
from traceview.analyses.core.stacks import NO_FRAME, Stacks, build_stacks, innermost
from traceview.columns.cpu_rows import OP
from traceview.columns.model import TraceEvents

# Why a kernel outside any frame has no frame through a flow (with NO_FRAME leaves).
FOUND, NO_BACKWARD_OP, NO_START, FORWARD_OUTSIDE = 0, 1, 2, 3


def backward_leaves(
    events: TraceEvents, stacks: Stacks, thread: np.ndarray, launch: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per launch (thread id, ns) outside any frame: the frame of its forward op (NO_FRAME:
    none) and why not (FOUND, NO_BACKWARD_OP, NO_START, FORWARD_OUTSIDE)."""
    n = len(launch)
    leaf = np.full(n, NO_FRAME, dtype=np.int64)
    reason = np.full(n, NO_BACKWARD_OP, dtype=np.int64)
    flows = events.flows
    finish = np.flatnonzero((flows.finish == 1) & (flows.flow >= 0))
    if n == 0 or len(finish) == 0:
        return leaf, reason
    op_end = _bound_op_ends(events, flows.thread[finish], flows.ts[finish])
    bound = finish[op_end > flows.ts[finish]]
    ends = op_end[op_end > flows.ts[finish]]
    ops = build_stacks(flows.thread[bound], np.zeros(len(bound), np.int64), flows.ts[bound], ends)
    at = innermost(ops, thread, launch)
    inside = np.flatnonzero(at != NO_FRAME)
    flow_id = flows.flow[bound[ops.row[at[inside]]]]
    start, has_start = _starts(events, flow_id)
    reason[inside] = np.where(has_start, FOUND, NO_START)
    with_start = inside[has_start]
    forward = innermost(stacks, flows.thread[start[has_start]], flows.ts[start[has_start]])
    leaf[with_start] = forward
    reason[with_start] = np.where(forward != NO_FRAME, FOUND, FORWARD_OUTSIDE)
    return leaf, reason


def _bound_op_ends(events: TraceEvents, thread: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Per flow finish (thread, ts), the end of the longest CPU op on its thread starting at
    its time (its ts when there is none). One pass over the CPU rows."""
    end = ts.copy()
    order = lex_order((ts, thread))
    keys = SortedPairs(thread[order].astype(np.int64), ts[order])
    for block in events.cpu.blocks():
        rows = block[block["correlation"] == OP]
        lo, hi = keys.equal_range(rows["thread"].astype(np.int64), rows["ts"])
        at, which = concat_ranges(lo, hi)  # every (flow finish, op starting at it) pair
        np.maximum.at(end, order[at], rows["end"][which])
    return end


def _starts(events: TraceEvents, flow_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per flow id, the row of its start (the first in the file) and whether it has one."""
    flows = events.flows
    starts = np.flatnonzero((flows.finish == 0) & (flows.flow >= 0))
    by_id = starts[np.argsort(flows.flow[starts], kind="stable")]
    ids = flows.flow[by_id]
    at = np.minimum(np.searchsorted(ids, flow_id), max(len(ids) - 1, 0))
    if len(ids) == 0:
        return np.zeros(len(flow_id), dtype=np.int64), np.zeros(len(flow_id), dtype=bool)
    row = by_id[at]
    return row, ids[at] == flow_id
