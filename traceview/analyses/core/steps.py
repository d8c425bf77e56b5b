"""ProfilerStep windows, which step each GPU activity belongs to, and the steps table.

A GPU activity belongs to step N when its launching runtime call (same correlation id,
the earliest if several) starts inside the CPU window [ts, ts + dur] of ``ProfilerStep#N``;
without a matched launch its own ts is used, except for activities launched before the trace
(analyses.core.prelaunch), which belong to no step. Steps seen only as ``gpu_user_annotation``
use that window and the activity's own ts.
"""

from __future__ import annotations

import heapq
import itertools
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from traceview.aggregate import sums
from traceview.aggregate.grouped import reduce_at
from traceview.aggregate.intervals import sums_by_run, unions_in_order
from traceview.aggregate.order import lex_order
from traceview.analyses.core.devices import (
    DeviceUsage,
    LaunchTimes,
    device_of_stream,
    launch_times,
    launch_times_by_pass,
)
from traceview.analyses.core.prelaunch import launched_before_trace
from traceview.columns.cpu_rows import is_op
from traceview.columns.model import STEP_PREFIX, StepWindow, TraceEvents
from traceview.columns.schema import KERNEL
from traceview.errors import UsageError
from traceview.parsing import merged_ranges

Launches = np.ndarray | LaunchTimes  # launch_times(events), whole or made as asked

# A device runs behind the CPU in a step when it started the step's work this share of the
# CPU step's duration (or more) after the CPU had launched it: the GPU was still busy.
BEHIND_SHARE = 0.1
_DESCRIBE_RUNS = 12
# Degenerate steps (StepRow.degenerate): called out and left out of medians.
EMPTY, GIANT, CUT = "empty", "single giant kernel", "cut by the trace's end"
GIANT_SHARE = 0.9  # runs of step numbers an error message lists at most

Steps = tuple[int | tuple[int, int], ...]  # step numbers and inclusive (first, last) ranges


@dataclass(frozen=True)
class Window:
    """A step's window in ns, whether it comes from the GPU annotation (no CPU step), and
    what its marker says (analyses.core.step_markers)."""

    start_ns: int
    end_ns: int
    gpu_only: bool
    label: str = ""
    phase: str = ""
    batch: int | None = None
    tokens: int | None = None
    cut: bool = False


@dataclass(frozen=True)
class StepDevice(DeviceUsage):
    """A step's GPU work on one device: the window [start_ns, end_ns] of its busy events and
    their union (DeviceUsage), how long after the CPU step began the device started on it
    (lag) and how long after the first of them was launched (queue: the GPU was still busy
    with earlier work). ns, the file's time base."""

    lag_ns: int
    queue_ns: int
    # The step's period on this device: the end of its GPU work on it minus the end of the
    # previous step's there; the first step (no previous on the device): its GPU window.
    period_ns: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "gpu_start_us": self.start_ns / 1000,
            "gpu_end_us": self.end_ns / 1000,
            "window_us": self.window_ns / 1000,
            "busy_us": self.busy_ns / 1000,
            "idle_us": self.idle_ns / 1000,
            "busy_pct": self.busy_pct,
            "lag_us": self.lag_ns / 1000,
            "queue_us": self.queue_ns / 1000,
            "period_us": self.period_ns / 1000,
        }


@dataclass(frozen=True)
class StepRow:
    """One line of ``traceview steps``: the CPU step, its kernels, and per device its GPU work."""

    step: int
    cpu_start_ns: int
    cpu_end_ns: int
    kernels: int
    kernel_time_ns: int
    devices: tuple[StepDevice, ...]
    gpu_only: bool
    label: str = ""  # a serving marker's name; "" for ProfilerStep#N
    phase: str = ""
    batch: int | None = None
    tokens: int | None = None
    longest_kernel_ns: int = 0
    cut: bool = False  # the trace ends inside the step: launches in it ran no GPU activity

    @property
    def name(self) -> str:
        return self.label or f"{STEP_PREFIX}{self.step}"

    @property
    def degenerate(self) -> str | None:
        """Why the step's figures are not those of a normal step, or None (docs/metrics.md
        "Degenerate steps"): no GPU work, one kernel holding GIANT_SHARE of its kernel time
        (with other kernels beside it or not), or cut by the trace's end."""
        if self.cut:
            return CUT
        if not self.devices:
            return EMPTY
        if self.longest_kernel_ns >= GIANT_SHARE * self.kernel_time_ns > 0:
            return GIANT
        return None

    def behind(self, device: StepDevice) -> bool:
        """Whether ``device`` ran behind the CPU in this step (GPU-bound): its queue wait is
        at least BEHIND_SHARE of the CPU step's duration."""
        return device.queue_ns > 0 and device.queue_ns >= BEHIND_SHARE * (
            self.cpu_end_ns - self.cpu_start_ns
        )

    @property
    def cpu_ns(self) -> int:
        """The CPU step's duration."""
        return self.cpu_end_ns - self.cpu_start_ns

    @property
    def gpu_paced(self) -> bool:
        """Whether a device ran behind the CPU in this step: the GPU set its pace."""
        return any(self.behind(d) for d in self.devices)

    @property
    def step_ns(self) -> int:
        """The step time (docs/metrics.md "Step time"): where a device ran behind the CPU
        (the GPU set the pace), the longest of its devices' periods; else the CPU step's."""
        if self.gpu_paced:
            return max(d.period_ns for d in self.devices)
        return self.cpu_ns

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "name": self.name,
            "cpu_start_us": self.cpu_start_ns / 1000,
            "cpu_dur_us": (self.cpu_end_ns - self.cpu_start_ns) / 1000,
            "step_time_us": self.step_ns / 1000,
            "paced_by": "gpu" if self.gpu_paced else "cpu",
            "kernels": self.kernels,
            "kernel_time_us": self.kernel_time_ns / 1000,
            "devices": [d.as_dict() for d in self.devices],
            "gpu_only": self.gpu_only,
            "phase": self.phase or "unknown",
            "batch": self.batch,
            "tokens": self.tokens,
            "degenerate": self.degenerate,
        }


def step_ranges(steps: Iterable[int | tuple[int, int]]) -> list[tuple[int, int]]:
    """Step numbers and (first, last) ranges as sorted, merged, inclusive ranges."""
    return merged_ranges([s if isinstance(s, tuple) else (int(s), int(s)) for s in steps])


def pick_steps(
    steps: Iterable[int | tuple[int, int]], available: list[int]
) -> tuple[list[int], list[tuple[int, int]]]:
    """The ``available`` steps (sorted) inside ``steps``, and the requested ranges of steps
    that are not available; in time linear in the ranges and the available steps."""
    chosen: list[int] = []
    missing: list[tuple[int, int]] = []
    for first, last in step_ranges(steps):
        inside = available[bisect_left(available, first) : bisect_right(available, last)]
        chosen += inside
        expected = first
        for n in [*inside, last + 1]:  # the holes between the steps found
            if n > expected:
                missing.append((expected, n - 1))
            expected = n + 1
    return chosen, missing


def select_steps(steps: Iterable[int | tuple[int, int]], windows: dict[int, Window]) -> list[int]:
    """The steps asked for, all of which must exist: else the usage error naming the missing
    ones and those found, compressed to ranges and cut to a readable length."""
    chosen, missing = pick_steps(steps, list(windows))
    if missing:
        raise UsageError(
            f"--pstep: no ProfilerStep {describe_ranges(missing)} in this trace "
            f"(steps found: {compress(list(windows))})"
        )
    return chosen


def compile_step_regex(pattern: str) -> re.Pattern[str]:
    """``--step-regex``: a regular expression with one group, the step number (digits)."""
    try:
        regex = re.compile(pattern)
    except re.error as e:
        raise UsageError(
            f"--step-regex {pattern!r}: not a valid regular expression ({e})"
        ) from None
    if regex.groups != 1:
        raise UsageError(
            f"--step-regex {pattern!r}: needs exactly one group, the step number "
            r"(e.g. 'train_step_(\d+)')"
        )
    return regex


def steps_matching(events: TraceEvents, regex: re.Pattern[str]) -> list[StepWindow]:
    """The step windows of ``--step-regex``: every CPU range (cpu_op, user_annotation, an
    nsys NVTX range) and ``ProfilerStep#N`` annotation whose whole name matches ``regex``,
    its group being the step number; a match whose group is not a number is no step."""
    names = events.names
    number = {}
    for i, name in enumerate(names):
        m = regex.fullmatch(name)
        if m and (m.group(1) or "").isdecimal():
            number[i] = int(m.group(1))
    out = [
        w
        for w in events.steps
        if (m := regex.fullmatch(f"{STEP_PREFIX}{w.step}")) and (m.group(1) or "").isdecimal()
    ]
    if not number:
        return out
    wanted = np.zeros(len(names), dtype=bool)
    wanted[list(number)] = True
    for block in events.cpu.blocks():
        ranges = block[is_op(block["correlation"]) & wanted[block["name"]]]
        for name, ts, end in zip(
            ranges["name"].tolist(), ranges["ts"].tolist(), ranges["end"].tolist(), strict=True
        ):
            out.append(StepWindow(number[name], ts, end, False))
    return out


def step_windows(events: TraceEvents) -> dict[int, Window]:
    """Each step's window; a CPU step wins over a GPU annotation of the same number.

    A step recorded more than once covers all its records (first start to last end).
    """
    cpu: dict[int, StepWindow] = {}
    gpu: dict[int, StepWindow] = {}
    for w in events.steps:
        table = gpu if w.on_gpu else cpu
        old = table.get(w.step)
        table[w.step] = w if old is None else replace(
            old, start_ns=min(old.start_ns, w.start_ns), end_ns=max(old.end_ns, w.end_ns)
        )  # fmt: skip
    windows = {n: _window(w, True) for n, w in gpu.items()}
    windows.update({n: _window(w, False) for n, w in cpu.items()})
    return dict(sorted(windows.items()))


def _window(w: StepWindow, gpu_only: bool) -> Window:
    return Window(w.start_ns, w.end_ns, gpu_only, w.label, w.phase, w.batch, w.tokens, w.cut)


def in_steps(
    events: TraceEvents,
    steps: Iterable[int | tuple[int, int]],
    windows: dict[int, Window],
    launch: np.ndarray | None = None,
) -> np.ndarray:
    """Boolean mask over GPU rows: the row belongs to one of ``steps``.

    One binary search per row over the union of the chosen windows (CPU windows on launch
    times, GPU-only ones on the rows' own start), not a pass over the rows per step.
    ``launch`` is ``launch_times(events)``, passed in when testing many steps.
    """
    chosen = select_steps(steps, windows)
    own = events.gpu.ts
    mask = np.zeros(len(own), dtype=bool)
    before = launched_before_trace(events)
    for gpu_only in (False, True):
        spans = [(w.start_ns, w.end_ns) for n in chosen if (w := windows[n]).gpu_only == gpu_only]
        if not spans:
            continue
        union = _union(np.array(spans, dtype=np.int64))
        points = own if gpu_only else launch
        if points is not None:  # a pass of rows at a time: no row-sized temporary
            passes: Iterable[tuple[slice, np.ndarray]] = _by_pass(points)
        else:  # nor the launch times of every row
            passes = launch_times_by_pass(events)
        for at, part in passes:
            inside = _inside(part, *union)
            inside &= ~before[at]
            mask[at] |= inside
    return mask


_PASS = 1 << 16  # rows a pass


def _by_pass(points: np.ndarray) -> Iterator[tuple[slice, np.ndarray]]:
    """(rows, their points) a pass of rows at a time."""
    for lo in range(0, len(points), _PASS):
        at = slice(lo, lo + _PASS)
        yield at, points[at]


def _inside(points: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Whether each point lies in one of the closed intervals [starts, ends] (disjoint,
    in order)."""
    at = np.searchsorted(starts, points, side="right")
    at -= 1
    found = at >= 0
    np.maximum(at, 0, out=at)
    found &= points <= ends[at]
    return found


def _union(spans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closed intervals (rows of start, end) merged where they overlap or touch."""
    spans = spans[np.argsort(spans[:, 0], kind="stable")]
    reach = np.maximum.accumulate(spans[:, 1])
    new = np.ones(len(spans), dtype=bool)
    new[1:] = spans[1:, 0] > reach[:-1]
    first = np.flatnonzero(new)
    return spans[first, 0], reach[np.append(first[1:] - 1, len(spans) - 1)]


def step_table(
    events: TraceEvents, windows: dict[int, Window] | None = None, launch: Launches | None = None
) -> list[StepRow]:
    """One row per step: its window, the kernels launched in it, and per device the window,
    busy and idle time of its busy events (kernel, memcpy, memset with dur > 0) and the lag.
    ``windows``: only these steps (a part of ``step_windows(events)``); default all.
    ``launch``: ``launch_times(events)``, when the caller has it already.

    All steps at once (no Python loop per step but building the rows): windows one after
    another (ProfilerSteps, serving markers in turn) take the GPU rows a pass at a time
    (``_figures_in_passes``); others (nested or of both kinds) their rows concatenated and
    one union over (step, device) segments (``_figures_at_once``).
    """
    if windows is None:
        windows = step_windows(events)
    if not windows:
        return []
    steps = list(windows)
    launch = launch_times(events) if launch is None else launch
    device_index, values = device_of_stream(events)
    width = max(len(values), 1)
    found = _figures_in_passes(events, list(windows.values()), launch, device_index, width)
    if found is None:
        found = _figures_at_once(events, list(windows.values()), launch, device_index, width)
    del launch
    per_step: list[list[StepDevice]] = [[] for _ in steps]
    for seg, first, last, busy_ns, launch_ns in zip(
        found.segment.tolist(),
        found.first.tolist(),
        found.last.tolist(),
        found.busy.tolist(),
        found.launch.tolist(),
        strict=True,
    ):
        w = windows[steps[seg // width]]
        per_step[seg // width].append(
            StepDevice(
                values[seg % width], first, last, busy_ns, first - w.start_ns, first - launch_ns
            )
        )
    _set_periods(per_step)
    return [
        StepRow(
            step=n,
            cpu_start_ns=w.start_ns,
            cpu_end_ns=w.end_ns,
            kernels=int(found.kernels[i]),
            kernel_time_ns=int(found.kernel_ns[i]),
            devices=tuple(per_step[i]),
            gpu_only=w.gpu_only,
            label=w.label,
            phase=w.phase,
            batch=w.batch,
            tokens=w.tokens,
            longest_kernel_ns=int(found.longest[i]),
            cut=w.cut,
        )
        for i, (n, w) in enumerate(windows.items())
    ]


@dataclass(frozen=True)
class _Figures:
    """Per step (window index): kernels, their summed and longest duration; per (step,
    device) segment with busy rows (segment = step · width + device index, ascending): its
    first start, last end, busy time and earliest launch."""

    kernels: np.ndarray
    kernel_ns: np.ndarray
    longest: np.ndarray
    segment: np.ndarray
    first: np.ndarray
    last: np.ndarray
    busy: np.ndarray
    launch: np.ndarray


def _figures_at_once(
    events: TraceEvents,
    windows: list[Window],
    launch: Launches,
    device_index: np.ndarray,
    width: int,
) -> _Figures:
    """The _Figures of any windows: every window's rows concatenated (a row in nested
    windows in the innermost), one sort by (segment, start) and one union."""
    steps = len(windows)
    before = launched_before_trace(events)
    ids = _row_ids(len(events.gpu.ts))
    rows = StepRows(events, ids[~before] if before.any() else ids, launch)
    del before, ids
    member, owner = rows.members(windows)
    del rows
    gpu = events.gpu
    kernel = gpu.kind[member] == KERNEL
    kernels = np.bincount(owner[kernel], minlength=steps)
    kernel_ns = sums_by_run(owner[kernel], gpu.dur[member[kernel]], steps)
    longest = np.zeros(steps, dtype=np.int64)
    np.maximum.at(longest, owner[kernel], gpu.dur[member[kernel]])
    del kernel
    busy = gpu.dur[member] > 0
    if not busy.all():
        member, owner = member[busy], owner[busy]
    del busy
    # (step, device) segments: int32 when they fit (a row-sized array is 10 MB, not 20)
    narrow = np.int32 if steps * width < 2**31 else np.int64
    segment: np.ndarray = owner.astype(narrow)
    segment *= width
    del owner
    segment += device_index.astype(narrow)[gpu.stream[member]]
    earliest_launch = _min_by(segment, launch[member], steps * width)
    # the rows by (segment, start), each column dropped once sorted: unions take them over
    order = lex_order((gpu.ts[member], segment))
    sorted_member = member[order]
    del member
    columns = [segment[order], gpu.ts[sorted_member], gpu.dur[sorted_member]]
    del order, segment, sorted_member
    columns[2] += columns[1]
    u = unions_in_order(columns, holes=False)
    return _Figures(
        kernels, kernel_ns, longest, u.segment, u.first, u.last, u.busy, earliest_launch[u.segment]
    )


def _one_after_another(windows: list[Window]) -> np.ndarray | None:
    """The windows' indices in start order when they are of one kind, start in strictly
    increasing order and each ends no later than the next starts (ProfilerSteps, serving
    markers in turn): then a point lies in one window, the last starting at or before it,
    or also in the one before when it lies on that one's end. Else None."""
    if len({w.gpu_only for w in windows}) != 1:
        return None
    starts = np.array([w.start_ns for w in windows], dtype=np.int64)
    ends = np.array([w.end_ns for w in windows], dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    if bool((starts[1:] <= starts[:-1]).any()) or bool((ends[:-1] > starts[1:]).any()):
        return None
    return order


def _figures_in_passes(
    events: TraceEvents,
    windows: list[Window],
    launch: Launches,
    device_index: np.ndarray,
    width: int,
) -> _Figures | None:
    """The _Figures of windows one after another (``_one_after_another``; else None), the
    GPU rows a pass at a time: each placed in the last window starting at or before its
    point (``_placed``), its step's figures added up as it goes. Each segment's union is
    measured from its busy rows' starts and ends sorted apart (``_unions_of_sorted``), as
    int64 keys ``segment << bits | (time − low)``: 16 B a busy row, no permutation of the
    rows (None when the keys would not fit in int64); past _KEYS_AT_ONCE rows, each row's
    window is noted (2-4 B) and the keys made for a group of windows at a time."""
    order = _one_after_another(windows)
    if order is None:
        return None
    gpu = events.gpu
    n, steps = len(gpu.ts), len(windows)
    segments = steps * width
    low = int(gpu.ts.min()) if n else 0
    high = int(gpu.ts.max()) + max(int(gpu.dur.max()), 0) if n else 0
    bits = (high - low).bit_length()
    if segments << bits >= 1 << 63 or not sums.fits(gpu.dur):
        return None
    starts = np.array([windows[i].start_ns for i in order], dtype=np.int64)
    ends = np.array([windows[i].end_ns for i in order], dtype=np.int64)
    touching = bool((ends[:-1] == starts[1:]).any())  # a point on both: in two windows
    source = gpu.ts if windows[0].gpu_only else launch
    before = launched_before_trace(events)
    device = device_index.astype(np.int64)
    kernels = np.zeros(steps, dtype=np.int64)
    kernel_ns = np.zeros(steps, dtype=np.int64)
    longest = np.zeros(steps, dtype=np.int64)
    earliest = np.full(segments, np.iinfo(np.int64).max, dtype=np.int64)
    counts = np.zeros(segments, dtype=np.int64)
    grouped = n > _KEYS_AT_ONCE
    # the busy rows' keys, filled in order (pages past the last row filled are never
    # touched); grouped: each row's window (start order; −1: none) and the rows also in
    # the window before
    keys = _Keys(0 if grouped else n, bits, low)
    place_of = np.full(n if grouped else 0, -1, dtype=np.int16 if steps < 2**15 else np.int32)
    edges: list[tuple[np.ndarray, np.ndarray]] = []
    for lo in range(0, n, _PASS):
        at = slice(lo, lo + _PASS)
        point = source[at]
        window = _placed(starts, point)
        placed = window >= 0
        placed &= ~before[at]
        np.maximum(window, 0, out=window)
        inside = placed & (point <= ends[window])
        taken = [(inside, window[inside])]
        if touching:  # on the end of the window before (which ends as this one starts)
            edge = placed & (window >= 1) & (point == ends[np.maximum(window - 1, 0)])
            taken.append((edge, window[edge] - 1))
        del point, window, placed
        for i, (mask, place) in enumerate(taken):
            if grouped:
                if i == 0:
                    place_of[at][mask] = place
                else:
                    edges.append((np.flatnonzero(mask) + lo, place))
            owner = order[place]
            dur = gpu.dur[at][mask]
            kernel = gpu.kind[at][mask] == KERNEL
            kernels += np.bincount(owner[kernel], minlength=steps)
            np.add.at(kernel_ns, owner[kernel], dur[kernel])
            reduce_at(np.maximum, longest, owner[kernel], dur[kernel])
            busy = dur > 0
            mask[mask] = busy  # the busy rows among them
            segment = owner[busy]
            segment *= width
            segment += device[gpu.stream[at][mask]]
            counts += np.bincount(segment, minlength=segments)
            reduce_at(np.minimum, earliest, segment, launch[at][mask])
            if not grouped:
                keys.add(segment, gpu.ts[at][mask], dur[busy])
    del before
    present = np.flatnonzero(counts)
    if grouped:
        first, last, busy_ns = _unions_by_group(
            events, order, counts, present, place_of, edges, (device, width, bits, low)
        )
    else:
        first, last, busy_ns = _unions_of_sorted(*keys.taken(), counts[present])
    shift = present << bits
    shift -= low
    first -= shift
    last -= shift
    return _Figures(kernels, kernel_ns, longest, present, first, last, busy_ns, earliest[present])


# Past this many GPU rows, the step table's keys are made for a group of windows at a time
# (16 B a busy row of the group, the windows' rows up to this many; a 7.8 GB trace's 2.2·10^6
# rows: 8 MB at once instead of 35 MB).
_KEYS_AT_ONCE = 1 << 19


def _unions_by_group(
    events: TraceEvents,
    order: np.ndarray,
    counts: np.ndarray,
    present: np.ndarray,
    place_of: np.ndarray,
    edges: list[tuple[np.ndarray, np.ndarray]],
    layout: tuple[np.ndarray, int, int, int],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_unions_of_sorted`` of the present segments (``counts``: busy rows a segment), the
    windows taken in start order by groups of up to _KEYS_AT_ONCE busy rows (a window
    holding more: alone), each group's keys made in a pass over the rows' windows
    (``place_of``, start order; ``edges``: rows also in the window before, and it);
    ``layout``: the device index per stream, width, bits and low of the keys."""
    gpu = events.gpu
    device, width, bits, low = layout
    steps = len(order)
    per_window = counts.reshape(steps, width).sum(axis=1)[order]  # start order
    first = np.empty(len(present), dtype=np.int64)
    last = np.empty(len(present), dtype=np.int64)
    busy = np.empty(len(present), dtype=np.int64)
    lo_window = 0
    while lo_window < steps:
        total = np.cumsum(per_window[lo_window:])
        hi_window = lo_window + max(int(np.searchsorted(total, _KEYS_AT_ONCE, "right")), 1)
        keys = _Keys(int(total[hi_window - lo_window - 1]), bits, low)
        parts: list[tuple[slice | np.ndarray, np.ndarray]] = [
            (slice(lo, lo + _PASS), place_of[lo : lo + _PASS])
            for lo in range(0, len(place_of), _PASS)
        ]
        for rows, place in [*parts, *edges]:
            take = (place >= lo_window) & (place < hi_window)
            dur = gpu.dur[rows][take]
            take[take] = dur > 0
            dur = dur[dur > 0]
            segment = order[place[take]].astype(np.int64)
            segment *= width
            segment += device[gpu.stream[rows][take]]
            keys.add(segment, gpu.ts[rows][take], dur)
        mine = np.zeros(steps, dtype=bool)
        mine[order[lo_window:hi_window]] = True
        chosen = np.flatnonzero(mine[present // width])  # positions in present
        found = _unions_of_sorted(*keys.taken(), counts[present[chosen]])
        first[chosen], last[chosen], busy[chosen] = found
        lo_window = hi_window
    return first, last, busy


def _placed(starts: np.ndarray, point: np.ndarray) -> np.ndarray:
    """Per point, the index of the last of the ``starts`` (ascending) at or before it, −1
    for none. Points that come in a few runs in order (a pass of launches mostly does) are
    counted past each start, run by run, instead of each searched among the starts (a
    binary search a point: 5× the time)."""
    breaks = np.flatnonzero(point[1:] < point[:-1])
    if len(breaks) > _RUNS_COUNTED:
        found: np.ndarray = np.searchsorted(starts, point, side="right")
        found -= 1
        return found
    bounds = [0, *(breaks + 1).tolist(), len(point)]
    # a mark where each start is first reached in each run (past its end: none reached)
    marks = np.zeros(len(point) + 1, dtype=np.int64)
    for lo, hi in itertools.pairwise(bounds):
        at = np.searchsorted(point[lo:hi], starts, side="left")
        at += lo
        marks += np.bincount(at, minlength=len(marks))
        marks[hi] -= len(starts)  # every start counted in this run: none in the next
    placed: np.ndarray = np.cumsum(marks[:-1])
    placed -= 1
    return placed


_RUNS_COUNTED = 16


class _Keys:
    """The busy rows' start and end keys (``_figures_in_passes``), filled a pass at a time
    into arrays sized for every row: the pages past the last row filled are never touched;
    rows beyond (on two windows' shared end) go into parts joined at the end."""

    def __init__(self, n: int, bits: int, low: int) -> None:
        self.start = np.empty(n, dtype=np.int64)
        self.end = np.empty(n, dtype=np.int64)
        self.bits, self.low = bits, low
        self.filled = 0
        self.more: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, segment: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> None:
        """Rows of ``segment`` (overwritten) at ``ts`` lasting ``dur``."""
        key = segment
        key <<= self.bits
        key -= self.low
        key += ts  # segment << bits | (ts − low): ts − low < 2^bits
        end = key + dur
        at, n = self.filled, len(key)
        if at + n <= len(self.start):
            self.start[at : at + n] = key
            self.end[at : at + n] = end
            self.filled += n
        else:
            self.more.append((key, end))

    def taken(self) -> tuple[np.ndarray, np.ndarray]:
        start, end = self.start[: self.filled], self.end[: self.filled]
        if self.more:
            start = np.concatenate([start, *(m[0] for m in self.more)])
            end = np.concatenate([end, *(m[1] for m in self.more)])
        return start, end


def _unions_of_sorted(
    start: np.ndarray, end: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per segment, its first start, last end (as keys) and union length, from its rows'
    start and end keys (segment-major, every end past its start) sorted here in place, each
    apart; ``counts``: the rows of each segment present, in order (a segment holds the same
    places in both). Of a segment's rows, at most ``i`` end at or before its ``i``-th start
    (only rows starting before it can), so that start opens a maximal interval of the union
    exactly when the ``i``-th smallest end is at or before it, and the hole before it runs
    from that end: the idle time is the sum of ``max(0, start[i] − end[i − 1])``."""
    start.sort(kind="stable")  # timsort: near-linear on keys mostly in order
    end.sort(kind="stable")
    bounds = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=bounds[1:])
    idle = np.zeros(len(counts), dtype=np.int64)
    for lo in range(1, len(start), _PASS):
        hi = min(lo + _PASS, len(start))
        hole = start[lo:hi] - end[lo - 1 : hi - 1]
        np.maximum(hole, 0, out=hole)
        heads = bounds[(bounds >= lo) & (bounds < hi)]
        hole[heads - lo] = 0  # a segment's first row opens no hole
        inner = heads[heads > lo]  # segments starting after the pass's first row
        owner = int(np.searchsorted(bounds, lo, side="right")) - 1  # the pass's first row's
        pieces = np.add.reduceat(hole, np.r_[0, inner - lo])
        idle[owner : owner + len(pieces)] += pieces
    head = bounds[:-1]
    first = start[head] if len(start) else start[:0]
    last = end[bounds[1:] - 1] if len(end) else end[:0]
    return first, last, last - first - idle


def _set_periods(per_step: list[list[StepDevice]]) -> None:
    """Each step's period on each device (StepDevice.period_ns): the end of its GPU work
    there minus the end of the previous step's (the previous step of the table with work on
    that device); the first one's, or one that ends no later than the previous: its window."""
    previous: dict[Any, int] = {}
    for devices in per_step:
        for i, d in enumerate(devices):
            before = previous.get(d.device, d.end_ns)
            devices[i] = replace(
                d, period_ns=d.end_ns - before if before < d.end_ns else d.window_ns
            )
            previous[d.device] = d.end_ns


def _row_ids(n: int) -> np.ndarray:
    """0 … n−1, int32 when they fit."""
    return np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)


def _min_by(segment: np.ndarray, values: np.ndarray, segments: int) -> np.ndarray:
    """The smallest value of each segment id in [0, segments) (int64 max where none)."""
    out = np.full(segments, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(out, segment, values)
    return out


class StepRows:
    """GPU rows (indices) ordered by their step-assignment point (the launch time, or the
    row's own start for GPU-only steps), so each step's rows are found by two binary searches
    instead of a pass over every row per step."""

    def __init__(
        self, events: TraceEvents, rows: np.ndarray, launch: Launches | None = None
    ) -> None:
        self.events = events
        self.rows = rows
        self.launch = launch  # launch_times(events), when known already
        self._sorted: dict[bool, _ByPoint] = {}

    def _by_point(self, gpu_only: bool) -> _ByPoint:
        if gpu_only not in self._sorted:
            self._sorted[gpu_only] = _ByPoint.of(self._points(gpu_only), self.rows)
        return self._sorted[gpu_only]

    def _points(self, gpu_only: bool) -> Callable[[np.ndarray], np.ndarray]:
        """The points of some rows (a fresh array). The launch times are sorted once: from
        then on not held beside the order."""
        ts = self.events.gpu.ts
        if gpu_only:
            return lambda rows: ts[rows]
        launch = launch_times(self.events) if self.launch is None else self.launch
        self.launch = None
        return lambda rows: launch[rows]

    def within(self, w: Window) -> np.ndarray:
        """Indices of the rows whose point lies in [w.start_ns, w.end_ns]."""
        by = self._by_point(w.gpu_only)
        lo, hi = (int(at[0]) for at in by.bounds([w.start_ns], [w.end_ns]))
        rows: np.ndarray = self.rows[by.positions(slice(lo, max(hi, lo)))]
        return rows

    def members(self, windows: list[Window]) -> tuple[np.ndarray, np.ndarray]:
        """The rows of every window, concatenated window after window, and for each the
        index of its window. A row in several windows (nested serving markers) belongs to
        one: the innermost, the shortest window holding it (then the latest to start)."""
        parts, owners = [self.rows[:0]], [np.zeros(0, dtype=np.int32)]
        for gpu_only in (False, True):
            which = [i for i, w in enumerate(windows) if w.gpu_only == gpu_only]
            if not which:
                continue
            by = self._by_point(gpu_only)
            lo, hi = by.bounds(
                [windows[i].start_ns for i in which], [windows[i].end_ns for i in which]
            )
            owner = np.array(which, dtype=np.int32)
            if _overlapping([windows[i] for i in which]):  # each row once: not rows × windows
                lo, hi, owner = _innermost_ranges(lo, hi, owner, windows)
            got, owner = _ranges_of(self.rows, by, lo, hi, owner)
            parts.append(got)
            owners.append(owner)
            del got, owner
        # one kind of window (the usual case): its rows as they are, without a copy
        both = len(parts) == 3
        member = np.concatenate(parts) if both else parts[-1]
        owner = np.concatenate(owners) if both else owners[-1]
        del parts, owners
        if _overlapping(windows):
            if both:  # a row in windows of both kinds: the innermost of its two
                member, owner = _innermost(member, owner, windows)
            order = np.lexsort((member, owner))  # members once each: one order
            member, owner = member[order], owner[order]
        elif bool((owner[1:] < owner[:-1]).any()):  # windows of both kinds, apart
            order = np.argsort(owner, kind="stable")
            member, owner = member[order], owner[order]
        return member, owner

    def inside(self, windows: list[Window]) -> np.ndarray:
        """Per GPU row of the events: whether it is one of the rows and its point lies in one
        of ``windows``; a pass of the order at a time, without each window's rows (the
        rows, owners and ranges of ``members``: 12 B a row)."""
        inside = np.zeros(len(self.events.gpu.ts), dtype=bool)
        for gpu_only in (False, True):
            chosen = [w for w in windows if w.gpu_only == gpu_only]
            if not chosen:
                continue
            by = self._by_point(gpu_only)
            lo, hi = by.bounds([w.start_ns for w in chosen], [w.end_ns for w in chosen])
            some = hi > lo
            lo, hi = np.sort(lo[some]), np.sort(hi[some])
            if not len(lo):
                continue
            # a place p is in a range where more ranges start at or before it than end there
            for a in range(int(lo[0]), int(hi[-1]), _PASS):
                at = np.arange(a, min(a + _PASS, int(hi[-1])), dtype=np.int64)
                covered = np.searchsorted(lo, at, side="right") > np.searchsorted(
                    hi, at, side="right"
                )
                inside[self.rows[by.positions(at[covered])]] = True
        return inside


_KEY_BITS = 62  # a packed key's bits: it and the bounds searched for stay below 2^63


@dataclass(frozen=True)
class _ByPoint:
    """The positions 0..n−1 of a StepRows' rows ordered by their points, ties by position.
    Packed, ``key`` holds (point − low) << bits | position, sorted: 8 B a row, made a pass at
    a time and sorted in place (the points, the positions and argsort's order apart were
    32 B a row at once: 0.22 GB for 7·10^6 CUDA-graph kernels). Where the points' span and
    the positions do not fit in _KEY_BITS, ``key`` holds the points sorted and ``order``
    the positions."""

    key: np.ndarray
    order: np.ndarray | None
    low: int
    span: int
    bits: int

    @classmethod
    def of(cls, points: Callable[[np.ndarray], np.ndarray], rows: np.ndarray) -> _ByPoint:
        """Of ``rows``, whose points ``points`` gives (a fresh array)."""
        n = len(rows)
        low = high = 0
        for lo in range(0, n, _PASS):
            part = points(rows[lo : lo + _PASS])
            low = int(part.min()) if lo == 0 else min(low, int(part.min()))
            high = int(part.max()) if lo == 0 else max(high, int(part.max()))
        bits = max((n - 1).bit_length(), 1)
        if (high - low + 1).bit_length() + bits > _KEY_BITS:
            point = points(rows)
            order = np.argsort(point, kind="stable")
            return cls(point[order], order, 0, 0, 0)
        key = np.empty(n, dtype=np.int64)
        for lo in range(0, n, _PASS):
            part = points(rows[lo : lo + _PASS])
            part -= low
            part <<= bits
            part |= np.arange(lo, lo + len(part), dtype=np.int64)
            key[lo : lo + len(part)] = part
        key.sort()  # in place: keys unique, so any sort gives the one order
        return cls(key, None, low, high - low, bits)

    def bounds(self, starts: list[int], ends: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """For each [start, end]: the sorted positions ``lo:hi`` whose point lies in it."""
        if self.order is not None:
            return (
                np.searchsorted(self.key, np.array(starts, dtype=np.int64), side="left"),
                np.searchsorted(self.key, np.array(ends, dtype=np.int64), side="right"),
            )
        # a point p >= start where its key >= (start − low) << bits; p <= end where its key
        # <= (end − low) << bits | mask; bounds beyond the span clamped just outside it
        mask, top = (1 << self.bits) - 1, self.span + 1
        first = [min(max(s - self.low, 0), top) << self.bits for s in starts]
        last = [-1 if e < self.low else (min(e - self.low, top) << self.bits) | mask for e in ends]
        return (
            np.searchsorted(self.key, np.array(first, dtype=np.int64), side="left"),
            np.searchsorted(self.key, np.array(last, dtype=np.int64), side="right"),
        )

    def positions(self, at: slice | np.ndarray) -> np.ndarray:
        """The positions (into the rows) at places ``at`` of the order."""
        if self.order is not None:
            return self.order[at]
        return self.key[at] & ((1 << self.bits) - 1)


def _ranges_of(
    rows: np.ndarray, by: _ByPoint, lo: np.ndarray, hi: np.ndarray, which: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The rows at ``by``'s places ``lo[i]:hi[i]``, one range after another, and for each row
    ``which[i]`` (int32), gathered a pass at a time (``concat_ranges``' int64 positions and
    owners are 16 B a row at once)."""
    length = np.maximum(hi - lo, 0)
    index = np.repeat(np.arange(len(lo), dtype=np.int32), length)  # each row's range
    shift = lo - (np.cumsum(length) - length)  # a row's place in the order − its place here
    got = np.empty(len(index), dtype=rows.dtype)
    for a in range(0, len(got), _PASS):
        at = np.arange(a, a + len(index[a : a + _PASS]), dtype=np.int64)
        at += shift[index[a : a + _PASS]]
        got[a : a + _PASS] = rows[by.positions(at)]
    owner: np.ndarray = which[index]
    return got, owner


def _overlapping(windows: list[Window]) -> bool:
    """Whether a window starts before another has ended (one ending as the next starts, as
    ProfilerSteps do, is not overlapping)."""
    if len(windows) < 2:
        return False
    starts = np.array([w.start_ns for w in windows], dtype=np.int64)
    ends = np.array([w.end_ns for w in windows], dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    reach = np.maximum.accumulate(ends[order])
    return bool((starts[order][1:] < reach[:-1]).any())  # back to back: not overlapping


def _innermost(
    member: np.ndarray, owner: np.ndarray, windows: list[Window]
) -> tuple[np.ndarray, np.ndarray]:
    """Each row once, with the shortest of its windows (then the latest to start)."""
    starts = np.array([w.start_ns for w in windows], dtype=np.int64)
    spans = np.array([w.end_ns - w.start_ns for w in windows], dtype=np.int64)
    order = np.lexsort((-starts[owner], spans[owner], member))
    member, owner = member[order], owner[order]
    first = np.ones(len(member), dtype=bool)
    first[1:] = member[1:] != member[:-1]
    return member[first], owner[first]


def _innermost_ranges(
    lo: np.ndarray, hi: np.ndarray, owner: np.ndarray, windows: list[Window]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Windows' places ``lo[i]:hi[i]`` (in one order of points) cut where any range begins or
    ends, each piece held by ``owner[i]``s and kept once, with the innermost of them as
    ``_innermost`` chooses (the shortest, then the latest to start, then the first): the
    pieces' bounds and owners. A sweep over the pieces (a loop per window, not per row)."""
    some = hi > lo
    lo, hi, owner = lo[some], hi[some], owner[some]
    cuts = np.unique(np.concatenate((lo, hi)))
    if len(cuts) < 2:
        return lo[:0], hi[:0], owner[:0]
    first = np.searchsorted(cuts, lo).tolist()  # each range: its pieces first:last
    last = np.searchsorted(cuts, hi).tolist()
    ranks = [
        (windows[w].end_ns - windows[w].start_ns, -windows[w].start_ns, w) for w in owner.tolist()
    ]
    opening = sorted(range(len(first)), key=first.__getitem__)
    held: list[tuple[int, int, int, int]] = []  # (span, −start, window, last piece)
    best = np.full(len(cuts) - 1, -1, dtype=np.int32)
    j = 0
    for piece in range(len(cuts) - 1):
        while j < len(opening) and first[opening[j]] == piece:
            heapq.heappush(held, (*ranks[opening[j]], last[opening[j]]))
            j += 1
        while held and held[0][3] <= piece:  # ended: let go of once on top
            heapq.heappop(held)
        if held:
            best[piece] = held[0][2]
    kept = best >= 0
    return cuts[:-1][kept], cuts[1:][kept], best[kept]


def compress(steps: list[int]) -> str:
    """``5-10, 12`` style list of step numbers, or ``none``."""
    return describe_ranges(step_ranges(steps)) if steps else "none"


def describe_ranges(ranges: list[tuple[int, int]], limit: int = _DESCRIBE_RUNS) -> str:
    """``5-10, 12`` for sorted ranges; past ``limit`` runs, the first and last few and how
    many were left out, so an error line stays short."""
    runs = [f"{a}" if a == b else f"{a}-{b}" for a, b in ranges]
    if len(runs) > limit:
        keep = limit // 2
        runs = [*runs[:keep], f"... ({len(runs) - 2 * keep} more)", *runs[-keep:]]
    return ", ".join(runs)
