"""``traceview audit``: its options, parsed here; the work is in traceview.app."""

from __future__ import annotations

import typer

from traceview import choices
from traceview.cli.common import Force, Format, Save, Trace, command
from traceview.cli.read_options import FROM_FLAGS, reads_traces
from traceview.options import ReadOptions


@command()
@reads_traces
def audit(
    trace: Trace,
    fmt: Format = choices.Format.TABLE,
    save: Save = None,
    force: Force = False,
    read: ReadOptions = FROM_FLAGS,
) -> None:
    """Can this trace be trusted? What the profiler dropped (launches without GPU work, GPU
    work without launches), clock and order faults, kineto's own warnings, truncation, and a
    verdict (exact, approximate, untrusted) on each headline figure. Exit 0 when sound, 1 when
    a headline figure is untrusted, 2 on errors."""
    from traceview.app import commands

    code = commands.audit(trace, read, commands.OutputOptions(fmt, force=force, save=save))
    if code:
        raise typer.Exit(code)
