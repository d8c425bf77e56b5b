"""Where a command's CPU time goes: the main thread's, the other threads' (the inflater, the
scan threads) and forked children's, with the wall time, on stderr.

    TRACEVIEW_SPLIT=threads .venv/bin/python benchmarks/cpu_split.py kernels TRACE --no-cache -q

Wall time is only meaningful on an idle machine; the CPU split much less depends on load.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import resource
import sys
import time

_START = time.perf_counter()


def _report() -> None:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    total, main = own.ru_utime + own.ru_stime, time.thread_time()
    print(
        f"{os.environ.get('TAG', '')}: wall {time.perf_counter() - _START:.2f} cpu {total:.2f} "
        f"main-thread {main:.2f} other-threads {total - main:.2f} "
        f"children {children.ru_utime + children.ru_stime:.2f}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    atexit.register(_report)
    from traceview.cli import main

    sys.argv = ["traceview", *sys.argv[1:]]
    with contextlib.suppress(SystemExit):
        main()
