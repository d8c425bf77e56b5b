"""traceview.app.memory's settings for the read: a block-sized allocation comes from glibc's
heap (the pages the last one freed) once they are set, where glibc alone maps it afresh, and a
thread's from the main heap, not an arena of its own; the command line sets them before a read
starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

GLIBC = (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")

# glibc's malloc, free and program break, before each probe below (_probe)
_LIBC = """
import ctypes, sys
libc = ctypes.CDLL("libc.so.6")
libc.sbrk.restype = ctypes.c_void_p
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
"""
# Whether a freed 3 MB block (a read's) serves the next one from the heap (below its top).
_PROBE = """
if sys.argv[1] == "set":
    from traceview.app.memory import reuse_block_memory
    reuse_block_memory()
first = libc.malloc(3 << 20)
libc.free(first)
again = libc.malloc(3 << 20)
in_heap = again == first and again < libc.sbrk(0)
# a thread's allocation: from the main heap, not an arena of its own, where one arena is set
import threading
got = []
thread = threading.Thread(target=lambda: got.append(libc.malloc(1 << 16)))
thread.start()
thread.join()
print(in_heap, libc.sbrk(0) - (64 << 20) < got[0] < libc.sbrk(0))
"""


@pytest.mark.skipif(not GLIBC or not sys.platform.startswith("linux"), reason="glibc only")
@pytest.mark.parametrize(("arg", "heap"), [("set", "True True"), ("unset", "False False")])
def test_a_block_and_a_thread_are_served_from_the_heap_once_set(arg: str, heap: str) -> None:
    assert _probe(_PROBE, arg) == heap


def _probe(code: str, arg: str) -> str:
    """What ``code`` (after _LIBC) prints in a fresh process given ``arg``, glibc's malloc
    left to its own defaults by the environment."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_ARENA_MAX",
                 "GLIBC_TUNABLES"):  # fmt: skip
        env.pop(name, None)
    argv = [sys.executable, "-c", _LIBC + code, arg]
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout.strip()


_ORDER = """
import sys
import traceview.cli as cli
from traceview.app import memory
calls = []
memory.reuse_block_memory = lambda: calls.append("thresholds")
cli._start_reading_early = lambda argv: calls.append("read")
cli._register = lambda names: calls.append("command") or (lambda **k: None)
sys.argv = ["traceview", "kernels", "x.json"]
cli.main()
print(",".join(calls))
"""


def test_the_command_line_sets_them_before_the_read_starts() -> None:
    """In a process of its own: main() holds collections and freezes the heap at its end."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, "-c", _ORDER], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "thresholds,read,command"


# Whether a 5 MB array comes from the heap after reuse_freed_memory: while a cache entry is
# read (entry_columns_mapped), and after it.
_ENTRY = """
from traceview.app import memory

def in_heap():
    at = libc.malloc(5 << 20)
    inside = at < libc.sbrk(0)
    libc.free(at)
    return inside

if sys.argv[1] == "unset":  # nothing set here before: nothing set by it either
    with memory.entry_columns_mapped():
        pass
    print(memory._set)
else:
    memory.reuse_freed_memory()  # 5 MB from the heap now (it grows for it)
    with memory.entry_columns_mapped():
        during = in_heap()
    print(during, in_heap())
"""


@pytest.mark.skipif(not GLIBC or not sys.platform.startswith("linux"), reason="glibc only")
@pytest.mark.parametrize(("arg", "out"), [("set", "False True"), ("unset", "None")])
def test_an_entrys_columns_are_mapped_apart_from_the_heap(arg: str, out: str) -> None:
    assert _probe(_ENTRY, arg) == out
