"""What is in the cache, and keeping it under its size limit (least recently used goes first)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from traceview.errors import UsageError

DEFAULT_MAX_SIZE = 20 * 10**9
PATHS = "paths.json"
USED = "meta.json"  # its mtime is the entry's last use
_STALE_TMP_SECONDS = 6 * 3600
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_KEY = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class Entry:
    """One cached trace."""

    key: str
    directory: Path
    size: int
    used_at: float
    paths: list[str]


def parse_size(text: str) -> int:
    """Bytes from ``20GB``, ``500MB``, ``1.5gb`` or a bare byte count."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kmgt]?b?)\s*", text.lower())
    if match is None:
        raise UsageError(f"size {text!r}: expected a number with KB, MB, GB or TB")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def max_size() -> int:
    """The size limit: ``$TRACEVIEW_CACHE_MAX_SIZE``, else 20 GB."""
    text = os.environ.get("TRACEVIEW_CACHE_MAX_SIZE")
    return parse_size(text) if text else DEFAULT_MAX_SIZE


def entries(root: Path) -> list[Entry]:
    """Every complete entry, least recently used first."""
    folder = root / "entries"
    found = [_entry(d) for d in folder.iterdir() if _KEY.match(d.name)] if folder.is_dir() else []
    return sorted((e for e in found if e is not None), key=lambda e: e.used_at)


def _entry(directory: Path) -> Entry | None:
    try:
        files = [p for p in directory.iterdir() if p.is_file()]
        size = sum(p.stat().st_size for p in files)
        stamp = directory / USED
        used = (stamp if stamp.exists() else directory).stat().st_mtime
    except OSError:
        return None  # removed meanwhile, or incomplete
    return Entry(directory.name, directory, size, used, read_paths(directory))


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


def evict(root: Path, limit: int, keep: str | None = None) -> list[Entry]:
    """Remove least recently used entries until the total is within ``limit``; never ``keep``."""
    from traceview.cache import remove_tree

    current = entries(root)
    total = sum(e.size for e in current)
    removed = []
    for entry in current:
        if total <= limit:
            break
        if entry.key == keep:
            continue
        remove_tree(entry.directory)
        total -= entry.size
        removed.append(entry)
    return removed


def remove_stale_tmp(root: Path) -> None:
    """Temp dirs left by killed processes (older than 6 hours)."""
    from traceview.cache import remove_tree

    folder = root / "tmp"
    if not folder.is_dir():
        return
    cutoff = time.time() - _STALE_TMP_SECONDS
    for d in folder.iterdir():
        try:
            if d.stat().st_mtime < cutoff:
                remove_tree(d)
        except OSError:
            pass


def clear(root: Path) -> int:
    """Remove every entry, temp dir and the identity index; the number of entries removed."""
    from traceview.cache import remove_tree
    from traceview.cache.key import forget_index

    count = len(entries(root))
    for name in ("entries", "tmp"):
        remove_tree(root / name)
    if (root / "index").is_dir():
        forget_index(root)
    return count


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
    return [
        f"directory  {root}",
        f"entries    {len(found)}",
        f"size       {human_size(total)} (+ {human_size(index_size(root))} index)",
        f"limit      {human_size(max_size())} (TRACEVIEW_CACHE_MAX_SIZE; LRU eviction)",
    ]


def list_lines(root: Path) -> list[str]:
    """``traceview cache list``: one line per entry, most recently used first."""
    now = time.time()
    lines = []
    for e in reversed(entries(root)):
        paths = ", ".join(e.paths) or "?"
        age = human_age(now - e.used_at)
        lines.append(f"{e.key}  {human_size(e.size):>9}  used {age:>4} ago  {paths}")
    return lines or ["(the cache is empty)"]
