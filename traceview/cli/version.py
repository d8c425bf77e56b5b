"""``traceview --version``'s line, printed by the option and by ``main`` without typer."""

from __future__ import annotations

from traceview import __version__


def print_version() -> None:
    from traceview.read.compiled import reader_name

    print(f"traceview {__version__} (reader: {reader_name()})")
