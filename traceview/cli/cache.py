"""``traceview cache``: its options, parsed here; the work is in traceview.app."""

from __future__ import annotations

from typing import Annotated

import typer

from traceview.cli.common import (
    app,
    command,
)
from traceview.cli.read_options import CacheDir

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
    from traceview.app import commands

    commands.cache_info(cache_dir)


@command(cache_app, "list")
def cache_list(cache_dir: CacheDir = None) -> None:
    """Every entry: key, size, last use, the trace path(s) it was read from."""
    from traceview.app import commands

    commands.cache_list(cache_dir)


@command(cache_app, "clear")
def cache_clear(cache_dir: CacheDir = None) -> None:
    """Remove every entry, the file index and temp dirs left by killed runs (nothing else)."""
    from traceview.app import commands

    commands.cache_clear(cache_dir)


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
    from traceview.app import commands

    commands.cache_prune(cache_dir, max_size)
