"""``traceview summary``: its options, parsed here; the work is in traceview.app."""

from __future__ import annotations

from typing import Annotated

import typer

from traceview import choices
from traceview.cli.common import (
    Force,
    PeaksFile,
    Phase,
    Save,
    Trace,
    command,
)
from traceview.cli.read_options import FROM_FLAGS, reads_traces
from traceview.options import ReadOptions


@command()
@reads_traces
def summary(
    trace: Trace,
    fmt: Annotated[
        choices.DocumentFormat,
        typer.Option("--format", "-f", help="table (rich or plain when piped), json or md."),
    ] = choices.DocumentFormat.TABLE,
    save: Save = None,
    force: Force = False,
    phase: Phase = None,
    include_warmup: Annotated[
        bool,
        typer.Option(
            "--include-warmup",
            help="Count warm-up and graph-capture steps in the step medians (left out by "
            "default, and said so).",
        ),
    ] = False,
    peaks: PeaksFile = None,
    read: ReadOptions = FROM_FLAGS,
) -> None:
    """One screen: the Findings first (the hints ranked by time at stake), then per device
    where the time went (categories, communication, copies, idle), the top categories,
    kernels and operators, launch and step figures, and each hint's evidence."""
    from traceview.app import commands

    out = commands.OutputOptions(fmt, force=force, save=save)
    commands.summary(trace, read, out, phase, include_warmup, peaks)
