"""ProfilerStep windows, which step each GPU activity belongs to, and the steps table.

A GPU activity belongs to step N when its launching runtime call (same correlation id,
the earliest if several) starts inside the CPU window [ts, ts + dur] of ``ProfilerStep#N``;
without a matched launch its own ts is used. Steps seen only as ``gpu_user_annotation``
use that window and the activity's own ts.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from traceview.aggregate.intervals import union_length
from traceview.errors import UsageError
from traceview.events import KERNEL, TraceEvents

_SPEC = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")
_DESCRIBE_RUNS = 12  # runs of step numbers an error message lists at most

Steps = tuple[int | tuple[int, int], ...]  # step numbers and inclusive (first, last) ranges


@dataclass(frozen=True)
class Window:
    """A step's window in ns, and whether it comes from the GPU annotation (no CPU step)."""

    start_ns: int
    end_ns: int
    gpu_only: bool


@dataclass(frozen=True)
class StepRow:
    """One line of ``traceview steps``."""

    step: int
    start_us: float  # relative to the trace span start
    duration_us: float
    kernels: int
    kernel_time_us: float
    gpu_end_us: float  # relative to the trace span start
    gpu_busy_pct: float
    gpu_only: bool

    def as_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


def parse_steps(spec: str) -> tuple[tuple[int, int], ...]:
    """``N``, ``N-M`` or ``N,M,...`` (parts may be ranges) as sorted, merged, inclusive
    (first, last) ranges: a range stays two numbers, however many steps it spans."""
    ranges = []
    for part in spec.split(","):
        m = _SPEC.match(part)
        if not m:
            raise UsageError(f"--pstep {spec!r}: expected N, N-M or N,M,... (e.g. 5, 5-7, 5,9)")
        first, last = int(m.group(1)), int(m.group(2) or m.group(1))
        if last < first:
            raise UsageError(f"--pstep {spec!r}: range {first}-{last} runs backwards")
        ranges.append((first, last))
    return tuple(_merged(ranges))


def step_ranges(steps: Iterable[int | tuple[int, int]]) -> list[tuple[int, int]]:
    """Step numbers and (first, last) ranges as sorted, merged, inclusive ranges."""
    return _merged([s if isinstance(s, tuple) else (int(s), int(s)) for s in steps])


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for first, last in sorted(ranges):
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return out


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
            f"(steps found: {_describe(list(windows))})"
        )
    return chosen


def step_windows(events: TraceEvents) -> dict[int, Window]:
    """Each step's window; a CPU step wins over a GPU annotation of the same number.

    A step recorded more than once covers all its records (first start to last end).
    """
    cpu: dict[int, tuple[int, int]] = {}
    gpu: dict[int, tuple[int, int]] = {}
    for w in events.steps:
        table = gpu if w.on_gpu else cpu
        old = table.get(w.step)
        table[w.step] = (w.start_ns, w.end_ns) if old is None else (
            min(old[0], w.start_ns), max(old[1], w.end_ns),
        )  # fmt: skip
    windows = {n: Window(s, e, True) for n, (s, e) in gpu.items()}
    windows.update({n: Window(s, e, False) for n, (s, e) in cpu.items()})
    return dict(sorted(windows.items()))


def launch_times(events: TraceEvents) -> np.ndarray:
    """Per GPU row: the start of its launching runtime call, else the row's own ts (ns)."""
    gpu, runtime = events.gpu, events.runtime
    points = gpu.ts.copy()
    if len(runtime.correlation) == 0 or len(gpu.ts) == 0:
        return points
    order = np.lexsort((runtime.ts, runtime.correlation))
    corr, first = np.unique(runtime.correlation[order], return_index=True)
    launch = runtime.ts[order][first]
    at = np.searchsorted(corr, gpu.correlation)
    at_ok = np.minimum(at, len(corr) - 1)
    matched = (gpu.correlation >= 0) & (corr[at_ok] == gpu.correlation)
    points[matched] = launch[at_ok[matched]]
    return points


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
    for gpu_only in (False, True):
        spans = [(w.start_ns, w.end_ns) for n in chosen if (w := windows[n]).gpu_only == gpu_only]
        if not spans:
            continue
        if gpu_only:
            points = own
        else:
            points = launch = launch_times(events) if launch is None else launch
        mask |= _within(points, spans)
    return mask


def _within(points: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
    """Whether each point lies in one of the closed intervals ``spans``."""
    starts, ends = _union(np.array(spans, dtype=np.int64))
    at = np.searchsorted(starts, points, side="right") - 1
    return (at >= 0) & (points <= ends[np.maximum(at, 0)])


def _union(spans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closed intervals (rows of start, end) merged where they overlap or touch."""
    spans = spans[np.argsort(spans[:, 0], kind="stable")]
    reach = np.maximum.accumulate(spans[:, 1])
    new = np.ones(len(spans), dtype=bool)
    new[1:] = spans[1:, 0] > reach[:-1]
    first = np.flatnonzero(new)
    return spans[first, 0], reach[np.append(first[1:] - 1, len(spans) - 1)]


def step_table(events: TraceEvents, kinds: tuple[int, ...] = (KERNEL,)) -> list[StepRow]:
    """One row per step: duration, GPU work launched in it, and GPU busy %.

    GPU busy % = union of the step's activity intervals / the step's GPU window, which runs
    from the step's start to the later of its end and the end of its last activity (the GPU
    runs behind the CPU, so clipping to the CPU window alone would hide the work).
    """
    windows = step_windows(events)
    rows_by = StepRows(events, np.flatnonzero(np.isin(events.gpu.kind, kinds)))
    return [_step_row(events, n, w, rows_by.within(w)) for n, w in windows.items()]


class StepRows:
    """GPU rows (indices) ordered by their step-assignment point (the launch time, or the
    row's own start for GPU-only steps), so each step's rows are found by two binary searches
    instead of a pass over every row per step."""

    def __init__(self, events: TraceEvents, rows: np.ndarray) -> None:
        self.events = events
        self.rows = rows
        self._sorted: dict[bool, tuple[np.ndarray, np.ndarray]] = {}

    def within(self, w: Window) -> np.ndarray:
        """Indices of the rows whose point lies in [w.start_ns, w.end_ns]."""
        if w.gpu_only not in self._sorted:
            gpu = self.events.gpu
            point = (gpu.ts if w.gpu_only else launch_times(self.events))[self.rows]
            order = np.argsort(point, kind="stable")
            self._sorted[w.gpu_only] = (point[order], self.rows[order])
        points, rows = self._sorted[w.gpu_only]
        lo = np.searchsorted(points, w.start_ns, side="left")
        hi = np.searchsorted(points, w.end_ns, side="right")
        return rows[lo:hi]


def _step_row(events: TraceEvents, n: int, w: Window, rows: np.ndarray) -> StepRow:
    origin = events.span_ns[0] if events.span_ns else 0
    ts, dur = events.gpu.ts[rows], events.gpu.dur[rows]
    end = ts + dur
    gpu_end = max(w.end_ns, int(end.max())) if len(end) else w.end_ns
    busy = union_length(np.clip(ts, w.start_ns, gpu_end), np.clip(end, w.start_ns, gpu_end))
    window = gpu_end - w.start_ns
    return StepRow(
        step=n,
        start_us=(w.start_ns - origin) / 1000,
        duration_us=(w.end_ns - w.start_ns) / 1000,
        kernels=len(rows),
        kernel_time_us=int(dur.sum()) / 1000,
        gpu_end_us=(gpu_end - origin) / 1000,
        gpu_busy_pct=100.0 * busy / window if window > 0 else 0.0,
        gpu_only=w.gpu_only,
    )


def _describe(steps: list[int]) -> str:
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
