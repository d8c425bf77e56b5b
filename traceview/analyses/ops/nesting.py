"""Work counted once when ops nest: an autocast ``aten::addmm`` that calls a bf16
``aten::addmm``, ``aten::linear`` → ``aten::addmm``, ``aten::matmul`` → ``aten::mm``.

Two calls on one thread whose FLOPs rules (analyses.flops) give the same kind of work (gemm,
attention, convolution) and of which one contains the other describe the same computation. At
the leaf level the work is counted at the innermost such call (the op that launched the
kernels); at the top level at the outermost. Calls nest properly (kineto writes them so).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traceview.aggregate.order import distinct, lex_order_then
from traceview.analyses.core.opcalls import OpCalls
from traceview.analyses.ops.flops import Work, rule_names
from traceview.columns.cpu_rows import OP
from traceview.columns.model import TraceEvents


@dataclass(frozen=True)
class Counted:
    """Per (name, shape) pair of op calls: how many calls carry their work, and the dtype that
    work runs in (the innermost call's input type: an autocast wrapper's fp32 inputs are not
    what its nested bf16 call computes in; None when its calls differ)."""

    calls: np.ndarray
    dtype: list[str | None]


def counted_calls(
    events: TraceEvents, calls: OpCalls, works: list[Work | None], innermost: bool
) -> Counted:
    """The Counted of ``calls``: a call's work is dropped when it wraps (``innermost``) or
    is wrapped by a call of the same kind of work."""
    kinds = sorted({w.kind for w in works if w is not None})
    kind = np.array([-1 if w is None else kinds.index(w.kind) for w in works] + [-1])
    width = max(len(events.shapes), 0) + 1
    pair_key = calls.name.astype(np.int64) * width + calls.shape.astype(np.int64) + 1
    by_key = np.argsort(pair_key, kind="stable")
    thread, ts, end, pair = _work_calls(events, pair_key[by_key], by_key, kind)
    # (thread, kind) as one group id, ordered as the pair is: the sort packs (group, ts),
    # and only calls tied on both are ordered by their end
    thread *= len(kinds)
    thread += kind[pair]
    held = [thread, ts, end, pair]  # handed over: _in_order frees each as it goes
    del thread, ts, end, pair
    group, end, pair = _in_order(held)
    wraps = _contains_next(group, end)
    shadowed = wraps if innermost else _inside_earlier(group, end)
    del group, end
    kept = np.flatnonzero(~shadowed)
    chain_end = np.flatnonzero(~wraps)  # calls wrapping none: each chain's innermost
    del wraps
    inner = pair[chain_end[np.searchsorted(chain_end, kept)]]  # of the calls kept
    del chain_end
    dtype: list[str | bool | None] = [True if w is None else w.dtype for w in works]
    for p, one in _one_dtype(works, pair[kept], inner).items():
        dtype[p] = one
    del kept, inner
    dropped = np.bincount(pair[shadowed], minlength=len(works))[: len(works)]
    return Counted(calls.calls - dropped, [d if isinstance(d, str) else None for d in dtype])


def _in_order(held: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The group, end and pair columns of ``held`` (group, ts, end, pair: the list emptied)
    in (group, ts, longest first) order, each reordered in turn and the old one freed
    before the next is made."""
    order = lex_order_then(held[0], held[1], lambda rows: [-held[2][rows]])
    del held[1]  # the starts: not needed in order
    out = []
    while held:
        out.append(held.pop(0)[order])
    group, end, pair = out
    return group, end, pair


def _one_dtype(
    works: list[Work | None], pair: np.ndarray, inner: np.ndarray
) -> dict[int, str | None]:
    """Per pair index in ``pair``: the dtype of the innermost calls (``inner``, pair indices
    with a Work) its calls count for, None when they differ; per distinct (pair, dtype)."""
    labels: dict[str | None, int] = {}
    code = np.array([labels.setdefault(None if w is None else w.dtype, len(labels)) for w in works])
    if len(pair) == 0:
        return {}
    values = list(labels)
    seen = distinct(pair.astype(np.int64) * len(values) + code[inner])
    owner, label = np.divmod(seen, len(values))
    alone = np.bincount(owner)[owner] == 1
    return {
        p: values[c] if one else None
        for p, c, one in zip(owner.tolist(), label.tolist(), alone.tolist(), strict=True)
    }


def _work_calls(
    events: TraceEvents, sorted_keys: np.ndarray, by_key: np.ndarray, kind: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Thread, start, end and pair index of every CPU op call whose name has a FLOPs rule
    and whose pair has a kind of work (``kind`` per pair index, −1: none), each column
    joined from the blocks' parts as the parts go."""
    names = rule_names()
    wanted = np.array([n in names for n in events.names] + [False])
    width = max(len(events.shapes), 0) + 1
    parts: list[tuple[np.ndarray, ...]] = []
    for block in events.cpu.blocks():
        rows = block[(block["correlation"] == OP) & wanted[block["name"]]]
        key = rows["name"].astype(np.int64) * width + rows["shape"].astype(np.int64) + 1
        at = np.minimum(np.searchsorted(sorted_keys, key), max(len(sorted_keys) - 1, 0))
        found = sorted_keys[at] == key if len(sorted_keys) else np.zeros(len(key), dtype=bool)
        pair = by_key[at[found]]
        worked = kind[pair] >= 0
        rows, pair = rows[found][worked], pair[worked]
        # copies: views of ``rows`` would hold every field of the CPU rows, 2.5× the bytes
        parts.append((rows["thread"].astype(np.int64), rows["ts"].copy(), rows["end"].copy(), pair))
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, empty
    columns = [list(column) for column in zip(*parts, strict=True)]
    del parts
    out = []
    for column in columns:
        out.append(np.concatenate(column))
        column.clear()
    return tuple(out)


def _contains_next(group: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Mask: the call's next one in (group, start, longest first) order is inside it (starts
    no earlier, by the order, and ends no later: a sibling that starts where it ends is not)."""
    out = np.zeros(len(end), dtype=bool)
    if len(end) > 1:
        out[:-1] = (group[1:] == group[:-1]) & (end[1:] <= end[:-1])
    return out


def _inside_earlier(group: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Mask: the call lies inside an earlier call of its group (in start order: one that
    ends no earlier than it)."""
    out = np.zeros(len(end), dtype=bool)
    if len(end) == 0:
        return out
    heads = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    for lo, hi in zip(heads.tolist(), [*heads[1:].tolist(), len(end)], strict=True):
        reach = np.maximum.accumulate(end[lo:hi])
        out[lo + 1 : hi] = end[lo + 1 : hi] <= reach[:-1]
    return out
