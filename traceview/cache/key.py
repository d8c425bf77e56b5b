"""The cache key: a streamed xxh3-128 hash of the trace bytes, remembered per file identity."""

from __future__ import annotations

import contextlib
import mmap
import sqlite3
from pathlib import Path
from typing import Any

_BLOCK = 8 << 20
_MAP_STEP = 64 << 20
INDEX_DIR = "index"


def content_hash(path: Path) -> str:
    """The xxh3-128 hex digest of the file's bytes (read-only).

    Hashed straight from a memory map (1 GB trace: 0.08 s against 0.17 s reading 8 MB
    blocks, whose copies cost more than the hash), pages dropped as it goes; files that
    cannot be mapped are read in blocks.
    """
    import xxhash

    digest = xxhash.xxh3_128()
    with path.open("rb") as f:
        try:
            mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # empty or special file
            while block := f.read(_BLOCK):
                digest.update(block)
            return digest.hexdigest()
        with mapping, memoryview(mapping) as view:
            for start in range(0, len(mapping), _MAP_STEP):
                size = min(_MAP_STEP, len(mapping) - start)
                digest.update(view[start : start + size])
                if hasattr(mmap, "MADV_DONTNEED"):
                    mapping.madvise(mmap.MADV_DONTNEED, start, size)
    return digest.hexdigest()


def identity(path: Path) -> tuple[str, int, int, int]:
    """(absolute path, size, mtime_ns, inode): a change in any of them means re-hash."""
    st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)


def trace_key(path: Path, cache_dir: Path, refresh: bool = False, verify: bool = False) -> str:
    """The content hash of ``path``, from the identity index unless the file changed (or
    ``verify``: always hashed). Without a usable index (a read-only cache), just the hash."""
    ident = identity(path)
    index = _open_index(cache_dir)
    if index is None:
        return content_hash(path)
    with index:
        known = None if refresh or verify else _get(index, ident)
        if isinstance(known, str):
            return known
        digest = content_hash(path)
        if identity(path) == ident:  # not rewritten while we hashed it
            with contextlib.suppress(sqlite3.Error, OSError):
                index.set(ident, digest)
        return digest


def _get(index: Any, ident: tuple[str, int, int, int]) -> object:
    try:
        return index.get(ident)
    except (sqlite3.Error, OSError):
        return None


def _open_index(cache_dir: Path) -> Any:
    """The identity index; a damaged one is deleted and made anew; None when it cannot be
    opened for writing (a read-only cache)."""
    import diskcache

    folder = cache_dir / INDEX_DIR
    for attempt in range(2):
        try:
            return diskcache.Cache(str(folder))
        except sqlite3.OperationalError:
            return None  # read-only, or locked for longer than diskcache waits
        except sqlite3.DatabaseError:  # "file is not a database": rebuild it
            if attempt or _remove_index_files(folder) is not None:
                return None
        except OSError:
            return None
    return None


def _remove_index_files(folder: Path) -> str | None:
    """Delete the index's own files (``cache.db`` and its journals), nothing else."""
    for name in ("cache.db", "cache.db-wal", "cache.db-shm", "cache.db-journal"):
        try:
            (folder / name).unlink(missing_ok=True)
        except OSError as e:
            return e.strerror or str(e)
    return None


def forget_index(cache_dir: Path) -> str | None:
    """Drop every remembered file identity (``cache clear``); None when done, else why not."""
    folder = cache_dir / INDEX_DIR
    if not folder.is_dir():
        return None
    index = _open_index(cache_dir)
    if index is None:
        return "cannot open the index for writing"
    try:
        with index:
            index.clear()
    except (sqlite3.Error, OSError) as e:
        return str(e)
    return None


def index_size(cache_dir: Path) -> int:
    """Bytes used by the identity index."""
    root = cache_dir / INDEX_DIR
    if not root.is_dir():
        return 0
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
