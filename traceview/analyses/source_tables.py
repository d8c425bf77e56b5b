"""The tables of ``source`` from each kernel's innermost frame: by frame name, by module
(``nn.Module: Class_N`` frames, with their module path) and as collapsed stacks."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from traceview.aggregate import sums
from traceview.aggregate.order import lex_order, packed_order
from traceview.analyses.core.stacks import (
    MODULE_PREFIX,
    NO_FRAME,
    Stacks,
    build_stacks,
    is_module,
)

BACKWARD_MARK = "[backward]"
MAX_PATH = 32  # module path components kept (the innermost); deeper paths start with "…/"
_PASS = 1 << 18  # frames taken at a time
_PACK_BITS = 62  # a folded stack's (stack, mark, kernel) packed into one int64 within these


@dataclass(frozen=True)
class FrameRow:
    """One frame name (``file.py(LINE): function``): GPU time launched directly in it
    (self), in it or below (total, of which backward), kernels below it, calls (ns)."""

    frame: str
    self_ns: int
    total_ns: int
    backward_ns: int
    kernels: int
    calls: int


@dataclass(frozen=True)
class ModuleRow:
    """One module path: forward and backward GPU time below its ``nn.Module`` frames (ns)."""

    module: str
    path: str
    forward_ns: int
    backward_ns: int
    calls: int


@dataclass(frozen=True)
class StackLine:
    """One distinct stack, outermost first, ending with the kernel (ns of GPU time)."""

    frames: tuple[str, ...]
    ns: int


@dataclass(frozen=True)
class InstanceTimes:
    """The kernels with an innermost frame, by that frame (``leaf``, ascending), with the
    running sums of their ns, backward ns (``len(leaf) + 1`` each): the GPU time launched in
    frame i or any frame inside it (i .. ``after``[i] − 1) is the difference of two running
    sums, found for the frames asked. Nothing is held a frame (five int64 arrays a frame
    were 410 MB for 8.6M frames)."""

    leaf: np.ndarray
    ns: np.ndarray
    backward: np.ndarray
    after: np.ndarray  # stacks.after

    def self_ns(self) -> np.ndarray:
        """Each kernel's ns, in ``leaf`` order."""
        return np.diff(self.ns)

    def totals(self, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Of each of ``frames`` (indices in the stacks): ns, backward ns and kernels in it or
        any frame inside it."""
        lo = np.searchsorted(self.leaf, frames, "left")
        hi = np.searchsorted(self.leaf, self.after[frames], "left")
        return self.ns[hi] - self.ns[lo], self.backward[hi] - self.backward[lo], hi - lo


def instance_times(
    stacks: Stacks, leaf: np.ndarray, backward: np.ndarray, dur: np.ndarray
) -> InstanceTimes:
    """The InstanceTimes of kernels with innermost frame ``leaf`` (NO_FRAME: none)."""
    found = np.flatnonzero(leaf != NO_FRAME)
    found = found[np.argsort(leaf[found], kind="stable")]
    ns = sums.cumsum(dur[found])
    backward_ns = sums.cumsum(np.where(backward[found], dur[found], 0))
    return InstanceTimes(leaf[found], np.r_[0, ns], np.r_[0, backward_ns], stacks.after)


def frame_rows(
    stacks: Stacks, names: Sequence[str], times: InstanceTimes, in_window: np.ndarray
) -> list[FrameRow]:
    """One row per frame name with GPU time, most total time first (a name's total counts
    each kernel once however often the name recurs in its stack). ``stacks.name``: ids into
    ``names``; the frames are taken a pass at a time."""
    groups = len(names)
    self_ns = sums.by_group(stacks.name[times.leaf], times.self_ns(), groups)
    total, backward, kernels, calls = (np.zeros(groups, dtype=np.int64) for _ in range(4))
    for lo in range(0, len(stacks), _PASS):
        at = slice(lo, lo + _PASS)
        first = np.flatnonzero(stacks.first_of_name[at]) + lo  # each kernel once a name
        name = stacks.name[first]
        for out, values in zip((total, backward, kernels), times.totals(first), strict=True):
            np.add.at(out, name, values)
        calls += np.bincount(stacks.name[at][in_window[at]], minlength=groups)
    kept = np.flatnonzero(total > 0)
    kept = kept[lex_order((kept, -self_ns[kept], -total[kept]))]
    return [
        FrameRow(
            names[i],
            int(self_ns[i]),
            int(total[i]),
            int(backward[i]),
            int(kernels[i]),
            int(calls[i]),
        )
        for i in kept.tolist()
    ]


def module_rows(stacks: Stacks, names: Sequence[str], times: InstanceTimes) -> list[ModuleRow]:
    """One row per module path with GPU time, most time first."""
    at = np.flatnonzero(is_module(list(names))[stacks.name])
    nested = build_stacks(stacks.thread[at], stacks.name[at], stacks.ts[at], stacks.end[at])
    total_ns, total_backward, _ = times.totals(at)
    rows: dict[str, list[int]] = {}
    parts: list[tuple[str, ...]] = []
    for i, (parent, name, row) in enumerate(
        zip(nested.parent.tolist(), nested.name.tolist(), nested.row.tolist(), strict=True)
    ):
        short = names[name][len(MODULE_PREFIX) :]
        parts.append(((parts[parent] if parent >= 0 else ()) + (short,))[-MAX_PATH:])
        total, backward = int(total_ns[row]), int(total_backward[row])
        deep = nested.depth[i] >= MAX_PATH
        path = ("…/" if deep else "") + "/".join(parts[i])
        row_of = rows.setdefault(path, [0, 0, 0])
        row_of[0] += total - backward
        row_of[1] += backward
        row_of[2] += 1
    ordered = sorted(rows.items(), key=lambda item: (-(item[1][0] + item[1][1]), item[0]))
    return [
        ModuleRow(path.rsplit("/", 1)[-1], path, forward, backward, calls)
        for path, (forward, backward, calls) in ordered
        if forward + backward > 0
    ]


def folded_stacks(
    stacks: Stacks,
    names: Sequence[str],
    leaf: np.ndarray,
    backward: np.ndarray,
    kernels: tuple[np.ndarray, Sequence[str]],
    dur: np.ndarray,
    why: np.ndarray,
    reasons: Sequence[str],
) -> list[StackLine]:
    """One line per distinct (stack, kernel): frames outermost first, ``[backward]`` before a
    kernel found through a flow, ``[<why>]`` for a kernel without a frame. ``names``: the
    frames' (stacks.name ids into it); ``kernels``: the kernels' name ids and their names."""
    kernel_name, kernel_names = kernels
    stack_of, stack_parent, stack_name = _stack_ids(stacks)
    found = leaf != NO_FRAME
    key = -1 - np.maximum(why.astype(np.int64), 0)  # ids of stacks from here
    key[found] = stack_of[leaf[found]]
    del found, stack_of
    order, heads = _grouped(key, backward, kernel_name)
    ns = np.add.reduceat(dur[order], heads) if len(heads) else np.empty(0, np.int64)
    chains: dict[int, tuple[str, ...]] = {}
    lines = []
    for row, total in zip(order[heads].tolist(), ns.tolist(), strict=True):
        k = int(key[row])
        if k >= 0:
            frames = _chain(k, stack_parent, stack_name, names, chains)
            tail = (BACKWARD_MARK,) if backward[row] else ()
        else:
            frames, tail = (f"[{reasons[-1 - k]}]",), ()
        lines.append(StackLine((*frames, *tail, kernel_names[int(kernel_name[row])]), int(total)))
    return sorted(lines, key=lambda line: line.frames)


def _grouped(
    key: np.ndarray, mark: np.ndarray, kernel: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The rows in (key, mark, kernel) order, stable (``lex_order((kernel, mark, key))``),
    and where each run of equal triples starts in it. The three are packed into one int64 a
    row when they fit in _PACK_BITS (else sorted as columns)."""
    n = len(key)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    low, kernel_bits = int(key.min()), int(kernel.max()).bit_length()
    if (
        int(kernel.min()) >= 0
        and (int(key.max()) - low).bit_length() + 1 + kernel_bits <= _PACK_BITS
    ):
        packed = key - low
        packed <<= 1
        packed |= mark
        packed <<= kernel_bits
        packed |= kernel
        order = np.argsort(packed, kind="stable")
        packed = packed[order]
        return order, np.flatnonzero(np.r_[True, packed[1:] != packed[:-1]])
    order = lex_order((kernel.astype(np.int64), mark.astype(np.int64), key))
    new = np.zeros(n, dtype=bool)
    new[0] = True
    for column in (key, mark, kernel):
        ordered = column[order]
        new[1:] |= ordered[1:] != ordered[:-1]
    return order, np.flatnonzero(new)


def _stack_ids(stacks: Stacks) -> tuple[np.ndarray, list[int], list[int]]:
    """Per frame, the id of its stack (the names from the outermost frame to it), and per
    stack id its parent stack and its last name. A level of depth at a time: the frames of
    one depth get their (parent's stack, name) pairs' ids at once (the ids' order differs
    from a pass in preorder; every use of them sorts by the names)."""
    n = len(stacks)
    if n == 0:
        return np.zeros(0, dtype=np.int64), [], []
    parent, name, depth = stacks.parent, stacks.name, stacks.depth  # int32 where they fit
    width = int(name.max()) + 1
    if not _one_level_up(parent, depth) or (n + 1) * width >= 2**63:
        return _stack_ids_in_preorder(stacks)
    small = np.int32 if n < 2**31 else np.int64
    order, bounds = _by_depth(depth, small)  # preorder within a depth
    of = np.empty(n, dtype=small)
    ups: list[np.ndarray] = []
    last: list[np.ndarray] = []
    count = 0
    for lo, hi in itertools.pairwise(bounds):  # a few dozen depths
        found = _number_level(order[lo:hi], parent, name, width, of, count)
        up_of, name_of = np.divmod(found, width)
        ups.append(up_of - 1)
        last.append(name_of)
        count += len(found)
    stack_parent: list[int] = np.concatenate(ups).tolist()
    stack_name: list[int] = np.concatenate(last).tolist()
    return of, stack_parent, stack_name


def _number_level(
    at: np.ndarray, parent: np.ndarray, name: np.ndarray, width: int, of: np.ndarray, count: int
) -> np.ndarray:
    """Of the frames ``at`` (one depth; their parents numbered in ``of``): their (parent's
    stack, name) pairs as keys, ``of[at]`` set to ``count`` + each key's rank among the
    distinct keys (``np.unique``'s inverse); returns those keys, ascending. One int64 key a
    frame sorted with its position (int32 positions), not ``np.unique``'s four arrays a
    frame: a level can hold most of a trace's frames."""
    up = np.where(parent[at] >= 0, of[np.maximum(parent[at], 0)], -1).astype(np.int64)
    up += 1
    up *= width
    up += name[at]
    order = packed_order(None, up)
    if order is None:  # too wide to pack with positions
        keys, inverse = np.unique(up, return_inverse=True)
        of[at] = count + inverse.reshape(-1)
        return keys
    up = up[order]  # ascending
    new = np.empty(len(up), dtype=bool)
    new[:1] = True
    np.not_equal(up[1:], up[:-1], out=new[1:])
    distinct: np.ndarray = up[new]
    del up
    rank = np.cumsum(new, dtype=of.dtype)
    rank += count - 1
    of[at[order]] = rank
    return distinct


def _one_level_up(parent: np.ndarray, depth: np.ndarray) -> bool:
    """Whether every root is at depth 0 and every other frame one level below its parent
    (a pass of frames at a time)."""
    for lo in range(0, len(parent), _PASS):
        up, level = parent[lo : lo + _PASS], depth[lo : lo + _PASS]
        held = up >= 0
        if not (
            bool((level[~held] == 0).all()) and bool((depth[up[held]] == level[held] - 1).all())
        ):
            return False
    return True


def _by_depth(depth: np.ndarray, dtype: type[np.integer[Any]]) -> tuple[np.ndarray, list[int]]:
    """The frames by depth, in order within one (``np.argsort(depth, kind="stable")`` as
    ``dtype``), and where each depth starts in it (one more bound than depths): a pass of
    frames at a time, each written to its depth's place."""
    filled = np.r_[0, np.cumsum(np.bincount(depth))]
    bounds: list[int] = filled.tolist()
    order = np.empty(len(depth), dtype=dtype)
    for lo in range(0, len(depth), _PASS):
        part = depth[lo : lo + _PASS]
        local = np.argsort(part, kind="stable")
        local += lo
        starts = np.r_[0, np.cumsum(np.bincount(part))].tolist()
        for level, (a, b) in enumerate(itertools.pairwise(starts)):
            if b > a:
                order[filled[level] : filled[level] + b - a] = local[a:b]
                filled[level] += b - a
    return order, bounds


def _stack_ids_in_preorder(stacks: Stacks) -> tuple[np.ndarray, list[int], list[int]]:
    """``_stack_ids`` by one pass over the frames in preorder (for links that do not go one
    depth up at a time)."""
    ids: dict[tuple[int, int], int] = {}
    stack_parent: list[int] = []
    stack_name: list[int] = []
    of: list[int] = []
    for parent, name in zip(stacks.parent.tolist(), stacks.name.tolist(), strict=True):
        up = of[parent] if parent >= 0 else -1
        sid = ids.get((up, name))
        if sid is None:
            sid = ids[up, name] = len(stack_parent)
            stack_parent.append(up)
            stack_name.append(name)
        of.append(sid)
    return np.array(of, dtype=np.int64), stack_parent, stack_name


def _chain(
    sid: int,
    stack_parent: list[int],
    stack_name: list[int],
    names: Sequence[str],
    chains: dict[int, tuple[str, ...]],
) -> tuple[str, ...]:
    """The names of stack ``sid``, outermost first (kept: several kernels share a stack)."""
    if sid not in chains:
        path = []
        at = sid
        while at >= 0:
            path.append(names[stack_name[at]])
            at = stack_parent[at]
        chains[sid] = tuple(reversed(path))
    return chains[sid]
