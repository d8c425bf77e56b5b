"""What every command shares: the typer app, the command decorator, and the options that
mean the same in every command that takes them."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from traceview import choices
from traceview.cli.errors import OneLineErrors
from traceview.cli.version import print_version

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
Phase = Annotated[
    choices.StepPhase | None,
    typer.Option(
        "--phase",
        help="Only GPU work of the steps of this phase (prefill, decode, mixed, capture, "
        "warmup, unknown; see `traceview steps`), picked as --pstep picks a step's. One trace.",
        show_default=False,
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
PeaksFile = Annotated[
    Path | None,
    typer.Option(
        "--peaks",
        help="JSON or TOML file of GPU peaks (TFLOP/s per dtype, TB/s) used before the "
        "built-in table; see docs/metrics.md.",
    ),
]
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
PowerLogFile = Annotated[
    Path | None,
    typer.Option(
        "--power",
        help="nvidia-smi CSV log recorded during the profile (see docs/energy.md).",
        show_default=False,
    ),
]
PowerTz = Annotated[
    str | None,
    typer.Option(
        "--power-tz",
        help="Zone of the log's timestamps: UTC, ±HH:MM or a name like Europe/Paris "
        "(default: the zone traceview record wrote beside the log, else the machine's zone; "
        "said on stderr).",
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


def _version(value: bool) -> None:
    if value:
        print_version()
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
