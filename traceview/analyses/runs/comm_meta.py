"""Each communication kernel's collective metadata (traceview.columns.comms): the kernel's own
args, and for what they lack, the args of the CPU op that launched it.

The launching op of a kernel: among the metadata-carrying CPU ops (``record_param_comms``) on
the thread of the kernel's launch (the earliest runtime call with its correlation id) that
start at or before the launch, the one starting last (the last in the file among equal
starts), if its window [ts, end] contains the launch. Definitions in docs/metrics.md.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from traceview.aggregate.order import lex_order, searchsorted_pairs
from traceview.analyses.core.oplinks import launches_and_threads
from traceview.columns.comms import ABSENT
from traceview.columns.model import TraceEvents
from traceview.columns.schema import CommColumns


@dataclass(frozen=True)
class KernelMeta:
    """Per kernel asked about: the index of its (process group, collective, dtype) in
    ``TraceEvents.comm_keys`` and its counts; ABSENT where neither source has them."""

    key: np.ndarray
    in_nelems: np.ndarray
    out_nelems: np.ndarray
    group_size: np.ndarray
    seq: np.ndarray


def kernel_meta(events: TraceEvents, rows: np.ndarray) -> KernelMeta:
    """The metadata of the GPU rows ``rows``."""
    meta = KernelMeta(*(np.full(len(rows), ABSENT, np.int64) for _ in fields(KernelMeta)))
    table = events.comms
    if len(table.key) == 0 or len(rows) == 0:
        return meta
    own = np.flatnonzero(table.gpu_row >= 0)
    if len(own):
        order = own[np.argsort(table.gpu_row[own], kind="stable")]
        at = order[np.minimum(np.searchsorted(table.gpu_row[order], rows), len(order) - 1)]
        has = table.gpu_row[at] == rows
        _fill(meta, table, np.flatnonzero(has), at[has])
    ops = np.flatnonzero((table.gpu_row < 0) & (table.thread >= 0))
    if len(ops) and _lacking(meta, table, ops):
        kernels, op = _launching_ops(events, rows, table, ops)
        _fill(meta, table, kernels, op)
    return meta


def ops_would_add(events: TraceEvents, rows: np.ndarray) -> bool:
    """Whether CPU ops whose thread this read does not know (read without CPU rows) carry
    what some of the GPU rows ``rows`` lack: a read with CPU rows links them."""
    table = events.comms
    unknown = np.flatnonzero((table.gpu_row < 0) & (table.thread < 0))
    return bool(len(unknown) and len(rows)) and _lacking(kernel_meta(events, rows), table, unknown)


def _fill(meta: KernelMeta, table: CommColumns, kernels: np.ndarray, at: np.ndarray) -> None:
    """Give ``kernels`` the values of table rows ``at`` where they have none yet."""
    for f in fields(KernelMeta):
        mine, theirs = getattr(meta, f.name), getattr(table, f.name)[at]
        empty = mine[kernels] == ABSENT
        mine[kernels[empty]] = theirs[empty]


def _lacking(meta: KernelMeta, table: CommColumns, ops: np.ndarray) -> bool:
    """Whether the ops hold a field some kernel lacks (else no linking is needed)."""
    return any(
        (getattr(meta, f.name) == ABSENT).any() and (getattr(table, f.name)[ops] != ABSENT).any()
        for f in fields(KernelMeta)
    )


def _launching_ops(
    events: TraceEvents, rows: np.ndarray, table: CommColumns, ops: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(positions in ``rows``, table rows): each kernel that has a launching op, and it."""
    launch, thread_of = launches_and_threads(events)
    thread, at_ts = thread_of[rows].astype(np.int64), launch[rows]
    by_start = ops[lex_order((ops, table.ts[ops], table.thread[ops].astype(np.int64)))]
    op_thread = table.thread[by_start].astype(np.int64)
    known = np.flatnonzero(thread >= 0)
    last = searchsorted_pairs(op_thread, table.ts[by_start], thread[known], at_ts[known], "right")
    candidate = by_start[np.maximum(last - 1, 0)]
    linked = (
        (last > 0)
        & (table.thread[candidate] == thread[known])
        & (table.end[candidate] >= at_ts[known])
    )
    return known[linked], candidate[linked]
