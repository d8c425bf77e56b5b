"""``traceview snapshot``: its options, parsed here; the work is in traceview.app."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from traceview.cli.common import (
    Force,
    command,
)
from traceview.cli.read_options import FROM_FLAGS, reads_traces
from traceview.cli.run_options import FROM_RUN_FLAGS, Traces, reads_runs
from traceview.options import ReadOptions, RunOptions


@command()
@reads_traces
@reads_runs
def snapshot(
    trace: Traces,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the snapshot here (default: stdout)."),
    ] = None,
    force: Force = False,
    read: ReadOptions = FROM_FLAGS,
    run: RunOptions = FROM_RUN_FLAGS,
) -> None:
    """A small versioned JSON summary of a trace (of a run: the roll-up and every rank's):
    the baseline for traceview diff."""
    from traceview.app import commands, runs

    if runs.is_run(trace, run):
        runs.snapshot(trace, run, read, output, force)
    else:
        commands.snapshot(trace[0], read, output, force)
