"""``traceview source``: its options, parsed here; the work is in traceview.app."""

from __future__ import annotations

from typing import Annotated

import typer

from traceview import choices
from traceview.cli.common import Force, Save, Top, Trace, Wide, command
from traceview.cli.read_options import FROM_FLAGS, reads_traces
from traceview.options import ReadOptions


@command()
@reads_traces
def source(
    trace: Trace,
    by: Annotated[
        choices.SourceBy,
        typer.Option(
            "--by",
            help="frame (file(line): function, self and total GPU time) or module (the "
            "nn.Module frames by module path, forward and backward GPU time).",
        ),
    ] = choices.SourceBy.FRAME,
    pstep: Annotated[
        str | None,
        typer.Option("--pstep", help="Only kernels of these ProfilerSteps: N, N-M or N,M,..."),
    ] = None,
    top: Top = 20,
    fmt: Annotated[
        choices.SourceFormat,
        typer.Option(
            "--format",
            "-f",
            help="Output: table (rich on a terminal, text when piped), json, csv, md, or "
            "folded (one line per distinct stack, 'frame;frame;...;kernel N' with N in GPU "
            "ns, for flamegraph.pl, inferno or speedscope).",
        ),
    ] = choices.SourceFormat.TABLE,
    save: Save = None,
    force: Force = False,
    wide: Wide = False,
    read: ReadOptions = FROM_FLAGS,
) -> None:
    """GPU time by the Python line (and nn.Module) that launched it, backward included
    (traces recorded with stacks: with_stack=True or traceview record --stack)."""
    from traceview.app import commands
    from traceview.app.source import source as run_source
    from traceview.parsing import parse_steps

    steps = tuple(parse_steps(pstep)) if pstep else ()
    out = commands.OutputOptions(fmt, save=save, force=force, wide=wide)
    run_source(trace, read, out, by, top, steps)
