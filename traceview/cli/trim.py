"""``traceview trim``: its options, parsed here; the work is in traceview.app."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from traceview.cli.common import command
from traceview.cli.read_options import FROM_FLAGS, reads_traces
from traceview.options import ReadOptions
from traceview.render.trim_command import TRIM_MARGIN


@command()
@reads_traces
def trim(
    trace: Annotated[
        Path,
        typer.Argument(
            help="Chrome trace file, plain or gzip (read twice: not a pipe, nor an Nsight "
            "Systems export).",
            show_default=False,
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="The trimmed trace (gzip when the name ends .gz); never the input.",
            show_default=False,
        ),
    ],
    pstep: Annotated[
        str | None,
        typer.Option(
            "--pstep",
            help="Keep these ProfilerSteps, N or N-M: the GPU work kernels --pstep counts, "
            "and everything else from the steps' start to the end of that work.",
        ),
    ] = None,
    window: Annotated[
        str | None,
        typer.Option(
            "--window",
            help="Keep START:END, each a duration from the trace's start (bare = µs; 5ms, 2s) "
            "or @ and an absolute ts in µs as gaps prints it (@4891402063393.596); a side may "
            "be empty. Events the window cuts are kept whole.",
        ),
    ] = None,
    around_gap: Annotated[
        int | None,
        typer.Option(
            "--around-gap",
            help="Keep the K-th largest device gap (#K of traceview gaps) with --margin on "
            "each side.",
        ),
    ] = None,
    margin: Annotated[
        str, typer.Option("--margin", help="Time kept on each side of --around-gap's gap.")
    ] = TRIM_MARGIN,
    device: Annotated[
        list[str] | None,
        typer.Option("--device", help="Keep only this GPU's events (repeatable)."),
    ] = None,
    no_cpu: Annotated[
        bool,
        typer.Option("--no-cpu", help="Leave out the CPU's events (every non-GPU process)."),
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite the --output file if it exists.")
    ] = False,
    read: ReadOptions = FROM_FLAGS,
) -> None:
    """Cut a trace down to a step, a time window or a gap, for Perfetto or chrome://tracing:
    the kept events copied byte for byte, with the header, metadata and flows."""
    from traceview.app import commands
    from traceview.app.trim import TrimOptions
    from traceview.parsing import parse_steps

    options = TrimOptions(
        steps=parse_steps(pstep) if pstep else (),
        window=window,
        around_gap=around_gap,
        margin=margin,
        devices=tuple(device) if device else None,
        cpu=not no_cpu,
    )
    commands.trim(trace, options, read, output, force)
