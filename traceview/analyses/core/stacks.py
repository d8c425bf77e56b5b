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

from traceview.aggregate.order import lex_order, narrowed, packed_order, present
from traceview.aggregate.sorted_pairs import SortedPairs

NO_FRAME = -1
_PASS = 1 << 20  # frames a search takes at a time: its temporaries stay small
_POINTS = 1 << 18  # points innermost takes at a time (each pass climbs the stacks' depth)
_INT64_LIMIT = 1 << 63
# The address in a built-in's frame name (``<built-in method add_ of Tensor object at 0x7f..>``):
# one per object, so the same method would be many frames.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def frame_names(name: np.ndarray, names: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """The frames' names without object addresses: per frame an id (int32) into the list
    returned (one pass over the distinct names, not the frames; no sort of the frames)."""
    ids = present(name, len(names))
    index: dict[str, int] = {}
    of_id = np.zeros(len(names), dtype=np.int32)
    of_id[ids] = [index.setdefault(_ADDRESS.sub("", names[i]), len(index)) for i in ids.tolist()]
    return of_id[name], list(index)


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
    """The nesting of the frames (rows of equal length; ``name``: interned name ids, not
    negative). The ids, rows and links are int32 where they fit: 8.6M frames held 1.30 GB at
    their peak with int64 temporaries (benchmarks/RESULTS-rust-43c.md). Frames given in
    preorder are not copied: the Stacks hold the columns given."""
    if _in_preorder(thread, ts, end):  # one thread's frames as traces record them: as given
        order = np.arange(len(ts), dtype=np.int32 if len(ts) < 2**31 else np.int64)
        threads, names, starts, ends = thread, name, ts, end
    else:
        order = _preorder(thread, ts, end)
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


def _in_preorder(thread: np.ndarray, ts: np.ndarray, end: np.ndarray) -> bool:
    """Whether the frames are in preorder already (by thread, start, longest first), a pass
    at a time."""
    n = len(ts)
    for lo in range(0, n - 1, _PASS):
        now, after = slice(lo, min(lo + _PASS, n - 1)), slice(lo + 1, min(lo + _PASS, n - 1) + 1)
        same_thread, same_start = thread[now] == thread[after], ts[now] == ts[after]
        ordered = (thread[now] < thread[after]) | (same_thread & (ts[now] < ts[after]))
        ordered |= same_thread & same_start & (end[now] >= end[after])
        if not bool(ordered.all()):
            return False
    return True


def _preorder(thread: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """``lex_order((-end, ts, thread))``: by thread, start, longest first, then row (int32
    where it fits)."""
    if len(ts) == 0:
        return np.empty(0, dtype=np.int64)
    order = packed_order(thread, ts, lambda at: [-end[at]])
    return lex_order((-end, ts, thread)) if order is None else order


def _nest_nested(
    threads: np.ndarray, names: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """``_nest``'s parent, depth, after and first-of-name, vectorised, for frames in preorder
    that nest; None when one overlaps its parent without nesting (``_nest`` cuts it, and the
    cut changes what follows). A frame is closed by the first later frame of its thread that
    starts after its end, or at its end and ends later (among equal starts the longest come
    first): a frame of no length at its end lies inside it. Positions are int32 where they
    fit, and each search runs a pass of frames at a time (one int64 key a frame held)."""
    n = len(starts)
    if n == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty, np.empty(0, dtype=bool)
    position = np.int32 if n < 2**31 - 1 else np.int64
    # preorder is by (thread, start): the first row of its thread starting at or after its end
    after = np.empty(n, dtype=position)
    pairs = SortedPairs(threads, starts)
    for first in range(0, n, _PASS):
        at = slice(first, first + _PASS)
        lo = pairs.search(threads[at], ends[at], "left")
        hi = pairs.search(threads[at], ends[at], "right")
        np.maximum(lo, np.arange(first + 1, first + 1 + len(lo)), out=lo)
        inside_at_end = (lo < hi) & (ends[np.minimum(lo, n - 1)] <= ends[at])
        after[at] = np.where(inside_at_end, hi, lo)
    del pairs
    # depth: the frames before it not yet closed
    closed = np.bincount(after, minlength=n + 1)
    np.cumsum(closed, out=closed)
    depth = np.empty(n, dtype=position)
    for begin in range(0, n, _PASS):
        stop = min(begin + _PASS, n)
        depth[begin:stop] = np.arange(begin, stop) - closed[begin:stop]
    del closed
    parent = _parents(depth, ends)
    if parent is None:
        return None  # overlapping without nesting: _nest's cut
    return parent, depth, after, _first_of_name(names, after)


def _parents(depth: np.ndarray, ends: np.ndarray) -> np.ndarray | None:
    """Each frame's parent: the last frame before it one level up (the nesting keeps it in
    its thread); None when a frame ends after its parent. (depth, position) keys sorted in
    place, searched a pass at a time."""
    n = len(depth)
    span = n + 1
    keys = depth.astype(np.int64)
    keys *= span
    keys += np.arange(n)
    keys.sort()
    parent = np.empty(n, dtype=depth.dtype)
    for lo in range(0, n, _PASS):
        at = slice(lo, lo + _PASS)
        up = depth[at].astype(np.int64)
        up -= 1
        up *= span
        up += np.arange(lo, lo + len(up))
        found = np.searchsorted(keys, up) - 1
        held = depth[at] > 0
        part = np.where(held, keys[np.maximum(found, 0)] % span, NO_FRAME)
        if bool((ends[part[held]] < ends[at][held]).any()):
            return None
        parent[at] = part
    return parent


def _first_of_name(names: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Per frame: no earlier frame of its name holds it (its after beyond it). The frames
    by (name, position) in one int64 key a frame, sorted in place; a running maximum of the
    afters, each name's offset above the last's, carried from pass to pass."""
    n = len(after)
    span = n + 1
    if n and (int(names.min()) < 0 or (int(names.max()) + 1) * span > _INT64_LIMIT):
        names = np.unique(names, return_inverse=True)[1].reshape(-1)  # dense ids
    keys = names.astype(np.int64)
    keys *= span
    keys += np.arange(n)
    keys.sort()
    first = np.empty(n, dtype=bool)
    carried = -1
    for lo in range(0, n, _PASS):
        part = keys[lo : lo + _PASS]
        row = part % span
        group = part - row  # the name's offset: its frames above every earlier name's
        held = after[row] + group
        before = np.maximum.accumulate(np.r_[carried, held[:-1]])
        carried = max(carried, int(held[-1]), int(before[-1]))
        first[row] = before <= row + group
    return first


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
    the time (ts ≤ time < end; its index in ``stacks``, int32 where it fits), else NO_FRAME
    (as for a point of a negative thread, or at NO_LAUNCH).

    The last frame of the point's thread starting at or before it (preorder: by thread and
    start, longest first, so of equal starts the innermost) holds it, or else the frame
    holding it encloses that one (the frames nest): the enclosing frames are climbed, a
    pass of points at a time, until one ends after the point. Frames of no length hold no
    time. The frames' (thread, start) packed once, no sort of them (a sort of frames and
    points together held ~115 bytes a frame: 1.6 GB for `source` at 8 GB of a trace
    recorded with stacks)."""
    m = len(at)
    out = np.full(m, NO_FRAME, dtype=np.int32 if len(stacks) < 2**31 else np.int64)
    if len(stacks) == 0 or m == 0:
        return out
    pairs = SortedPairs(stacks.thread, stacks.ts)
    for lo in range(0, m, _POINTS):
        part = slice(lo, lo + _POINTS)
        out[part] = _innermost(stacks, pairs, thread[part], at[part])
    return out


def _innermost(
    stacks: Stacks, pairs: SortedPairs, thread: np.ndarray, at: np.ndarray
) -> np.ndarray:
    """``innermost`` of a pass of points (``pairs``: the frames' (thread, ts))."""
    out = np.full(len(at), NO_FRAME, dtype=np.int64)
    last = pairs.search(thread, at, "right") - 1
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
