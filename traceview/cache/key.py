"""The cache key: a streamed xxh3-128 hash of the trace bytes, remembered per file identity."""

from __future__ import annotations

from pathlib import Path

_BLOCK = 8 << 20
INDEX_DIR = "index"


def content_hash(path: Path) -> str:
    """The xxh3-128 hex digest of the file's bytes, read in 8 MB blocks (read-only)."""
    import xxhash

    digest = xxhash.xxh3_128()
    with path.open("rb") as f:
        while block := f.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def identity(path: Path) -> tuple[str, int, int, int]:
    """(absolute path, size, mtime_ns, inode): a change in any of them means re-hash."""
    st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)


def trace_key(path: Path, cache_dir: Path, refresh: bool = False) -> str:
    """The content hash of ``path``, from the identity index unless the file changed."""
    import diskcache

    ident = identity(path)
    with diskcache.Cache(str(cache_dir / INDEX_DIR)) as index:
        known = None if refresh else index.get(ident)
        if isinstance(known, str):
            return known
        digest = content_hash(path)
        if identity(path) == ident:  # not rewritten while we hashed it
            index.set(ident, digest)
        return digest


def forget_index(cache_dir: Path) -> None:
    """Drop every remembered file identity (``cache clear``)."""
    import diskcache

    with diskcache.Cache(str(cache_dir / INDEX_DIR)) as index:
        index.clear()


def index_size(cache_dir: Path) -> int:
    """Bytes used by the identity index."""
    root = cache_dir / INDEX_DIR
    if not root.is_dir():
        return 0
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
