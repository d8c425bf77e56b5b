"""Which directory is a traceview cache: the cache deletes only what it created.

A cache root holds a ``CACHEDIR.TAG`` (the Cache Directory Tagging marker, which backup tools
also honour) naming traceview, written when the cache is created. A directory without it is
used only if it is empty or, strictly, the layout of an older traceview cache (nothing but
``entries/`` of entry keys, ``tmp/`` of traceview temp dirs, ``index/`` and ``last_trace``),
which then gets the marker. Anything else — and ``/`` or the home directory, whatever they
hold — is refused.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from pathlib import Path

from traceview.errors import UsageError


def state_dir() -> Path:
    """``$TRACEVIEW_CACHE_DIR``, else ``$XDG_CACHE_HOME/traceview``, else ``~/.cache/traceview``."""
    explicit = os.environ.get("TRACEVIEW_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "traceview"


MARKER = "CACHEDIR.TAG"
SIGNATURE = "Signature: 8a477f597d28d172789f06886806bc55"
_TAG = (
    f"{SIGNATURE}\n# This file is a cache directory tag created by traceview.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)
KEY = re.compile(r"^[0-9a-f]{32}$")
# <key>.<pid>.<hex>: an entry being written; <key>.old.<pid>.<hex> (or, before the pid was
# recorded, <key>.old.<hex>): an entry being removed.
TMP_NAME = re.compile(r"^[0-9a-f]{32}\.(?:old\.(?:(\d+)\.)?|(\d+)\.)[0-9a-f]{32}$")
_INDEX_FILE = re.compile(r"^cache\.db(?:-wal|-shm|-journal)?$")
# last_trace (and its temp files); a marker being written by a process making the cache now.
_FILES = re.compile(r"^(?:last_trace|\.last_trace\.\d+|\.CACHEDIR\.TAG\.\d+\.[0-9a-f]{32})$")


def tmp_owner(name: str) -> int | None:
    """The pid that made a traceview temp dir (None: not recorded or not a temp dir name)."""
    match = TMP_NAME.match(name)
    if match is None:
        return None
    pid = match.group(1) or match.group(2)
    return int(pid) if pid else None


def is_tmp_name(name: str) -> bool:
    return TMP_NAME.match(name) is not None


def new_tmp_name(key: str, old: bool = False) -> str:
    return f"{key}.{'old.' if old else ''}{os.getpid()}.{uuid.uuid4().hex}"


def claim(root: Path) -> None:
    """Make sure ``root`` is a traceview cache before writing into it: create it with its
    marker, or mark an empty directory or an older traceview cache; else a UsageError."""
    _refuse_dangerous(root)
    if has_marker(root):
        return
    root.mkdir(parents=True, exist_ok=True)
    if not _old_layout(root):
        if has_marker(root):
            return  # another process made the cache meanwhile
        raise UsageError(_not_a_cache(root))
    _write_marker(root)


def check(root: Path) -> None:
    """Before ``cache info/list/clear/prune``: ``root`` is a traceview cache (or absent).

    An older cache without a marker is recognised by its layout and marked if it can be.
    """
    _refuse_dangerous(root)
    if not root.exists() or has_marker(root):
        return
    if not root.is_dir() or not _old_layout(root):
        raise UsageError(_not_a_cache(root))
    with contextlib.suppress(OSError):  # a read-only old cache: recognised all the same
        _write_marker(root)


def has_marker(root: Path) -> bool:
    try:
        with (root / MARKER).open("rb") as f:
            head = f.read(512)
    except OSError:
        return False
    return head.startswith(SIGNATURE.encode()) and b"traceview" in head


def _refuse_dangerous(root: Path) -> None:
    resolved = Path(os.path.realpath(root))
    try:
        home = Path(os.path.realpath(Path.home()))
    except (RuntimeError, KeyError):  # no $HOME and no passwd entry
        home = Path(resolved.anchor)
    if resolved == Path(resolved.anchor) or resolved == home or resolved in home.parents:
        raise UsageError(
            f"{root}: refusing to use {resolved} as the cache directory "
            "(it is /, your home directory or above it)"
        )


def _not_a_cache(root: Path) -> str:
    return (
        f"{root}: not a traceview cache (no {MARKER}, and it holds other files); "
        "name an empty or new directory with --cache-dir / TRACEVIEW_CACHE_DIR"
    )


def _old_layout(root: Path) -> bool:
    """Empty, or nothing but what an older traceview cache holds (checked name by name)."""
    try:
        for child in root.iterdir():
            name = child.name
            if name == "entries":
                names_ok = all(KEY.match(c.name) for c in child.iterdir())
            elif name == "tmp":
                names_ok = all(is_tmp_name(c.name) for c in child.iterdir())
            elif name == "index":
                names_ok = all(_INDEX_FILE.match(c.name) for c in child.iterdir())
            else:
                names_ok = _FILES.match(name) is not None and child.is_file()
            if not names_ok:
                return False
    except OSError:
        return False
    return True


def _write_marker(root: Path) -> None:
    tmp = root / f".{MARKER}.{os.getpid()}.{uuid.uuid4().hex}"
    tmp.write_text(_TAG, encoding="utf-8")
    os.replace(tmp, root / MARKER)
