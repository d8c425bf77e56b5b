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


def cpu_context(events: TraceEvents, correlation: int, at_ns: int) -> CpuContext:
    """The context of the thread that launched ``correlation``, at time ``at_ns``."""
    cpu = events.cpu
    if correlation < 0 or len(cpu.ts) == 0:
        return NO_CONTEXT
    launches = np.flatnonzero(cpu.correlation == correlation)
    if len(launches) == 0:
        return NO_CONTEXT
    launch = int(launches[np.argmin(cpu.ts[launches])])
    thread = int(cpu.thread[launch])
    live = np.flatnonzero((cpu.ts <= at_ns) & (cpu.end >= at_ns))  # few: filter these by thread
    live = live[cpu.thread[live] == thread]
    runtime = cpu.correlation[live] >= 0
    return CpuContext(
        thread=_thread_label(events.threads[thread]),
        runtime=_innermost(events, live[runtime]),
        cpu_op=_innermost(events, live[~runtime]),
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
