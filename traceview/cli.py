"""The command line: options are declared and parsed here, the work happens in traceview.run."""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from traceview import __version__, choices
from traceview.cli_options import FROM_FLAGS, CacheDir, reads_traces
from traceview.cli_run_options import FROM_RUN_FLAGS, PerRank, Traces, reads_runs
from traceview.options import ReadOptions
from traceview.run_options import RunOptions
from traceview.usage import OneLineErrors

app = typer.Typer(
    name="traceview",
    cls=OneLineErrors,
    help="Where did the GPU time go? Streaming analysis of huge Chrome-trace / profiler files.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def command(group: typer.Typer = app, name: str | None = None) -> Callable[[_F], _F]:
    """``group.command(name)`` whose one-line help in the command list is the first paragraph
    of the docstring as one line (the list keeps a docstring's line breaks mid-sentence)."""

    def register(f: _F) -> _F:
        first = (inspect.getdoc(f) or "").split("\n\n")[0]
        return group.command(name, short_help=" ".join(first.split()))(f)

    return register


_F = TypeVar("_F", bound=Callable[..., Any])
Trace = Annotated[
    Path,
    typer.Argument(
        help="Trace file: Chrome trace JSON, plain or gzip (.json, .json.gz), or an Nsight "
        "Systems SQLite export (nsys export --type sqlite); - reads stdin (a pipe: read "
        "once, not cached).",
        show_default=False,
    ),
]
Format = Annotated[
    choices.Format,
    typer.Option(
        "--format", "-f", help="Output: table (rich on a terminal, text when piped), json, csv, md."
    ),
]
Verbose = Annotated[
    bool, typer.Option("--verbose", "-v", help="Full kernel names instead of short ones.")
]
Wide = Annotated[
    bool,
    typer.Option(
        "--wide",
        help="On a terminal, show every column however wide (else the least "
        "important are left out on a narrow one, and said so).",
    ),
]
Top = Annotated[int, typer.Option("--top", "-t", min=0, help="Rows to show; 0 = all.")]
Force = Annotated[bool, typer.Option("--force", help="Overwrite the --output file if it exists.")]
Save = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Write the output (in the --format chosen; table: plain text) to this file "
        "instead of stdout.",
        show_default=False,
    ),
]


def _version(value: bool) -> None:
    if value:
        print(f"traceview {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Where did the GPU time go? Streaming analysis of huge Chrome-trace / profiler files."""


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
            help="name (exact kernel name), short (merge template instantiations) or category "
            "(gemm, attention, communication, ...; see docs/metrics.md).",
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
    read: ReadOptions = FROM_FLAGS,
    runs: RunOptions = FROM_RUN_FLAGS,
) -> None:
    """Per-kernel statistics: count, total, mean, std, min/max, p50/p90/p99, shares."""
    from traceview import run, run_ranks
    from traceview.analyses.kernels import KernelOptions
    from traceview.analyses.steps import parse_steps

    kinds = tuple(k.strip() for k in include.split(",") if k.strip())
    if "kernel" not in kinds:
        kinds = ("kernel", *kinds)
    options = KernelOptions(
        sort=sort, top=top, group_by=group_by, include=kinds, name_regex=name,
        steps=tuple(parse_steps(pstep)) if pstep else (),
    )  # fmt: skip
    out = run.OutputOptions(fmt, verbose, output, force, wide)
    if run_ranks.is_run(trace, runs):
        run_ranks.kernels(trace, replace(runs, per_rank=per_rank), options, read, out)
    else:
        run.kernels(trace[0], options, read, out)


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
    read: ReadOptions = FROM_FLAGS,
    runs: RunOptions = FROM_RUN_FLAGS,
) -> None:
    """Why the GPU sits idle: device gaps with their cause (CPU or GPU), idle per device,
    histogram, transitions, the largest gaps and what the CPU was doing."""
    from traceview import run, run_ranks
    from traceview.analyses.gaps import GapOptions, parse_duration, parse_hist_range
    from traceview.analyses.steps import parse_steps
    from traceview.state import last_trace

    if trace is None:
        from traceview.render.escape import visible  # a file name is data too

        trace = [last_trace()]
        print(
            f"traceview: using the last trace analysed: {visible(str(trace[0]))}", file=sys.stderr
        )
    hist_min_ns, hist_max_ns = parse_hist_range(hist_min, hist_max)
    options = GapOptions(
        busy=tuple(k.strip() for k in busy.split(",") if k.strip()),
        min_gap_ns=parse_duration(min_gap, "--min-gap"),
        streams=tuple(stream) if stream else None,
        devices=tuple(device) if device else None,
        steps=tuple(parse_steps(pstep)) if pstep else (),
        hist_min_ns=hist_min_ns,
        hist_max_ns=hist_max_ns,
        bins=bins, linear=linear, largest=largest, sort=gap_sort, top=gap_top,
        per_stream=per_stream, context=not no_context, stream_top=stream_top,
    )  # fmt: skip
    out = run.OutputOptions(fmt, verbose, output, force, wide)
    if run_ranks.is_run(trace, runs):
        run_ranks.gaps(trace, runs, options, read, out)
    else:
        run.gaps(trace[0], options, read, out)


@command()
@reads_traces
@reads_runs
def steps(
    trace: Traces,
    fmt: Format = choices.Format.TABLE,
    save: Save = None,
    force: Force = False,
    per_rank: PerRank = False,
    read: ReadOptions = FROM_FLAGS,
    runs: RunOptions = FROM_RUN_FLAGS,
    top: Annotated[
        int,
        typer.Option(
            "--top",
            "-t",
            min=0,
            help="Steps in the table (the first N; table, text and md); 0 = all. JSON and CSV "
            "hold every step.",
        ),
    ] = 100,
) -> None:
    """The ProfilerSteps: CPU duration, kernels launched, and per device the GPU window,
    busy %, idle and how far the GPU runs behind the CPU."""
    from traceview import run, run_ranks

    out = run.OutputOptions(fmt, force=force, save=save)
    if run_ranks.is_run(trace, runs):
        run_ranks.steps(trace, replace(runs, per_rank=per_rank), read, out, top)
    else:
        run.steps(trace[0], read, out, top)


@command()
@reads_traces
def summary(
    trace: Trace,
    fmt: Annotated[
        choices.DocumentFormat,
        typer.Option("--format", "-f", help="table (rich or plain when piped), json or md."),
    ] = choices.DocumentFormat.TABLE,
    save: Save = None,
    force: Force = False,
    read: ReadOptions = FROM_FLAGS,
) -> None:
    """One screen: per device where the time went (categories, communication, copies, idle),
    the top categories, kernels and operators, launch and step figures, and hints."""
    from traceview import run

    run.summary(trace, read, run.OutputOptions(fmt, force=force, save=save))


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
    peaks: Annotated[
        Path | None,
        typer.Option(
            "--peaks",
            help="JSON or TOML file of GPU peaks (TFLOP/s per dtype, TB/s) used before the "
            "built-in table; see docs/metrics.md.",
        ),
    ] = None,
    fmt: Format = choices.Format.TABLE,
    save: Save = None,
    force: Force = False,
    read: ReadOptions = FROM_FLAGS,
) -> None:
    """Where the GPU time went per operator: calls, kernels, GPU and CPU time, launch delay,
    and from shapes FLOPs, bytes, TFLOP/s, % of peak and the bound."""
    from traceview import run
    from traceview.analyses.ops import OpOptions

    options = OpOptions(level=level, top=top, group_by=group_by, peaks_file=peaks)
    run.ops(trace, options, read, run.OutputOptions(fmt, force=force, save=save))


@command()
@reads_traces
@reads_runs
def snapshot(
    trace: Traces,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the snapshot here (default: stdout)."),
    ] = None,
    force: Force = False,
    read: ReadOptions = FROM_FLAGS,
    runs: RunOptions = FROM_RUN_FLAGS,
) -> None:
    """A small versioned JSON summary of a trace (of a run: the roll-up and every rank's):
    the baseline for traceview diff."""
    from traceview import run, run_ranks

    if run_ranks.is_run(trace, runs):
        run_ranks.snapshot(trace, runs, read, output, force)
    else:
        run.snapshot(trace[0], read, output, force)


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
            "(from kernel names; the gate applies per category): name, short, category.",
        ),
    ] = choices.DiffGroupBy.NAME,
    verbose: Verbose = False,
    wide: Wide = False,
    fmt: Annotated[
        choices.DocumentFormat,
        typer.Option(
            "--format",
            "-f",
            help="Output: table (rich on a terminal, text when piped), json, md (review comment).",
        ),
    ] = choices.DocumentFormat.TABLE,
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
    runs: RunOptions = FROM_RUN_FLAGS,
) -> None:
    """Compare two traces or snapshots (or two runs: directories, globs or run snapshots);
    with --max-regression, a CI gate (exit 1 on regression)."""
    from traceview import run, run_ranks
    from traceview.analyses.diff import DiffOptions, parse_percent
    from traceview.analyses.gaps import parse_duration
    from traceview.analyses.steps import parse_steps

    options = DiffOptions(
        steps=tuple(parse_steps(pstep)) if pstep else (),
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
    )
    out = run.OutputOptions(fmt, verbose, force=force, wide=wide, save=save)
    if run_ranks.is_run_side(base, runs) or run_ranks.is_run_side(new, runs):
        run_ranks.diff(base, new, replace(runs, per_rank=per_rank), options, read, out)
    else:
        run.diff(base, new, options, read, out)


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
    """Write the trace's columns as Parquet tables (for pandas, DuckDB, polars); see README."""
    from traceview import run

    run.export(trace, read, output, force)


@command()
@reads_traces
@reads_runs
def ranks(
    trace: Traces,
    fmt: Format = choices.Format.TABLE,
    wide: Wide = False,
    save: Save = None,
    force: Force = False,
    read: ReadOptions = FROM_FLAGS,
    runs: RunOptions = FROM_RUN_FLAGS,
) -> None:
    """A run, one trace per rank: per rank kernel time, busy %, communication (exposed),
    step time, the slowest rank; the collectives, their skew and who arrives last, and
    where the trace gives process groups and message sizes, nccl-tests algbw and busbw."""
    from traceview import run, run_ranks

    out = run.OutputOptions(fmt, wide=wide, force=force, save=save)
    run_ranks.ranks(trace, runs, read, out)


cache_app = typer.Typer(
    help="The Parquet cache of ingested traces: info, list, clear, prune. A cache directory "
    "holds a CACHEDIR.TAG naming traceview; other directories are refused.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(cache_app, name="cache")


@command(cache_app, "info")
def cache_info(cache_dir: CacheDir = None) -> None:
    """Where the cache is, how many entries, their size, leftover temp dirs, the size limit."""
    from traceview import run

    run.cache_info(cache_dir)


@command(cache_app, "list")
def cache_list(cache_dir: CacheDir = None) -> None:
    """Every entry: key, size, last use, the trace path(s) it was read from."""
    from traceview import run

    run.cache_list(cache_dir)


@command(cache_app, "clear")
def cache_clear(cache_dir: CacheDir = None) -> None:
    """Remove every entry, the file index and temp dirs left by killed runs (nothing else)."""
    from traceview import run

    run.cache_clear(cache_dir)


@command(cache_app, "prune")
def cache_prune(
    max_size: Annotated[
        str | None,
        typer.Option(
            "--max-size",
            help="Size limit with a unit: 20GB, 500MB, 4096B, or 0 "
            "(default: $TRACEVIEW_CACHE_MAX_SIZE, else 20GB).",
        ),
    ] = None,
    cache_dir: CacheDir = None,
) -> None:
    """Evict least recently used entries until the cache is within its size limit; remove
    temp dirs left by killed runs."""
    from traceview import run

    run.cache_prune(cache_dir, max_size)


PowerLogFile = Annotated[
    Path | None,
    typer.Option(
        "--power",
        help='nvidia-smi CSV log recorded during the profile (see README "Kernels and energy").',
        show_default=False,
    ),
]
PowerTz = Annotated[
    str | None,
    typer.Option(
        "--power-tz",
        help="Zone of the log's timestamps: UTC, ±HH:MM or a name like Europe/Paris "
        "(default: the machine's zone, said on stderr).",
        show_default=False,
    ),
]
PowerOffset = Annotated[
    str,
    typer.Option(
        "--power-offset",
        help="Shift the log's times by this (e.g. -250ms, 2s; bare = µs) to align its clock.",
    ),
]
PowerGpu = Annotated[
    list[str] | None,
    typer.Option(
        "--power-gpu",
        help="INDEX=DEVICE: nvidia-smi index INDEX is trace device DEVICE (repeatable; "
        "default: the same number).",
        show_default=False,
    ),
]


@command()
@reads_traces
def unique(
    trace: Trace,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write every distinct kernel as JSON lines here.",
            show_default=False,
        ),
    ] = None,
    force: Force = False,
    top: Annotated[
        int, typer.Option("--top", "-t", min=0, help="Table rows to show; 0 = all.")
    ] = 20,
    fmt: Format = choices.Format.TABLE,
    power: PowerLogFile = None,
    power_tz: PowerTz = None,
    power_offset: PowerOffset = "0",
    power_gpu: PowerGpu = None,
    verbose: Verbose = False,
    wide: Wide = False,
    read: ReadOptions = FROM_FLAGS,
) -> None:
    """The distinct kernels (name + launch configuration) and copies, with their replay tier
    (1 memcpy/memset, 2 GEMM/BLAS, 3 other); with --power, each one's energy."""
    from traceview import run
    from traceview.analyses.energy import PowerOptions

    options = None
    if power is not None:
        options = PowerOptions(power, power_tz, power_offset, tuple(power_gpu or ()))
    run.unique(trace, read, run.OutputOptions(fmt, verbose, output, force, wide), top, options)


@command()
@reads_traces
def energy(
    trace: Trace,
    power: Annotated[
        Path,
        typer.Option(
            "--power",
            help='nvidia-smi CSV log recorded during the profile (see README "Kernels and '
            'energy").',
            show_default=False,
        ),
    ],
    power_tz: PowerTz = None,
    power_offset: PowerOffset = "0",
    power_gpu: PowerGpu = None,
    top: Annotated[
        int, typer.Option("--top", "-t", min=0, help="Kernel rows to show; 0 = all.")
    ] = 20,
    fmt: Format = choices.Format.TABLE,
    verbose: Verbose = False,
    wide: Wide = False,
    save: Save = None,
    force: Force = False,
    read: ReadOptions = FROM_FLAGS,
) -> None:
    """GPU energy from an nvidia-smi power log: per device (busy, idle) and per kernel."""
    from traceview import run
    from traceview.analyses.energy import PowerOptions

    options = PowerOptions(power, power_tz, power_offset, tuple(power_gpu or ()))
    out = run.OutputOptions(fmt, verbose, force=force, wide=wide, save=save)
    run.energy(trace, read, out, top, options)


def main() -> None:
    """Entry point (usage errors exit 2, data errors 1, see traceview.errors)."""
    # No linear algebra here: without its thread pool, OpenBLAS makes numpy's import ~0.05 s
    # shorter (0.14 s against 0.19 s, median of 11 on 2 cores).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    app(prog_name="traceview")


@command()
@reads_traces
@reads_runs
def report(
    trace: Traces,
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="The HTML file to write.", show_default=False),
    ],
    timeline_step: Annotated[
        int | None,
        typer.Option(
            "--timeline-step",
            help="The step drawn as kernel rectangles per stream (default: the median step).",
            show_default=False,
        ),
    ] = None,
    rank: Annotated[
        int | None,
        typer.Option(
            "--rank",
            help="A run: the rank whose trace the sections after 'Ranks' show (default: the "
            "lowest rank).",
            rich_help_panel="Several ranks",
            show_default=False,
        ),
    ] = None,
    force: Force = False,
    read: ReadOptions = FROM_FLAGS,
    runs: RunOptions = FROM_RUN_FLAGS,
) -> None:
    """One self-contained HTML page with plots (works offline): time breakdown, kernels,
    utilisation timeline, gap histogram, steps, roofline; of a run (several rank files), the
    ranks first. Needs the report extra (plotly)."""
    from traceview import run, run_ranks
    from traceview.render.html.documents import ReportOptions

    options = ReportOptions(timeline_step=timeline_step, rank=rank)
    if run_ranks.is_run(trace, runs):
        run_ranks.report(trace, runs, read, options, output, force)
    else:
        run.report(trace[0], options, read, output, force)
