"""State kept between runs: the last trace analysed (for ``gaps`` without TRACE), in the
cache directory (``--cache-dir``, else the state directory); none with ``--no-cache``."""

from __future__ import annotations

import os
from pathlib import Path

from traceview.cache.root import has_marker, state_dir
from traceview.errors import UsageError


def remember_trace(path: Path, cache_dir: Path | None = None) -> None:
    """Record ``path`` as the last trace analysed in ``cache_dir`` (only a traceview cache:
    nothing is written into another directory), else in the state directory; a failure to
    record is not an error."""
    try:
        directory = state_dir() if cache_dir is None else cache_dir
        if cache_dir is not None and not has_marker(cache_dir):
            return
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".last_trace.{os.getpid()}"
        tmp.write_text(str(path.resolve()), encoding="utf-8")
        os.replace(tmp, directory / "last_trace")
    except OSError:
        pass


def last_trace(cache_dir: Path | None = None) -> Path:
    """The last trace analysed (recorded in ``cache_dir``, else in the state directory), or
    a usage error saying to name one."""
    try:
        text = (
            ((state_dir() if cache_dir is None else cache_dir) / "last_trace")
            .read_text(encoding="utf-8")
            .strip()
        )
    except OSError:
        text = ""
    if not text:
        raise UsageError("no TRACE given and no trace analysed before: name a trace file")
    return Path(text)
