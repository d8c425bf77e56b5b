"""A step's time in parts that add up to it exactly (docs/metrics.md "Diff --explain").

For a step with step time T (analyses.core.steps: the GPU's period where it set the pace,
else the CPU step) and, per device, its own busy events (kernels, copies and fills with
dur > 0, as the step owns them):

    T = kernel time + copy time − overlap + idle in the windows + edge

``kernel time`` and ``copy time`` are the events' durations summed; ``overlap`` = those
durations − the devices' busy (the union of each device's events: work running at once on
several streams); ``idle`` = the holes of those unions inside each device's window, each
hole split by cause; ``edge`` = T − the devices' windows summed: the part of the step that
lies outside its GPU work (negative where the windows are longer than T).

Causes of idle: ``host wait`` = the part of a hole before the launch of the activity after it
(as ``gaps``); of the rest, ``communication`` when that activity is a communication kernel,
``launch latency`` when the rest is shorter than LAUNCH_LATENCY_NS, else ``gpu wait``. An edge
is ``host wait`` for a CPU-paced step (the CPU's step outside the GPU's work), and for a
GPU-paced step it is the device gap before the step's first work, split the same way; a
negative edge is ``step overlap``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traceview.aggregate.intervals import unions_in_order
from traceview.aggregate.order import lex_order
from traceview.analyses.core.categories import by_name
from traceview.analyses.core.devices import NO_LAUNCH, device_of_stream, first_launch
from traceview.analyses.core.steps import StepRow, StepRows, Window
from traceview.columns.model import TraceEvents
from traceview.columns.schema import KERNEL

LAUNCH_LATENCY_NS = 20_000
CAUSES = ("host wait", "launch latency", "gpu wait", "communication")


@dataclass(frozen=True)
class StepParts:
    """One step's parts (ns): ``idle`` per cause in CAUSES order (holes and edge together),
    ``step_overlap`` the negative edge (0 or less)."""

    step: int
    step_ns: int
    kernel_ns: int
    copy_ns: int
    overlap_ns: int
    idle_ns: tuple[int, ...]
    step_overlap_ns: int

    @property
    def total_ns(self) -> int:
        """The parts summed: equal to ``step_ns`` by construction."""
        return (
            self.kernel_ns
            + self.copy_ns
            - self.overlap_ns
            + sum(self.idle_ns)
            + self.step_overlap_ns
        )


def step_parts(events: TraceEvents, rows: list[StepRow], windows: list[Window]) -> list[StepParts]:
    """The StepParts of ``rows`` (the step table of ``events`` for ``windows``, in order)."""
    n = len(rows)
    gpu = events.gpu
    member, owner = StepRows(events, np.arange(len(gpu.ts), dtype=np.int64)).members(windows)
    busy = gpu.dur[member] > 0
    member, owner = member[busy], owner[busy]
    dur = gpu.dur[member]
    kernel = gpu.kind[member] == KERNEL
    kernel_ns = np.zeros(n, dtype=np.int64)
    copy_ns = np.zeros(n, dtype=np.int64)
    np.add.at(kernel_ns, owner[kernel], dur[kernel])  # exact ns
    np.add.at(copy_ns, owner[~kernel], dur[~kernel])
    launch = first_launch(events)
    comm = np.array([by_name(name) == "communication" for name in events.names] + [False])
    idle = np.zeros((n, len(CAUSES)), dtype=np.int64)
    if len(member):
        device_index, values = device_of_stream(events)
        width = max(len(values), 1)
        segment = owner.astype(np.int64) * width + device_index[gpu.stream[member]]
        ts = gpu.ts[member]
        order = lex_order((ts, segment))
        u = unions_in_order(
            [segment[order], ts[order], (ts + dur)[order]], neighbours=True, order=order
        )
        assert u.hole_next is not None
        after = member[u.hole_next]
        causes = _split(u.hole_start, u.hole_end, launch[after], comm[gpu.name[after]])
        step_of_hole = u.hole_segment // width
        for c in range(len(CAUSES)):
            np.add.at(idle[:, c], step_of_hole, causes[:, c])
    out = []
    first_start = _first_starts(rows)
    previous_end = _previous_ends(rows)
    for i, r in enumerate(rows):
        devices_busy = sum(d.busy_ns for d in r.devices)
        windows_ns = sum(d.window_ns for d in r.devices)
        k, c = int(kernel_ns[i]), int(copy_ns[i])
        edge = r.step_ns - windows_ns
        by_cause = idle[i].copy()
        step_overlap = 0
        if edge < 0:
            step_overlap = edge
        elif (
            r.gpu_paced
            and (prev := previous_end[i]) is not None
            and (first := first_start[i]) is not None
        ):
            gap = np.array([prev], dtype=np.int64)
            head = _split(gap, gap + edge, np.array([first[1]]), np.array([False]))
            by_cause += head[0]
        else:
            by_cause[0] += edge  # the CPU's step outside the GPU's work: the GPU waited on it
        out.append(
            StepParts(
                step=r.step,
                step_ns=r.step_ns,
                kernel_ns=k,
                copy_ns=c,
                overlap_ns=k + c - devices_busy,
                idle_ns=tuple(int(x) for x in by_cause),
                step_overlap_ns=step_overlap,
            )
        )
    return out


def _split(
    start: np.ndarray, end: np.ndarray, launch: np.ndarray, communication: np.ndarray
) -> np.ndarray:
    """Per hole [start, end] (the activity after it launched at ``launch``, NO_LAUNCH when
    unknown; a communication kernel or not): its ns per cause, in CAUSES order."""
    length = end - start
    host = np.where(launch == NO_LAUNCH, 0, np.clip(launch - start, 0, length))
    rest = length - host
    out = np.zeros((len(start), len(CAUSES)), dtype=np.int64)
    out[:, 0] = host
    out[:, 3] = np.where(communication, rest, 0)
    short = ~communication & (rest < LAUNCH_LATENCY_NS)
    out[:, 1] = np.where(short, rest, 0)
    out[:, 2] = np.where(~communication & ~short, rest, 0)
    return out


def _first_starts(rows: list[StepRow]) -> list[tuple[int, int] | None]:
    """Per step: (its earliest GPU start over its devices, the launch time of that work:
    the start minus its queue), or None without GPU work."""
    out: list[tuple[int, int] | None] = []
    for r in rows:
        if not r.devices:
            out.append(None)
            continue
        d = min(r.devices, key=lambda d: d.start_ns)
        out.append((d.start_ns, d.start_ns - d.queue_ns))
    return out


def _previous_ends(rows: list[StepRow]) -> list[int | None]:
    """Per step: the latest GPU end of the previous step of the table, None for the first."""
    out: list[int | None] = [None]
    for r in rows[:-1]:
        out.append(max((d.end_ns for d in r.devices), default=None))
    return out
