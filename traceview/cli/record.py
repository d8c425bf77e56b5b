"""``traceview record``: its options, parsed here; the work is in traceview.app.record."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from traceview.cli.common import command


@command()
def record(
    program: Annotated[
        list[str],
        typer.Argument(
            help="The program and its arguments, after --: python train.py ..., python -m "
            "module ..., or a console script of this environment.",
            show_default=False,
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Directory to write (default: ./traceview-<date>-<time>/).",
            show_default=False,
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Write into the directory even if it is not empty.")
    ] = False,
    wait: Annotated[int, typer.Option("--wait", min=0, help="Steps skipped first.")] = 5,
    warmup: Annotated[
        int, typer.Option("--warmup", min=0, help="Steps profiled but not kept, next.")
    ] = 2,
    active: Annotated[int, typer.Option("--active", min=1, help="Steps recorded.")] = 5,
    shapes: Annotated[
        bool, typer.Option("--shapes/--no-shapes", help="record_shapes (FLOPs, op+shapes).")
    ] = True,
    memory: Annotated[
        bool, typer.Option("--memory/--no-memory", help="profile_memory ([memory] events).")
    ] = True,
    stack: Annotated[
        bool, typer.Option("--stack", help="with_stack: Python frames (larger traces).")
    ] = False,
    step_forwards: Annotated[
        int,
        typer.Option(
            "--step-forwards",
            min=0,
            help="Inference: a step every N calls of the outermost module (0: optimizer steps "
            "only).",
        ),
    ] = 0,
    step_seconds: Annotated[
        float,
        typer.Option(
            "--step-seconds",
            min=0.0,
            help="Inference: a step at the end of the first outermost forward call this many "
            "seconds or more after the last step (0: off).",
        ),
    ] = 0.0,
    power: Annotated[
        bool, typer.Option("--power", help="Log GPU power with nvidia-smi beside the run.")
    ] = False,
    power_interval: Annotated[
        int, typer.Option("--power-interval", min=1, help="nvidia-smi's logging period, in ms.")
    ] = 40,
    no_report: Annotated[
        bool, typer.Option("--no-report", help="Skip report.html (it needs plotly).")
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet", "-q", help="Only warnings on stderr, no lines naming the next commands."
        ),
    ] = False,
) -> None:
    """Run a Python program under torch.profiler (without editing it), log its GPU power, and
    analyse what it recorded: its summary, and report.html in the output directory."""
    from traceview.app import record as app_record

    options = app_record.RecordOptions(
        out=output, force=force, wait=wait, warmup=warmup, active=active, shapes=shapes,
        memory=memory, stack=stack, step_forwards=step_forwards, step_seconds=step_seconds,
        power=power,
        power_interval_ms=power_interval, report=not no_report, quiet=quiet,
    )  # fmt: skip
    raise typer.Exit(app_record.record(program, options))
