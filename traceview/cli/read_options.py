"""The options every trace-reading command shares, declared once.

``@reads_traces`` adds them to a command's signature (so typer parses them and ``--help`` lists
them) and hands the command one :class:`ReadOptions` as its ``read`` argument: a new read flag is
a field of ReadOptions and a parameter of :func:`_read_flags`, nothing else.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from traceview.options import ReadOptions

Partial = Annotated[
    bool,
    typer.Option(
        "--partial",
        help="Analyse the complete events of a truncated trace (with a warning); in a run, "
        "skip a rank that cannot be read.",
    ),
]
Quiet = Annotated[
    bool,
    typer.Option("--quiet", "-q", help="No progress bar (nor snapshot's Wrote line) on stderr."),
]
Strict = Annotated[
    bool,
    typer.Option("--strict", help="Fail (exit 1) instead of skipping and counting bad events."),
]
NoCache = Annotated[
    bool,
    typer.Option("--no-cache", help="Read the trace itself: neither use nor fill the cache."),
]
Refresh = Annotated[
    bool, typer.Option("--refresh", help="Re-read the trace and replace its cache entry.")
]
CacheDir = Annotated[
    Path | None,
    typer.Option(
        "--cache-dir",
        help="Cache directory (default: $TRACEVIEW_CACHE_DIR, else ~/.cache/traceview).",
        show_default=False,
    ),
]
Verify = Annotated[
    bool,
    typer.Option(
        "--verify",
        help="Re-hash the trace to find its cache entry instead of trusting its path, size, "
        "mtime and inode (for a file edited in place with its mtime restored).",
    ),
]
StepRegex = Annotated[
    str | None,
    typer.Option(
        "--step-regex",
        help="Steps are the CPU ranges (cpu_op, user_annotation, nsys NVTX) whose whole name "
        "matches this, its one group the step number (default: ProfilerStep#N annotations, "
        "else serving step markers: docs/metrics.md).",
        show_default=False,
    ),
]


def _read_flags(
    partial: Partial = False,
    quiet: Quiet = False,
    strict: Strict = False,
    no_cache: NoCache = False,
    refresh: Refresh = False,
    cache_dir: CacheDir = None,
    verify: Verify = False,
    step_regex: StepRegex = None,
) -> ReadOptions:
    """The shared read flags as typed on the command line, made into one ReadOptions."""
    return ReadOptions(partial, quiet, strict, not no_cache, refresh, cache_dir, verify, step_regex)


FROM_FLAGS = ReadOptions()  # a command's ``read`` default; @reads_traces passes the real one
_READ_FLAGS = tuple(inspect.signature(_read_flags, eval_str=True).parameters.values())
READ_FLAG_NAMES = tuple(p.name for p in _READ_FLAGS)


def reads_traces(command: Callable[..., None]) -> Callable[..., None]:
    """A command taking ``read: ReadOptions``: typer sees the shared read flags instead."""
    signature = inspect.signature(command, eval_str=True)
    own = [p for name, p in signature.parameters.items() if name != "read"]

    @functools.wraps(command)
    def with_read_flags(*args: Any, **kwargs: Any) -> None:
        flags = {name: kwargs.pop(name) for name in READ_FLAG_NAMES if name in kwargs}
        command(*args, read=_read_flags(**flags), **kwargs)

    with_read_flags.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*own, *_READ_FLAGS]
    )
    return with_read_flags


__all__ = ["FROM_FLAGS", "READ_FLAG_NAMES", "CacheDir", "reads_traces"]
