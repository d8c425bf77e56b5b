"""Where output goes: stdout for data, stderr for everything else, files written atomically."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from traceview.console import stderr_console as stderr_console  # run.py prints with it too
from traceview.errors import TraceviewError, UsageError
from traceview.render.escape import visible

if TYPE_CHECKING:  # rich is imported only to print (0.03 s): a warm run may print nothing
    from rich.progress import Progress, TaskID


def stdout_is_terminal() -> bool:
    return sys.stdout is not None and sys.stdout.isatty()


def write_stdout(text: str | Iterator[str], json: bool = False) -> None:
    """Write data (or its chunks, as they are made) to stdout; a full disk or a closed stdout
    is one error line, not a traceback. On a stdout that cannot encode every character
    (``PYTHONIOENCODING=ascii``), JSON gets ``\\u`` escapes and text ASCII stand-ins."""
    if sys.stdout is None:  # started with stdout closed (``>&-``)
        raise TraceviewError("cannot write to stdout: it is closed")
    encodable = _encodable(getattr(sys.stdout, "encoding", None))
    try:
        for chunk in [text] if isinstance(text, str) else text:
            sys.stdout.write(chunk if encodable(chunk) else _stand_ins(chunk, json))
        sys.stdout.flush()
    except BrokenPipeError:
        raise  # the reader left (``| head``): the CLI exits quietly
    except (OSError, ValueError) as e:
        _discard_stdout()
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise TraceviewError(f"cannot write to stdout: {reason}") from None


def _encodable(encoding: str | None) -> Callable[[str], bool]:
    """Whether a text can be written as it is to a stream of this encoding."""
    import codecs

    try:
        name = codecs.lookup(encoding or "utf-8").name
    except LookupError:
        name = "ascii"
    if name.startswith("utf-"):
        return lambda text: True

    def encodable(text: str) -> bool:
        if text.isascii():
            return True
        try:
            text.encode(name)
        except UnicodeEncodeError:
            return False
        return True

    return encodable


# What the text outputs hold beyond ASCII (units, table rules, separators), in ASCII.
_ASCII = str.maketrans({
    "µ": "u", "μ": "u", "…": "...", "·": "-", "–": "-", "—": "--", "→": "->", "←": "<-",
    "±": "+/-", "×": "x", "≥": ">=", "≤": "<=", "≈": "~", "─": "-", "━": "-", "│": "|",
    "┃": "|", "┼": "+", "┌": "+", "┐": "+", "└": "+", "┘": "+", "├": "+", "┤": "+",
    "┬": "+", "┴": "+", "▏": "|", "█": "#", "°": " deg",
})  # fmt: skip


def _stand_ins(text: str, json: bool) -> str:
    """``text`` in ASCII: JSON with ``\\uXXXX`` escapes (valid wherever a non-ASCII character
    can be: inside a string), text with ASCII stand-ins and other characters escaped."""
    if json:
        return "".join(c if c.isascii() else _json_escape(c) for c in text)
    return text.translate(_ASCII).encode("ascii", "backslashreplace").decode("ascii")


def _json_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _discard_stdout() -> None:
    """Point fd 1 at /dev/null, so that the interpreter's flush at exit cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def check_output_path(path: Path, force: bool, inputs: Sequence[Path]) -> None:
    """Usage errors of an output file, before any reading: one of the ``inputs`` (the trace,
    a side file an option names: see options.inputs_of; through a hard link or a symlink
    too, ``--force`` or not), a directory, a file that exists without
    ``--force``. A character device or FIFO (``/dev/null``, ``/dev/stdout``) is written to."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return  # a new file (or a dangling symlink, whose target is created)
    except OSError as e:
        raise UsageError(f"{path}: cannot write ({e.strerror or e})") from None
    if _is_an_input(st, inputs):
        raise UsageError(
            f"{path}: is the input trace or a file an option reads; it is never overwritten"
        )
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{path}: is a directory; name an output file")
    if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode) or _is_open_fd(path):
        return
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{path}: not a regular file, character device or pipe")
    if not force:
        raise UsageError(f"{path}: already exists (use --force to overwrite)")


def _is_an_input(st: os.stat_result, inputs: Sequence[Path]) -> bool:
    """Whether ``st`` is the file of one of ``inputs`` (same device and inode)."""
    for source in inputs:
        try:
            other = source.stat()
        except OSError:
            continue
        if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
            return True
    return False


def write_file(
    path: Path,
    text: str | bytes | Iterator[str] | Iterator[bytes],
    force: bool,
    inputs: Sequence[Path] = (),
    quiet: bool = False,
) -> None:
    """Write ``text`` (or its chunks, as they are made) to ``path``: a regular file atomically
    (a temp file renamed over it, with the user's umask; removed if making the text fails),
    a device or pipe by writing to it. Never an input trace. ``Wrote PATH`` on stderr unless
    ``quiet``."""
    check_output_path(path, force, inputs)
    data = _encoded(text)
    try:
        st = path.stat()
    except OSError:
        st = None
    try:
        if st is not None and (not stat.S_ISREG(st.st_mode) or _is_open_fd(path)):
            _write_through(path, data)
        else:
            _write_atomically(Path(os.path.realpath(path)), data, st)
    except OSError as e:
        raise TraceviewError(f"{path}: cannot write ({e.strerror or e})") from None
    # A plain line: rich's import and console were 0.02 s of a warm report (and rich read
    # ":name:" in a path as an emoji).
    if not quiet:
        sys.stderr.write(f"Wrote {visible(str(path))}\n")


def _is_open_fd(path: Path) -> bool:
    """Whether ``path`` leads, through symlinks, to an open file descriptor (``/dev/stdout``,
    ``/proc/self/fd/1``): what the shell redirected it to is written to, never replaced."""
    for _ in range(40):
        if path.parent.name == "fd" and path.parent.parent.parent == Path("/proc"):
            return True
        if not path.is_symlink():
            return False
        path = path.parent / os.readlink(path)
    return False


def _encoded(text: str | bytes | Iterator[str] | Iterator[bytes]) -> Iterator[bytes]:
    """The UTF-8 bytes of ``text`` (bytes: written as they are), chunk by chunk."""
    if isinstance(text, bytes):
        yield text
    elif isinstance(text, str):
        yield text.encode("utf-8")
    else:
        for chunk in text:
            yield chunk if isinstance(chunk, bytes) else chunk.encode("utf-8")


def _write_through(path: Path, data: Iterator[bytes]) -> None:
    """Write to a device, pipe or open descriptor as it is: no temp file, the node is never
    replaced; appended, so a report after stdout data (``-o /dev/stdout > f``) follows it."""
    fd = _open_for_writing(path)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def _open_for_writing(path: Path) -> int:
    """``path`` opened to append; a FIFO without a reader yet is said on stderr, then
    waited on (its reader may start after traceview), never in silence."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_NOCTTY
    try:
        fd = os.open(path, flags | os.O_NONBLOCK)
    except OSError as e:
        if e.errno != errno.ENXIO:  # ENXIO: a FIFO that nobody reads yet
            raise
        sys.stderr.write(f"traceview: waiting for a reader of the FIFO {visible(str(path))}\n")
        sys.stderr.flush()
        return os.open(path, flags)
    os.set_blocking(fd, True)
    return fd


def _write_atomically(target: Path, data: Iterator[bytes], st: os.stat_result | None) -> None:
    """A temp file beside ``target`` (mode 0666 less the umask, or the mode of the file it
    replaces), renamed over it; removed if anything fails."""
    tmp = target.parent / f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    try:
        try:
            if st is not None:
                os.fchmod(fd, stat.S_IMODE(st.st_mode) & 0o777)
            _write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _write_all(fd: int, data: Iterator[bytes]) -> None:
    for chunk in data:
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view) :]


def check_export_dir(
    directory: Path, force: bool, inputs: Sequence[Path], names: Sequence[str]
) -> None:
    """Usage errors of ``export -o DIR`` before any reading: a file, not a directory (the
    input trace above all), a directory that is not empty without ``--force``, a directory
    where one of the files to write is an input."""
    try:
        st = directory.stat()
    except FileNotFoundError:
        return
    except OSError as e:
        raise UsageError(f"{directory}: cannot write ({e.strerror or e})") from None
    if _is_an_input(st, inputs):
        raise UsageError(f"{directory}: is the input trace; export -o names a directory")
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{directory}: not a directory (export -o names a directory)")
    if not force and any(directory.iterdir()):
        raise UsageError(f"{directory}: not empty (use --force to write into it)")
    for name in names:
        with contextlib.suppress(OSError):
            if _is_an_input((directory / name).stat(), inputs):
                raise UsageError(f"{directory / name}: is the input trace; it is never overwritten")


@contextlib.contextmanager
def removed_on_failure(directory: Path, names: Sequence[str]) -> Iterator[None]:
    """If the block fails, remove what it created: the files of ``names`` that were not
    there before, and the directories (``directory`` and its parents) it made, once empty."""
    made = [d for d in (directory, *directory.parents) if not os.path.lexists(d)]
    existing = {name for name in names if os.path.lexists(directory / name)}
    try:
        yield
    except BaseException:
        for name in names:
            if name not in existing:
                with contextlib.suppress(OSError):
                    os.unlink(directory / name)
        for d in made:  # deepest first; rmdir removes only empty directories
            with contextlib.suppress(OSError):
                os.rmdir(d)
        raise


def _near(estimate: int, shown: int | None) -> bool:
    """An estimated total within 2% of the one shown."""
    return shown is not None and abs(estimate - shown) <= shown // 50


# Called with (bytes read, total) by every ByteProgress of this process, bar or not (at most
# ten times a second): ``traceview mcp`` sends it to the agent as progress notifications.
progress_listener: Callable[[int, int | None], None] | None = None


class ByteProgress:
    """A transient progress bar by bytes read (decompressed for gzip, against an estimated
    total), throttled; silent when not a terminal (``progress_listener`` hears it all the
    same)."""

    def __init__(self, total_bytes: int | None, enabled: bool) -> None:
        """``total_bytes``: None until the reader's first estimate (gzip)."""
        self._enabled = enabled and sys.stderr.isatty()
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._total = total_bytes
        self._last = 0.0

    def __enter__(self) -> Callable[[int, int | None], None]:
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

    def update(self, position: int, total: int | None = None) -> None:
        """``position`` bytes done of ``total`` (a new estimate) or of the size given first."""
        now = time.monotonic()
        listener = progress_listener
        if (self._progress is None and listener is None) or now - self._last < 0.1:
            return
        self._last = now
        if total is not None and not _near(total, self._total):
            self._total = total  # only when it moved: rich forgets its speed when it changes
        if listener is not None:
            listener(position, self._total)
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=position, total=self._total)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
