"""Where a traceview command's peak RSS is reached: VmRSS and VmHWM (/proc/self/status, MB)
printed on stderr on entering and leaving the functions named, in the CLI's own processes
(the two-process read's worker prints its own pid).

    MEMWRAP=traceview.app.reading._ingest,traceview.analyses.core.oplinks.link_ops \\
        python benchmarks/mem_calls.py steps TRACE --no-cache -q -f json > /dev/null

A name is ``module.function`` or ``module.Class.method``; the module's attribute is replaced,
and so is every traceview module's own reference to it (``from x import f``). The peak between
two lines is the later line's ``hwm`` where it rose.

``MEMTRACE=1``: tracemalloc from the start (numpy's buffers included): each line adds what is
live (``live``) and the traced peak since the previous line (``tpeak``), so RSS above ``live``
is heap kept, not held; ``MEMSNAP=N`` with it: the N largest live allocations by line at
each line (``MEMDEPTH=D``: by their tracebacks of D frames, the traceview ones shown).
``MEMHEAP=1``: glibc's mallinfo2 (in use, free inside the heap, mapped apart).
``MEMLOG=FILE``: the lines appended to FILE instead (an Aside's child writes nowhere else).
``MEMSMAPS=N``: the N mappings holding the most anonymous memory (/proc/self/smaps, MB), each
with its start address and file (glibc's heap ``[heap]``; other arenas are 64 MB-aligned).
``MEMTRIM=1``: glibc's ``malloc_trim(0)`` before each line (a measurement of what the heap
keeps, not what the CLI does).
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import importlib
import os
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

_T0 = time.perf_counter()


def status() -> dict[str, int]:
    """VmHWM and VmRSS of this process, MB."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem")):
                key, value = line.split(":")
                out[key] = int(value.split()[0]) // 1024
    return out


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
            "fordblks", "keepcost",
        )
    ]  # fmt: skip


def _heap() -> str:
    """glibc's heap (``MEMHEAP=1``): in use, free inside it, mapped apart (MB)."""
    if not os.environ.get("MEMHEAP"):
        return ""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _Mallinfo2
    m = libc.mallinfo2()
    return f" heap used {m.uordblks >> 20:4} free {m.fordblks >> 20:4} mapped {m.hblkhd >> 20:4}"


def _smaps() -> str:
    """The mappings holding the most anonymous memory (``MEMSMAPS=N``)."""
    top = int(os.environ.get("MEMSMAPS", "0"))
    if not top:
        return ""
    regions: list[list[Any]] = []
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and not head[0].endswith(":"):
                regions.append([head[0].partition("-")[0], head[5] if len(head) > 5 else "", 0])
            elif head[0] == "Anonymous:":
                regions[-1][2] += int(head[1])
    regions.sort(key=lambda r: -r[2])
    return "".join(f"\n   {kb >> 10:4} MB anon at {at} {name}" for at, name, kb in regions[:top])


def _trim() -> None:
    if os.environ.get("MEMTRIM"):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _where(traceback: tracemalloc.Traceback) -> str:
    """The traceview lines of an allocation's traceback, innermost first."""
    own = [f for f in traceback if "/traceview/" in f.filename] or list(traceback)[:1]
    return " < ".join(f"{f.filename.rpartition('/traceview/')[2]}:{f.lineno}" for f in own)


def _say(mark: str, name: str) -> None:
    _trim()
    s = status()
    traced = ""
    if tracemalloc.is_tracing():
        live, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        traced = f" live {live >> 20:5} tpeak {peak >> 20:5}"
        top = int(os.environ.get("MEMSNAP", "0"))
        if top:
            by = "traceback" if os.environ.get("MEMDEPTH") else "lineno"
            stats = tracemalloc.take_snapshot().statistics(by)[:top]
            traced += "".join(f"\n   {st.size >> 20:4} MB {_where(st.traceback)}" for st in stats)
    line = (f"[{time.perf_counter() - _T0:7.2f} pid{os.getpid()}] {mark} {name:<55} "
            f"rss {s['VmRSS']:5} hwm {s['VmHWM']:5} anon {s['RssAnon']:5} file "
            f"{s['RssFile']:4} shm {s['RssShmem']:4}{traced}{_heap()}{_smaps()}")  # fmt: skip
    _emit(line)


def _emit(line: str) -> None:
    """A line on stderr, or appended to ``MEMLOG`` (a forked child's stderr goes nowhere)."""
    log = os.environ.get("MEMLOG")
    if not log:
        print(line, file=sys.stderr)
        return
    with open(log, "a") as f:
        f.write(line + "\n")


def wrap(dotted: str) -> None:
    module, _, attr = dotted.rpartition(".")
    try:
        owner: Any = importlib.import_module(module)
    except ImportError:
        parent, _, cls = module.rpartition(".")
        owner = getattr(importlib.import_module(parent), cls)
    fn: Callable[..., Any] = getattr(owner, attr)

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        _say(">", dotted)
        try:
            return fn(*args, **kwargs)
        finally:
            _say("<", dotted)

    setattr(owner, attr, wrapped)
    for name, loaded in list(sys.modules.items()):
        if name.startswith("traceview") and getattr(loaded, attr, None) is fn:
            setattr(loaded, attr, wrapped)


def main() -> None:
    if os.environ.get("MEMTRACE"):
        tracemalloc.start(int(os.environ.get("MEMDEPTH", "1")))
    for dotted in filter(None, os.environ.get("MEMWRAP", "").split(",")):
        wrap(dotted)
    atexit.register(lambda: _emit(f"[exit pid{os.getpid()}] {status()}"))
    from traceview.cli import main as cli

    sys.argv[0] = "traceview"
    cli()


if __name__ == "__main__":
    main()
