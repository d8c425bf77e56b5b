"""Where output goes: stdout for data, stderr for everything else, files written atomically."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from traceview.errors import TraceviewError

if TYPE_CHECKING:  # rich is imported only to print (0.03 s): a warm run may print nothing
    from rich.console import Console
    from rich.progress import Progress, TaskID


def stderr_console() -> Console:
    """The console for progress, warnings and errors."""
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


def write_stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def write_file(path: Path, text: str, force: bool) -> None:
    """Write ``text`` to ``path`` atomically; refuse to replace a file without ``force``."""
    if path.exists() and not force:
        raise TraceviewError(f"{path}: already exists (use --force to overwrite)")
    if path.is_dir():
        raise TraceviewError(f"{path}: is a directory")
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        raise TraceviewError(f"{path}: cannot write ({e.strerror or e})") from None
    stderr_console().print(f"Wrote {path}", markup=False, soft_wrap=True)


class ByteProgress:
    """A transient progress bar by file bytes read, throttled; silent when not a terminal."""

    def __init__(self, total_bytes: int, enabled: bool) -> None:
        self._enabled = enabled and sys.stderr.isatty()
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._total = total_bytes
        self._last = 0.0

    def __enter__(self) -> Callable[[int], None]:
        if self._enabled:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            self._progress = Progress(
                "reading", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                TimeRemainingColumn(), console=stderr_console(), transient=True,
            )  # fmt: skip
            self._progress.start()
            self._task = self._progress.add_task("read", total=self._total)
        return self.update

    def update(self, position: int) -> None:
        now = time.monotonic()
        if self._progress is None or now - self._last < 0.1:
            return
        self._last = now
        if self._task is not None:
            self._progress.update(self._task, completed=position)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
