"""The one place for memory policy: glibc's malloc set for a command that makes and drops many
large numpy arrays, and freed heap pages given back between a command's stages.

By default glibc maps each allocation above its (adaptive) mmap threshold afresh and unmaps it
when freed, so every large temporary of an analysis faults its pages in again (zero-filled by
the kernel). ``traceview report`` on the 1 GB benchmark trace took 105k-127k minor page faults
and 0.30-0.50 s of system time in its analyses; with freed memory kept for the next arrays,
28k-30k faults and 0.10-0.15 s (the same user time and page; measured with getrusage, three
runs each). ``report`` no longer asks for it: at 7.83 GB the holes its documents' temporaries
left in the heap set its process's peak (260 MB warm); under the read's thresholds 245-252 MB,
in 6-7% more time there (none at 0.52 GB). Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator
from functools import cache

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8  # <malloc.h>
MMAP_THRESHOLD = 32 << 20  # the largest glibc takes on 64-bit systems: larger arrays are mapped
TRIM_THRESHOLD = 1 << 30  # freed memory at the top of the heap is given back above this


def reuse_freed_memory() -> None:
    """Have glibc serve allocations up to 32 MB from its heap and keep what is freed there for
    the next ones (no effect but on glibc)."""
    _thresholds(MMAP_THRESHOLD, TRIM_THRESHOLD)


# The read's: above its blocks (3 MB bytes objects and the few bytes kept from the block
# before) and its chunks' columns; two blocks' worth kept free at the heap's top. Larger
# ones held more at 8 GB (audit 257-266 MB at 8-16 MB against 253 here).
READ_MMAP_THRESHOLD = 4 << 20
READ_TRIM_THRESHOLD = 8 << 20


def reuse_block_memory() -> None:
    """Fixed thresholds for the read, from the start (no effect but on glibc): each block and
    its chunk's columns from the heap, in the pages the last one freed. Left adaptive, they
    depend on the process's first allocations: in some processes each block was mapped or
    grown afresh (9,380 brk calls and 3.2 s of system time in ``gaps`` on 15 copies of the
    H200 big trace, 6.3 s in all; 1.4 s and 5.2 s fixed; benchmarks/RESULTS-rust-43c.md).
    One arena for every thread: the inflate thread's blocks (2 MB, under the threshold now)
    in an arena of their own held 7-9 MB more (kernels on the H200 big trace's .json.gz and
    on 4 copies of it compressed), in the same time."""
    libc = _glibc()
    if libc is None:
        return
    _thresholds(READ_MMAP_THRESHOLD, READ_TRIM_THRESHOLD)
    libc.mallopt(M_ARENA_MAX, 1)


@contextlib.contextmanager
def entry_columns_mapped() -> Iterator[None]:
    """The read's thresholds while a cache entry is read, then those set before (none set
    here before: nothing changed): its columns, above them, each mapped on its own, not made
    in the heap among their decoding's buffers, whose holes the heap keeps (``report``, warm
    at 7.83 GB after reuse_freed_memory: 86 MB free in the heap after the read;
    benchmarks/RESULTS-rust-43c.md)."""
    before = _set
    if before is None:
        yield
        return
    _thresholds(READ_MMAP_THRESHOLD, READ_TRIM_THRESHOLD)
    try:
        yield
    finally:
        _thresholds(*before)


_set: tuple[int, int] | None = None  # the (mmap, trim) thresholds last set here


def _thresholds(mmap: int, trim: int) -> None:
    global _set
    libc = _glibc()
    if libc is None:
        return
    libc.mallopt(M_MMAP_THRESHOLD, mmap)
    libc.mallopt(M_TRIM_THRESHOLD, trim)
    _set = (mmap, trim)


def release_free_memory() -> None:
    """Return the allocator's free pages to the OS (glibc only; cheap)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


@cache
def _glibc() -> ctypes.CDLL | None:
    """glibc, loaded by its soname (not ctypes.util.find_library, which runs ldconfig in a
    subprocess: 20-45 ms after a big read); None elsewhere."""
    try:
        libc_version = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        return None
    if not libc_version or not libc_version.startswith("glibc"):
        return None
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None
