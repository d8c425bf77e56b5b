"""The ingest fingerprint: a hash of the source of the code that turns trace bytes into the
columns and facts a cache entry holds. An entry is valid only for the code that wrote it, so
a change in how events are read (in a release, or an editable install) is never served stale.

Computed once per process from the installed source files (17 files, 0.15 MB: about 0.5 ms
in a warm run); nothing here imports the modules it hashes.
"""

from __future__ import annotations

import functools
from pathlib import Path

# The package's files and directories (every .py below them) whose code decides what an
# entry holds: reading, the columns, the stored facts (quality checks, time resolution);
# tests/cli/test_cache_fingerprint.py checks that every module they import is here.
INGEST_SOURCES = (
    "read",
    "_core.*",  # the compiled core (rust/) and its stub: a glob, as the extension's name varies
    "columns",
    "cache/root.py",
    "cache/store.py",
    "analyses/core/quality.py",
    "analyses/core/prelaunch.py",
    "aggregate/order.py",
    "aggregate/sorted_runs.py",
    "aggregate/grouped.py",
)


@functools.cache
def ingest_fingerprint() -> str:
    """The fingerprint of this installation's ingest code (cached for the process)."""
    return fingerprint(Path(__file__).resolve().parent.parent)


@functools.cache
def code_fingerprint(sources: tuple[str, ...]) -> str:
    """The fingerprint of other code of this installation (``sources`` named as in
    INGEST_SOURCES): what numbers derived from an entry were worked out with."""
    return fingerprint(Path(__file__).resolve().parent.parent, sources)


def fingerprint(package: Path, sources: tuple[str, ...] = INGEST_SOURCES) -> str:
    """An xxh3-128 digest of each source's path (relative to ``package``) and bytes.

    xxhash, not hashlib: a warm run imports xxhash anyway (the entry's checksum), while
    hashlib's import alone took 12 ms of it (``python -X importtime``, demo trace).
    """
    import xxhash

    digest = xxhash.xxh3_128()
    for path in source_files(package, sources):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def source_files(package: Path, sources: tuple[str, ...] = INGEST_SOURCES) -> list[Path]:
    """The source files (by default the ingest ones) under ``package``, in a fixed order."""
    files: list[Path] = []
    for name in sources:
        path = package / name
        if "*" in name:
            files += sorted(package.glob(name))
        else:
            files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return files
