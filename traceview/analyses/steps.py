"""ProfilerStep windows, which step each GPU activity belongs to, and the steps table.

A GPU activity belongs to step N when its launching runtime call (same correlation id,
the earliest if several) starts inside the CPU window [ts, ts + dur] of ``ProfilerStep#N``;
without a matched launch its own ts is used. Steps seen only as ``gpu_user_annotation``
use that window and the activity's own ts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from traceview.aggregate.intervals import union_length
from traceview.errors import UsageError
from traceview.events import KERNEL, TraceEvents

_SPEC = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


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


def parse_steps(spec: str) -> list[int]:
    """``N``, ``N-M`` or ``N,M,...`` (parts may be ranges) as a sorted list of step numbers."""
    steps: set[int] = set()
    for part in spec.split(","):
        m = _SPEC.match(part)
        if not m:
            raise UsageError(f"--pstep {spec!r}: expected N, N-M or N,M,... (e.g. 5, 5-7, 5,9)")
        first, last = int(m.group(1)), int(m.group(2) or m.group(1))
        if last < first:
            raise UsageError(f"--pstep {spec!r}: range {first}-{last} runs backwards")
        steps.update(range(first, last + 1))
    return sorted(steps)


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
    steps: list[int],
    windows: dict[int, Window],
    launch: np.ndarray | None = None,
) -> np.ndarray:
    """Boolean mask over GPU rows: the row belongs to one of ``steps``.

    ``launch`` is ``launch_times(events)``, passed in when testing many steps.
    """
    missing = [n for n in steps if n not in windows]
    if missing:
        found = _describe(list(windows))
        raise UsageError(
            f"--pstep: no ProfilerStep {', '.join(map(str, missing))} in this trace "
            f"(steps found: {found})"
        )
    if launch is None:
        launch = launch_times(events)
    own = events.gpu.ts
    mask = np.zeros(len(own), dtype=bool)
    for n in steps:
        w = windows[n]
        point = own if w.gpu_only else launch
        mask |= (point >= w.start_ns) & (point <= w.end_ns)
    return mask


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
    if not steps:
        return "none"
    runs: list[str] = []
    start = prev = steps[0]
    for n in [*steps[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        runs.append(f"{start}" if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(runs)
