"""``traceview diff``: its options, parsed here; the work is in traceview.app."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from traceview import choices
from traceview.cli.common import (
    Force,
    Save,
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
def diff(
    base: Annotated[
        Path,
        typer.Argument(
            help="Baseline: a trace or a snapshot (traceview snapshot).", show_default=False
        ),
    ],
    new: Annotated[
        Path, typer.Argument(help="The run to check: a trace or a snapshot.", show_default=False)
    ],
    max_regression: Annotated[
        str | None,
        typer.Option(
            "--max-regression",
            help="Gate: exit 1 when total kernel time, or the time of any kernel holding "
            "--min-share of the baseline, grew by more than this (5% or 5). Default: no gate.",
        ),
    ] = None,
    max_idle_regression: Annotated[
        str | None,
        typer.Option(
            "--max-idle-regression",
            help="Gate: exit 1 when GPU idle time grew by more than this (5% or 5).",
        ),
    ] = None,
    min_share: Annotated[
        str,
        typer.Option(
            "--min-share",
            help="Gate only kernels holding at least this % of the baseline kernel time.",
        ),
    ] = "1%",
    min_time: Annotated[
        str,
        typer.Option(
            "--min-time",
            help="Never gate kernels below this time on both sides (10us, 0.5ms; bare = µs).",
        ),
    ] = "10us",
    pstep: Annotated[
        str | None,
        typer.Option("--pstep", help="Compare only these ProfilerSteps (both sides): N, N-M, N,M."),
    ] = None,
    new_pstep: Annotated[
        str | None,
        typer.Option(
            "--new-pstep",
            help="NEW's steps, when they differ from --pstep (BASE's): two step ranges of one "
            "trace, e.g. diff t.json t.json --pstep 3-5 --new-pstep 6-8.",
        ),
    ] = None,
    top: Annotated[
        int, typer.Option("--top", "-t", min=0, help="Kernel rows per table; 0 = all.")
    ] = 20,
    allow_empty_baseline: Annotated[
        bool,
        typer.Option(
            "--allow-empty-baseline",
            help="Pass the gate when the baseline has no kernel time (or no idle) and NEW has "
            "some; without it that growth from zero is a regression.",
        ),
    ] = False,
    group_by: Annotated[
        choices.DiffGroupBy,
        typer.Option(
            "--group-by",
            help="Compare kernels by exact name, or by short name (template instantiations "
            "summed: a kernel whose template arguments changed is not new), or by category "
            "(from kernel names; the gate applies per category), or by launching op (traces "
            "only; torch.compile's regions as one op), or by fused op (traces only: an "
            "Inductor kernel shared among the ops its name says it fused, any other kernel "
            "under its launching op): name, short, category, op, fused-op.",
        ),
    ] = choices.DiffGroupBy.NAME,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="Two traces: split the change in median step time into parts that add up to "
            "it exactly (kernel time by --group-by group, copies, overlap, idle by cause), a "
            "waterfall; --max-regression then gates each part (% of the base step time).",
        ),
    ] = False,
    verbose: Verbose = False,
    wide: Wide = False,
    fmt: Annotated[
        choices.DiffFormat,
        typer.Option(
            "--format",
            "-f",
            help="Output: table (rich on a terminal, text when piped), json, md (review comment), "
            "html (two traces, with --explain and -o: a page drawing the waterfall).",
        ),
    ] = choices.DiffFormat.TABLE,
    save: Save = None,
    force: Force = False,
    per_rank: Annotated[
        bool,
        typer.Option(
            "--per-rank",
            help="Two runs: also compare each rank found in both, each with the gate.",
            rich_help_panel="Several ranks",
        ),
    ] = False,
    read: ReadOptions = FROM_FLAGS,
    run: RunOptions = FROM_RUN_FLAGS,
) -> None:
    """Compare two traces or snapshots (or two runs: directories, globs or run snapshots);
    with --max-regression, a CI gate (exit 1 on regression)."""
    from traceview.analyses.diff import DiffOptions, check_options
    from traceview.app import commands, runs
    from traceview.parsing import parse_duration, parse_percent, parse_steps

    options = DiffOptions(
        steps=tuple(parse_steps(pstep)) if pstep else (),
        new_steps=tuple(parse_steps(new_pstep)) if new_pstep else (),
        max_regression_pct=(
            parse_percent(max_regression, "--max-regression") if max_regression else None
        ),
        max_idle_regression_pct=(
            parse_percent(max_idle_regression, "--max-idle-regression")
            if max_idle_regression
            else None
        ),
        min_share_pct=parse_percent(min_share, "--min-share"),
        min_time_ns=parse_duration(min_time, "--min-time"),
        top=top,
        allow_empty_baseline=allow_empty_baseline,
        group_by=group_by,
        explain=explain,
    )
    out = commands.OutputOptions(fmt, verbose, force=force, wide=wide, save=save)
    check_options(options)  # before a side is opened: telling a run from a pipe reads it
    if runs.is_run_side(base, run) or runs.is_run_side(new, run):
        runs.diff(base, new, replace(run, per_rank=per_rank), options, read, out)
    else:
        commands.diff(base, new, options, read, out)
