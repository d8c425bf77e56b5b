"""The tables of ``source`` from each kernel's innermost frame: by frame name, by module
(``nn.Module: Class_N`` frames, with their module path) and as collapsed stacks."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from traceview.aggregate.order import lex_order
from traceview.analyses.core.stacks import (
    MODULE_PREFIX,
    NO_FRAME,
    Stacks,
    build_stacks,
    subtree_sums,
)

BACKWARD_MARK = "[backward]"
MAX_PATH = 32  # module path components kept (the innermost); deeper paths start with "…/"


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
    """Per frame of ``stacks``: GPU ns launched directly in it (all, backward), kernels
    directly in it, and the same over it and every frame inside it."""

    self_ns: np.ndarray
    self_backward: np.ndarray
    total_ns: np.ndarray
    total_backward: np.ndarray
    total_kernels: np.ndarray


def instance_times(
    stacks: Stacks, leaf: np.ndarray, backward: np.ndarray, dur: np.ndarray
) -> InstanceTimes:
    """The InstanceTimes of kernels with innermost frame ``leaf`` (NO_FRAME: none)."""
    n = len(stacks)
    found = leaf != NO_FRAME
    self_ns, self_backward, kernels = (np.zeros(n, dtype=np.int64) for _ in range(3))
    np.add.at(self_ns, leaf[found], dur[found])
    np.add.at(self_backward, leaf[found & backward], dur[found & backward])
    np.add.at(kernels, leaf[found], 1)
    return InstanceTimes(
        self_ns,
        self_backward,
        subtree_sums(stacks, self_ns),
        subtree_sums(stacks, self_backward),
        subtree_sums(stacks, kernels),
    )


def frame_rows(
    stacks: Stacks, names: Sequence[str], times: InstanceTimes, in_window: np.ndarray
) -> list[FrameRow]:
    """One row per frame name with GPU time, most total time first (a name's total counts
    each kernel once however often the name recurs in its stack)."""
    ids, inverse = np.unique(stacks.name, return_inverse=True)
    first = stacks.first_of_name

    def by_name(values: np.ndarray, where: np.ndarray | None = None) -> np.ndarray:
        out = np.zeros(len(ids), dtype=np.int64)
        np.add.at(out, inverse if where is None else inverse[where], values)
        return out

    self_ns = by_name(times.self_ns)
    total = by_name(times.total_ns[first], first)
    backward = by_name(times.total_backward[first], first)
    kernels = by_name(times.total_kernels[first], first)
    calls = by_name(np.ones(int(in_window.sum()), dtype=np.int64), in_window)
    kept = np.flatnonzero(total > 0)
    kept = kept[lex_order((ids[kept], -self_ns[kept], -total[kept]))]
    return [
        FrameRow(
            names[int(ids[i])],
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
    ids = np.unique(stacks.name)
    modules = [i for i in ids.tolist() if names[i].startswith(MODULE_PREFIX)]
    at = np.flatnonzero(np.isin(stacks.name, modules))
    nested = build_stacks(stacks.thread[at], stacks.name[at], stacks.ts[at], stacks.end[at])
    rows: dict[str, list[int]] = {}
    parts: list[tuple[str, ...]] = []
    for i, (parent, name, row) in enumerate(
        zip(nested.parent.tolist(), nested.name.tolist(), nested.row.tolist(), strict=True)
    ):
        short = names[name][len(MODULE_PREFIX) :]
        parts.append(((parts[parent] if parent >= 0 else ()) + (short,))[-MAX_PATH:])
        frame = int(at[row])
        total, backward = int(times.total_ns[frame]), int(times.total_backward[frame])
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
    key = -1 - np.maximum(why, 0)
    key[found] = stack_of[leaf[found]]
    mark = backward.astype(np.int64)
    order = lex_order((kernel_name.astype(np.int64), mark, key))
    columns = (key[order], mark[order], kernel_name[order])
    new = np.zeros(len(order), dtype=bool)
    new[:1] = True
    for column in columns:
        new[1:] |= column[1:] != column[:-1]
    heads = np.flatnonzero(new)
    sums = np.add.reduceat(dur[order], heads) if len(heads) else np.empty(0, np.int64)
    chains: dict[int, tuple[str, ...]] = {}
    lines = []
    for head, ns in zip(heads.tolist(), sums.tolist(), strict=True):
        k, row = int(key[order[head]]), int(order[head])
        if k >= 0:
            frames = _chain(k, stack_parent, stack_name, names, chains)
            tail = (BACKWARD_MARK,) if mark[row] else ()
        else:
            frames, tail = (f"[{reasons[-1 - k]}]",), ()
        lines.append(StackLine((*frames, *tail, kernel_names[int(kernel_name[row])]), int(ns)))
    return sorted(lines, key=lambda line: line.frames)


def _stack_ids(stacks: Stacks) -> tuple[np.ndarray, list[int], list[int]]:
    """Per frame, the id of its stack (the names from the outermost frame to it), and per
    stack id its parent stack and its last name. A level of depth at a time: the frames of
    one depth get their (parent's stack, name) pairs' ids at once (the ids' order differs
    from a pass in preorder; every use of them sorts by the names)."""
    n = len(stacks)
    if n == 0:
        return np.zeros(0, dtype=np.int64), [], []
    parent, name, depth = stacks.parent, stacks.name, stacks.depth  # int32 where they fit
    held = parent >= 0
    width = int(name.max()) + 1
    levels = bool((depth[~held] == 0).all()) and bool(
        (depth[parent[held]] == depth[held] - 1).all()
    )
    if not levels or (n + 1) * width >= 2**63:
        return _stack_ids_in_preorder(stacks)
    small = np.int32 if n < 2**31 else np.int64
    order = np.argsort(depth, kind="stable").astype(small)  # by depth, preorder within
    bounds = np.searchsorted(depth[order], np.arange(int(depth.max()) + 2)).tolist()
    of = np.empty(n, dtype=small)
    ups: list[np.ndarray] = []
    last: list[np.ndarray] = []
    count = 0
    for lo, hi in itertools.pairwise(bounds):  # a few dozen depths
        at = order[lo:hi]
        up = np.where(held[at], of[np.maximum(parent[at], 0)], -1).astype(np.int64)
        up += 1
        up *= width
        up += name[at]
        found, inverse = np.unique(up, return_inverse=True)
        of[at] = count + inverse.reshape(-1)
        up_of, name_of = np.divmod(found, width)
        ups.append(up_of - 1)
        last.append(name_of)
        count += len(found)
    stack_parent: list[int] = np.concatenate(ups).tolist()
    stack_name: list[int] = np.concatenate(last).tolist()
    return of, stack_parent, stack_name


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
