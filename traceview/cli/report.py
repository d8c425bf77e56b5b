"""``traceview report``: its options, parsed here; the work is in traceview.app."""

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
def report(
    trace: Traces,
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="The HTML file to write.", show_default=False),
    ],
    timeline_step: Annotated[
        int | None,
        typer.Option(
            "--timeline-step",
            help="The step drawn as kernel rectangles per stream (default: the median step).",
            show_default=False,
        ),
    ] = None,
    rank: Annotated[
        int | None,
        typer.Option(
            "--rank",
            help="A run: the rank whose trace the sections after 'Ranks' show (default: the "
            "lowest rank).",
            rich_help_panel="Several ranks",
            show_default=False,
        ),
    ] = None,
    force: Force = False,
    read: ReadOptions = FROM_FLAGS,
    run: RunOptions = FROM_RUN_FLAGS,
) -> None:
    """One self-contained HTML page with plots (works offline): time breakdown, kernels,
    utilisation timeline, gap histogram, steps, roofline; of a run (several rank files), the
    ranks first. Needs the report extra (plotly)."""
    from traceview.app import commands, runs
    from traceview.render.html.documents import ReportOptions

    options = ReportOptions(timeline_step=timeline_step, rank=rank)
    if runs.is_run(trace, run):
        runs.report(trace, run, read, options, output, force)
    else:
        commands.report(trace[0], options, read, output, force)
