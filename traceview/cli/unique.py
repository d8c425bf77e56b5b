"""``traceview unique``: its options, parsed here; the work is in traceview.app."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from traceview import choices
from traceview.cli.common import (
    Force,
    Format,
    PowerGpu,
    PowerLogFile,
    PowerOffset,
    PowerTz,
    Trace,
    Verbose,
    Wide,
    command,
)
from traceview.cli.read_options import FROM_FLAGS, reads_traces
from traceview.options import ReadOptions


@command()
@reads_traces
def unique(
    trace: Trace,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write every distinct kernel as JSON lines here.",
            show_default=False,
        ),
    ] = None,
    force: Force = False,
    top: Annotated[
        int, typer.Option("--top", "-t", min=0, help="Table rows to show; 0 = all.")
    ] = 20,
    fmt: Format = choices.Format.TABLE,
    power: PowerLogFile = None,
    power_tz: PowerTz = None,
    power_offset: PowerOffset = "0",
    power_gpu: PowerGpu = None,
    verbose: Verbose = False,
    wide: Wide = False,
    read: ReadOptions = FROM_FLAGS,
) -> None:
    """The distinct kernels (name + launch configuration) and copies, with their replay tier
    (1 memcpy/memset, 2 GEMM/BLAS, 3 other); with --power, each one's energy."""
    from traceview.analyses.energy import PowerOptions
    from traceview.app import commands

    options = None
    if power is not None:
        options = PowerOptions(power, power_tz, power_offset, tuple(power_gpu or ()))
    commands.unique(
        trace, read, commands.OutputOptions(fmt, verbose, output, force, wide), top, options
    )
