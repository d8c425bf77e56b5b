"""What ``traceview steps`` shows: the trace's summary, the step table and the model FLOPs,
from one read of the trace (CPU rows included), with the op links aside (a second core)
when the caller has an Aside."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from traceview.analyses.core.aside import Aside
from traceview.analyses.core.devices import launch_times
from traceview.analyses.core.step_markers import PhaseEvidence, step_phases
from traceview.analyses.core.steps import StepRow, step_table
from traceview.analyses.core.trace import TraceSummary, summarize
from traceview.analyses.ops.model_flops import (
    Known,
    ModelFlops,
    Picks,
    linked,
    linked_known_rows,
    steps_model_flops,
)
from traceview.columns.model import TraceEvents


@dataclass(frozen=True)
class StepReport:
    trace: TraceSummary
    rows: list[StepRow]
    flops: ModelFlops


def step_report(
    events: TraceEvents, peaks_file: Path | None = None, aside: Aside | None = None
) -> StepReport:
    """The StepReport of ``events`` (read with CPU rows; ``peaks_file``: a ``--peaks`` file
    for MFU). ``aside``: where the op links and categories (``linked_known_rows``, half the
    work) are worked out while this process summarizes, gathers the phases' evidence and the
    model-FLOPs calls in a pass of its own and makes the step table; the result is the same."""
    later = None if aside is None else aside(partial(linked_known_rows, events), np.ndarray)
    try:
        trace = summarize(events)  # first: its temporaries beside the columns alone
        evidence = PhaseEvidence(events)
        if later is None:
            # the steps' phases from the pass over the CPU rows that links the ops
            found = linked(events, evidence.add)
            events = step_phases(events, evidence)
            # of the links, only the rows' known FLOPs and launch times are kept (9 B a row)
            first = found.links.launch
            known = Known.of(events, found)
            del found
            launch = launch_times(events, first)
            del first
            rows = step_table(events, launch=launch)
        else:
            picks = Picks(events)
            for block in events.cpu.passing_blocks():  # the links' pass's riders, here
                evidence.add(block)
                few = block[picks.wanted[block["name"]]]
                if len(few):
                    picks.add(few)
            calls, embeddings = picks.calls_of(events), picks.embeddings.rows()
            del picks
            events = step_phases(events, evidence)
            launch = launch_times(events)  # the links' first launches, looked up here
            rows = step_table(events, launch=launch)
            known = Known(later.result(), calls, embeddings)
        flops = steps_model_flops(events, rows, peaks_file, known, launch)
    finally:
        if later is not None:
            later.cancel()
    return StepReport(trace, rows, flops)
