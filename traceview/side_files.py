"""Side inputs (a power log, a peaks file, a run snapshot): read whole, once, through one
bounded reader. Each kind has a maximum size (docs/output.md, "Limits"); a regular file or a pipe is
read, a device, directory or socket refused; a FIFO with no writer reads as empty, never
waited on."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from traceview.errors import TraceviewError

MAX_BYTES = {
    "power log": 2 << 30,  # a day of 8 GPUs sampled every 40 ms is about 1 GB
    "peaks file": 1 << 20,
    "snapshot": 64 << 20,  # traceview snapshot writes a few hundred KB
    "run snapshot": 4 << 30,
    "record file": 64 << 10,  # traceview record's record.json: a few lines
    "scheduler file": 1 << 20,  # a Dask scheduler's address and a few fields
}


def size_text(limit: int) -> str:
    """``2 GiB``, ``64 MiB``, ``1 MiB``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if limit >= 1 << shift and limit % (1 << shift) == 0:
            return f"{limit >> shift} {unit}"
    return f"{limit} bytes"


def too_big(path: Path | str, kind: str) -> TraceviewError:
    """The error of a side file over its kind's maximum size."""
    return TraceviewError(f"{path}: larger than the {size_text(MAX_BYTES[kind])} a {kind} may be")


def read_side_file(path: Path, kind: str, what: str | None = None) -> bytes:
    """The bytes of ``path``, at most ``MAX_BYTES[kind]`` (else a TraceviewError); errors
    begin with ``what`` (default: the path)."""
    where = what or str(path)
    limit = MAX_BYTES[kind]
    try:
        # O_NONBLOCK: opening a FIFO that has no writer returns at once instead of waiting.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as e:
        raise TraceviewError(f"{where}: cannot read the {kind} ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
            raise TraceviewError(f"{where}: not a regular file or a pipe (give a {kind} file)")
        if stat.S_ISREG(st.st_mode) and st.st_size > limit:
            raise too_big(where, kind)
        os.set_blocking(fd, True)  # a pipe with a writer is waited on; without one it is empty
        data = _read_up_to(fd, limit + 1, where, kind)
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    if len(data) > limit:
        raise too_big(where, kind)
    if not data and stat.S_ISFIFO(st.st_mode):
        raise TraceviewError(f"{where}: an empty pipe (a FIFO with no writer?); no {kind} in it")
    return data


def _read_up_to(fd: int, count: int, where: str, kind: str) -> bytes:
    parts, size = [], 0
    try:
        while size < count and (block := os.read(fd, min(1 << 24, count - size))):
            parts.append(block)
            size += len(block)
    except OSError as e:
        if e.errno == errno.EISDIR:
            raise TraceviewError(f"{where}: is a directory, not a {kind}") from None
        raise TraceviewError(f"{where}: cannot read the {kind} ({e.strerror or e})") from None
    return b"".join(parts)
