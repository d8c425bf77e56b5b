"""What is in the cache, and keeping it under its size limit (least recently used goes first)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from traceview.cache.root import KEY, is_tmp_name, new_tmp_name, tmp_owner
from traceview.errors import UsageError

DEFAULT_MAX_SIZE = 20 * 10**9
PATHS = "paths.json"
USED = "meta.json"  # its mtime is the entry's last use
_STALE_TMP_SECONDS = 6 * 3600
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}


@dataclass(frozen=True)
class Entry:
    """One cached trace."""

    key: str
    directory: Path
    size: int
    used_at: float
    paths: list[str]


@dataclass(frozen=True)
class Removal:
    """What ``evict``, ``clear`` or the temp dir sweep removed, and what they could not."""

    entries: list[Entry]
    tmp_dirs: int = 0
    failed: list[tuple[Path, str]] = field(default_factory=list)

    def summary(self, root: Path) -> str:
        """``Removed 2 entries (1.2 MB) and 1 temp dir from ROOT``, and what failed."""
        freed = human_size(sum(e.size for e in self.entries))
        n = len(self.entries)
        text = f"Removed {n} {'entry' if n == 1 else 'entries'} ({freed})"
        if self.tmp_dirs:
            text += f" and {self.tmp_dirs} temp dir{'s' * (self.tmp_dirs > 1)}"
        text += f" from {root}"
        if self.failed:
            path, reason = self.failed[0]
            text += f"; could not remove {len(self.failed)} ({path}: {reason})"
        return text


def parse_size(text: str, what: str = "size") -> int:
    """Bytes from ``20GB``, ``500MB``, ``1.5gb``, ``4096B`` or ``0``.

    A unit is required (but for 0): a bare ``5`` meant 5 bytes, and pruning to 5 bytes
    empties the cache.
    """
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kmgt]?b?)\s*", text.lower())
    if match is None or (not match.group(2) and float(match.group(1)) != 0):
        raise UsageError(f"{what} {text!r}: expected a number with a unit: B, KB, MB, GB or TB")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def max_size() -> int:
    """The size limit: ``$TRACEVIEW_CACHE_MAX_SIZE``, else 20 GB."""
    text = os.environ.get("TRACEVIEW_CACHE_MAX_SIZE")
    return parse_size(text, "TRACEVIEW_CACHE_MAX_SIZE") if text else DEFAULT_MAX_SIZE


def entries(root: Path, with_paths: bool = True) -> list[Entry]:
    """Every complete entry, least recently used first (``with_paths``: with the trace
    paths each was read from, a file read per entry that eviction does without)."""
    folder = root / "entries"
    found = (
        [_entry(d, with_paths) for d in folder.iterdir() if KEY.match(d.name)]
        if folder.is_dir()
        else []
    )
    return sorted((e for e in found if e is not None), key=lambda e: e.used_at)


def _entry(directory: Path, with_paths: bool = True) -> Entry | None:
    try:
        with os.scandir(directory) as found:
            files = [f for f in found if f.is_file(follow_symlinks=False)]
            size = sum(f.stat(follow_symlinks=False).st_size for f in files)
        stamp = [f for f in files if f.name == USED]
        used = (stamp[0].stat() if stamp else directory.stat()).st_mtime
    except OSError:
        return None  # removed meanwhile, or incomplete
    paths = read_paths(directory) if with_paths else []
    return Entry(directory.name, directory, size, used, paths)


def read_paths(directory: Path) -> list[str]:
    """The trace paths this entry was read from."""
    try:
        paths = json.loads((directory / PATHS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [str(p) for p in paths] if isinstance(paths, list) else []


def write_paths(directory: Path, paths: list[str]) -> None:
    """Replace the entry's path list atomically."""
    tmp = directory / f".{PATHS}.{os.getpid()}.{uuid.uuid4().hex}"
    tmp.write_text(json.dumps(paths), encoding="utf-8")
    os.replace(tmp, directory / PATHS)


def add_path(directory: Path, path: Path) -> None:
    """Remember one more path of the same content (a rename or copy); best effort."""
    name = str(path.resolve())
    paths = read_paths(directory)
    if name not in paths:
        with contextlib.suppress(OSError):
            write_paths(directory, [*paths, name])


def touch(directory: Path) -> None:
    """Mark the entry as used now (for least-recently-used eviction); best effort."""
    with contextlib.suppress(OSError):
        os.utime(directory / USED)


def evict(root: Path, limit: int, keep: str | None = None) -> Removal:
    """Remove least recently used entries until the total is within ``limit``; never ``keep``."""
    current = entries(root, with_paths=False)
    total = sum(e.size for e in current)
    removed: list[Entry] = []
    failed: list[tuple[Path, str]] = []
    for entry in current:
        if total <= limit:
            break
        if entry.key == keep:
            continue
        problem = remove_entry(root, entry.directory)
        if problem is None:
            total -= entry.size
            removed.append(entry)
        else:
            failed.append((entry.directory, problem))
    return Removal(removed, failed=failed)


def remove_entry(root: Path, directory: Path) -> str | None:
    """Remove an entry: renamed into ``tmp/`` first (readers see it all or not at
    all), then deleted. None when done, else why it could not be removed."""
    from traceview.cache import TMP, remove_tree

    doomed = root / TMP / new_tmp_name(directory.name, old=True)
    try:
        doomed.parent.mkdir(exist_ok=True)
        os.rename(directory, doomed)
    except FileNotFoundError:
        return None  # removed meanwhile by another process
    except OSError as e:
        return e.strerror or str(e)
    remove_tree(doomed)
    return None


def stale_tmp(root: Path) -> list[Path]:
    """traceview's own temp dirs left by killed processes: the process that made one is gone,
    or (pid reused, or not recorded) it is older than 6 hours. Nothing else in ``tmp/``."""
    folder = root / "tmp"
    if not folder.is_dir():
        return []
    cutoff = time.time() - _STALE_TMP_SECONDS
    found = []
    for d in folder.iterdir():
        if not is_tmp_name(d.name):
            continue
        try:
            old = d.lstat().st_mtime < cutoff
        except OSError:
            continue
        owner = tmp_owner(d.name)
        if old or (owner is not None and not _alive(owner)):
            found.append(d)
    return found


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process (or not a pid): not ours to judge
    return True


def remove_stale_tmp(root: Path) -> Removal:
    """Remove the temp dirs of killed processes."""
    from traceview.cache import remove_tree

    count = 0
    failed: list[tuple[Path, str]] = []
    for d in stale_tmp(root):
        remove_tree(d)
        if os.path.lexists(d):
            failed.append((d, "cannot remove it"))
        else:
            count += 1
    return Removal([], count, failed)


def clear(root: Path) -> Removal:
    """Remove every entry, the temp dirs of killed processes and the identity index."""
    from traceview.cache.key import forget_index

    failed: list[tuple[Path, str]] = []
    removed = []
    for entry in entries(root):
        problem = remove_entry(root, entry.directory)
        if problem is None:
            removed.append(entry)
        else:
            failed.append((entry.directory, problem))
    tmp = remove_stale_tmp(root)
    problem = forget_index(root)
    if problem is not None:
        failed.append((root / "index", problem))
    return Removal(removed, tmp.tmp_dirs, failed + tmp.failed)


def human_size(n: float) -> str:
    """1.2 GB, 340.0 MB, 12 B."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def human_age(seconds: float) -> str:
    """3s, 5m, 2h, 4d."""
    for unit, span in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= span:
            return f"{seconds / span:.0f}{unit}"
    return f"{max(seconds, 0):.0f}s"


def info_lines(root: Path) -> list[str]:
    """``traceview cache info``."""
    from traceview.cache.key import index_size

    found = entries(root)
    total = sum(e.size for e in found)
    leftovers = stale_tmp(root)
    left_size = sum(_tree_size(d) for d in leftovers)
    return [
        f"directory  {root}",
        f"entries    {len(found)}",
        f"size       {human_size(total)} (+ {human_size(index_size(root))} index)",
        f"leftovers  {len(leftovers)} temp dirs of interrupted runs, {human_size(left_size)}"
        " (cache prune and cache clear remove them)",
        f"limit      {human_size(max_size())} (TRACEVIEW_CACHE_MAX_SIZE; LRU eviction)",
    ]


def _tree_size(directory: Path) -> int:
    total = 0
    for path in directory.rglob("*"):
        with contextlib.suppress(OSError):
            total += path.lstat().st_size if path.is_file() else 0
    return total


def list_lines(root: Path) -> list[str]:
    """``traceview cache list``: one line per entry, most recently used first."""
    now = time.time()
    lines = []
    for e in reversed(entries(root)):
        paths = ", ".join(e.paths) or "?"
        age = human_age(now - e.used_at)
        lines.append(f"{e.key}  {human_size(e.size):>9}  used {age:>4} ago  {paths}")
    return lines or ["(the cache is empty)"]
