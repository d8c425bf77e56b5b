"""The command line: one module per command declares its options and calls traceview.app;
the options every command shares are declared once (common, read_options, run_options).

``main`` imports only the module of the command it runs (each brings its analyses, and typer
builds every registered command's parameters on each call); ``traceview.cli.app`` has them all.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer

# Registered in this order, which ``traceview --help`` lists; each is the module of that name.
COMMANDS = (
    "record",
    "kernels",
    "gaps",
    "steps",
    "summary",
    "ops",
    "snapshot",
    "diff",
    "export",
    "ranks",
    "cache",
    "unique",
    "energy",
    "report",
    "memory",
    "trim",
    "mcp",
    "audit",
    "source",
)


def _register(names: tuple[str, ...]) -> typer.Typer:
    from traceview.cli.common import app

    for name in names:
        importlib.import_module(f"traceview.cli.{name}")
    return app


class NoPandas:
    """Refuses to import pandas. pyarrow, on its first array made or converted, imports pandas
    where it is installed, to check whether that array is a pandas object: 0.3 s and ~40 MB
    on every command that reads or writes the cache. The command line never uses pandas
    (only the library's ``to_pandas`` does), so it runs as where pandas is not installed.
    A finder on sys.meta_path (not importlib.abc's class: importing that takes ~1.5 ms)."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: Any = None) -> None:
        if name.partition(".")[0] == "pandas":
            raise ImportError(f"traceview's command line does not import {name}", name=name)


def main() -> None:
    """Entry point (usage errors exit 2, data errors 1, see traceview.errors)."""
    # No linear algebra here: without its thread pool, OpenBLAS makes numpy's import ~0.05 s
    # shorter (0.14 s against 0.19 s, median of 11 on 2 cores).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if "pandas" not in sys.modules and not any(type(f) is NoPandas for f in sys.meta_path):
        sys.meta_path.insert(0, NoPandas())
    # A command named first needs only its module; anything else (help, an unknown or
    # misspelt command, --version) gets every command, so lists and suggestions are whole.
    first = sys.argv[1] if len(sys.argv) > 1 else ""
    if sys.argv[1:] == ["--version"]:  # as the --version option prints it, without typer
        from traceview.cli.version import print_version

        try:
            print_version()
        except BrokenPipeError:  # as typer ends then: exit 1, nothing on stderr
            sys.stdout = None  # nothing left to flush at exit
            sys.exit(1)
        return
    from traceview.app.memory import reuse_block_memory
    from traceview.forked import fork_cache_writes, hold_collections

    reuse_block_memory()  # before the read starts (_start_reading_early) and forks
    hold_collections()  # until the command starts its work (see traceview.forked)
    _start_reading_early(sys.argv[1:])
    fork_cache_writes()  # a cache entry is written by a process of its own (cache)
    try:
        from traceview.cli.errors import terminate_as_interrupt

        terminate_as_interrupt()  # SIGTERM cleans up as Ctrl-C does: no temp file left behind
        app = _register((first,) if first in COMMANDS else COMMANDS)
        app(prog_name="traceview")
    finally:
        parallel = sys.modules.get("traceview.columns.parallel")
        if parallel is not None:
            parallel.stop_early()  # a worker no read adopted (an error, another file)
        gc.freeze()  # the process ends: nothing left is worth the collections at exit


# The read each command makes of its trace with its default options, (CPU rows, python
# frames): a guess only, the read checks it (see _start_reading_early).
_EARLY_READS = {
    "kernels": (False, False),
    "gaps": (True, False),
    "steps": (True, False),
    "summary": (True, True),
}


def _start_reading_early(args: list[str]) -> None:
    """``traceview CMD TRACE ...`` likely reads TRACE: fork the worker of a split read now,
    before typer and the command's analyses are imported (~0.1 s), so that it reads while this
    process starts. The read adopts it only if it reads that file as guessed; anything else
    (another file or another read: options, not a trace) stops it and reads as usual, a cache
    hit stops it at once (``main`` stops a worker no read adopted). A run's traces are read by
    other processes: no guess is made then."""
    if (
        len(args) < 3
        or args[0] not in _EARLY_READS
        or args[1].startswith("-")
        or not args[2].startswith("-")  # more traces (a run): read by other processes
        or any(a in ("-h", "--help") for a in args)
    ):
        return
    from pathlib import Path

    from traceview.analyses.core.stall import STALL_FRAME_MIN_NS
    from traceview.columns.parallel import start_early

    # With the cache, the worker hashes the blocks it reads: a first read makes the key of them.
    # summary's read keeps only the long frames, with the cache too (its entry says so).
    cached = "--no-cache" not in args
    floor = STALL_FRAME_MIN_NS if args[0] == "summary" else 0
    start_early(Path(args[1]), *_EARLY_READS[args[0]], hash_blocks=cached, frames_from_ns=floor)


def __getattr__(name: str) -> Any:
    if name == "app":  # the whole command line, every command registered
        return _register(COMMANDS)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["COMMANDS", "NoPandas", "app", "main"]
