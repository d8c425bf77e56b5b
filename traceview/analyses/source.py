"""``traceview source``: GPU time by the Python frames that launched it (docs/source.md).

A kernel's launch (the runtime call with its correlation id) lies inside a stack of Python
frames on its thread (analyses.core.stacks); its GPU time is *self* time of the innermost
frame and *total* time of every frame around it (a name counted once per stack, however
often it recurs). A kernel launched outside any frame (autograd's thread runs the backward
without Python) is attributed through its backward op's ``fwdbwd`` flow to the stack of the
forward op that made it, as *backward* time. Integer ns throughout: the self times plus the
unattributed time are the kernel time exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from traceview.aggregate.order import packed_order, positions_where
from traceview.analyses.core.devices import NO_LAUNCH
from traceview.analyses.core.oplinks import launches_and_threads
from traceview.analyses.core.selection import Selection, select
from traceview.analyses.core.stacks import NO_FRAME, Stacks, build_stacks, frame_names, innermost
from traceview.analyses.core.steps import Steps, step_windows
from traceview.analyses.source_flows import (
    FORWARD_OUTSIDE,
    NO_BACKWARD_OP,
    NO_START,
    backward_leaves,
)
from traceview.analyses.source_tables import (
    FrameRow,
    ModuleRow,
    StackLine,
    folded_stacks,
    frame_rows,
    instance_times,
    module_rows,
)
from traceview.columns.model import TraceEvents

SCHEMA_VERSION = 1
# Why a kernel's GPU time has no frame (the keys of SourceReport.unattributed).
NO_STACKS = "no stacks recorded"
NO_LAUNCH_FOUND = "launch not in the trace (launched before it began, or no correlation id)"
OUTSIDE = "launched outside any Python frame"
BACKWARD_OUTSIDE = "backward of a forward op outside any Python frame"
NO_FLOW = "backward without a fwdbwd flow to its forward op"
_PASS = 1 << 16  # frames taken at a time


@dataclass(frozen=True)
class SourceOptions:
    """``--pstep`` (steps, empty: all) and whether the stacks (folded, flame) are wanted."""

    steps: Steps = ()
    stacks: bool = False


@dataclass(frozen=True)
class SourceReport:
    """GPU time by Python frame and module (ns)."""

    path: str
    frames_read: bool
    frame_count: int  # python frames in the trace
    kernels: int
    kernel_ns: int
    attributed_ns: int  # forward (frames) and backward (through flows)
    backward_ns: int
    unattributed: dict[str, int]  # why → ns
    frames: list[FrameRow]
    modules: list[ModuleRow]
    stacks: list[StackLine] = field(default_factory=list)  # when asked for
    steps: tuple[int, ...] = ()
    notes: list[str] = field(default_factory=list)

    @property
    def unattributed_ns(self) -> int:
        return sum(self.unattributed.values())

    @property
    def has_frames(self) -> bool:
        return self.frame_count > 0


def analyse_source(events: TraceEvents, options: SourceOptions) -> SourceReport:
    """The report of ``events`` (read with their frames)."""
    selected = select(events, Selection(kinds=("kernel",), steps=options.steps))
    rows = positions_where(selected.mask)
    dur = events.gpu.dur[rows]
    frames = events.frames
    name, names = frame_names(frames.name, events.names)
    stacks = build_stacks(frames.thread, name, frames.ts, frames.end)
    del name
    notes = _notes(events, stacks)  # before the per-frame times are held beside the stacks
    leaf, backward, why = _leaves(events, stacks, rows)
    unattributed = {reason: int(dur[why == i].sum()) for i, reason in enumerate(_REASONS)}
    attributed = leaf != NO_FRAME
    times = instance_times(stacks, leaf, backward, dur)
    in_window = _in_windows(events, stacks, selected.steps)
    lines = []
    if options.stacks:
        kernel = events.gpu.name[rows]
        lines = folded_stacks(
            stacks, names, leaf, backward, (kernel, events.names), dur, why, _REASONS
        )
    return SourceReport(
        path=events.path,
        frames_read=events.frames_read,
        frame_count=len(stacks),
        kernels=len(rows),
        kernel_ns=int(dur.sum()),
        attributed_ns=int(dur[attributed].sum()),
        backward_ns=int(dur[backward].sum()),
        unattributed={k: v for k, v in unattributed.items() if v},
        frames=frame_rows(stacks, names, times, in_window),
        modules=module_rows(stacks, names, times),
        stacks=lines,
        steps=selected.steps,
        notes=[*selected.notes, *notes],
    )


def stack_lines(events: TraceEvents) -> list[StackLine]:
    """``analyse_source(events, SourceOptions(stacks=True)).stacks`` alone (the report's
    flame graph): without the frames' and modules' tables and times."""
    selected = select(events, Selection(kinds=("kernel",)))
    rows = positions_where(selected.mask)
    frames = events.frames
    name, names = frame_names(frames.name, events.names)
    stacks = build_stacks(frames.thread, name, frames.ts, frames.end)
    del name
    leaf, backward, why = _leaves(events, stacks, rows)
    kernel = events.gpu.name[rows]
    dur = events.gpu.dur[rows]
    return folded_stacks(stacks, names, leaf, backward, (kernel, events.names), dur, why, _REASONS)


_REASONS = (NO_STACKS, NO_LAUNCH_FOUND, OUTSIDE, BACKWARD_OUTSIDE, NO_FLOW)
_ATTRIBUTED = -1


def _leaves(
    events: TraceEvents, stacks: Stacks, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per kernel of ``rows``: its innermost frame (NO_FRAME: none), whether it was found
    through a backward flow, and why it has none (an index into _REASONS, _ATTRIBUTED)."""
    n = len(rows)
    why = np.full(n, _ATTRIBUTED, dtype=np.int8)
    if len(stacks) == 0:
        why[:] = _REASONS.index(NO_STACKS)
        return np.full(n, NO_FRAME, dtype=np.int32), np.zeros(n, dtype=bool), why
    launch, thread = launches_and_threads(events)
    thread = thread[rows]  # int32
    launch = launch[rows]
    launched = (launch != NO_LAUNCH) & (thread >= 0)
    why[~launched] = _REASONS.index(NO_LAUNCH_FOUND)
    leaf = innermost(stacks, thread, launch)  # a pass at a time
    leaf[~launched] = NO_FRAME
    outside = np.flatnonzero(launched & (leaf == NO_FRAME))
    del launched
    found, reason = backward_leaves(events, stacks, thread[outside], launch[outside])
    leaf[outside] = found
    backward = np.zeros(n, dtype=bool)
    backward[outside] = found != NO_FRAME
    codes = np.full(len(reason), _ATTRIBUTED, dtype=np.int8)
    for code, text in ((NO_BACKWARD_OP, OUTSIDE), (NO_START, NO_FLOW),
                       (FORWARD_OUTSIDE, BACKWARD_OUTSIDE)):  # fmt: skip
        codes[reason == code] = _REASONS.index(text)
    why[outside] = codes
    return leaf, backward, why


def _in_windows(events: TraceEvents, stacks: Stacks, steps: Sequence[int]) -> np.ndarray:
    """Mask over frames: starts in the CPU windows of the chosen steps (all without a filter)."""
    if not steps:
        return np.ones(len(stacks), dtype=bool)
    windows = step_windows(events)
    spans = sorted((windows[s].start_ns, windows[s].end_ns) for s in steps if s in windows)
    if not spans:
        return np.zeros(len(stacks), dtype=bool)
    starts = np.array([s for s, _ in spans], dtype=np.int64)
    ends = np.maximum.accumulate(np.array([e for _, e in spans], dtype=np.int64))
    at = np.searchsorted(starts, stacks.ts, side="right") - 1
    inside: np.ndarray = (at >= 0) & (stacks.ts <= ends[np.maximum(at, 0)])
    return inside


def _notes(events: TraceEvents, stacks: Stacks) -> list[str]:
    """What may mislead in the frames: cut overlaps, parent ids that disagree with time."""
    notes = []
    if stacks.overlapping:
        notes.append(
            f"{stacks.overlapping} python frames overlap another without nesting in it "
            "(a damaged trace): each was cut at the end of the frame it starts in"
        )
    disagree = _parent_disagreements(events, stacks)
    if disagree:
        notes.append(
            f"{disagree} python frames name as 'Python parent id' a frame of their thread they "
            "do not nest in by time (hooks called from C++, or a damaged trace): stacks follow "
            "the nesting in time"
        )
    return notes


def _parent_disagreements(events: TraceEvents, stacks: Stacks) -> int:
    """Frames whose Python parent id names another frame of their thread than the one they
    nest in (duplicated ids: the first frame with the id). The ids sorted once (int32
    positions), the parents looked up a pass of frames at a time."""
    frames = events.frames
    n = len(stacks)
    if n == 0:
        return 0
    ids = frames.python_id[stacks.row]
    order = packed_order(None, ids)
    order = np.argsort(ids, kind="stable") if order is None else order
    ids = ids[order]  # ascending
    disagree = 0
    for lo in range(0, n, _PASS):
        at = slice(lo, lo + _PASS)
        parents = frames.python_parent[stacks.row[at]]
        found = np.minimum(np.searchsorted(ids, parents), n - 1)
        named = order[found]
        known = (parents >= 0) & (ids[found] == parents)
        known &= stacks.thread[named] == stacks.thread[at]
        disagree += int((known & (named != stacks.parent[at])).sum())
    return disagree
