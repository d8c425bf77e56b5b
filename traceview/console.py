"""The stderr console: progress, warnings and errors, never data (every layer may warn)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported only to print (0.03 s): a warm run may print nothing
    from rich.console import Console


def stderr_console() -> Console:
    """The console for progress, warnings and errors; lines are not hard-wrapped when stderr is
    not a terminal (a log file or ``2>&1 | grep`` gets each message on one line)."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=not _is_terminal(sys.stderr))


def _is_terminal(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
