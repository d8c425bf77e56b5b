"""``traceview mcp``: its options, parsed here; the server is in traceview.cli.agent."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from traceview.cli.common import command
from traceview.cli.read_options import CacheDir
from traceview.errors import TraceviewError

MISSING = "traceview mcp needs the MCP SDK: pip install 'traceview[mcp]'"


@command()
def mcp(
    root: Annotated[
        list[Path] | None,
        typer.Option(
            "--root",
            help="A directory whose files the agent may read (repeatable; default: the "
            "working directory). Paths outside every root, or symlinks out of them, devices "
            "and FIFOs are refused.",
            show_default=False,
        ),
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "--out-dir",
            help="The directory trim writes its files in (new files only); without it, "
            "writing tools are refused.",
            show_default=False,
        ),
    ] = None,
    max_tokens: Annotated[
        int,
        typer.Option(
            "--max-tokens",
            min=1000,
            help="Each answer's budget in tokens, estimated as UTF-8 bytes / 3; longer "
            "tables are cut by rank, and the answer says how to ask for the rest.",
        ),
    ] = 2_000,
    cache_dir: CacheDir = None,
) -> None:
    """Serve every analysis as a tool for coding agents over the Model Context Protocol
    (stdio): bounded JSON answers, each with the command that reproduces it."""
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        raise TraceviewError(MISSING)
    from traceview.app.agent.paths import Confinement
    from traceview.cli.agent.server import Settings, serve

    where = Confinement.of(root or [], out_dir)
    serve(Settings(where, max_tokens, cache_dir))
