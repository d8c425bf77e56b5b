"""What the analyses of one trace have in common, worked out once when several run together.

``traceview report`` shows the documents of ``summary``, ``kernels``, ``gaps``, ``steps`` and
``ops`` from one read; alone, each of those analyses links the ops, times the op calls, takes
each device's usage and gaps or the step table itself. A Shared holds exactly what each would
compute (the same functions on the same rows), so passing one changes no number: it only
saves doing the work again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traceview.analyses.core.categories import categorize
from traceview.analyses.core.devices import (
    DeviceUsage,
    GapSet,
    LaunchTimes,
    device_gaps,
    name_rank,
)
from traceview.analyses.core.graphs import graph_launch_ids
from traceview.analyses.core.opcalls import OpCalls, op_calls
from traceview.analyses.core.oplinks import OpLinks, link_ops
from traceview.analyses.core.steps import StepRow, step_table
from traceview.analyses.core.trace import TraceSummary, summarize
from traceview.columns.model import TraceEvents


@dataclass(frozen=True)
class Shared:
    """Of one trace (read with its CPU rows): the rank of each name id in sorted order; the
    op links, launch time and category of every GPU row; the op calls; the step table; each
    device's usage and device gaps over all its GPU activity; the summary over that usage;
    the correlation ids of its graph launches."""

    rank: np.ndarray  # name_rank(events.names)
    links: OpLinks  # link_ops(events)
    category: np.ndarray  # categorize(events, links)
    calls: OpCalls  # op_calls(events)
    step_rows: list[StepRow]  # step_table(events)
    usage: list[DeviceUsage]  # usage(events)
    gaps: GapSet | None  # every_gap; None once let go of (summary's operators)
    trace: TraceSummary  # summarize(events)
    graphs: np.ndarray  # graph_launch_ids(events)
    ts: np.ndarray  # events.gpu.ts (the column itself), for ``launch``

    @property
    def launch(self) -> LaunchTimes:
        """``launch_times(events)``, made for the rows asked: 8 B a GPU row not held through
        a summary's analyses."""
        return LaunchTimes(self.ts, self.links.launch)


def every_gap(
    events: TraceEvents, launch: np.ndarray, rank: np.ndarray
) -> tuple[list[DeviceUsage], GapSet]:
    """Each device's usage and its gaps over every GPU row (``launch``: ``first_launch``;
    ``rank``: ``name_rank``), as a Shared holds them."""
    n = len(events.gpu.ts)
    # int32 rows where they fit, as gaps passes them: the gaps' before and after rows half
    # the size, held to the end of a summary; passed as a temporary (no name holds it):
    # freed inside once sorted
    return device_gaps(
        events, np.arange(n, dtype=np.int32 if n < 2**31 else np.int64), launch, rank
    )


def links_and_calls(events: TraceEvents, rank: np.ndarray) -> tuple[OpLinks, OpCalls]:
    """The op links of every GPU row and the op calls, as a Shared holds them (``rank``:
    ``name_rank``): what reads the runtime calls."""
    # the op calls first, then the links: each phase's arrays (every op's columns, every
    # GPU row's links) are not held through the other's peak (the CPU rows read twice)
    calls = op_calls(events)
    return link_ops(events, rank, with_top=False, with_end=True), calls  # no top op is read


def work_out(
    events: TraceEvents,
    linked: tuple[OpLinks, OpCalls] | None = None,
    rank: np.ndarray | None = None,
    category: np.ndarray | None = None,
) -> Shared:
    """The Shared of ``events``; ``linked``: their op links and op calls, when the caller
    has them already (analyses.stored_links); ``rank``, ``category``: ``name_rank`` and
    ``categorize(events, links)``, when the caller has them."""
    rank = name_rank(events.names) if rank is None else rank
    links, calls = links_and_calls(events, rank) if linked is None else linked
    usage, gaps = every_gap(events, links.launch, rank)
    # the launch times after the gaps' peak, for the step table alone
    step_rows = step_table(events, launch=LaunchTimes(events.gpu.ts, links.launch))
    return Shared(
        rank=rank,
        links=links,
        category=categorize(events, links, dtype=np.int8) if category is None else category,
        calls=calls,
        step_rows=step_rows,
        usage=usage,
        gaps=gaps,
        trace=summarize(events, usage),
        graphs=graph_launch_ids(events),
        ts=events.gpu.ts,
    )
