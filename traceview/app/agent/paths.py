"""Where an agent may read and write: the roots given to ``traceview mcp --root`` and its
``--out-dir``, checked on every path an agent names before any command sees it.

A path to read is resolved (symlinks followed; a relative one from the first root) and must
land inside a root and be a regular file: not a directory, device, FIFO or socket, which a
read could block on or which are no trace. A path to write must land inside the out-dir,
where nothing of that name exists yet (not even a dangling symlink): nothing is overwritten,
an input least of all.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from traceview.errors import TraceviewError, UsageError

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


@dataclass(frozen=True)
class Confinement:
    """The resolved roots an agent reads under, and the out-dir it writes under (or None)."""

    roots: tuple[Path, ...]
    out_dir: Path | None = None

    @classmethod
    def of(cls, roots: Sequence[Path], out_dir: Path | None) -> Confinement:
        """From the server's options: each an existing directory (a usage error if not)."""
        resolved = tuple(_directory(root, "--root") for root in roots or (Path.cwd(),))
        return cls(resolved, None if out_dir is None else _directory(out_dir, "--out-dir"))

    def readable(self, text: str) -> Path:
        """The resolved file an agent asked to read (an error naming it if it may not)."""
        if not text or "\0" in text:
            raise UsageError(f"{text!r}: not a path")
        if text in ("-", "/dev/stdin"):
            raise UsageError(f"{text}: standard input is not served; give a file under a root")
        resolved = Path(os.path.realpath(self.roots[0] / Path(text).expanduser()))
        if not any(resolved.is_relative_to(root) for root in self.roots):
            where = ", ".join(map(str, self.roots))
            raise UsageError(f"{text}: outside the roots this server may read ({where})")
        try:
            mode = resolved.stat().st_mode
        except FileNotFoundError:
            raise TraceviewError(f"{text}: no such file") from None
        except OSError as e:
            raise TraceviewError(f"{text}: {e.strerror or e}") from None
        for is_kind, kind in _KINDS:
            if is_kind(mode):
                raise UsageError(f"{text}: {kind}, not a file: refused")
        return resolved

    def writable(self, text: str) -> Path:
        """The new file an agent asked to write, inside the out-dir."""
        if self.out_dir is None:
            raise UsageError(
                "this tool writes a file: start traceview mcp with --out-dir DIR to allow it"
            )
        if not text or "\0" in text:
            raise UsageError(f"{text!r}: not a path")
        wanted = self.out_dir / Path(text).expanduser()
        parent = Path(os.path.realpath(wanted.parent))
        if wanted.name in ("", ".", "..") or not parent.is_relative_to(self.out_dir):
            raise UsageError(f"{text}: outside the out-dir ({self.out_dir})")
        target = parent / wanted.name
        if os.path.lexists(target):
            raise UsageError(f"{text}: exists; traceview mcp never overwrites a file")
        if not parent.is_dir():
            raise UsageError(f"{text}: no such directory in the out-dir ({self.out_dir})")
        return target


def _directory(path: Path, flag: str) -> Path:
    resolved = Path(os.path.realpath(path.expanduser()))
    if not resolved.is_dir():
        raise UsageError(f"{flag} {path}: not a directory")
    return resolved
