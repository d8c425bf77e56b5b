"""Python call stacks from a trace's frames: which frames nest in which, and the innermost
frame around any point of a thread (a kernel's launch, a host stall).

Frames nest by time, per thread: a frame lies inside another when its closed window
[ts, end] lies inside the other's. A frame that starts inside another and ends after it
(overlapping without nesting: the trace is damaged) is cut at the other's end and counted.
The ``Python parent id`` is only checked against that nesting (it can name a frame that began
before the trace, on another thread, or form a cycle in a damaged trace): no walk follows it.

One linear pass over the frames in (thread, start, longest first) order, keeping the open
frames on a stack; the queries are vectorised (one search of the frames, then their
enclosing frames climbed).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from traceview.aggregate.order import lex_order, narrowed, searchsorted_pairs

NO_FRAME = -1
# The address in a built-in's frame name (``<built-in method add_ of Tensor object at 0x7f..>``):
# one per object, so the same method would be many frames.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def frame_names(name: np.ndarray, names: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """The frames' names without object addresses: per frame an id into the list returned
    (one pass over the distinct names, not the frames)."""
    ids, inverse = np.unique(name, return_inverse=True)
    index: dict[str, int] = {}
    of_id = np.array(
        [index.setdefault(_ADDRESS.sub("", names[i]), len(index)) for i in ids.tolist()],
        dtype=np.int64,
    )
    return of_id[inverse].reshape(-1), list(index)


MODULE_PREFIX = "nn.Module: "


@dataclass(frozen=True)
class Stacks:
    """Frames in preorder (by thread, then start, longest first): ``row`` their row in the
    input; ``end`` cut where a frame overlapped its parent without nesting; ``parent`` the
    enclosing frame (NO_FRAME for a root); frame i's descendants are i+1 .. ``after``[i] − 1;
    ``first_of_name``: no enclosing frame has its name (recursion counted once)."""

    row: np.ndarray
    thread: np.ndarray
    name: np.ndarray
    ts: np.ndarray
    end: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    after: np.ndarray
    first_of_name: np.ndarray
    overlapping: int  # frames cut because they overlapped another without nesting

    def __len__(self) -> int:
        return len(self.row)


def build_stacks(thread: np.ndarray, name: np.ndarray, ts: np.ndarray, end: np.ndarray) -> Stacks:
    """The nesting of the frames (rows of equal length; ``name``: interned name ids). The
    ids, rows and links are int32 where they fit (8.5M frames: 170 MB less than int64)."""
    order = lex_order((-end, ts, thread)) if len(ts) else np.empty(0, dtype=np.int64)
    threads, names, starts, ends = thread[order], name[order], ts[order], end[order]
    nested = _nest_nested(threads, names, starts, ends)
    if nested is not None:  # every frame inside its parent: nothing to cut
        parent, depth, after, first = nested
        cut, overlapping = ends, 0
    else:
        cut_ = ends.tolist()
        parent_, depth_, after_, first_, overlapping = _nest(
            threads.tolist(), names.tolist(), starts.tolist(), cut_
        )
        cut = np.array(cut_, dtype=np.int64)
        parent, depth, after = (np.array(a, dtype=np.int64) for a in (parent_, depth_, after_))
        first = np.array(first_, dtype=bool)
    return Stacks(
        row=narrowed(order),
        thread=narrowed(threads),
        name=narrowed(names),
        ts=starts,
        end=cut,
        parent=narrowed(parent),
        depth=narrowed(depth),
        after=narrowed(after),
        first_of_name=first,
        overlapping=overlapping,
    )


def _nest_nested(
    threads: np.ndarray, names: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """``_nest``'s parent, depth, after and first-of-name, vectorised, for frames in preorder
    that nest; None when one overlaps its parent without nesting (``_nest`` cuts it, and the
    cut changes what follows). A frame is closed by the first later frame of its thread that
    starts after its end, or at its end and ends later (among equal starts the longest come
    first): a frame of no length at its end lies inside it."""
    n = len(starts)
    if n == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty, np.empty(0, dtype=bool)
    index = np.arange(n, dtype=np.int64)
    # preorder is by (thread, start): the first row of its thread starting at or after its end
    lo = np.maximum(searchsorted_pairs(threads, starts, threads, ends, "left"), index + 1)
    hi = searchsorted_pairs(threads, starts, threads, ends, "right")
    inside_at_end = (lo < hi) & (ends[np.minimum(lo, n - 1)] <= ends)
    after = np.where(inside_at_end, hi, lo)
    del lo, hi, inside_at_end
    # depth: the frames before it not yet closed
    depth = index - np.cumsum(np.bincount(after, minlength=n + 1))[:n]
    # parent: the last frame before it one level up (the nesting keeps it in its thread)
    by_depth = np.lexsort((index, depth))
    keys = depth[by_depth] * (n + 1) + by_depth
    at = np.searchsorted(keys, (depth - 1) * (n + 1) + index) - 1
    held = depth > 0
    parent = np.where(held, by_depth[np.maximum(at, 0)], NO_FRAME)
    del by_depth, keys, at
    if bool((ends[parent[held]] < ends[held]).any()):
        return None  # overlapping without nesting: _nest's cut
    # first of its name: no earlier frame of its name holds it (its after beyond it)
    by_name = np.lexsort((index, names))
    group = np.r_[0, np.cumsum(names[by_name][1:] != names[by_name][:-1])] * (n + 1)
    before = np.maximum.accumulate(np.r_[-1, (after[by_name] + group)[:-1]])
    first = np.empty(n, dtype=bool)
    first[by_name] = before <= by_name + group
    return parent, depth, after, first


def _nest(
    threads: list[int], names: list[int], starts: list[int], ends: list[int]
) -> tuple[list[int], list[int], list[int], list[bool], int]:
    """The stack pass (linear: each frame is pushed and popped once); cuts ``ends`` in place."""
    n = len(starts)
    parent, depth, after = [NO_FRAME] * n, [0] * n, [n] * n
    first = [True] * n
    open_names: dict[int, int] = {}
    stack: list[int] = []
    overlapping = 0
    current = None
    for i in range(n):
        if threads[i] != current:
            current = threads[i]
            _close(stack, after, i, names, open_names, 0)
        start, end = starts[i], ends[i]
        while stack:
            top = stack[-1]
            if end <= ends[top]:
                break
            if start < ends[top]:  # overlaps the open frame without nesting in it
                ends[i] = end = ends[top]
                overlapping += 1
                break
            _close(stack, after, i, names, open_names, len(stack) - 1)
        if stack:
            parent[i] = stack[-1]
        depth[i] = len(stack)
        seen = open_names.get(names[i], 0)
        first[i] = seen == 0
        open_names[names[i]] = seen + 1
        stack.append(i)
    return parent, depth, after, first, overlapping


def _close(
    stack: list[int],
    after: list[int],
    at: int,
    names: list[int],
    open_names: dict[int, int],
    keep: int,
) -> None:
    """Close the open frames above the first ``keep``: their descendants end before ``at``."""
    while len(stack) > keep:
        top = stack.pop()
        after[top] = at
        open_names[names[top]] -= 1


def innermost(stacks: Stacks, thread: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Per point (a thread id, a time in ns), the innermost frame on that thread that holds
    the time (ts ≤ time < end; its index in ``stacks``), else NO_FRAME.

    The last frame of the point's thread starting at or before it (preorder: by thread and
    start, longest first, so of equal starts the innermost) holds it, or else the frame
    holding it encloses that one (the frames nest): the enclosing frames are climbed, all
    points at once, until one ends after the point. Frames of no length hold no time. One
    search of every frame, no sort of them (a sort of frames and points together held
    ~115 bytes a frame: 1.6 GB for `source` at 8 GB of a trace recorded with stacks)."""
    m = len(at)
    out = np.full(m, NO_FRAME, dtype=np.int64)
    if len(stacks) == 0 or m == 0:
        return out
    last = searchsorted_pairs(stacks.thread, stacks.ts, thread, at, "right") - 1
    frame = np.where(stacks.thread[np.maximum(last, 0)] == thread, last, NO_FRAME)
    frame[last < 0] = NO_FRAME
    todo = np.flatnonzero(frame != NO_FRAME)
    while len(todo):  # at most the deepest stack's depth rounds
        f = frame[todo]
        holds = stacks.end[f] > at[todo]
        out[todo[holds]] = f[holds]
        todo = todo[~holds]
        frame[todo] = stacks.parent[frame[todo]]
        todo = todo[frame[todo] != NO_FRAME]
    return out


def subtree_sums(stacks: Stacks, values: np.ndarray) -> np.ndarray:
    """Per frame, the sum of ``values`` (one per frame) over it and every frame inside it."""
    cum = np.concatenate([[0], np.cumsum(values, dtype=np.int64)])
    total: np.ndarray = cum[stacks.after] - cum[np.arange(len(stacks))]
    return total


def is_module(names: list[str]) -> np.ndarray:
    """Mask over names: an ``nn.Module: Class_N`` frame."""
    return np.fromiter((n.startswith(MODULE_PREFIX) for n in names), bool, len(names))


def covering_frame(
    stacks: Stacks, names: Sequence[str], thread: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[str, int, int] | None:
    """Of the windows [start, end) (ns) on ``thread`` (e.g. host stalls), the innermost
    frame holding at least half of each (found from the frame around its middle, going out),
    and of these the name holding the most time: (name, ns of the windows inside it, windows
    it holds); None when no frame holds half of any window."""
    middle = start + (end - start) // 2
    frame = innermost(stacks, thread, middle)
    held: dict[int, list[int]] = {}
    for at, lo, hi in zip(frame.tolist(), start.tolist(), end.tolist(), strict=True):
        while at != NO_FRAME:  # out through the enclosing frames: at most the stack's depth
            inside = min(int(stacks.end[at]), hi) - max(int(stacks.ts[at]), lo)
            if 2 * inside >= hi - lo:
                entry = held.setdefault(int(stacks.name[at]), [0, 0])
                entry[0] += inside
                entry[1] += 1
                break
            at = int(stacks.parent[at])
    if not held:
        return None
    name, (ns, count) = max(held.items(), key=lambda item: (item[1][0], -item[0]))
    return names[name], ns, count
