"""``traceview export``: its options, parsed here; the work is in traceview.app."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from traceview.cli.common import (
    Trace,
    command,
)
from traceview.cli.read_options import FROM_FLAGS, reads_traces
from traceview.options import ReadOptions


@command()
@reads_traces
def export(
    trace: Trace,
    output: Annotated[
        Path,
        typer.Option(
            "--output", "-o", help="Directory for the Parquet tables.", show_default=False
        ),
    ],
    force: Annotated[
        bool, typer.Option("--force", help="Write into the directory even if it is not empty.")
    ] = False,
    read: ReadOptions = FROM_FLAGS,
) -> None:
    """Write the trace's columns as Parquet tables (for pandas, DuckDB, polars): docs/export.md."""
    from traceview.app import commands

    commands.export(trace, read, output, force)
