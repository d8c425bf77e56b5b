"""``traceview ops``: its options, parsed here; the work is in traceview.app."""

from __future__ import annotations

from typing import Annotated

import typer

from traceview import choices
from traceview.cli.common import (
    Force,
    Format,
    PeaksFile,
    Phase,
    Save,
    Top,
    Trace,
    command,
)
from traceview.cli.read_options import FROM_FLAGS, reads_traces
from traceview.options import ReadOptions


@command()
@reads_traces
def ops(
    trace: Trace,
    level: Annotated[
        choices.OpLevel,
        typer.Option(
            "--level",
            help="Attribute each kernel to its leaf op (innermost cpu_op around its launch) or "
            "its top op (outermost).",
        ),
    ] = choices.OpLevel.LEAF,
    top: Top = 20,
    group_by: Annotated[
        choices.OpGroupBy,
        typer.Option(
            "--group-by",
            help="One row per op name (op), or per op name, Input Dims and Input type (op+shapes).",
        ),
    ] = choices.OpGroupBy.OP,
    peaks: PeaksFile = None,
    fmt: Format = choices.Format.TABLE,
    save: Save = None,
    force: Force = False,
    phase: Phase = None,
    read: ReadOptions = FROM_FLAGS,
) -> None:
    """Where the GPU time went per operator: calls, kernels, GPU and CPU time, queue delay,
    and from shapes FLOPs, bytes, TFLOP/s, % of peak and the bound."""
    from traceview.analyses.ops.view import OpOptions
    from traceview.app import commands

    options = OpOptions(level=level, top=top, group_by=group_by, peaks_file=peaks)
    out = commands.OutputOptions(fmt, force=force, save=save)
    commands.ops(trace, options, read, out, phase)
