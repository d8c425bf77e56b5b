"""``traceview audit``: can this trace be trusted? What the profiler dropped, clock and order
faults, what kineto said about itself, truncation; and a verdict on each headline figure.

Every check has a stable id, a severity, a count, a time, the steps it touches and at most
EXAMPLES examples with their ts (for ``trim --window``). Definitions in docs/audit.md.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from traceview.aggregate import sums
from traceview.aggregate.order import distinct, ids_dtype
from traceview.aggregate.sorted_runs import in_sorted
from traceview.analyses.core.devices import (
    NO_LAUNCH,
    DeviceUsage,
    device_of_stream,
    first_launch,
)
from traceview.analyses.core.faults import (
    COPY_CALL,
    FILL_CALL,
    GRAPH_CALL,
    KERNEL_CALL,
    NO_END,
    Calls,
    Drift,
    carried,
    earlier_ends,
    group_order,
    order_faults,
    picked,
    record_counts,
    runtime_calls,
)
from traceview.analyses.core.prelaunch import launched_before_trace, launched_mask
from traceview.analyses.core.quality import time_resolution
from traceview.analyses.core.steps import step_windows
from traceview.analyses.core.trace import TraceSummary, summarize
from traceview.columns.model import StepWindow, TraceEvents
from traceview.columns.numbers import NEGATIVE_DUR
from traceview.columns.schema import KERNEL, GpuColumns
from traceview.humanize import duration

SCHEMA_VERSION = 1
EXAMPLES = 5
ERROR, WARNING, INFO = "error", "warning", "info"
EXACT, APPROXIMATE, UNTRUSTED = "exact", "approximate", "untrusted"
# The headline figures a verdict is given on (summary's figures); and MFU's, where the trace
# has an MFU value: built on the step time and the op attribution, it has their findings.
FIGURES = ("busy_pct", "idle", "step_time", "kernel_time", "op_attribution")
MFU = "mfu"
MFU_BASIS = ("step_time", "op_attribution")
FIGURE_WORDS = {
    "busy_pct": "busy %",
    "idle": "idle and its causes",
    "step_time": "step time",
    "kernel_time": "kernel time",
    "op_attribution": "op attribution",
    MFU: "MFU",
}
CHECKS = (
    "launch-without-gpu",
    "gpu-without-launch",
    "launched-before-trace",
    "start-before-launch",
    "stream-overlap",
    "negative-duration",
    "zero-duration",
    "beyond-span",
    "out-of-order",
    "clock-drift",
    "profiler-warning",
    "truncated",
)


@dataclass(frozen=True)
class Example:
    """One instance of a finding: where (ts, ns; None for what has no time), how long, what
    (a kernel's or call's name, or a line kineto wrote), and where it applies."""

    ts_ns: int | None
    dur_ns: int
    name: str
    device: Any = None
    stream: Any = None
    correlation: int | None = None
    step: int | None = None
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        ts = None if self.ts_ns is None else self.ts_ns / 1000
        end = None if self.ts_ns is None else (self.ts_ns + max(self.dur_ns, 0)) / 1000
        return {
            "ts_us": ts,
            "dur_us": self.dur_ns / 1000,
            "name": self.name,
            "device": self.device,
            "stream": self.stream,
            "correlation": self.correlation,
            "step": self.step,
            "detail": self.detail,
            # what `traceview trim --window` takes to cut the trace around it
            "window": None if ts is None else f"@{ts:.3f}:@{end:.3f}",
        }


@dataclass(frozen=True)
class Part:
    """A named share of a check's count and time (launch-without-gpu, truncated)."""

    what: str
    count: int
    time_ns: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"what": self.what, "count": self.count, "time_us": self.time_ns / 1000}


@dataclass(frozen=True)
class Check:
    """One check's result (count 0: it ran and found nothing)."""

    id: str
    severity: str
    count: int
    time_ns: int
    steps: tuple[int, ...]
    examples: tuple[Example, ...]
    what: str  # one line: what the count counts
    devices: tuple[tuple[Any, int, int], ...] = ()  # (device, count, time ns)
    parts: tuple[Part, ...] = ()
    bound_ns: int = 0  # by how much it can move a figure (see _RULES)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity,
            "count": self.count,
            "time_us": self.time_ns / 1000,
            "steps": list(self.steps),
            "examples": [e.as_dict() for e in self.examples],
            "what": self.what,
            "devices": [{"device": d, "count": n, "time_us": t / 1000} for d, n, t in self.devices],
            "parts": [p.as_dict() for p in self.parts],
        }


@dataclass(frozen=True)
class Figure:
    """The verdict on one headline figure: exact, approximate (within ± bound) or untrusted."""

    trust: str
    bound_ns: int | None = None
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        bound = None if self.bound_ns is None else self.bound_ns / 1000
        return {"trust": self.trust, "bound_us": bound, "reason": self.reason}


@dataclass(frozen=True)
class Audit:
    """The result of ``traceview audit``."""

    trace: TraceSummary
    checks: tuple[Check, ...]  # every check that ran, in CHECKS order
    figures: dict[str, Figure]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def untrusted(self) -> bool:
        return any(f.trust == UNTRUSTED for f in self.figures.values())

    @property
    def found(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.count)

    def as_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "trace": self.trace.as_dict(),
            "sound": not self.untrusted,
            "checks": [c.as_dict() for c in self.checks],
            "figures": figures_json(self.figures),
            "notes": list(self.notes),
        }


def figures_json(figures: dict[str, Figure]) -> dict[str, Any]:
    """``figures`` as the JSON of audit and summary's ``trust``."""
    return {name: f.as_dict() for name, f in figures.items()}


Idle = tuple[np.ndarray, np.ndarray, np.ndarray]  # see _Trace.idle


class _Trace:
    """What the checks share: the trace, its runtime calls, each GPU row's launch, device and
    step point, the step windows sorted by start, and the GPU rows by stream or device and
    start (made once, for the checks that take them in that order)."""

    def __init__(self, events: TraceEvents, launch: np.ndarray | None) -> None:
        self.events = events
        self.calls: Calls = runtime_calls(events)
        self.launch = first_launch(events) if launch is None else launch
        self.stream_device, self.device_values = device_of_stream(events)
        windows = sorted(step_windows(events).items(), key=lambda kv: kv[1].start_ns)
        self.step_number = np.array([n for n, _ in windows], dtype=np.int64)
        self.step_start = np.array([w.start_ns for _, w in windows], dtype=np.int64)
        self.step_end = np.array([w.end_ns for _, w in windows], dtype=np.int64)
        self._runs: dict[bool, tuple[np.ndarray | None, np.ndarray | None]] = {}
        self._idle: dict[bool, Idle] = {}
        self._graph_ids: np.ndarray | None = None

    def device(self, rows: np.ndarray | slice) -> np.ndarray:
        """The device (an index into device_values) of each of the GPU ``rows``."""
        return np.asarray(self.stream_device[self.events.gpu.stream[rows]])

    def devices_of(self, rows: np.ndarray | slice) -> np.ndarray | None:
        """``device(rows)``, None where the trace has one device."""
        return None if len(self.device_values) == 1 else self.device(rows)

    def runs(self, per_device: bool) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The GPU rows' order by group and start (faults.group_order) and their group (their
        stream, or their device; None: all one), made once for each grouping (a device per
        stream: the streams' own)."""
        gpu, streams = self.events.gpu, len(self.events.streams)
        by_stream = self._by_stream(per_device)
        if by_stream not in self._runs:
            if by_stream:
                group = gpu.stream if streams > 1 else None
            else:
                index = self.stream_device.astype(ids_dtype(len(self.device_values)))
                group = index[gpu.stream]
            self._runs[by_stream] = (group_order(group, gpu.ts), group)
        return self._runs[by_stream]

    def _by_stream(self, per_device: bool) -> bool:
        return not per_device or len(self.device_values) == len(self.events.streams)

    def idle(self, per_device: bool) -> Idle:
        """Per GPU row, whether its stream (or device) was idle when it started (no earlier
        work on it still running); and the rows starting before earlier work on it ends,
        with by how much. Worked out once (a device per stream: the streams' own)."""
        key = self._by_stream(per_device)
        if key not in self._idle:
            self._idle = {key: _idle_and_overlaps(self, per_device)}  # the last only
        return self._idle[key]

    @property
    def graph_ids(self) -> np.ndarray:
        """The sorted distinct correlation ids of the graph launch calls."""
        if self._graph_ids is None:
            c = self.calls
            self._graph_ids = distinct(c.correlation[c.kind == GRAPH_CALL])
        return self._graph_ids

    def step_of(self, points: np.ndarray) -> np.ndarray:
        """Per time point: the number of the step window holding it (the latest starting
        one), −1 when none."""
        if len(self.step_start) == 0:
            return np.full(len(points), -1, dtype=np.int64)
        at = np.searchsorted(self.step_start, points, side="right") - 1
        inside = (at >= 0) & (points <= self.step_end[np.maximum(at, 0)])
        return np.where(inside, self.step_number[np.maximum(at, 0)], -1)

    def point(self, rows: np.ndarray | slice) -> np.ndarray:
        """A GPU row's step point: its launch's start, else its own start."""
        launch = self.launch[rows]
        return np.asarray(np.where(launch == NO_LAUNCH, self.events.gpu.ts[rows], launch))

    def gpu_check(
        self,
        check_id: str,
        severity: str,
        what: str,
        rows: np.ndarray,
        time: np.ndarray | None = None,
        detail: Callable[[int], str] | None = None,
        bound_ns: int | None = None,
    ) -> Check:
        """A check whose instances are GPU rows; ``time`` per row (default: its dur)."""
        gpu = self.events.gpu
        time = gpu.dur[rows] if time is None else time
        steps = self.step_of(self.point(rows))
        device = self.device(rows)
        per_device = np.bincount(device, minlength=len(self.device_values))
        device_time = sums.by_group(device, time, len(self.device_values))
        devices = tuple(
            (self.device_values[d], int(per_device[d]), int(device_time[d]))
            for d in np.flatnonzero(per_device).tolist()
        )
        # the largest first (ties: the earliest), so the examples show what matters most
        pick = np.lexsort((gpu.ts[rows], -time))[:EXAMPLES]
        streams = self.events.streams
        examples = tuple(
            Example(
                int(gpu.ts[r]),
                int(gpu.dur[r]),
                self.events.names[int(gpu.name[r])],
                self.device_values[int(self.stream_device[gpu.stream[r]])],
                streams[int(gpu.stream[r])].stream,
                int(gpu.correlation[r]) if gpu.correlation[r] >= 0 else None,
                None if steps[i] < 0 else int(steps[i]),
                "" if detail is None else detail(i),
            )
            for i, r in zip(pick.tolist(), rows[pick].tolist(), strict=True)
        )
        total = sums.total(time)
        return Check(
            check_id,
            severity,
            len(rows),
            total,
            _steps(steps),
            examples,
            what,
            devices,
            bound_ns=total if bound_ns is None else bound_ns,
        )

    def call_examples(self, calls: np.ndarray, detail: str) -> list[Example]:
        c = self.calls
        steps = self.step_of(c.ts[calls])
        return [
            Example(
                int(c.ts[i]),
                int(c.dur[i]),
                self.events.names[int(c.name[i])],
                correlation=int(c.correlation[i]),
                step=None if s < 0 else int(s),
                detail=detail,
            )
            for i, s in zip(calls.tolist(), steps.tolist(), strict=True)
        ]


def _steps(steps: np.ndarray) -> tuple[int, ...]:
    return tuple(distinct(steps[steps >= 0]).tolist())


def audit(
    events: TraceEvents,
    launch: np.ndarray | None = None,
    mfu: bool = False,
    devices: list[DeviceUsage] | None = None,
) -> Audit:
    """Every check on ``events`` (read with its CPU rows) and the verdicts they give;
    ``launch``: ``first_launch(events)`` when the caller has it already; ``mfu``: whether the
    trace has an MFU value (analyses.ops.model_flops ``has_mfu``), which then gets a verdict;
    ``devices``: ``usage(events)``, when the caller has it."""
    checks, notes = checks_of(events, launch)
    return Audit(
        trace=summarize(events, devices),
        checks=checks,
        figures=verdicts(checks, events, mfu),
        notes=notes,
    )


def checks_of(
    events: TraceEvents, launch: np.ndarray | None = None
) -> tuple[tuple[Check, ...], tuple[str, ...]]:
    """The checks of ``audit`` and its notes (what it could not check)."""
    t = _Trace(events, launch)
    launches = len(events.runtime.ts) > 0 and len(events.gpu.ts) > 0
    notes = []
    checks = []
    if not len(events.gpu.ts):
        notes.append("no GPU activity in this trace: the launch checks cannot run")
    elif not launches:
        notes.append(
            "no launch calls in this trace (GPU activity only): the launch checks cannot run"
        )
    if launches:
        checks += [_launch_without_gpu(t), *_unlaunched(t), _start_before_launch(t)]
    # out of order before the rows' runs are made and held (its sorts' peak without them)
    out_of_order = _out_of_order(t)
    checks += [_stream_overlap(t), _negative(t), _zero(t), _beyond_span(t, notes)]
    checks += [out_of_order]
    if launches:
        checks.append(_clock_drift(t))
    checks += [_profiler_warning(t), _truncated(t)]
    # a check that found nothing is no warning, whatever it would be
    return tuple(c if c.count else replace(c, severity=INFO) for c in checks), tuple(notes)


def _launch_without_gpu(t: _Trace) -> Check:
    """Launch calls whose correlation id no GPU activity carries; graph replays with fewer
    kernels than another replay of the same graph; the calls after the last launch that ran
    (the profiler stopped before their work)."""
    c = t.calls
    launch = c.kind <= GRAPH_CALL
    ran = _ran(t.events, c.correlation)
    ran &= launch  # the launches whose work is in the trace
    last = int(np.max(c.ts, where=ran, initial=NO_END))
    lost = np.flatnonzero(np.not_equal(launch, ran, out=ran))  # the others
    del launch, ran
    cut = c.ts[lost] > last
    if len(t.step_number) and cut.any():
        # the stop cuts the step the work ended in, or the last one; a whole step between
        # them without its work is a loss (a buffer that overflowed), not the stop
        at = np.flatnonzero(cut)
        step = t.step_of(c.ts[lost[at]])
        ended = int(t.step_of(np.array([last]))[0])
        kept = (step == -1) | (step == ended) | (step == int(t.step_number.max()))
        cut[at[~kept]] = False
    cut_calls, lost = lost[cut], lost[~cut]
    parts: list[Part] = []
    examples: list[Example] = []
    chosen: list[np.ndarray] = []
    for kind, what in (
        (KERNEL_CALL, "kernel launches"),
        (GRAPH_CALL, "graph launches"),
        (COPY_CALL, "copies"),
        (FILL_CALL, "fills"),
    ):
        calls = lost[c.kind[lost] == kind]
        parts.append(Part(what, len(calls), sums.total(c.dur[calls])))
        chosen.append(calls)
    short = _short_replays(t, t.graph_ids)
    parts.append(Part("kernels missing from graph replays", short[0], short[1]))
    parts.append(Part("cut by the profiler's stop", len(cut_calls), sums.total(c.dur[cut_calls])))
    for calls in chosen:
        examples += t.call_examples(calls[: EXAMPLES - len(examples)], "no GPU activity")
    examples += short[2][: EXAMPLES - len(examples)]
    examples += t.call_examples(cut_calls[: EXAMPLES - len(examples)], "after the last work")
    every = np.concatenate([*chosen, cut_calls])
    steps = set(_steps(t.step_of(c.ts[every]))) | {e.step for e in short[2] if e.step}
    kernels_lost = parts[0].count + parts[1].count + parts[4].count
    severity = ERROR if kernels_lost else WARNING if parts[2].count + parts[3].count else INFO
    return Check(
        "launch-without-gpu",
        severity,
        sum(p.count for p in parts),
        sum(p.time_ns for p in parts),
        tuple(sorted(steps)),
        tuple(examples[:EXAMPLES]),
        "launch calls with no GPU activity, kernels missing from graph replays",
        parts=tuple(parts),
        bound_ns=0,
    )


def _ran(events: TraceEvents, ids: np.ndarray) -> np.ndarray:
    """Mask: which of the runtime call ``ids`` some GPU activity carries."""
    return carried(events.gpu.correlation, ids)


def _short_replays(t: _Trace, graph_ids: np.ndarray) -> tuple[int, int, list[Example]]:
    """Kernels missing from graph replays: each replay compared with the replay of the most
    kernels (the first launched among equals) of its graph, a graph being the replays with
    the same first kernel, or with the same last one (a replay that lost its first kernel
    still ends as the others do); of the two, the longer reference. Their number, the kernel
    time they lack against it, examples (the short replays' first kernel)."""
    gpu = t.events.gpu
    if len(graph_ids) == 0:
        return 0, 0, []
    r = _replays(gpu, graph_ids)
    if len(r.count) == 0:
        return 0, 0, []
    count, kernel_ns, started = r.count, r.kernel_ns, r.started
    refs = [_reference(gpu.name[ends], count, started) for ends in (r.first, r.last)]
    ref_of = np.where(count[refs[1]] > count[refs[0]], refs[1], refs[0])
    missing = count[ref_of] - count
    short = np.flatnonzero(missing > 0)
    lacking = np.maximum(kernel_ns[ref_of] - kernel_ns, 0)[short]
    steps = t.step_of(t.point(r.first[short]))
    names = t.events.names
    examples = [
        Example(
            int(started[i]),
            int(kernel_ns[i]),
            names[int(gpu.name[r.first[i]])],
            t.device_values[int(t.stream_device[gpu.stream[r.first[i]]])],
            t.events.streams[int(gpu.stream[r.first[i]])].stream,
            int(r.correlation[i]),
            None if s < 0 else int(s),
            f"replay of {int(count[i])} kernels; {int(count[ref_of[i]])} in the graph's longest",
        )
        for i, s in zip(short[:EXAMPLES].tolist(), steps[:EXAMPLES].tolist(), strict=True)
    ]
    return int(missing[short].sum()), sums.total(lacking), examples


@dataclass(frozen=True)
class _Replays:
    """The graph replays that ran kernels, by correlation id: each one's id, kernels, their
    time (int64, as numpy adds), start, and first and last kernel (GPU rows): by (start,
    row), the first the earliest, the last the latest."""

    correlation: np.ndarray
    count: np.ndarray
    kernel_ns: np.ndarray
    started: np.ndarray
    first: np.ndarray
    last: np.ndarray


def _replays(gpu: GpuColumns, graph_ids: np.ndarray) -> _Replays:
    """The _Replays of the kernels a graph launch (of ``graph_ids``, sorted distinct ids)
    ran, a pass of GPU rows at a time: a replay's index among the ids is its group, so only
    replay-sized arrays are held (the rows sorted by (id, start) were ~32 B a GPU row at
    once: 0.23 GB for 7·10^6 CUDA-graph kernels)."""
    n = len(graph_ids)
    count = np.zeros(n, dtype=np.int64)
    kernel_ns = np.zeros(n, dtype=np.int64)
    first_ts = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    last_ts = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    first = np.full(n, -1, dtype=np.int64)
    last = np.full(n, -1, dtype=np.int64)
    for lo in range(0, len(gpu.ts), _PASS):
        correlation = gpu.correlation[lo : lo + _PASS]
        row = np.flatnonzero(
            in_sorted(graph_ids, correlation) & (gpu.kind[lo : lo + _PASS] == KERNEL)
        )
        if not len(row):
            continue
        replay = np.searchsorted(graph_ids, correlation[row])
        row += lo
        ts = gpu.ts[row]
        order = np.lexsort((row, ts, replay))
        replay, row, ts = replay[order], row[order], ts[order]
        head = np.flatnonzero(np.r_[True, replay[1:] != replay[:-1]])
        tail = np.r_[head[1:], len(replay)] - 1
        at = replay[head]  # each once
        count[at] += tail - head + 1
        kernel_ns[at] += np.add.reduceat(gpu.dur[row], head)
        # a later pass's rows come after: its first wins on an earlier start alone, its last
        # on a start as late or later
        earlier = ts[head] < first_ts[at]
        first_ts[at[earlier]], first[at[earlier]] = ts[head][earlier], row[head][earlier]
        later = ts[tail] >= last_ts[at]
        last_ts[at[later]], last[at[later]] = ts[tail][later], row[tail][later]
    ran = np.flatnonzero(count)
    return _Replays(
        graph_ids[ran], count[ran], kernel_ns[ran], first_ts[ran], first[ran], last[ran]
    )


def _reference(graph: np.ndarray, count: np.ndarray, started: np.ndarray) -> np.ndarray:
    """Per replay (its graph key, kernel count, start): the replay of its graph with the most
    kernels, the earliest among equals."""
    order = np.lexsort((started, -count, graph))
    head = order[np.r_[True, graph[order][1:] != graph[order][:-1]]]
    return np.asarray(head[np.searchsorted(graph[head], graph)])


def _unlaunched(t: _Trace) -> list[Check]:
    """GPU activity no launch call in the trace carries: launched before the trace began
    (analyses.core.prelaunch), and the rest (dropped runtime events)."""
    unlaunched = ~launched_mask(t.events)
    gpu, called = t.events.gpu, t.events.runtime.correlation
    known = called >= 0
    first_call = int(np.min(called, where=known, initial=_NO_ID)) if known.any() else -1
    # CUPTI numbers calls in the order they are made: an id below every call's was made first
    before = launched_before_trace(t.events)
    if first_call > 0:  # else no activity's id (>= 0) is below it
        numbered = (gpu.correlation >= 0) & (gpu.correlation < first_call)
        numbered &= unlaunched
        before |= numbered
        del numbered
    rest = unlaunched
    rest &= ~before
    return [
        t.gpu_check(
            "gpu-without-launch",
            WARNING,
            "GPU activities whose launch call is not in the trace (dropped runtime events)",
            np.flatnonzero(rest),
        ),
        t.gpu_check(
            "launched-before-trace",
            INFO,
            "GPU activities launched before the trace began (the queued tail of earlier work)",
            np.flatnonzero(before),
        ),
    ]


def _start_before_launch(t: _Trace) -> Check:
    gpu = t.events.gpu
    rows = np.flatnonzero(gpu.ts < t.launch)  # NO_LAUNCH is below every start
    early = t.launch[rows] - gpu.ts[rows]
    return t.gpu_check(
        "start-before-launch",
        WARNING,
        "GPU activities starting before their launch call (time: by how much)",
        rows,
        early,
        lambda i: f"{duration(int(early[i]) / 1000)} before its launch call",
        bound_ns=int(early.max()) if len(early) else 0,
    )


def _stream_overlap(t: _Trace) -> Check:
    _, rows, overlap = t.idle(per_device=False)
    return t.gpu_check(
        "stream-overlap",
        WARNING,
        "GPU activities that start before earlier work on their stream ends (time: overlap)",
        rows,
        overlap,
    )


def _idle_and_overlaps(t: _Trace, per_device: bool) -> Idle:
    """_Trace.idle, worked out in one pass of faults.earlier_ends."""
    gpu = t.events.gpu
    idle = np.empty(len(gpu.ts), dtype=bool)
    rows, overlap = [], []
    for at, before in earlier_ends(*t.runs(per_device), gpu.ts, gpu.dur):
        ts = gpu.ts[at]
        idle[at] = before < ts
        into = np.minimum(before, ts + gpu.dur[at])
        into -= ts
        hit = (before != NO_END) & (into > 0)
        rows.append(picked(at, hit).astype(np.int64, copy=False))
        overlap.append(into[hit])
    found, by_row = _by_row(rows)
    return idle, found, _joined(overlap, np.int64)[by_row]


def _by_row(parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Row indices found a pass at a time, joined and sorted; and the order that sorts them."""
    rows = _joined(parts, np.int64)
    order = np.argsort(rows, kind="stable")  # rows found in order: a pass over them
    return rows[order], order


def _joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def _negative(t: _Trace) -> Check:
    n = t.events.quality.get(NEGATIVE_DUR, 0)
    return Check(
        "negative-duration",
        ERROR if n else INFO,
        n,
        0,
        (),
        (),
        "events with a negative dur (the reader skips them: their time is lost)",
        bound_ns=0,
    )


def _zero(t: _Trace) -> Check:
    """Zero-length GPU activities where the trace has ns timestamps (at whole µs, a short
    kernel rounds to 0 and is not a fault)."""
    gpu = t.events.gpu
    exact = time_resolution(t.events) == "ns"
    rows = np.flatnonzero(gpu.dur == 0) if exact else np.zeros(0, dtype=np.int64)
    return t.gpu_check(
        "zero-duration",
        WARNING,
        "GPU activities of 0 ns in a trace with ns timestamps",
        rows,
    )


def _beyond_span(t: _Trace, notes: list[str]) -> Check:
    """GPU activities starting or ending outside the CPU rows' span by more than SPAN_REACH
    times its length and more than SPAN_REACH_MIN_NS (a GPU running behind its CPU trails it
    by a few step times, never by that much: such a ts is a broken clock or value)."""
    gpu = t.events.gpu
    lo, hi = t.calls.cpu_span
    if hi <= lo:
        rows = np.zeros(0, dtype=np.int64)
        if len(gpu.ts):
            notes.append("no CPU rows: beyond-span has no span to check against")
    else:
        reach = max(SPAN_REACH * (hi - lo), SPAN_REACH_MIN_NS)
        found = []
        for at in range(0, len(gpu.ts), _PASS):  # a pass's temporaries, not the rows'
            ts = gpu.ts[at : at + _PASS]
            far = ts + gpu.dur[at : at + _PASS] > hi + reach
            far |= ts < lo - reach
            found.append(np.flatnonzero(far) + at)
        rows = _joined(found, np.int64)
    return t.gpu_check(
        "beyond-span",
        ERROR,
        "GPU activities lying far outside the CPU span (10 times its length, and 1 s)",
        rows,
    )


SPAN_REACH = 10
SPAN_REACH_MIN_NS = 1_000_000_000
_PASS = 1 << 16  # rows a pass
_NO_ID = np.iinfo(np.int64).max


def _out_of_order(t: _Trace) -> Check:
    """Runtime calls numbered lower than an earlier call of their thread; GPU activities
    numbered lower than earlier work on their stream."""
    c, gpu = t.calls, t.events.gpu
    calls = order_faults(c.thread, c.ts, c.correlation)
    rows = order_faults(gpu.stream, gpu.ts, gpu.correlation)
    check = t.gpu_check(
        "out-of-order",
        WARNING,
        "runtime calls and GPU activities numbered before earlier ones of their thread/stream",
        rows,
    )
    call_time = sums.total(c.dur[calls])
    examples = [*check.examples, *t.call_examples(calls[:EXAMPLES], "call out of order")]
    return Check(
        check.id,
        WARNING,
        check.count + len(calls),
        check.time_ns + call_time,
        tuple(sorted(set(check.steps) | set(_steps(t.step_of(c.ts[calls]))))),
        tuple(examples[:EXAMPLES]),
        check.what,
        check.devices,
        (
            Part("GPU activities", len(rows), check.time_ns),
            Part("runtime calls", len(calls), call_time),
        ),
        bound_ns=0,
    )


def _clock_drift(t: _Trace) -> Check:
    """Per device, the trend of the launch → start floor over the trace (faults.Drift),
    from the kernels launched on their own that started on an idle device."""
    trends = Drift(len(t.device_values))
    own = _own_launches(t, trends)
    _own_passes(t, own, trends.floors)
    found = []
    for d, value in enumerate(t.device_values):
        trend = trends.trend(d)
        if trend is not None:
            found.append((value, trend, int(trends.low[d]), int(trends.high[d])))
    examples = tuple(
        Example(
            low,
            high - low,
            "launch → start delay",
            value,
            detail=f"its floor moves {'+' if trend > 0 else '-'}{duration(abs(trend) / 1000)}"
            " over the trace",
        )
        for value, trend, low, high in found[:EXAMPLES]
    )
    bound = max((abs(trend) for _, trend, _, _ in found), default=0)
    return Check(
        "clock-drift",
        WARNING,
        len(found),
        sum(abs(trend) for _, trend, _, _ in found),
        (),
        examples,
        "devices whose launch → start delay floor trends over the trace (time: the trend)",
        tuple((v, 1, abs(trend)) for v, trend, _, _ in found),
        bound_ns=bound,
    )


def _own_launches(t: _Trace, trends: Drift) -> np.ndarray:
    """Mask: the kernels launched on their own (no graph) that started on an idle device;
    their launches' span per device to ``trends``."""
    gpu = t.events.gpu
    graphs = t.graph_ids
    own = t.idle(per_device=True)[0].copy()
    for lo in range(0, len(own), _PASS):
        at = slice(lo, lo + _PASS)
        hit = own[at]
        hit &= t.launch[at] != NO_LAUNCH
        hit &= gpu.kind[at] == KERNEL
        if len(graphs):
            hit &= ~in_sorted(graphs, gpu.correlation[at])
        rows = picked(at, hit)
        trends.span(t.devices_of(rows), t.launch[rows])
    return own


def _own_passes(
    t: _Trace, own: np.ndarray, add: Callable[[np.ndarray | None, np.ndarray, np.ndarray], None]
) -> None:
    """The rows of ``own`` a pass at a time: their device index, launch and start to ``add``."""
    gpu = t.events.gpu
    for lo in range(0, len(own), _PASS):
        at = slice(lo, lo + _PASS)
        mine = own[at]
        device = t.devices_of(at)
        add(None if device is None else device[mine], t.launch[at][mine], gpu.ts[at][mine])


def _profiler_warning(t: _Trace) -> Check:
    """kineto's own WARNING and ERROR lines in the trace's top-level object, verbatim, and its
    ``Record counts`` INFO line when records were lost or misplaced."""
    header = t.events.header
    lines = [*_log(header, "ERROR"), *_log(header, "WARNING"), *record_counts(_log(header, "INFO"))]
    return Check(
        "profiler-warning",
        WARNING,
        len(lines),
        0,
        (),
        tuple(Example(None, 0, line) for line in lines[:EXAMPLES]),
        "lines kineto wrote about its own recording (ERROR, WARNING, lost-record counts)",
        bound_ns=0,
    )


def _log(header: dict[str, Any], key: str) -> list[str]:
    """A kineto log list of the header (some traces hold it as the text of a Python list)."""
    value = header.get(key)
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value) if value.lstrip().startswith("[") else [value]
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            value = [value]
    if not isinstance(value, list):
        return []
    return [str(v) for v in value]


def _truncated(t: _Trace) -> Check:
    """The file cut before its end; steps without an end (no duration); steps the trace ends
    inside; CPU steps with no GPU work launched in them (in a trace with GPU work)."""
    events = t.events
    cut_at = events.read.truncated_at
    steps = [s for s in events.steps if not s.on_gpu]
    no_end = [s.step for s in events.steps if s.end_ns <= s.start_ns]
    ended = [s.step for s in events.steps if s.cut]
    empty: list[int] = []
    if len(events.gpu.ts) and steps:
        after = _first_point_after(t, np.array([s.start_ns for s in steps], dtype=np.int64))
        empty = [
            s.step for s, first in zip(steps, after.tolist(), strict=True)
            if first > s.end_ns and not s.cut and s.step not in no_end
        ]  # fmt: skip
    missing = _missing_steps(events)
    parts = (
        Part("file cut before its end", int(cut_at is not None)),
        Part("steps without an end", len(no_end)),
        Part("steps missing their CPU range", len(missing)),
        Part("steps the trace ends inside", len(ended)),
        Part("steps with no GPU work", len(empty)),
    )
    examples = [] if cut_at is None else [
        Example(None, 0, f"cut at byte {cut_at}", detail=f"{events.read.events} events read")
    ]  # fmt: skip
    windows = {s.step: s for s in sorted(events.steps, key=lambda s: s.on_gpu, reverse=True)}
    for what, numbers in (
        ("no end", no_end),
        ("no CPU range", missing),
        ("trace ends inside", ended),
        ("no GPU work", empty),
    ):
        examples += [_step_example(windows.get(n), n, what)
                     for n in numbers[: EXAMPLES - len(examples)]]  # fmt: skip
    severity = ERROR if cut_at is not None else WARNING if no_end else INFO
    return Check(
        "truncated",
        severity,
        sum(p.count for p in parts),
        0,
        tuple(sorted({*no_end, *missing, *ended, *empty})),
        tuple(examples[:EXAMPLES]),
        "a file cut short; steps without an end or CPU range, cut by the trace's end, or with "
        "no GPU work",
        parts=parts,
        bound_ns=0,
    )


def _first_point_after(t: _Trace, starts: np.ndarray) -> np.ndarray:
    """Per start: the earliest GPU row's step point at or after it (int64 max when none),
    a pass of rows at a time (no sort of the points: a minimum per gap between the starts,
    then the smallest of those at or after each start)."""
    bounds = distinct(starts)  # sorted, without np.unique's import of numpy.ma
    lowest = np.full(len(bounds) + 1, np.iinfo(np.int64).max, dtype=np.int64)
    for lo in range(0, len(t.events.gpu.ts), _PASS):
        points = t.point(slice(lo, lo + _PASS))
        gap = np.searchsorted(bounds, points, side="right")
        if bool((gap[1:] >= gap[:-1]).all()):  # points in order: a run of rows a gap
            first = np.flatnonzero(np.r_[True, gap[1:] != gap[:-1]])
            np.minimum.at(lowest, gap[first], np.minimum.reduceat(points, first))
        else:
            np.minimum.at(lowest, gap, points)
    # a point at or after bounds[j] lies past j + 1 of them
    after = np.minimum.accumulate(lowest[::-1])[::-1]
    return np.asarray(after[np.searchsorted(bounds, starts) + 1])


def _step_example(window: StepWindow | None, n: int, what: str) -> Example:
    """An example step: its window, or only its number when the trace has no range of it
    (a step missing from the numbering)."""
    if window is None:
        return Example(None, 0, f"ProfilerStep#{n}", step=n, detail=what)
    label = window.label or f"ProfilerStep#{n}"
    return Example(window.start_ns, window.end_ns - window.start_ns, label, step=n, detail=what)


def _missing_steps(events: TraceEvents) -> list[int]:
    """ProfilerStep numbers between the first and last CPU range with no CPU range of their
    own (a GPU annotation may still have it), in a trace with CPU ProfilerStep ranges."""
    cpu = {s.step for s in events.steps if not s.on_gpu and not s.label}
    if not cpu:
        return []
    known = cpu | {s.step for s in events.steps if s.on_gpu and not s.label}
    lo, hi = min(cpu), max(known)
    return [n for n in range(lo, hi + 1) if n not in cpu][:_MISSING_LISTED]


_MISSING_LISTED = 10_000  # a step numbering with a huge hole: the first this many


# What each finding does to each figure: (check id, figure, trust, reason). An approximate
# verdict's bound is the sum of its findings' bounds (Check.bound_ns).
_RULES: tuple[tuple[str, Sequence[str], str, str], ...] = (
    ("launch-without-gpu", ("busy_pct", "idle", "kernel_time", "step_time"), UNTRUSTED,
     "{n} launched kernels or graph replays left no GPU activity: their time is unknown"),
    ("negative-duration", ("busy_pct", "idle", "kernel_time", "step_time"), UNTRUSTED,
     "{n} events had a negative duration and were skipped"),
    ("beyond-span", ("busy_pct", "idle", "step_time"), UNTRUSTED,
     "{n} GPU activities lie far outside the trace's span: its window is wrong"),
    ("truncated", FIGURES, UNTRUSTED, "the file is cut short: the figures cover its first part"),
    ("launched-before-trace", ("busy_pct", "idle", "kernel_time", "op_attribution"),
     APPROXIMATE, "{b} from work launched before the trace"),
    ("gpu-without-launch", ("idle", "step_time", "op_attribution"), APPROXIMATE,
     "{b} from GPU work whose launch call was dropped"),
    ("start-before-launch", ("idle", "step_time"), APPROXIMATE,
     "{b} from GPU work starting before its launch call"),
    ("clock-drift", ("idle", "step_time"), APPROXIMATE, "{b} from the device clock's drift"),
    ("stream-overlap", ("kernel_time",), APPROXIMATE,
     "{b} from activities overlapping on one stream"),
    ("truncated", ("step_time",), APPROXIMATE, "{n} steps without an end or CPU range"),
)  # fmt: skip


def verdicts(checks: Sequence[Check], events: TraceEvents, mfu: bool = False) -> dict[str, Figure]:
    """Each headline figure's trust from the checks' findings (_RULES, docs/audit.md); with
    ``mfu``, MFU's too: the findings of the figures it is built on (MFU_BASIS), each once."""
    by_id = {c.id: c for c in checks}
    found: dict[str, list[tuple[str, int, str]]] = {f: [] for f in FIGURES}
    if mfu:  # a finding of both (gpu-without-launch, a cut file) counts once
        found[MFU] = []
    for check_id, figures, trust, words in _RULES:
        c = by_id.get(check_id)
        if c is None or not c.count or not _applies(c, trust):
            continue
        n = _rule_count(c, trust)
        reason = words.format(n=n, b=f"± {duration(c.bound_ns / 1000)}")
        for f in figures:
            found[f].append((trust, c.bound_ns, reason))
        if mfu and set(figures) & set(MFU_BASIS):
            found[MFU].append((trust, c.bound_ns, reason))
    if not len(events.cpu) and len(events.gpu.ts):
        no_ops = (UNTRUSTED, 0, "no CPU ops in this trace")
        found["op_attribution"].append(no_ops)
        if mfu:
            found[MFU].append(no_ops)
    out = {}
    for f in found:
        bad = [r for r in found[f] if r[0] == UNTRUSTED]
        if bad:
            out[f] = Figure(UNTRUSTED, None, "; ".join(r[2] for r in bad))
        elif found[f]:
            bound = sum(r[1] for r in found[f])
            out[f] = Figure(APPROXIMATE, bound, "; ".join(r[2] for r in found[f]))
        else:
            out[f] = Figure(EXACT, 0)
    return out


def _applies(c: Check, trust: str) -> bool:
    """Whether a check's finding gives this rule's verdict: launch-without-gpu's untrusted
    only for lost kernels (not copies, fills or the profiler's stop); truncated's untrusted
    only for a cut file, its approximate only for steps without an end or CPU range."""
    return c.id not in ("launch-without-gpu", "truncated") or _rule_count(c, trust) > 0


def _rule_count(c: Check, trust: str) -> int:
    parts = {p.what: p.count for p in c.parts}
    if c.id == "launch-without-gpu":
        return sum(
            parts.get(k, 0)
            for k in ("kernel launches", "graph launches", "kernels missing from graph replays")
        )
    if c.id == "truncated" and trust == UNTRUSTED:
        return parts.get("file cut before its end", 0)
    if c.id == "truncated":
        return parts.get("steps without an end", 0) + parts.get("steps missing their CPU range", 0)
    return c.count
