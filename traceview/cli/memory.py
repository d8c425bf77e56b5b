"""``traceview memory``: its options, parsed here; the work is in traceview.app."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer

from traceview import choices
from traceview.cli.common import Force, Format, Save, Wide, command
from traceview.cli.read_options import FROM_FLAGS, reads_traces
from traceview.cli.run_options import FROM_RUN_FLAGS, PerRank, Traces, reads_runs
from traceview.options import ReadOptions, RunOptions


@command()
@reads_traces
@reads_runs
def memory(
    trace: Traces,
    fmt: Format = choices.Format.TABLE,
    save: Save = None,
    force: Force = False,
    top: Annotated[
        int,
        typer.Option(
            "--top",
            "-t",
            min=0,
            help="Ops holding memory at the peak shown per device; 0 = all. JSON and CSV "
            "hold every one.",
        ),
    ] = 10,
    wide: Wide = False,
    per_rank: PerRank = False,
    read: ReadOptions = FROM_FLAGS,
    run: RunOptions = FROM_RUN_FLAGS,
) -> None:
    """GPU memory from the caching allocator's events (profile_memory=True): per device
    the peak allocated and reserved, when, the steps' peaks and growth, and the live
    allocations at the peak by the op that made them."""
    from traceview.app import commands, runs

    out = commands.OutputOptions(fmt, force=force, save=save, wide=wide)
    if runs.is_run(trace, run):
        runs.memory(trace, replace(run, per_rank=per_rank), read, out, top)
    else:
        commands.memory(trace[0], read, out, top)
