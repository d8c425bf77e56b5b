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

from traceview.events import STEP_PREFIX, CpuColumns, TraceEvents


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
_BLOCK = 1 << 16  # CPU rows per step of the scan


def cpu_contexts(events: TraceEvents, gaps: list[tuple[int, int]]) -> list[CpuContext]:
    """For each (correlation, at_ns): the state at at_ns of the thread that launched it."""
    cpu = events.cpu
    wanted = sorted({correlation for correlation, _ in gaps if correlation >= 0})
    if len(cpu.ts) == 0 or not wanted:
        return [NO_CONTEXT] * len(gaps)
    instants = np.array(sorted({at for _, at in gaps}), dtype=np.int64)
    live, launches = _scan(cpu, instants, np.array(wanted, dtype=np.int64))
    return [_context(events, live, launches, correlation, at) for correlation, at in gaps]


def _scan(
    cpu: CpuColumns, instants: np.ndarray, wanted: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Rows in flight at one of the ``instants``, and rows with a ``wanted`` correlation.

    One pass for all gaps, block by block: small temporaries are reused, where 14 MB ones for
    the 1.8M rows of a 1 GB trace cost fresh memory pages each (13-20 ms against 20-110 ms).
    """
    live, launches = [np.zeros(0, dtype=np.intp)], [np.zeros(0, dtype=np.intp)]
    for lo in range(0, len(cpu.ts), _BLOCK):
        block = slice(lo, lo + _BLOCK)
        correlation = cpu.correlation[block]
        live.append(_hits(instants, cpu.ts[block], cpu.end[block]) + lo)
        launches.append(_hits(wanted, correlation, correlation) + lo)
    return np.concatenate(live), np.concatenate(launches)


def _hits(values: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Indices i such that one of the sorted ``values`` lies in [low[i], high[i]]."""
    first = np.minimum(np.searchsorted(values, low), len(values) - 1)
    point = values[first]  # the smallest value at or above low[i], if there is one
    return np.flatnonzero((point >= low) & (point <= high))


def _context(
    events: TraceEvents, live: np.ndarray, launches: np.ndarray, correlation: int, at_ns: int
) -> CpuContext:
    cpu = events.cpu
    if correlation < 0:
        return NO_CONTEXT
    launches = launches[cpu.correlation[launches] == correlation]
    if len(launches) == 0:
        return NO_CONTEXT
    launch = int(launches[np.argmin(cpu.ts[launches])])
    thread = int(cpu.thread[launch])
    rows = live[(cpu.thread[live] == thread) & (cpu.ts[live] <= at_ns) & (cpu.end[live] >= at_ns)]
    runtime = cpu.correlation[rows] >= 0
    return CpuContext(
        thread=_thread_label(events.threads[thread]),
        runtime=_innermost(events, rows[runtime]),
        cpu_op=_innermost(events, rows[~runtime]),
        launch_delay_us=(int(cpu.ts[launch]) - at_ns) / 1000,
    )


def _innermost(events: TraceEvents, rows: np.ndarray) -> str | None:
    """Name of the latest-starting event of ``rows`` (ProfilerStep windows excluded)."""
    names = [(int(events.cpu.ts[r]), events.names[int(events.cpu.name[r])]) for r in rows]
    names = [(ts, n) for ts, n in names if not n.startswith(STEP_PREFIX)]
    return max(names)[1] if names else None


def _thread_label(thread: tuple[Any, Any]) -> str:
    pid, tid = thread
    return f"{pid}/{tid}"
