"""A trace file's content hash, made of the hashes of its blocks: xxh3-128 of the file's size
and of the xxh3-128 digest of each 1 MiB block (the last one shorter), in order.

Block by block, so that the processes reading a file can hash the parts they read as they read
them (the blocks are in the CPU's cache then: ~0.03 s for 0.5 GB, where reading the file again
to hash it took ~0.1 s more) and the key is the same however the file was split; a block no
reader saw whole (where a part starts or stops) is read again at the end (``key``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from io import FileIO
from pathlib import Path
from typing import Any

from traceview.errors import TraceviewError

HASH_BLOCK = 1 << 20


class BlockHashes:
    """The digests of the blocks of a file of ``size`` bytes seen so far (``feed``)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.digests: dict[int, bytes] = {}
        self._at = -1  # the offset just after the last bytes fed
        self._block = -1  # the block being hashed (its bytes up to ``_at``), if any
        self._state: Any = None

    def feed(self, offset: int, data: memoryview | bytes) -> None:
        """The file's bytes ``data`` at ``offset``; a block is hashed if its bytes come in
        order, from its start (a gap or a jump back drops the block under way)."""
        import xxhash

        end = min(offset + len(data), self.size)  # a file that grew: its size changed
        if offset != self._at:
            self._state = None
        self._at = offset + len(data)
        pos = offset
        while pos < end:
            if self._state is None:
                if pos % HASH_BLOCK:  # a block seen from its middle: read again at the end
                    pos += HASH_BLOCK - pos % HASH_BLOCK
                    continue
                self._state, self._block = xxhash.xxh3_128(), pos // HASH_BLOCK
            stop = min(end, (self._block + 1) * HASH_BLOCK)
            self._state.update(data[pos - offset : stop - offset])
            pos = stop
            if stop == min((self._block + 1) * HASH_BLOCK, self.size):
                self.digests[self._block] = self._state.digest()
                self._state = None

    def missing(self) -> list[int]:
        """The blocks not hashed yet."""
        return [i for i in range(-(-self.size // HASH_BLOCK)) if i not in self.digests]

    def key(self, path: Path) -> str:
        """The file's hash: the missing blocks read from ``path`` first; a file shorter now
        than ``size`` is "the file changed while it was read"."""
        missing = self.missing()
        if missing:
            buffer = bytearray(HASH_BLOCK)
            with path.open("rb", buffering=0) as f, memoryview(buffer) as view:
                for block in missing:
                    self._read_block(f.fileno(), block, view, path)
        import xxhash

        digest = xxhash.xxh3_128(self.size.to_bytes(8, "little"))
        for block in range(-(-self.size // HASH_BLOCK)):
            digest.update(self.digests[block])
        return digest.hexdigest()

    def _read_block(self, fd: int, block: int, view: memoryview, path: Path) -> None:
        start = block * HASH_BLOCK
        want = min(HASH_BLOCK, self.size - start)
        done = 0
        while done < want:
            n = os.preadv(fd, [view[done:want]], start + done)
            if not n:
                raise TraceviewError(
                    f"{path}: the file changed while it was read (it got shorter: "
                    f"{self.size} bytes when reading began, {start + done} read)"
                )
            done += n
        self._at = -1
        self.feed(start, view[:want])


def read_in_order(f: FileIO, path: Path, feed: Callable[[int, memoryview], object]) -> None:
    """Feeds the open file ``f`` (``path``) to ``feed(offset, bytes)`` in order, through one
    reusable buffer, never a memory map (a mapped file another program shortens kills the
    process). A file shorter by the end than when reading began is "the file changed while
    it was read"."""
    size, done = os.fstat(f.fileno()).st_size, 0
    buffer = bytearray(HASH_BLOCK)
    with memoryview(buffer) as view:
        while n := f.readinto(view):
            feed(done, view[:n])
            done += n
    if done < size:
        raise TraceviewError(
            f"{path}: the file changed while it was read (it got shorter: {size} bytes "
            f"when reading began, {done} read)"
        )


def file_hash(path: Path) -> str:
    """The hash of the file at ``path`` (read-only), read in order."""
    with path.open("rb", buffering=0) as f:
        hashes = BlockHashes(os.fstat(f.fileno()).st_size)
        read_in_order(f, path, hashes.feed)
    return hashes.key(path)
