"""State kept between runs: the last trace analysed (for ``gaps`` without TRACE)."""

from __future__ import annotations

import os
from pathlib import Path

from traceview.cache.root import state_dir
from traceview.errors import UsageError


def remember_trace(path: Path) -> None:
    """Record ``path`` as the last trace analysed; a failure to record is not an error."""
    try:
        directory = state_dir()
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".last_trace.{os.getpid()}"
        tmp.write_text(str(path.resolve()), encoding="utf-8")
        os.replace(tmp, directory / "last_trace")
    except OSError:
        pass


def last_trace() -> Path:
    """The last trace analysed, or a usage error saying to name one."""
    try:
        text = (state_dir() / "last_trace").read_text(encoding="utf-8").strip()
    except OSError:
        text = ""
    if not text:
        raise UsageError("no TRACE given and no trace analysed before: name a trace file")
    return Path(text)
