"""Whether a command's analyses use a second core: a big trace's (from the size at which it
is read in two processes, ``TRACEVIEW_PARALLEL_MIN_BYTES``, of text: a gzip file's inflated
size) on Linux with two cores or more, unless ``TRACEVIEW_ANALYSES=serial`` or
``TRACEVIEW_SPLIT=threads`` (one process, threads only) says otherwise, or a thread of this
process is writing the cache (a fork copies no thread, only the locks it holds), or the
trace has more than ASIDE_MAX_GPU_ROWS GPU activities. The work aside runs in a forked
child (traceview.forked.Aside), which falls back to this process on any failure, and on a
child that does not answer in time: the output is the same either way.
"""

from __future__ import annotations

import os
import sys

from traceview.analyses.summary import Aside as AsideRunner
from traceview.cache import writing_on_a_thread
from traceview.columns.model import TraceEvents
from traceview.columns.parallel import split_min_bytes
from traceview.forked import Aside
from traceview.read.source import text_size_hint

# A child's temporaries come on top of what the main process holds (the columns it shares
# copy-on-write, and what it lets go of once lent, stay the child's): at 7.83 GB of the H200
# big trace (2.2 M GPU activities) summary's processes held 310 MB together (summed PSS), in
# one process 254 MB, in the same time; at 7.57 GB of vLLM graph replays (6.6 M) 815 MB
# against 676, 8% slower (benchmarks/RESULTS-rust-43c.md, "Stop 78").
ASIDE_MAX_GPU_ROWS = 1 << 20


def aside_for(events: TraceEvents) -> AsideRunner | None:
    """traceview.forked.Aside where the analyses of ``events`` use a second core, else None."""
    if os.environ.get("TRACEVIEW_ANALYSES", "").strip().lower() == "serial":
        return None
    if os.environ.get("TRACEVIEW_SPLIT", "").strip().lower() == "threads":
        return None
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return None
    if (os.cpu_count() or 1) < 2 or not _big(events):
        return None
    if len(events.gpu.ts) > ASIDE_MAX_GPU_ROWS:
        return None
    if writing_on_a_thread():
        return None
    return Aside


def _big(events: TraceEvents) -> bool:
    """Whether the trace holds as much text as one read in two processes: a gzip file's
    analyses are as much work as those of the text it inflates to (RESULTS-rust-43c.md,
    "Stop 79"); its file is opened only when its size on disk does not settle it."""
    least = split_min_bytes()
    return events.size_bytes >= least or text_size_hint(events.path, events.size_bytes) >= least
