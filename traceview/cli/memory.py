"""``traceview memory``: its options, parsed here; the work is in traceview.app."""

from __future__ import annotations

from typing import Annotated

import typer

from traceview import choices
from traceview.cli.common import Force, Format, Save, Trace, Wide, command
from traceview.cli.read_options import FROM_FLAGS, reads_traces
from traceview.options import ReadOptions


@command()
@reads_traces
def memory(
    trace: Trace,
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
    read: ReadOptions = FROM_FLAGS,
) -> None:
    """GPU memory from the caching allocator's events (profile_memory=True): per device
    the peak allocated and reserved, when, the steps' peaks and growth, and the live
    allocations at the peak by the op that made them."""
    from traceview.app import commands

    commands.memory(
        trace, read, commands.OutputOptions(fmt, force=force, save=save, wide=wide), top
    )
