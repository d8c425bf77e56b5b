"""A trace's op links and op calls kept in its cache entry, so a warm report reads them.

``traceview report`` links every GPU row to its ops (analyses.oplinks) and walks every CPU
op's stack (analyses.opcalls): on the 1 GB benchmark trace that is 0.55 s of CPU, a third of
a warm report, redone on every run for the same entry. The arrays are kept as a derived file
of the entry (cache.derived), under a key of the code that works them out (the ingest code,
the analyses and aggregate), so they are served only to code that would compute the same
ones, and only to the entry's own events (their sizes are checked). Ids are kept as int32
where they fit (19 MB for the 1 GB trace's 550k GPU rows); what is given back has the values
and dtypes ``link_ops`` and ``op_calls`` give.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from traceview.aggregate.order import narrowed
from traceview.analyses.core.opcalls import OpCalls
from traceview.analyses.core.oplinks import NO_OP, OpLinks
from traceview.cache.fingerprint import INGEST_SOURCES, code_fingerprint
from traceview.columns.cpu_rows import NO_SHAPE
from traceview.columns.model import TraceEvents
from traceview.options import ReadOptions

if TYPE_CHECKING:
    from traceview.cache.derived import Place

# The code the arrays come from (as the ranks' stored summaries: every analysis and aggregate).
LINK_SOURCES = (
    *INGEST_SOURCES,
    "cache/op_links.py",
    "analyses",
    "aggregate",
    "choices.py",
    "parsing.py",
)
FORMAT = 3  # the layout of the arrays below
# per GPU row, as kept (int32 where they fit, narrower as linked): the leaf ops alone, as
# work_out links them
_IDS = ("leaf", "thread", "leaf_shape")
_CALLS = ("name", "shape", "calls", "cpu_ns", "self_ns")


def place(path: Path, read: ReadOptions) -> Place | None:
    """Where the trace's entry is, found before the trace is read; None without a cache."""
    from traceview.cache.derived import place_for

    return None if read.partial else place_for(path, read)  # a partial read is never cached


def links_key() -> str:
    """The key the arrays are kept under (hex digits)."""
    import xxhash

    text = repr((FORMAT, "op links and calls", code_fingerprint(LINK_SOURCES)))
    return xxhash.xxh3_128_hexdigest(text.encode())


def load(where: Place, events: TraceEvents) -> tuple[OpLinks, OpCalls] | None:
    """The kept links and calls of ``events`` (read from the entry); None when there are
    none to use: the caller works them out (and keeps them)."""
    from traceview.cache import derived

    arrays = derived.load(where, links_key())
    if arrays is None:
        return None
    try:
        return from_arrays(events, arrays)
    except (KeyError, ValueError, TypeError):
        return None  # not what this code writes: worked out again, kept anew


def save(where: Place, events: TraceEvents, links: OpLinks, calls: OpCalls) -> None:
    """Keep the links and calls worked out from ``events`` in the entry (written by then;
    nothing is kept without one)."""
    from traceview.cache import derived

    derived.save(where, links_key(), to_arrays(events, links, calls))


def to_arrays(events: TraceEvents, links: OpLinks, calls: OpCalls) -> dict[str, np.ndarray]:
    """The arrays to keep."""
    out = {"sizes": _sizes(events), "launch": links.launch, "launch_ns": links.launch_ns}
    for name in _IDS:
        out[name] = _narrow(getattr(links, name))
    for name in _CALLS:
        out[f"calls_{name}"] = getattr(calls, name)
    return out


def from_arrays(events: TraceEvents, arrays: dict[str, np.ndarray]) -> tuple[OpLinks, OpCalls]:
    """The links and calls kept in ``arrays``; ValueError when they are not of ``events``."""
    if arrays["sizes"].tolist() != _sizes(events).tolist():
        raise ValueError("kept for other events")
    leaf, thread, leaf_shape = (arrays[name] for name in _IDS)
    launch, launch_ns = arrays["launch"], arrays["launch_ns"]
    n = len(events.gpu.ts)
    if any(len(a) != n for a in (leaf, thread, launch, launch_ns, leaf_shape)):
        raise ValueError("not one value per GPU row")
    top = np.broadcast_to(np.int64(NO_OP), (n,))  # not looked for (link_ops, with_top=False)
    top_shape = np.broadcast_to(np.int64(NO_SHAPE), (n,))
    links = OpLinks(leaf, top, thread, launch, launch_ns, leaf_shape, top_shape)
    calls = OpCalls(*(arrays[f"calls_{name}"] for name in _CALLS))
    return links, calls


def _sizes(events: TraceEvents) -> np.ndarray:
    """What the arrays must fit: GPU rows, names, CPU rows, shapes."""
    sizes = (len(events.gpu.ts), len(events.names), len(events.cpu), len(events.shapes))
    return np.array(sizes, dtype=np.int64)


def _narrow(ids: np.ndarray | None) -> np.ndarray:
    """``ids`` as int32 when they fit (half the bytes on disk), else as they are."""
    if ids is None:
        raise ValueError("no ids")
    return narrowed(ids)
