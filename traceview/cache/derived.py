"""Numbers derived from a trace, kept in its cache entry beside the tables.

A derived file (``derived-<key>.npz``: numpy arrays only, no pickles) is worked out from the
entry's events by code outside the cache; its key names that code and its options (the
caller's business). It is written after the entry, atomically, and goes with the entry when
the entry is refreshed, rebuilt or evicted. A file that cannot be read is a miss, never an
error: the caller works the numbers out again and stores them anew.
"""

from __future__ import annotations

import contextlib
import os
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from traceview.cache import CacheSettings, entry_dir, warn
from traceview.options import ReadOptions

PREFIX = "derived-"


@dataclass(frozen=True)
class Place:
    """Where a trace's entry is (or will be) and the trace's identity when it was hashed."""

    trace: Path
    directory: Path
    identity: tuple[str, int, int, int]


def place_for(path: Path, read: ReadOptions) -> Place | None:
    """Where the trace's entry is for a read with ``read``'s cache flags, found before the
    trace is read; None without a cache."""
    if not read.cache:
        return None
    return place_of(path, CacheSettings(True, read.refresh, read.cache_dir, read.verify))


def place_of(path: Path, settings: CacheSettings) -> Place | None:
    """Where the trace's entry goes; None without a cache (or for a pipe, or a cache that
    cannot be used: the usual read says why)."""
    import stat

    from traceview.cache.key import identity, trace_key
    from traceview.cache.root import claim

    if not settings.enabled:
        return None
    root = settings.root()
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return None
        claim(root)  # a traceview cache (made now if need be), as opening the entry checks
        ident = identity(path)
        key = trace_key(path, root, settings.refresh, settings.verify)
    except Exception:  # unreadable, changed while hashed, a broken index: read as usual
        return None
    return Place(path, entry_dir(root, key), ident)


def entry_meta(place: Place) -> dict[str, Any] | None:
    """The entry's metadata, checked as when the entry is opened; None without a valid entry
    (the usual read then deals with a damaged one)."""
    from traceview.cache.store import read_meta

    try:
        return read_meta(place.directory) if place.directory.is_dir() else None
    except Exception:
        return None


def used(place: Place) -> None:
    """Mark the entry as used by the trace now, as opening it for its events does."""
    from traceview.cache.manage import add_path, touch

    touch(place.directory)
    add_path(place.directory, place.trace)


def file_name(key: str) -> str:
    """The file of the derived numbers with this key (hex digits)."""
    return f"{PREFIX}{key}.npz"


def load(place: Place, key: str) -> dict[str, np.ndarray] | None:
    """The arrays stored under ``key``; None when absent or unreadable (zip CRCs checked)."""
    try:
        with np.load(place.directory / file_name(key), allow_pickle=False) as stored:
            return {name: stored[name] for name in stored.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return None


def save(place: Place, key: str, arrays: dict[str, np.ndarray]) -> None:
    """Store the arrays under ``key``: a temp file in the entry, renamed into place (a
    reader sees all of it or nothing). Nothing is stored when the trace changed since it
    was hashed or the entry is not there (not written, evicted or replaced meanwhile)."""
    from traceview.cache.key import identity

    target = place.directory / file_name(key)
    tmp = place.directory / f".{target.name}.{os.getpid()}.{uuid.uuid4().hex}"
    try:
        if identity(place.trace) != place.identity:
            return  # the numbers may be of other bytes than the entry's
        with tmp.open("wb") as f:
            np.savez(f, allow_pickle=False, **arrays)
        os.replace(tmp, target)
    except FileNotFoundError:
        return  # no entry (anymore): its derived numbers would go with it anyway
    except Exception as e:  # full disk, unwritable entry: worked out again next time
        warn(f"could not store derived numbers in the cache ({type(e).__name__}: {e})")
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
