"""``traceview ranks``: its options, parsed here; the work is in traceview.app."""

from __future__ import annotations

from traceview import choices
from traceview.cli.common import (
    Force,
    Format,
    Save,
    Wide,
    command,
)
from traceview.cli.read_options import FROM_FLAGS, reads_traces
from traceview.cli.run_options import FROM_RUN_FLAGS, Traces, reads_runs
from traceview.options import ReadOptions, RunOptions


@command()
@reads_traces
@reads_runs
def ranks(
    trace: Traces,
    fmt: Format = choices.Format.TABLE,
    wide: Wide = False,
    save: Save = None,
    force: Force = False,
    read: ReadOptions = FROM_FLAGS,
    run: RunOptions = FROM_RUN_FLAGS,
) -> None:
    """A run, one trace per rank: per rank kernel time, busy %, communication (exposed),
    step time, the slowest rank; the collectives, their skew and who arrives last, and
    where the trace gives process groups and message sizes, nccl-tests algbw and busbw."""
    from traceview.app import commands, runs

    out = commands.OutputOptions(fmt, wide=wide, force=force, save=save)
    runs.ranks(trace, run, read, out)
