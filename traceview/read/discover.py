"""The files of a run and the rank of each.

Inputs are trace files, directories (their ``*.json`` and ``*.json.gz`` files, or those
matching ``--glob``; never hidden ones, such as what ``traceview record`` keeps beside its
traces or a writer's temp file) and glob patterns. A file's rank is ``distributedInfo.rank``
from its header, read by streaming only the top of the file up to ``traceEvents`` (ijson);
else the ``--rank-regex`` match on the file name (by default the last integer after ``rank`` or
``worker``); files with neither get the smallest ranks not taken, in file order (said on
stderr by the caller). Two files claiming one rank are an error naming both.
"""

from __future__ import annotations

import glob as globbing
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

import ijson
from zlib_ng import zlib_ng

from traceview.errors import TraceviewError, UsageError
from traceview.read.source import GZIP_MAGIC

DEFAULT_GLOBS = ("*.json", "*.json.gz")
DEFAULT_RANK_REGEX = r"(?:rank|worker)\D*?(\d+)(?!.*(?:rank|worker))"
_GLOB_CHARS = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class RankFile:
    """One file of the run and its rank; ``source``: header, name or order."""

    rank: int
    path: Path
    source: str


def run_files(inputs: list[Path], pattern: str | None = None) -> list[Path]:
    """The trace files that the inputs name, in order, each once."""
    found: list[Path] = []
    for item in inputs:
        found.extend(_expand(item, pattern))
    unique: dict[Path, None] = {}
    for path in found:
        unique.setdefault(path, None)
    if not unique:
        raise TraceviewError(f"{' '.join(map(str, inputs))}: no trace files found")
    return list(unique)


def _expand(item: Path, pattern: str | None) -> list[Path]:
    if item.is_dir():
        globs = (pattern,) if pattern else DEFAULT_GLOBS
        files = {p for glob in globs for p in item.glob(glob) if not _hidden(p, item)}
        if not files:
            raise TraceviewError(f"{item}: a directory without trace files ({_globs(pattern)})")
        return _regular(sorted(files))
    if not item.exists() and _GLOB_CHARS.search(str(item)):
        matches = sorted(Path(p) for p in globbing.glob(str(item)))
        if not matches:
            raise TraceviewError(f"{item}: no file matches this pattern")
        return _regular(matches)
    return [item]  # a missing file is reported by the reader, with the other bad inputs


def _hidden(path: Path, directory: Path) -> bool:
    """A name below ``directory`` that starts with a dot (as a shell's glob skips them)."""
    return any(part.startswith(".") for part in path.relative_to(directory).parts)


def _regular(paths: list[Path]) -> list[Path]:
    """``paths``, every one a regular file (through symlinks): a run's rank is never
    dropped in silence; anything else that a directory or glob names is an error naming it."""
    odd = [f"{p} ({why})" for p in paths if (why := _not_a_file(p)) is not None]
    if odd:
        raise TraceviewError(
            f"not a trace file: {', '.join(odd)}; a run's directory or glob names only its "
            "rank files (remove the entry, or narrow it with --glob)"
        )
    return paths


def _not_a_file(path: Path) -> str | None:
    """Why ``path`` is not a regular file, or None when it is."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "a dangling symlink" if path.is_symlink() else "gone"
    except OSError as e:
        return e.strerror or str(e)
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _globs(pattern: str | None) -> str:
    return pattern if pattern else " or ".join(DEFAULT_GLOBS)


def compile_rank_regex(pattern: str | None) -> re.Pattern[str]:
    """The ``--rank-regex`` (its first group, else its whole match, is the rank)."""
    try:
        return re.compile(pattern or DEFAULT_RANK_REGEX, re.IGNORECASE)
    except re.error as e:
        raise UsageError(
            f"--rank-regex {pattern!r}: not a valid regular expression ({e})"
        ) from None


def assign_ranks(paths: list[Path], regex: re.Pattern[str]) -> list[RankFile]:
    """Each file with its rank, ordered by rank; an error when two files claim one rank."""
    claimed: dict[int, RankFile] = {}
    unranked: list[Path] = []
    for path in paths:
        rank, source = header_rank(path), "header"
        if rank is None:
            rank, source = name_rank(path, regex), "name"
        if rank is None:
            unranked.append(path)
            continue
        other = claimed.get(rank)
        if other is not None:
            raise TraceviewError(f"rank {rank} is claimed by two files: {other.path} and {path}")
        claimed[rank] = RankFile(rank, path, source)
    free = (r for r in range(len(paths) + len(claimed)) if r not in claimed)
    for path, rank in zip(unranked, free, strict=False):
        claimed[rank] = RankFile(rank, path, "order")
    return [claimed[r] for r in sorted(claimed)]


def name_rank(path: Path, regex: re.Pattern[str]) -> int | None:
    """The rank in the file name: the regex's first group (or its match), as an integer."""
    match = regex.search(path.name)
    if match is None:
        return None
    text = match.group(1) if match.groups() else match.group(0)
    if text is None or not text.isdigit():
        return None
    return _checked_rank(int(text), path)


MAX_RANK = 2**63 - 1


def _checked_rank(rank: int, path: Path) -> int:
    if rank > MAX_RANK:
        raise TraceviewError(f"{path}: rank {rank} is beyond int64; ranks are 0 to 2^63-1")
    return rank


# A corrupt gzip stream (zlib_ng.pyi types the class as an instance).
_ZLIB_NG_ERROR = cast("type[Exception]", zlib_ng.error)


def header_rank(path: Path) -> int | None:
    """``distributedInfo.rank`` from the header, reading only up to ``traceEvents``; None when
    the file cannot be read that way or the header has no rank (the reader then says what is
    wrong with it, if anything)."""
    try:
        with _open(path) as f:
            rank = _rank_before_events(f)
    except (OSError, ValueError, EOFError, ijson.JSONError, _ZLIB_NG_ERROR):
        return None
    return None if rank is None else _checked_rank(rank, path)


def _open(path: Path) -> IO[bytes]:
    with path.open("rb") as f:
        magic = f.read(2)
    if magic == GZIP_MAGIC:
        from zlib_ng import gzip_ng

        return cast(IO[bytes], gzip_ng.open(path, "rb"))  # type: ignore[no-untyped-call]
    return path.open("rb")


def _rank_before_events(f: IO[bytes]) -> int | None:
    for prefix, event, value in ijson.parse(f, buf_size=1 << 12):
        if prefix == "" and event == "map_key" and value == "traceEvents":
            return None
        if prefix == "distributedInfo.rank":
            return _as_rank(value)
    return None


def _as_rank(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None
