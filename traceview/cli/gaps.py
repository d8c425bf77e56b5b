"""``traceview gaps``: its options, parsed here; the work is in traceview.app."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from traceview import choices
from traceview.cli.common import (
    Force,
    Format,
    Phase,
    Verbose,
    Wide,
    command,
)
from traceview.cli.read_options import FROM_FLAGS, reads_traces
from traceview.cli.run_options import FROM_RUN_FLAGS, reads_runs
from traceview.options import ReadOptions, RunOptions


@command()
@reads_traces
@reads_runs
def gaps(
    trace: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Trace file; omitted: the last trace analysed. Several files, a directory or "
            "a glob make a run: one trace per rank.",
            show_default=False,
        ),
    ] = None,
    busy: Annotated[
        str, typer.Option("--busy", help="What keeps the GPU busy: kernel,memcpy,memset or kernel.")
    ] = "kernel,memcpy,memset",
    min_gap: Annotated[
        str,
        typer.Option(
            "--min-gap", help="Ignore gaps shorter than this (1us, 0.5ms, 250ns; bare = µs)."
        ),
    ] = "0",
    stream: Annotated[
        list[str] | None, typer.Option("--stream", help="Only this stream (repeatable).")
    ] = None,
    device: Annotated[
        list[str] | None, typer.Option("--device", help="Only this device (repeatable).")
    ] = None,
    pstep: Annotated[
        str | None,
        typer.Option("--pstep", help="Only GPU work of these ProfilerSteps: N, N-M or N,M,..."),
    ] = None,
    hist_min: Annotated[
        str | None,
        typer.Option("--hist-min", help="Histogram lower bound (default: smallest gap)."),
    ] = None,
    hist_max: Annotated[
        str | None, typer.Option("--hist-max", help="Histogram upper bound (default: largest gap).")
    ] = None,
    bins: Annotated[int, typer.Option("--bins", min=1, help="Histogram bins.")] = 20,
    linear: Annotated[
        bool, typer.Option("--linear", help="Linear histogram bins (default: log).")
    ] = False,
    gap_sort: Annotated[
        choices.GapSort,
        typer.Option("--gap-sort", help="Transitions order: count, avg, max, min, stdev, total."),
    ] = choices.GapSort.TOTAL,
    gap_top: Annotated[
        int, typer.Option("--gap-top", min=0, help="Transitions to show; 0 = all.")
    ] = 15,
    largest: Annotated[
        int,
        typer.Option("--largest", min=0, help="How many of the largest gaps to list; 0 = all."),
    ] = 10,
    per_stream: Annotated[
        bool,
        typer.Option(
            "--per-stream",
            help="Gaps per stream (a stream idle while another keeps the GPU busy counts) "
            "instead of device gaps (the GPU idle).",
        ),
    ] = False,
    no_context: Annotated[
        bool,
        typer.Option(
            "--no-context",
            help="Do not read CPU ops to say what held each gap (faster; cause and host wait "
            "are still given).",
        ),
    ] = False,
    verbose: Verbose = False,
    wide: Wide = False,
    fmt: Format = choices.Format.TABLE,
    stream_top: Annotated[
        int,
        typer.Option(
            "--stream-top",
            min=0,
            help="Streams in the Streams table (the first N; table, text and md); 0 = all. "
            "JSON, CSV and the --gap-output report hold every stream.",
        ),
    ] = 100,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            "--gap-output",
            help="Also write a detailed text report (every transition, full names) here.",
        ),
    ] = None,
    force: Force = False,
    phase: Phase = None,
    read: ReadOptions = FROM_FLAGS,
    run: RunOptions = FROM_RUN_FLAGS,
) -> None:
    """Why the GPU sits idle: device gaps with their cause (cpu, launch latency, gpu wait),
    idle per device, histogram, transitions, the largest gaps and what the CPU was doing."""
    from traceview.analyses.gaps import options_from_words
    from traceview.app import commands, runs
    from traceview.app.last_trace import last_trace

    if trace is None:
        from traceview.render.escape import visible  # a file name is data too

        trace = [last_trace(read.cache_dir)]
        print(
            f"traceview: using the last trace analysed: {visible(str(trace[0]))}", file=sys.stderr
        )
    options = options_from_words(
        busy=busy, min_gap=min_gap, stream=stream, device=device, pstep=pstep,
        hist_min=hist_min, hist_max=hist_max, bins=bins, linear=linear, largest=largest,
        gap_sort=gap_sort, gap_top=gap_top, per_stream=per_stream, context=not no_context,
        stream_top=stream_top,
    )  # fmt: skip
    out = commands.OutputOptions(fmt, verbose, output, force, wide)
    if runs.is_run(trace, run):
        commands.one_trace_only("--phase", phase)
        runs.gaps(trace, run, options, read, out)
    else:
        commands.gaps(trace[0], options, read, out, phase)
