"""The command line: options are declared and parsed here, the work happens in traceview.run."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from traceview import __version__
from traceview.errors import TraceviewError

app = typer.Typer(
    name="traceview",
    help="Where did the GPU time go? Streaming analysis of huge Chrome-trace / profiler files.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

Trace = Annotated[
    Path,
    typer.Argument(
        help="Trace file: Chrome trace JSON, plain or gzip (.json, .json.gz).", show_default=False
    ),
]
Format = Annotated[
    str,
    typer.Option(
        "--format", "-f", help="Output: table (rich on a terminal, text when piped), json, csv, md."
    ),
]
Partial = Annotated[
    bool,
    typer.Option(
        "--partial", help="Analyse the complete events of a truncated trace (with a warning)."
    ),
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar on stderr.")]
Verbose = Annotated[
    bool, typer.Option("--verbose", "-v", help="Full kernel names instead of short ones.")
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


@app.command()
def kernels(
    trace: Trace,
    sort: Annotated[
        str,
        typer.Option(
            "--sort",
            "-s",
            help="Order: count, duration (mean), percentage (% of launches), "
            "duration-percentage (% of kernel time), total, max, p99, name.",
        ),
    ] = "duration-percentage",
    top: Annotated[int, typer.Option("--top", "-t", min=0, help="Rows to show; 0 = all.")] = 10,
    verbose: Verbose = False,
    group_by: Annotated[
        str,
        typer.Option(
            "--group-by", help="name (exact kernel name) or short (merge template instantiations)."
        ),
    ] = "name",
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
    fmt: Format = "table",
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Also write a detailed text report (every kernel, full names) here.",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite the --output file if it exists.")
    ] = False,
    partial: Partial = False,
    quiet: Quiet = False,
) -> None:
    """Per-kernel statistics: count, total, mean, std, min/max, p50/p90/p99, shares."""
    from traceview import run
    from traceview.analyses.kernels import KernelOptions
    from traceview.analyses.steps import parse_steps

    kinds = tuple(k.strip() for k in include.split(",") if k.strip())
    if "kernel" not in kinds:
        kinds = ("kernel", *kinds)
    with _reported():
        options = KernelOptions(
            sort=sort, top=top, group_by=group_by, include=kinds, name_regex=name,
            steps=tuple(parse_steps(pstep)) if pstep else (),
        )  # fmt: skip
        out = run.OutputOptions(fmt, verbose, output, force)
        run.kernels(trace, options, run.ReadOptions(partial, quiet), out)


@app.command()
def steps(
    trace: Trace, fmt: Format = "table", partial: Partial = False, quiet: Quiet = False
) -> None:
    """The ProfilerSteps found: duration, kernels launched in each, kernel time, GPU busy %."""
    from traceview import run

    _call(run.steps, trace, run.ReadOptions(partial, quiet), run.OutputOptions(fmt))


@contextmanager
def _reported() -> Iterator[None]:
    """Turn a TraceviewError into one line on stderr and its exit code."""
    try:
        yield
    except TraceviewError as e:
        print(f"traceview: error: {e.message}", file=sys.stderr)
        raise typer.Exit(e.exit_code) from None
    except BrokenPipeError:
        sys.stderr.close()
        raise typer.Exit(0) from None


def _call(fn: Callable[..., None], *args: Any) -> None:
    with _reported():
        fn(*args)


def main() -> None:
    """Entry point (usage errors exit 2, data errors 1, see traceview.errors)."""
    app()
