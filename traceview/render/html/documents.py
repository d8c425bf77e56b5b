"""What the report shows: the JSON documents of ``summary``, ``kernels``, ``gaps``, ``steps``,
``ops`` and ``memory``, built by the same analyses and renderers as those commands from one read
of the trace, so every number in the page equals theirs; plus the timeline (analyses.timeline). Of a
run, also the run's ``ranks`` document, the other documents being of one rank's trace."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from traceview.analyses.audit import Check, checks_of
from traceview.analyses.core.common import Shared, work_out
from traceview.analyses.core.oplinks import launches_only
from traceview.analyses.gaps import GapOptions, analyse_gaps
from traceview.analyses.kernels import KernelOptions, analyse_kernels
from traceview.analyses.memory import analyse_memory
from traceview.analyses.ops.model_flops import model_flops, trace_peaks
from traceview.analyses.ops.view import OpOptions, analyse_ops
from traceview.analyses.source import stack_lines
from traceview.analyses.source_tables import StackLine
from traceview.analyses.step_breakdown import step_breakdown
from traceview.analyses.step_outliers import outliers
from traceview.analyses.summary import overview
from traceview.analyses.timeline import (
    BINS,
    GraphStep,
    StepWork,
    Utilisation,
    graph_steps,
    pick_step,
    step_work,
    utilisation,
)
from traceview.columns.model import TraceEvents
from traceview.render import kernels as render_kernels
from traceview.render import memory as render_memory
from traceview.render import steps as render_steps

LARGEST_GAPS = 20  # the device gaps marked on the timeline (``gaps --largest 20``)


@dataclass(frozen=True)
class ReportOptions:
    """What the page shows beyond the commands' defaults."""

    timeline_step: int | None = None  # the step drawn as rectangles (None: the median step)
    bins: int = BINS
    rank: int | None = None  # a run: the rank whose trace the sections show (None: the lowest)


@dataclass(frozen=True)
class Documents:
    """The commands' JSON documents and the timeline, for one trace."""

    summary: dict[str, Any]
    kernels: dict[str, Any]  # ``kernels --top 0``
    gaps: dict[str, Any]  # ``gaps --largest 20``
    steps: dict[str, Any]
    ops: dict[str, Any]  # ``ops --top 0 [--group-by op+shapes]``
    step_outliers: list[bool]  # per row of ``steps``
    utilisation: Utilisation
    step: StepWork | None
    names: Sequence[str]  # the trace's names (StepWork.name indexes them)
    # A run: the ``ranks`` document, and the rank whose trace the documents above are of.
    ranks: dict[str, Any] | None = None
    rank: int | None = None
    memory: dict[str, Any] | None = None  # ``memory -f json`` (None: not worked out)
    graph_steps: Sequence[GraphStep] = ()  # the steps CUDA-graph replays ran kernels in
    stacks: Sequence[StackLine] = ()  # ``source -f folded`` (none without python frames)
    # per step and device: compute / communication / memcpy / host wait / other idle
    step_breakdown: dict[str, Any] | None = None


@dataclass(frozen=True)
class CallsRead:
    """What the documents read the runtime calls for: audit's checks (the summary's verdicts)
    and the GPU time by Python stack. Worked out first, a caller lets go of the calls
    (without_runtime) for the other documents."""

    checks: tuple[Check, ...]
    stacks: Sequence[StackLine]


def calls_read(events: TraceEvents) -> CallsRead:
    """The documents' work that reads ``events``' runtime calls."""
    return CallsRead(checks_of(events)[0], _stacks(events))


def collect(
    events: TraceEvents,
    options: ReportOptions,
    shared: Shared | None = None,
    first: CallsRead | None = None,
) -> Documents:
    """Every document from the one ``events`` (read with its CPU rows); what several
    analyses need (op links, op calls, step table, device usage and gaps) is worked out once
    (``shared``: when the caller has it already). ``first``: calls_read of ``events``, when
    the caller has it (then ``events`` may be without their runtime calls:
    without_runtime). A ``shared`` handed over (the caller keeps no reference) lets go of
    its links but their launch times once the documents that read them are made (30 MB at
    7.8 GB), before the gaps' peak."""
    step = pick_step(events, options.timeline_step)
    shared = work_out(events) if shared is None else shared
    gaps = shared.gaps
    assert gaps is not None, "a Shared of its own, or the caller's: with its gaps"
    flops = model_flops(
        events,
        shared.links,
        shared.category,
        shared.step_rows,
        shared.launch,
        trace_peaks(events, None),
    )
    steps = render_steps.as_json(shared.trace, shared.step_rows, flops)
    del flops
    kernels = render_kernels.as_json(analyse_kernels(events, KernelOptions(top=0), shared))
    summary = overview(events, shared, checks=None if first is None else first.checks).as_json()
    ops = analyse_ops(events, _op_options(), shared).as_json()
    # what follows reads the links' launch times alone
    shared = replace(shared, links=launches_only(shared.links))
    return Documents(
        summary=summary,
        kernels=kernels,
        gaps=analyse_gaps(events, GapOptions(largest=LARGEST_GAPS), shared).as_json(),
        steps=steps,
        ops=ops,
        step_outliers=outliers([s["step_time_us"] for s in steps["steps"]]),
        utilisation=utilisation(events, options.bins, shared.usage, gaps),
        step=None
        if step is None
        else step_work(events, step, launch=shared.launch, graphs=shared.graphs),
        names=events.names,
        memory=render_memory.as_json(shared.trace, analyse_memory(events)),
        graph_steps=graph_steps(events, shared.graphs, shared.launch),
        stacks=_stacks(events) if first is None else first.stacks,
        step_breakdown=step_breakdown(events, shared.step_rows, shared.category, gaps).as_json(),
    )


def _stacks(events: TraceEvents) -> Sequence[StackLine]:
    """GPU time by Python stack, when the trace was read with frames and has some."""
    if len(events.frames.ts) == 0:
        return ()
    return stack_lines(events)


def _op_options() -> OpOptions:
    """``ops --top 0``, with ``--group-by op+shapes`` where ``ops`` has it (the operator
    issue): then the roofline has one point per op and shapes (and so dtype)."""
    wanted: dict[str, Any] = {"top": 0}
    if "group_by" in {f.name for f in fields(OpOptions)}:
        wanted["group_by"] = "op+shapes"
    return OpOptions(**wanted)
