"""``traceview kernels``: its options, parsed here; the work is in traceview.app."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from traceview import choices
from traceview.cli.common import (
    Force,
    Format,
    Phase,
    Top,
    Verbose,
    Wide,
    command,
)
from traceview.cli.read_options import FROM_FLAGS, reads_traces
from traceview.cli.run_options import FROM_RUN_FLAGS, PerRank, Traces, reads_runs
from traceview.options import ReadOptions, RunOptions


@command()
@reads_traces
@reads_runs
def kernels(
    trace: Traces,
    sort: Annotated[
        choices.KernelSort,
        typer.Option(
            "--sort",
            "-s",
            help="Order: count, duration (mean), percentage (% of launches), "
            "duration-percentage (% of kernel time), total, max, p99, name.",
        ),
    ] = choices.KernelSort.DURATION_PERCENTAGE,
    top: Top = 10,
    verbose: Verbose = False,
    wide: Wide = False,
    group_by: Annotated[
        choices.KernelGroupBy,
        typer.Option(
            "--group-by",
            help="name (exact kernel name), short (merge template instantiations), category "
            "(gemm, attention, communication, ...), op (the launching op, torch.compile's "
            "regions as one) or fused-op (the ops: a Triton kernel's time shared equally "
            "among the ops its name says it fused); see docs/metrics.md.",
        ),
    ] = choices.KernelGroupBy.NAME,
    pstep: Annotated[
        str | None,
        typer.Option("--pstep", help="Only kernels of these ProfilerSteps: N, N-M or N,M,..."),
    ] = None,
    include: Annotated[
        str,
        typer.Option(
            "--include", help="GPU activity kinds, comma-separated: kernel, memcpy, memset."
        ),
    ] = "kernel",
    name: Annotated[
        str | None, typer.Option("--name", help="Only kernels whose full name matches this regex.")
    ] = None,
    fmt: Format = choices.Format.TABLE,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Also write a detailed text report (every kernel, full names) here.",
        ),
    ] = None,
    force: Force = False,
    per_rank: PerRank = False,
    phase: Phase = None,
    read: ReadOptions = FROM_FLAGS,
    run: RunOptions = FROM_RUN_FLAGS,
) -> None:
    """Per-kernel statistics: count, total, mean, std, min/max, p50/p90/p99, shares."""
    from traceview.analyses.kernels import KernelOptions
    from traceview.app import commands, runs
    from traceview.parsing import parse_steps

    kinds = tuple(k.strip() for k in include.split(",") if k.strip())
    if "kernel" not in kinds:
        kinds = ("kernel", *kinds)
    options = KernelOptions(
        sort=sort, top=top, group_by=group_by, include=kinds, name_regex=name,
        steps=tuple(parse_steps(pstep)) if pstep else (),
    )  # fmt: skip
    out = commands.OutputOptions(fmt, verbose, output, force, wide)
    if runs.is_run(trace, run):
        commands.one_trace_only("--phase", phase)
        runs.kernels(trace, replace(run, per_rank=per_rank), options, read, out)
    else:
        commands.kernels(trace[0], options, read, out, phase)
