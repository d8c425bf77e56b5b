"""What the CPU was doing when a GPU gap began: the answer to "why is the GPU idle".

For the activity after a gap: find its launching runtime call (same correlation id), then on
that CPU thread, at the moment the gap began, the runtime call and the innermost CPU op in
flight (e.g. ``cudaStreamSynchronize`` inside ``aten::item``), and how long after the gap
began the launch came (a late launch means the GPU waited for the CPU).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from traceview.cpu_rows import OP, ROW, CpuRows
from traceview.events import STEP_PREFIX, TraceEvents


@dataclass(frozen=True)
class CpuContext:
    """The launching thread's state at the start of a gap (names; delay in µs)."""

    thread: str | None
    runtime: str | None
    cpu_op: str | None
    launch_delay_us: float | None

    def describe(self) -> str | None:
        """One line such as ``cudaStreamSynchronize in aten::item; launched 1,204.0 µs in``."""
        if self.thread is None:
            return None
        doing = " in ".join(x for x in (self.runtime, self.cpu_op) if x) or "no op in flight"
        if self.launch_delay_us is None:
            return doing
        when = "after" if self.launch_delay_us >= 0 else "before"
        return f"{doing}; next launch {abs(self.launch_delay_us):,.1f} µs {when} the gap began"

    def as_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


NO_CONTEXT = CpuContext(None, None, None, None)


def cpu_contexts(events: TraceEvents, gaps: list[tuple[int, int]]) -> list[CpuContext]:
    """For each (correlation, at_ns): the state at at_ns of the thread that launched it.

    The launches' start times come from the runtime columns, so one question is asked of
    the CPU rows: which rows are in flight at one of these instants (the gaps' starts and
    the launches' starts)? Sources that know each block's time range skip the others.
    """
    wanted = sorted({correlation for correlation, _ in gaps if correlation >= 0})
    if len(events.cpu) == 0 or not wanted:
        return [NO_CONTEXT] * len(gaps)
    launch_at = _launch_times(events, wanted)
    instants = np.array(sorted({at for _, at in gaps} | set(launch_at.values())), dtype=np.int64)
    live = _scan(events.cpu, instants)
    return [_context(events, live, launch_at, correlation, at) for correlation, at in gaps]


def _launch_times(events: TraceEvents, wanted: list[int]) -> dict[int, int]:
    """The start of the earliest runtime call of each wanted correlation id (if any)."""
    runtime = events.runtime
    hit = np.isin(runtime.correlation, wanted)
    out: dict[int, int] = {}
    for correlation, ts in zip(
        runtime.correlation[hit].tolist(), runtime.ts[hit].tolist(), strict=True
    ):
        if ts < out.get(correlation, ts + 1):
            out[correlation] = ts
    return out


def _scan(cpu: CpuRows, instants: np.ndarray) -> np.ndarray:
    """The rows in flight at one of the sorted ``instants``, in file order: one pass over
    the CPU rows, block by block, for all gaps."""
    live = [np.zeros(0, dtype=ROW)]
    for block in cpu.blocks(instants=instants):
        live.append(block[_hits(instants, block["ts"], block["end"])])
    return np.concatenate(live)


def _hits(values: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Indices i such that one of the sorted ``values`` lies in [low[i], high[i]]."""
    first = np.minimum(np.searchsorted(values, low), len(values) - 1)
    point = values[first]  # the smallest value at or above low[i], if there is one
    return np.flatnonzero((point >= low) & (point <= high))


def _context(
    events: TraceEvents, live: np.ndarray, launch_at: dict[int, int], correlation: int, at_ns: int
) -> CpuContext:
    if correlation not in launch_at:
        return NO_CONTEXT
    start = launch_at[correlation]
    launches = live[(live["correlation"] == correlation) & (live["ts"] == start)]
    if len(launches) == 0:
        return NO_CONTEXT
    launch = launches[0]  # the first of the earliest, in file order
    thread = int(launch["thread"])
    rows = live[(live["thread"] == thread) & (live["ts"] <= at_ns) & (live["end"] >= at_ns)]
    runtime = rows["correlation"] != OP
    return CpuContext(
        thread=_thread_label(events.threads[thread]),
        runtime=_innermost(events, rows[runtime]),
        cpu_op=_innermost(events, rows[~runtime]),
        launch_delay_us=(start - at_ns) / 1000,
    )


def _innermost(events: TraceEvents, rows: np.ndarray) -> str | None:
    """Name of the innermost of ``rows`` (ProfilerStep windows excluded): the latest start,
    then the earliest end (of two ops starting together, the one nested in the other)."""
    ts, end, name = (rows[field].tolist() for field in ("ts", "end", "name"))
    named = [
        (start, -stop, events.names[n])
        for start, stop, n in zip(ts, end, name, strict=True)
        if not events.names[n].startswith(STEP_PREFIX)
    ]
    return max(named)[2] if named else None


def _thread_label(thread: tuple[Any, Any]) -> str:
    pid, tid = thread
    return f"{pid}/{tid}"
