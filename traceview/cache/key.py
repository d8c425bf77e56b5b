"""The cache key: a hash of the trace's bytes (read.blockhash: xxh3-128 over its blocks'
xxh3-128 digests), remembered per file identity."""

from __future__ import annotations

import contextlib
import sqlite3
import stat
from pathlib import Path
from typing import Any, Literal, overload

from traceview.read.blockhash import file_hash, read_in_order

INDEX_DIR = "index"


def trace_hash(path: Path) -> str:
    """The trace's key: its content hash (read.blockhash), the file read now."""
    return file_hash(path)


def content_hash(path: Path) -> str:
    """The xxh3-128 hex digest of the file's bytes (read-only): an entry's own files, read
    in order (read.blockhash.read_in_order)."""
    import xxhash

    digest = xxhash.xxh3_128()
    with path.open("rb", buffering=0) as f:
        read_in_order(f, path, lambda _, data: digest.update(data))
    return digest.hexdigest()


def identity(path: Path) -> tuple[str, int, int, int]:
    """(absolute path, size, mtime_ns, inode): a change in any of them means re-hash."""
    st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)


@overload
def trace_key(
    path: Path,
    cache_dir: Path,
    refresh: bool = ...,
    verify: bool = ...,
    defer: Literal[False] = ...,
) -> str: ...
@overload
def trace_key(
    path: Path, cache_dir: Path, refresh: bool, verify: bool, defer: Literal[True]
) -> str | None: ...
def trace_key(
    path: Path, cache_dir: Path, refresh: bool = False, verify: bool = False, defer: bool = False
) -> str | None:
    """The content hash of ``path``, from the identity index unless the file changed (or
    ``verify``: always hashed). Without a usable index (a read-only cache), just the hash.

    ``defer``: None, not the hash, when no entry can be the file's (``refresh``, or no file
    of its size was ever hashed for this cache): the read that follows hashes the blocks it
    reads (read.blockhash), and ``remember_key`` records the key it makes of them."""
    ident = identity(path)
    if defer and not verify and not (cache_dir / INDEX_DIR / _INDEX_FILES[0]).exists():
        return None  # a new cache: no file hashed yet (the index is made by remember_key)
    index = _open_index(cache_dir)
    if index is None:
        return trace_hash(path)
    with index:
        known = None if refresh or verify else _get(index, ident)
        if isinstance(known, str):
            return known
        if defer and not verify and (refresh or _get(index, _size_key(ident[1])) is None):
            return None
        digest = trace_hash(path)
        _remember(index, path, ident, digest)
        return digest


def remember_key(path: Path, cache_dir: Path, ident: tuple[str, int, int, int], key: str) -> None:
    """Record ``key``, made by a read of the file of identity ``ident``, in the index."""
    index = _open_index(cache_dir)
    if index is not None:
        with index:
            _remember(index, path, ident, key)


def _remember(index: Any, path: Path, ident: tuple[str, int, int, int], digest: str) -> None:
    """The file's hash, and that a file of its size was hashed (trace_key's ``defer``)."""
    if identity(path) == ident:  # not rewritten while we hashed it
        with contextlib.suppress(sqlite3.Error, OSError):
            index.set(ident, digest)
            index.set(_size_key(ident[1]), True)


def _size_key(size: int) -> tuple[str, int]:
    return ("size", size)


def _get(index: Any, ident: tuple[str, int, int, int] | tuple[str, int]) -> object:
    try:
        return index.get(ident)
    except (sqlite3.Error, OSError):
        return None


def _open_index(cache_dir: Path) -> Any:
    """The identity index; a damaged one is deleted and made anew; None when it cannot be
    opened for writing (a read-only cache)."""
    import diskcache

    folder = cache_dir / INDEX_DIR
    if not _own_files(folder):
        return None  # a link or another program's file: never written through
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


_INDEX_FILES = ("cache.db", "cache.db-wal", "cache.db-shm", "cache.db-journal")


def _own_files(folder: Path) -> bool:
    """Whether the index folder and its files are what the cache made: a real directory
    (or none yet) of regular files with one link each, never a symlink (a link to a user's
    SQLite file would get diskcache's tables written into it)."""
    try:
        st = folder.lstat()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        return False
    for name in _INDEX_FILES:
        try:
            st = (folder / name).lstat()
        except FileNotFoundError:
            continue
        except OSError:
            return False
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return False
    return True


def _remove_index_files(folder: Path) -> str | None:
    """Delete the index's own files (``cache.db`` and its journals), nothing else."""
    for name in _INDEX_FILES:
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
    if not _own_files(folder):
        return "not the index files traceview made (a link?): left as they are"
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
