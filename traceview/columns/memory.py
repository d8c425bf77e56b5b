"""Give freed heap memory back to the operating system.

Per-batch numpy arrays are small, so the C allocator serves them from its heap; once they
are joined into big columns (which get their own mappings) and freed, the heap keeps the
pages, and the process's resident memory counts both. glibc's ``malloc_trim`` returns
them. Elsewhere (musl, macOS) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable
from functools import cache


def release_free_memory() -> None:
    """Return the allocator's free pages to the OS (glibc only; cheap)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):
        return None
