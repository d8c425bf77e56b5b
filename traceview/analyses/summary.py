"""``traceview summary``: where each GPU's time went, on one screen, and what to try.

Per device, the window is split exactly into compute (the union of its non-communication
kernels), exposed communication (communication kernels' time not overlapped by compute),
exposed memcpy/memset (copy time overlapped by neither) and idle; each category's own busy time
(its union) is listed beside it. Then the top categories, kernels and operators by GPU time,
launch figures, steps and the hints (analyses.hints). Definitions in docs/metrics.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from traceview.aggregate import sums
from traceview.aggregate.order import fits_int32, present
from traceview.analyses import hints as hint_rules
from traceview.analyses.audit import MFU, Check, Figure, checks_of, figures_json, verdicts
from traceview.analyses.core.breakdown import Breakdown, breakdowns
from traceview.analyses.core.categories import CATEGORIES
from traceview.analyses.core.common import Shared, every_gap, work_out
from traceview.analyses.core.devices import NO_LAUNCH, GapSet, busy_by_device, name_rank
from traceview.analyses.core.graphs import replayed
from traceview.analyses.core.names import display_names
from traceview.analyses.core.opcalls import OpCalls, OpCallsByBlock, op_calls
from traceview.analyses.core.oplinks import OpLinks, no_call
from traceview.analyses.core.phase_figures import PhaseReport, counted, phase_report
from traceview.analyses.core.prelaunch import without_runtime
from traceview.analyses.core.step_markers import PhaseEvidence, step_phases
from traceview.analyses.core.steps import StepRow
from traceview.analyses.core.trace import TraceSummary, with_facts
from traceview.analyses.memory import MemoryReport, analyse_memory
from traceview.analyses.ops.model_flops import Mfu, linked, model_flops, trace_peaks
from traceview.analyses.ops.view import OpOptions, OpRow, analyse_ops
from traceview.columns.model import TraceEvents
from traceview.columns.packed_names import subset
from traceview.columns.schema import KERNEL

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
TOP = 5
SCHEMA_VERSION = 2


@dataclass(frozen=True)
class Ranked:
    """A kernel (by name) or a category by its GPU time."""

    name: str
    gpu_time_ns: int
    pct: float
    short_name: str = ""  # a kernel's name as displayed (docs/metrics.md "Short names")

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "gpu_time_us": self.gpu_time_ns / 1000, "pct": self.pct}


@dataclass(frozen=True)
class Launches:
    """Kernels, those with a known launch, the median queue delay (kernel start − launch
    call start; a graph launch counted once, by its first kernel) and how many kernels
    launched on their own ran shorter than the runtime call that launched them; the launch
    calls' own CPU time (median and total, a graph launch once); the kernels that CUDA-graph
    replays ran, and their time."""

    kernels: int
    linked: int
    median_queue_delay_ns: int | None
    timed: int
    shorter_than_launch: int
    graph_launches: int = 0
    graph_kernels: int = 0
    graph_kernel_ns: int = 0
    kernel_ns: int = 0
    calls: int = 0  # launch calls whose end was read
    median_call_ns: int | None = None
    call_total_ns: int = 0

    def as_dict(self) -> dict[str, Any]:
        queue = None if self.median_queue_delay_ns is None else self.median_queue_delay_ns / 1000
        return {
            "kernels": self.kernels,
            "linked": self.linked,
            "median_queue_delay_us": queue,
            "median_delay_us": queue,  # the old name of median_queue_delay_us, kept for scripts
            "launch_calls": self.calls,
            "median_launch_call_us": None
            if self.median_call_ns is None
            else self.median_call_ns / 1000,
            "launch_call_total_us": self.call_total_ns / 1000,
            "shorter_than_launch": self.shorter_than_launch,
            "shorter_than_launch_pct": (
                100.0 * self.shorter_than_launch / self.timed if self.timed else None
            ),
            "graph_launches": self.graph_launches,
            "graph_kernels": self.graph_kernels,
            "graph_kernel_time_us": self.graph_kernel_ns / 1000,
        }


@dataclass(frozen=True)
class StepDeviceFigures:
    """Over the steps: a device's median busy % of its step window, median lag, and in how
    many steps it ran behind the CPU."""

    device: Any
    median_busy_pct: float
    median_lag_ns: int
    behind: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "median_busy_pct": self.median_busy_pct,
            "median_lag_us": self.median_lag_ns / 1000,
            "steps_behind": self.behind,
        }


@dataclass(frozen=True)
class Steps:
    """The counted steps: how many, the median of their CPU durations and of their step
    times (GPU-paced where a device ran behind the CPU: docs/metrics.md "Step time"), how
    many the GPU paced, and per device its figures."""

    count: int
    median_cpu_ns: int | None
    devices: tuple[StepDeviceFigures, ...]
    median_step_ns: int | None = None
    gpu_paced: int = 0

    @property
    def paced_by(self) -> str:
        """``gpu`` when the GPU set the pace of most counted steps, else ``cpu``."""
        return "gpu" if 2 * self.gpu_paced > self.count else "cpu"

    def as_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "median_cpu_dur_us": None if self.median_cpu_ns is None else self.median_cpu_ns / 1000,
            "median_step_time_us": (
                None if self.median_step_ns is None else self.median_step_ns / 1000
            ),
            "paced_by": self.paced_by,
            "gpu_paced_steps": self.gpu_paced,
            "devices": [d.as_dict() for d in self.devices],
        }


@dataclass(frozen=True)
class Overview:
    """The result of ``traceview summary``."""

    trace: TraceSummary
    devices: tuple[Breakdown, ...]
    categories: tuple[Ranked, ...]
    kernels: tuple[Ranked, ...]
    ops: tuple[OpRow, ...]
    launches: Launches
    steps: Steps
    hints: tuple[hint_rules.Hint, ...]
    notes: list[str] = field(default_factory=list)
    memory: MemoryReport | None = None  # the allocator's peaks (traceview memory)
    phases: PhaseReport | None = None  # per-phase step figures, steady state, degenerate steps
    mfu: Mfu | None = None  # model FLOPs utilisation over the counted steps
    trust: dict[str, Figure] | None = None  # each headline figure's verdict (analyses.audit)

    @property
    def findings(self) -> tuple[hint_rules.Finding, ...]:
        """The hints ranked by their time at stake (docs/hints.md "Findings")."""
        return hint_rules.rank(self.hints)

    def as_json(self) -> dict[str, Any]:
        ranks = {f.hint.rule: f.rank for f in self.findings}
        return {
            "schema_version": SCHEMA_VERSION,
            "trace": self.trace.as_dict(),
            "devices": [d.as_dict() for d in self.devices],
            "top_categories": [c.as_dict() for c in self.categories],
            "top_kernels": [k.as_dict() for k in self.kernels],
            "top_ops": [o.as_dict() for o in self.ops],
            "launch": self.launches.as_dict(),
            "steps": self.steps.as_dict(),
            "findings": [f.as_dict() for f in self.findings],
            "hints": [{**h.as_dict(), "rank": ranks[h.rule]} for h in self.hints],
            "notes": list(self.notes),
            "memory": None if self.memory is None else self.memory.summary_dict(),
            "mfu": None if self.mfu is None else self.mfu.as_dict(),
            **_phases_json(self.phases),
            "trust": None if self.trust is None else figures_json(self.trust),
        }


class Later(Protocol[T_co]):
    """A value being worked out elsewhere (traceview.forked.Aside)."""

    def result(self) -> T_co: ...

    def cancel(self) -> None: ...


class Aside(Protocol):
    """Starts ``work()`` elsewhere (a second core) and gives its Later; ``kind``: the type of
    its value. The value must be what ``work()`` gives here (Aside falls back to that)."""

    def __call__(self, work: Callable[[], T], kind: type[T]) -> Later[T]: ...


@dataclass(frozen=True)
class DeviceHints:
    """The devices' breakdowns and the hints (``device_hints``): a part of an Overview that
    may be worked out aside."""

    devices: tuple[Breakdown, ...]
    hints: tuple[hint_rules.Hint, ...]


@dataclass(frozen=True)
class CallsAndKernels:
    """The op calls and the top kernels (``calls_and_kernels``): a part of an Overview that
    may be worked out aside (the op calls in a pass of their own)."""

    calls: OpCalls
    kernels: tuple[Ranked, ...]


def overview(
    events: TraceEvents,
    shared: Shared | None = None,
    include_warmup: bool = False,
    peaks_file: Path | None = None,
    trust: dict[str, Figure] | None = None,
    phases_here: bool = False,
    aside: Aside | None = None,
    checks: tuple[Check, ...] | None = None,
) -> Overview:
    """Everything ``summary`` shows, from one read of the trace (CPU rows included);
    ``shared``: the op links, op calls, device usage and gaps and step table, when the
    caller has them already. Step medians leave out degenerate steps, and warm-up and
    capture steps unless ``include_warmup``; ``peaks_file``: a ``--peaks`` file for MFU.
    ``trust``: the verdicts of the whole trace (MFU's among them), when ``events`` are a part
    of it (a phase's GPU work: its launches of other phases would read as lost); else worked
    out here. MFU has a verdict only where ``events`` have an MFU value. ``phases_here``:
    the steps' phases are not set yet (read without ``phases``): they are set from the
    evidence gathered in the links' pass (``shared`` None). ``aside``: where the
    CallsAndKernels (the op calls in a pass of their own) are worked out while this process
    links the ops, sets the phases and runs audit's checks, and then the DeviceHints while
    it works out the operators, MFU and the launches (``shared`` None); the result is the
    same. ``checks``: audit's checks of ``events``, when the caller ran them (before it let
    go of the runtime calls: without_runtime)."""
    found = None
    split = aside is not None and shared is None
    pending: list[Later[Any]] = []  # stopped on the way out, whatever happens
    try:
        if shared is None:
            # the links with the op calls, the model-FLOPs rows, the optimizer steps' spans
            # and the phases' evidence gathered in the links' pass (the op calls aside:
            # in a pass of their own there)
            rank = name_rank(events.names)
            if aside is not None:
                pending.append(aside(partial(calls_and_kernels, events), CallsAndKernels))
            calls = None if split else OpCallsByBlock(events)
            evidence = PhaseEvidence(events) if phases_here else None

            def seen(block: np.ndarray) -> None:  # the op calls and phases ride on that pass
                if calls is not None:
                    calls.add(block)
                if evidence is not None:
                    evidence.add(block)

            # the trace's facts (summarize's data checks, ~40 B a GPU row at their peak) and
            # audit's checks before the links are held
            events = with_facts(events)
            if trust is None and checks is None:
                checks = checks_of(events)[0]
            found = linked(events, seen, rank, True, count=False)
            if evidence is not None:
                events = step_phases(events, evidence)
            if calls is None:
                first = pending.pop(0).result()  # the aside's work (holding the read) let go
            else:
                first = CallsAndKernels(calls.result(), _kernels(events))
            del calls, evidence
            kernels = first.kernels
            # the runtime calls are used no more but by the launched mask, kept: freed where
            # the caller handed ``events`` over (commands.summary), 16 B a call
            events = without_runtime(events)
            # the model-FLOPs calls counted once they are let go of (their rows, 28 B a call)
            found = replace(found, calls=found.counted(events))
            shared = work_out(events, (found.links, first.calls), rank, found.category)
            del first
        else:
            if phases_here:
                events = step_phases(events)
            kernels = _kernels(events)
        memory = analyse_memory(events, holders=False)
        gaps = shared.gaps
        assert gaps is not None  # let go of below, after their last use
        phases = phase_report(
            events, shared.step_rows, gaps, include_warmup, shared.launch, shared.graphs
        )
        # MFU before the hints: the model-FLOPs calls are not held in their child
        kept = counted(shared.step_rows, include_warmup)
        flops = model_flops(
            events,
            shared.links,
            shared.category,
            shared.step_rows,
            shared.launch,
            trace_peaks(events, peaks_file),
            None if found is None else found.counted(events),
            None if found is None else found.embeddings,
        )
        del found
        mfu = flops.summary(kept)
        del flops
        # the operators go without the gaps (14 B a gap): the hints take them first, here or
        # in a child whose copy is its own (worked out again should it fail)
        shared = replace(shared, gaps=None)
        if split and aside is not None:  # aside while the operators are worked out here
            lent = [gaps]
            del gaps
            work = partial(_hints_lent, events, shared, lent, memory)
            pending.append(aside(work, DeviceHints))
            lent.clear()
            by_device = busy_by_device(events)  # the child sorts its own, with the gaps
        else:
            by_device = busy_by_device(events)  # one sort for both
            device = device_hints(events, replace(shared, gaps=gaps), by_device, memory)
            del gaps
        ops = analyse_ops(events, OpOptions(top=TOP), shared, by_device)
        del by_device
        launches = _launches(events, shared.links, shared.graphs)
        if split:
            device = pending[-1].result()
    finally:
        for later in pending:
            later.cancel()
    if trust is None:  # audit's verdicts (its trace summary is shared.trace)
        checks = checks_of(events, shared.links.launch)[0] if checks is None else checks
        trust = verdicts(checks, events, mfu=mfu.value is not None)
    elif mfu.value is None:  # the whole trace's verdicts: MFU's only where there is a value
        trust = {name: f for name, f in trust.items() if name != MFU}
    gpu = events.gpu
    return Overview(
        trace=shared.trace,
        devices=device.devices,
        categories=_ranked(
            list(CATEGORIES), sums.by_group(shared.category, gpu.dur, len(CATEGORIES))
        ),
        kernels=kernels,
        ops=tuple(ops.rows),
        launches=launches,
        steps=_steps(kept),
        hints=device.hints,
        notes=_notes(events, phases),
        memory=memory,
        phases=phases,
        mfu=mfu,
        trust=trust,
    )


def device_hints(
    events: TraceEvents, shared: Shared, by_device: np.ndarray, memory: MemoryReport
) -> DeviceHints:
    """The DeviceHints of ``events`` (``by_device``: ``busy_by_device(events)``; ``memory``:
    their MemoryReport; ``shared`` with its gaps)."""
    links, category, gaps = shared.links, shared.category, shared.gaps
    assert gaps is not None, "the hints read the gaps"
    devices = breakdowns(events, category, shared.usage, gaps, links.launch, by_device)
    facts = hint_rules.Facts(
        events, links, category, devices, shared.usage, gaps, memory, shared.graphs
    )
    return DeviceHints(devices, tuple(hint_rules.evaluate(facts)))


def _hints_lent(
    events: TraceEvents, shared: Shared, lent: list[GapSet], memory: MemoryReport
) -> DeviceHints:
    """``device_hints`` with the gaps ``lent``: in an aside's child, its copy of them as at
    the fork; here (the lender emptied it once the child started), worked out again."""
    gaps = lent[0] if lent else every_gap(events, shared.links.launch, shared.rank)[1]
    by_device = busy_by_device(events)
    return device_hints(events, replace(shared, gaps=gaps), by_device, memory)


def calls_and_kernels(events: TraceEvents) -> CallsAndKernels:
    """The CallsAndKernels of ``events``."""
    return CallsAndKernels(op_calls(events), _kernels(events))


def _kernels(events: TraceEvents) -> tuple[Ranked, ...]:
    """The top kernels by GPU time, with their displayed names."""
    return _named(events, _ranked(events.names, _kernel_time(events)))


def _notes(events: TraceEvents, phases: PhaseReport) -> list[str]:
    notes = [] if len(events.cpu) else ["no CPU ops in this trace: no operators, no launches"]
    if phases.warmup_left_out:
        notes.append(
            f"{len(phases.warmup_left_out)} warm-up/capture step(s) "
            f"({', '.join(map(str, phases.warmup_left_out))}) left out of the step medians; "
            "--include-warmup counts them"
        )
    notes += [
        f"step {n} ({name}) is degenerate: {why}; left out of the step medians"
        for n, name, why in phases.degenerate
    ]
    return notes


def _phases_json(phases: PhaseReport | None) -> dict[str, Any]:
    if phases is None:
        return {"phases": [], "steady_state": None, "degenerate_steps": []}
    return {
        "phases": [p.as_dict() for p in phases.phases],
        "steady_state": None if phases.steady is None else phases.steady.as_dict(),
        "degenerate_steps": [
            {"step": n, "name": name, "reason": why} for n, name, why in phases.degenerate
        ],
    }


def _ranked(labels: Sequence[str], summed: np.ndarray) -> tuple[Ranked, ...]:
    """The TOP labels by their summed duration (``summed``: per label)."""
    totals = {labels[i]: int(summed[i]) for i in np.flatnonzero(summed).tolist()}
    whole = sum(totals.values())
    best = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]
    return tuple(Ranked(k, v, 100.0 * v / whole if whole else 0.0) for k, v in best)


_PASS = 1 << 16


def _kernel_rows(events: TraceEvents) -> Iterator[np.ndarray]:
    """The kernels' rows, a pass of GPU rows at a time (no index array of every kernel)."""
    kind = events.gpu.kind
    for lo in range(0, len(kind), _PASS):
        rows = np.flatnonzero(kind[lo : lo + _PASS] == KERNEL)
        rows += lo
        yield rows


def _kernel_time(events: TraceEvents) -> np.ndarray:
    """Per name id: the kernels' summed duration."""
    gpu = events.gpu
    summed = sums.GroupSums(len(events.names))
    for rows in _kernel_rows(events):
        summed.add(gpu.name[rows], gpu.dur[rows])
    return summed.out


def _named(events: TraceEvents, kernels: tuple[Ranked, ...]) -> tuple[Ranked, ...]:
    """The kernels with their displayed names, decided over every GPU name of the trace."""
    used = present(events.gpu.name, len(events.names))
    display = display_names(subset(events.names, used))
    return tuple(replace(k, short_name=display.get(k.name, k.name)) for k in kernels)


def _launches(events: TraceEvents, links: OpLinks, graph_ids: np.ndarray) -> Launches:
    """The launch figures, a pass of kernels at a time: only the queue delays and launch
    calls the medians need are held, and per graph launch its first kernel's start and its
    call (not its kernels: 7·10^6 replayed kernels would hold 0.45 GB)."""
    gpu = events.gpu
    launch, launch_ns = links.launch, links.launch_ns
    none = no_call(launch_ns)
    n = int(np.count_nonzero(gpu.kind == KERNEL))
    delay = _Filled(n)  # of kernels launched on their own, then replays
    calls = _Filled(n)  # launch calls timed (a replay's once, after)
    delays = timed = linked = shorter = 0
    kernel_ns, graph_ns = sums.GroupSums(1), sums.GroupSums(1)
    # per graph launch (graph_ids' order): whether a kernel of the trace ran it; of those
    # with their launch call, the earliest start of its kernels and the call's start and
    # duration (NO_LAUNCH: none)
    ran = np.zeros(len(graph_ids), dtype=bool)
    first = np.full(len(graph_ids), _NEVER, dtype=np.int64)
    called = np.full(len(graph_ids), NO_LAUNCH, dtype=np.int64)
    took_ns = np.full(len(graph_ids), NO_LAUNCH, dtype=np.int64)
    graph_kernels = 0
    for rows in _kernel_rows(events):
        graph = replayed(events, rows, graph_ids)
        start, took = launch[rows], launch_ns[rows]
        has = start != NO_LAUNCH
        linked += int(np.count_nonzero(has))
        own = has & ~graph
        got = int(np.count_nonzero(own))
        delay.put(delays, (gpu.ts[rows] - start)[own])
        delays += got
        own &= took != none
        call = took[own].astype(np.int64, copy=False)
        calls.put(timed, call)
        timed += len(call)
        shorter += int(np.count_nonzero(gpu.dur[rows][own] < call))
        dur = gpu.dur[rows]
        kernel_ns.add(np.zeros(len(dur), dtype=np.int64), dur)
        if graph.any():
            graph_kernels += int(np.count_nonzero(graph))
            graph_ns.add(np.zeros(int(graph.sum()), dtype=np.int64), dur[graph])
            slot = np.searchsorted(graph_ids, gpu.correlation[rows][graph])  # its launch
            ran[slot] = True
            replay = has[graph]
            slot = slot[replay]
            np.minimum.at(first, slot, gpu.ts[rows][graph][replay])
            called[slot] = start[graph][replay]  # one call for every kernel of a replay
            replay_ns = took[graph][replay].astype(np.int64)
            replay_ns[replay_ns == none] = NO_LAUNCH
            took_ns[slot] = replay_ns
    own_calls = timed
    if graph_kernels:  # a replay's delay: its first kernel's start − the launch call
        seen = first != _NEVER
        delay.values = np.concatenate([delay.values[:delays], (first - called)[seen]])
        delays = len(delay.values)
        seen &= took_ns != NO_LAUNCH  # a graph launch's call once
        calls.values = np.concatenate([calls.values[:timed], took_ns[seen]])
        timed = len(calls.values)
    del first, called, took_ns
    call_total = sums.total(calls.values[:timed])
    # the medians in place (both arrays are this function's own): no copy beside them
    median_delay = _median(delay.values[:delays], in_place=True)
    del delay
    median_call = _median(calls.values[:timed], in_place=True)
    del calls
    return Launches(
        kernels=n,
        linked=linked,
        median_queue_delay_ns=median_delay,
        timed=own_calls,
        shorter_than_launch=shorter,
        graph_launches=int(np.count_nonzero(ran)),
        graph_kernels=graph_kernels,
        graph_kernel_ns=int(graph_ns.out[0]),
        kernel_ns=int(kernel_ns.out[0]),
        calls=timed,
        median_call_ns=median_call,
        call_total_ns=call_total,
    )


_NEVER = np.iinfo(np.int64).max  # no kernel of the graph launch seen


class _Filled:
    """Up to ``n`` int64 values written in order, held as int32 while they fit (half the
    memory; the median and the sum are the same), widened at the first that does not."""

    def __init__(self, n: int) -> None:
        self.values = np.empty(n, dtype=np.int32)

    def put(self, at: int, values: np.ndarray) -> None:
        if self.values.dtype == np.int32 and len(values) and not fits_int32(values):
            self.values = self.values.astype(np.int64)
        self.values[at : at + len(values)] = values


def _median(values: np.ndarray, in_place: bool = False) -> int | None:
    """Nearest-rank median (the ceil(n/2)-th smallest), None when empty; ``in_place``:
    ``values`` partitioned themselves (no copy)."""
    if len(values) == 0:
        return None
    k = (len(values) + 1) // 2 - 1
    if not in_place:
        return int(np.partition(values, k)[k])
    values.partition(k)
    return int(values[k])


def _steps(rows: list[StepRow]) -> Steps:
    per_device: dict[Any, list[tuple[float, int, bool]]] = {}
    for r in rows:
        for d in r.devices:
            per_device.setdefault(d.device, []).append((d.busy_pct, d.lag_ns, r.behind(d)))
    devices = tuple(
        StepDeviceFigures(
            device=device,
            median_busy_pct=float(sorted(b for b, _, _ in found)[(len(found) + 1) // 2 - 1]),
            median_lag_ns=int(_median(np.array([lag for _, lag, _ in found])) or 0),
            behind=sum(1 for _, _, behind in found if behind),
        )
        for device, found in per_device.items()
    )
    cpu = np.array([r.cpu_ns for r in rows], dtype=np.int64)
    paced = np.array([r.step_ns for r in rows], dtype=np.int64)
    gpu_paced = sum(1 for r in rows if r.gpu_paced)
    return Steps(len(rows), _median(cpu), devices, _median(paced), gpu_paced)
