"""``traceview energy``: its options, parsed here; the work is in traceview.app."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from traceview import choices
from traceview.cli.common import (
    Force,
    Format,
    PowerGpu,
    PowerOffset,
    PowerTz,
    Save,
    Trace,
    Verbose,
    Wide,
    command,
)
from traceview.cli.read_options import FROM_FLAGS, reads_traces
from traceview.options import ReadOptions


@command()
@reads_traces
def energy(
    trace: Trace,
    power: Annotated[
        Path,
        typer.Option(
            "--power",
            help="nvidia-smi CSV log recorded during the profile (see docs/energy.md).",
            show_default=False,
        ),
    ],
    power_tz: PowerTz = None,
    power_offset: PowerOffset = "0",
    power_gpu: PowerGpu = None,
    top: Annotated[
        int, typer.Option("--top", "-t", min=0, help="Kernel rows to show; 0 = all.")
    ] = 20,
    fmt: Format = choices.Format.TABLE,
    verbose: Verbose = False,
    wide: Wide = False,
    save: Save = None,
    force: Force = False,
    read: ReadOptions = FROM_FLAGS,
) -> None:
    """GPU energy from an nvidia-smi power log: per device (busy, idle) and per kernel."""
    from traceview.analyses.energy import PowerOptions
    from traceview.app import commands

    options = PowerOptions(power, power_tz, power_offset, tuple(power_gpu or ()))
    out = commands.OutputOptions(fmt, verbose, force=force, wide=wide, save=save)
    commands.energy(trace, read, out, top, options)
