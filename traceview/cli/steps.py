"""``traceview steps``: its options, parsed here; the work is in traceview.app."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer

from traceview import choices
from traceview.cli.common import (
    Force,
    Format,
    PeaksFile,
    Save,
    command,
)
from traceview.cli.read_options import FROM_FLAGS, reads_traces
from traceview.cli.run_options import FROM_RUN_FLAGS, PerRank, Traces, reads_runs
from traceview.options import ReadOptions, RunOptions


@command()
@reads_traces
@reads_runs
def steps(
    trace: Traces,
    fmt: Format = choices.Format.TABLE,
    save: Save = None,
    force: Force = False,
    per_rank: PerRank = False,
    read: ReadOptions = FROM_FLAGS,
    run: RunOptions = FROM_RUN_FLAGS,
    top: Annotated[
        int,
        typer.Option(
            "--top",
            "-t",
            min=0,
            help="Steps in the table (the first N; table, text and md); 0 = all. JSON and CSV "
            "hold every step.",
        ),
    ] = 100,
    peaks: PeaksFile = None,
) -> None:
    """The ProfilerSteps (else a serving framework's step markers): phase, CPU duration,
    kernels launched, and per device the GPU window, busy %, idle and how far the GPU runs
    behind the CPU; the step time (the GPU's period where it sets the pace), and from the
    recorded shapes model FLOPs, MFU and tokens per step."""
    from traceview.app import commands, runs

    out = commands.OutputOptions(fmt, force=force, save=save)
    if runs.is_run(trace, run):
        runs.steps(trace, replace(run, per_rank=per_rank), read, out, top)
    else:
        commands.steps(trace[0], read, out, top, peaks)
