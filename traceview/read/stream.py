"""Traces from a pipe: ``-`` (stdin), ``/dev/stdin``, ``<(zcat t.json.gz)``, a named pipe.

A pipe can be read once, from its start. Each is opened once per path and kept here, so
the checks that look at its first bytes (gzip? SQLite? a snapshot?) and the reader share
one stream: what the checks peek at is kept and handed to the reader first.

Such input is read in one process (the two-process split needs offsets) and is never
cached: entries are found by a file's identity and the hash of its content, and a pipe's
content is known only once it has been read whole, so no later run could find its entry
without reading the whole input again, which is the cost the cache exists to avoid.
"""

from __future__ import annotations

import os
import select
import stat
import sys
from pathlib import Path

from traceview.errors import TraceviewError, UsageError

STDIN = Path("-")
SQLITE_MAGIC = b"SQLite format 3\x00"
# A named pipe without a writer: how long to wait before saying so on stderr.
_WAIT_NOTE_MS = 1000
_OPEN: dict[str, PipeInput] = {}


def is_pipe(path: Path) -> bool:
    """Whether ``path`` is read as a stream: ``-``, a named pipe or a character device
    (``/dev/stdin`` and ``<(...)`` are pipes behind a path)."""
    if path == STDIN:
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def pipe_note(path: Path, verify: bool, refresh: bool) -> str:
    """The stderr line that says how a pipe is read (and which options do nothing)."""
    ignored = [name for name, given in (("--verify", verify), ("--refresh", refresh)) if given]
    why = f"; {' and '.join(ignored)} ignored" if ignored else ""
    return f"traceview: note: {path} is a pipe: read once as it comes, not cached{why}"


def pipe_input(path: Path) -> PipeInput:
    """The stream of ``path``, opened on first use (a named pipe waits for its writer)."""
    key = str(path)
    if key not in _OPEN:
        _OPEN[key] = PipeInput(path, _open(path))
    return _OPEN[key]


def _open(path: Path) -> int:
    """A blocking descriptor of the pipe; a terminal is refused (nothing was piped)."""
    if path == STDIN:
        fd = os.dup(sys.stdin.fileno())
    else:
        try:  # without blocking: a named pipe without a writer would block here, silently
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as e:
            raise TraceviewError(f"{path}: cannot read: {e.strerror or e}") from None
    if os.isatty(fd):
        os.close(fd)
        raise UsageError(
            f"{path}: is a terminal: pipe a trace into traceview "
            "(zcat t.json.gz | traceview kernels -) or name a file"
        )
    _wait_for_writer(path, fd)
    os.set_blocking(fd, True)
    return fd


def _wait_for_writer(path: Path, fd: int) -> None:
    """Wait until the pipe has data or is closed, saying so if it takes a while (Linux does
    not report a named pipe that never had a writer as closed)."""
    poll = select.poll()
    poll.register(fd, select.POLLIN | select.POLLHUP)
    if poll.poll(_WAIT_NOTE_MS):
        return
    print(
        f"traceview: waiting for data on {path} (a pipe with no writer yet; Ctrl-C to stop)",
        file=sys.stderr,
        flush=True,
    )
    poll.poll()


class PipeInput:
    """One pass over a pipe, with a look at its first bytes before reading starts."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd
        self._head = bytearray()  # read by peek(), not yet handed out by read()
        self._consumed = 0
        self.taken = False

    def peek(self, size: int) -> bytes:
        """The first ``size`` bytes (fewer if the input is shorter), before any read()."""
        if self._consumed:
            raise TraceviewError(f"{self.path}: a pipe can be read only once")
        while len(self._head) < size:
            chunk = self._read_fd(size - len(self._head))
            if not chunk:
                break
            self._head += chunk
        return bytes(self._head[:size])

    def take(self) -> PipeInput:
        """This input for the one reader that reads it through; a second is an error."""
        if self.taken:
            raise TraceviewError(f"{self.path}: a pipe can be read only once (is it given twice?)")
        self.taken = True
        return self

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes: the peeked ones first, then the pipe's (b"" at its end)."""
        if size < 0:
            data = bytes(self._head) + self._read_all()
            self._head.clear()
        else:  # as a file's read: short only at the end (then reading is as a file's)
            data = bytes(self._head[:size])
            del self._head[:size]
            if len(data) < size:
                data += self._read_fd(size - len(data))
        self._consumed += len(data)
        return data

    def _read_all(self) -> bytes:
        parts = []
        while chunk := self._read_fd(1 << 20):
            parts.append(chunk)
        return b"".join(parts)

    def _read_fd(self, size: int) -> bytes:
        """Up to ``size`` bytes from the pipe, waiting until that many or its end."""
        if self._fd is None:
            return b""
        parts, missing = [], size
        try:
            while missing > 0 and (chunk := os.read(self._fd, missing)):
                parts.append(chunk)
                missing -= len(chunk)
        except OSError as e:
            raise TraceviewError(f"{self.path}: cannot read: {e.strerror or e}") from None
        return b"".join(parts)

    def tell(self) -> int:
        """Bytes handed out by read() so far."""
        return self._consumed

    def seek(self, offset: int) -> int:
        """Only to where reading is (a pipe cannot go back or skip)."""
        if offset != self._consumed:
            raise TraceviewError(f"{self.path}: a pipe cannot be read again from the start")
        return offset

    def fileno(self) -> int:
        """The pipe's descriptor (-1 once closed)."""
        return -1 if self._fd is None else self._fd

    def close(self) -> None:
        """Close the pipe (a second pass is then an error, as it could not see the data)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
