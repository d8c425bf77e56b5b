"""The options of every command that takes a run (several rank files), declared once.

``@reads_runs`` adds them to a command's signature (typer parses them, ``--help`` lists them)
and hands the command one :class:`RunOptions` as its ``run`` argument, like ``@reads_traces``
does for the read flags.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from traceview.options import RunOptions

_PANEL = "Several ranks"
Glob = Annotated[
    str | None,
    typer.Option(
        "--glob",
        help="In a directory, read the files matching this (default: *.json and *.json.gz).",
        rich_help_panel=_PANEL,
        show_default=False,
    ),
]
RankRegex = Annotated[
    str | None,
    typer.Option(
        "--rank-regex",
        help="A file's rank from its name when its header has no distributedInfo.rank: the "
        "first group of this regex (default: the last integer after 'rank' or 'worker').",
        rich_help_panel=_PANEL,
        show_default=False,
    ),
]
Jobs = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        "-j",
        min=1,
        help="Rank files read at once (processes; default: all cores).",
        rich_help_panel=_PANEL,
        show_default=False,
    ),
]
Engine = Annotated[
    str,
    typer.Option(
        "--engine",
        help="local (a process pool) or dask (dask.distributed: pip install 'traceview[dask]').",
        rich_help_panel=_PANEL,
    ),
]
Scheduler = Annotated[
    str | None,
    typer.Option(
        "--scheduler",
        help="--engine dask: the address of a running scheduler (default: start a local one).",
        rich_help_panel=_PANEL,
        show_default=False,
    ),
]
SchedulerFile = Annotated[
    Path | None,
    typer.Option(
        "--scheduler-file",
        help="--engine dask: a running cluster's scheduler file.",
        rich_help_panel=_PANEL,
        show_default=False,
    ),
]


def _run_flags(
    glob: Glob = None,
    rank_regex: RankRegex = None,
    jobs: Jobs = None,
    engine: Engine = "local",
    scheduler: Scheduler = None,
    scheduler_file: SchedulerFile = None,
) -> RunOptions:
    """The run flags as typed, made into one RunOptions."""
    return RunOptions(glob, rank_regex, jobs, engine, scheduler, scheduler_file)


PerRank = Annotated[
    bool,
    typer.Option(
        "--per-rank",
        help="Several ranks: each rank's own table after the roll-up.",
        rich_help_panel=_PANEL,
    ),
]
Traces = Annotated[
    list[Path],
    typer.Argument(
        help="Trace file: Chrome trace JSON, plain or gzip (.json, .json.gz), or an Nsight "
        "Systems SQLite export (nsys export --type sqlite). Several files, a directory or a "
        "glob make a run: one trace per rank, rolled up.",
        show_default=False,
    ),
]


FROM_RUN_FLAGS = RunOptions()  # a command's ``run`` default; @reads_runs passes the real one
_RUN_FLAGS = tuple(inspect.signature(_run_flags, eval_str=True).parameters.values())
RUN_FLAG_NAMES = tuple(p.name for p in _RUN_FLAGS)


def reads_runs(command: Callable[..., None]) -> Callable[..., None]:
    """A command taking ``run: RunOptions``: typer sees the run flags instead."""
    signature = inspect.signature(command, eval_str=True)
    own = [p for name, p in signature.parameters.items() if name != "run"]

    @functools.wraps(command)
    def with_run_flags(*args: Any, **kwargs: Any) -> None:
        flags = {name: kwargs.pop(name) for name in RUN_FLAG_NAMES if name in kwargs}
        command(*args, run=_run_flags(**flags), **kwargs)

    with_run_flags.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*own, *_RUN_FLAGS]
    )
    return with_run_flags


__all__ = ["FROM_RUN_FLAGS", "RUN_FLAG_NAMES", "PerRank", "Traces", "reads_runs"]
