"""``traceview trim``: what to keep (a time window, the GPU work of steps), worked out from
the trace's columns, then the kept events copied byte for byte (traceview.app.trim_copy).

Definitions (docs/metrics.md#trim): an event with a duration is kept when [ts, ts + dur]
meets the window (kept whole), one without when its ts is inside it; metadata events (``M``)
always. With ``--pstep`` the window is the steps' CPU window widened to the GPU work of the
steps, and a GPU activity is kept exactly when ``kernels --pstep`` counts it (its launch in
the steps). Flow events are kept when both their ends are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from traceview.errors import UsageError
from traceview.parsing import parse_duration
from traceview.render.trim_command import TRIM_MARGIN

if TYPE_CHECKING:
    import numpy as np

    from traceview.analyses.core.steps import Window
    from traceview.columns.model import TraceEvents

ABSOLUTE = "@"  # before a --window value: a ts on the trace's clock (µs), as gaps prints it


@dataclass(frozen=True)
class TrimOptions:
    """What to keep, as the user gave it (``steps``: parsed --pstep ranges)."""

    steps: tuple[tuple[int, int], ...] = ()
    window: str | None = None
    around_gap: int | None = None
    margin: str = TRIM_MARGIN
    devices: tuple[str, ...] | None = None
    cpu: bool = True

    def side_files(self) -> tuple[Path, ...]:
        return ()


@dataclass(frozen=True)
class Cut:
    """What trim keeps, in ns on the trace's clock: the window (None: open on that side),
    the devices (their values as text; None: all), whether CPU events stay, and with
    --pstep which GPU activities: by correlation id, and by (correlation, own ts) for the
    few whose id alone does not decide (absent, or shared by kept and dropped rows)."""

    start_ns: int | None = None
    end_ns: int | None = None
    devices: frozenset[str] | None = None
    cpu: bool = True
    steps: bool = False
    correlations: frozenset[int] = frozenset()
    by_ts: dict[int, frozenset[int]] = field(default_factory=dict)
    what: str = "the whole trace"

    def gpu_row_kept(self, correlation: int, ts_ns: int | None) -> bool:
        """With --pstep: whether the GPU activity is one the steps hold."""
        if correlation >= 0 and correlation not in self.by_ts:
            return correlation in self.correlations
        return ts_ns is not None and ts_ns in self.by_ts.get(correlation, ())


def check_options(options: TrimOptions) -> None:
    """Usage errors before any reading."""
    given = [options.steps != (), options.window is not None, options.around_gap is not None]
    if sum(given) > 1:
        raise UsageError("give one of --pstep, --window and --around-gap")
    if options.around_gap is not None and options.around_gap < 1:
        raise UsageError(f"--around-gap {options.around_gap}: the largest gap is 1")
    if len(options.steps) > 1:
        raise UsageError("--pstep: trim keeps one range of steps (N or N-M)")
    parse_duration(options.margin, "--margin")
    if options.window is not None:
        parse_window(options.window, 0)


def parse_window(text: str, origin_ns: int) -> tuple[int | None, int | None]:
    """``START:END`` in ns on the trace's clock: each a duration from ``origin_ns`` (bare
    numbers µs), or ``@`` and an absolute ts in µs; an empty side is open, and so is a start
    of 0 (``0:`` reaches the first event, an instant before the span's start too)."""
    if text.count(":") != 1:
        raise UsageError(f"--window {text!r}: expected START:END (e.g. 100ms:150ms)")
    start, end = (_point(part, origin_ns) for part in text.split(":"))
    if start == origin_ns and not text.lstrip().startswith(ABSOLUTE):
        start = None
    if start is not None and end is not None and end < start:
        raise UsageError(f"--window {text!r}: ends before it starts")
    return start, end


def _point(text: str, origin_ns: int) -> int | None:
    text = text.strip()
    if not text:
        return None
    if text.startswith(ABSOLUTE):
        return parse_duration(text[1:], "--window")
    return origin_ns + parse_duration(text, "--window")


def plan_cut(events: TraceEvents, options: TrimOptions) -> Cut:
    """The Cut the options ask for, on this trace."""
    devices = _devices(events, options.devices)
    cpu = options.cpu
    if options.steps:
        return _steps_cut(events, options, devices)
    start: int | None
    end: int | None
    if options.around_gap is not None:
        start, end, what = _gap_window(events, options, devices)
    elif options.window is not None:
        origin = events.span_ns[0] if events.span_ns else 0
        start, end = parse_window(options.window, origin)
        what = f"the window {options.window}"
    else:
        start = end = None
        what = "the whole trace"
    return Cut(start, end, devices, cpu, what=what)


def _devices(events: TraceEvents, wanted: Sequence[str] | None) -> frozenset[str] | None:
    """The --device values (a usage error naming the trace's devices when one is not in it)."""
    if wanted is None:
        return None
    from traceview.analyses.core.selection import Selection, select

    select(events, Selection(devices=wanted))  # the error of a device the trace lacks
    return frozenset(str(d) for d in wanted)


def _steps_cut(events: TraceEvents, options: TrimOptions, devices: frozenset[str] | None) -> Cut:
    """--pstep: the GPU activities ``kernels --pstep`` would count (any kind, these devices),
    and around them the window from the steps' start to the end of their work."""
    import numpy as np

    from traceview.analyses.core.selection import Selection, select
    from traceview.analyses.core.steps import select_steps, step_windows
    from traceview.columns.schema import GPU_KINDS

    windows = step_windows(events)
    chosen = select_steps(options.steps, windows)
    chosen_devices = None if devices is None else sorted(devices)
    selection = Selection(kinds=GPU_KINDS, steps=options.steps, devices=chosen_devices)
    mask = select(events, selection).mask
    gpu = events.gpu
    start = min(windows[n].start_ns for n in chosen)
    end = max(windows[n].end_ns for n in chosen)
    if mask.any():
        start = min(start, int(gpu.ts[mask].min()))
        end = max(end, int((gpu.ts[mask] + gpu.dur[mask]).max()))
    kept = gpu.correlation[mask]
    shared = _also_dropped(gpu.correlation, mask, np.unique(kept))
    unsure = np.isin(gpu.correlation, shared) | (gpu.correlation < 0)
    by_ts: dict[int, set[int]] = {int(c): set() for c in shared.tolist()}
    by_ts.setdefault(-1, set())
    rows = np.flatnonzero(mask & unsure)
    for c, ts in zip(gpu.correlation[rows].tolist(), gpu.ts[rows].tolist(), strict=True):
        by_ts[max(c, -1)].add(ts)
    first, last = options.steps[0]
    return Cut(
        start, end, devices, options.cpu, steps=True,
        correlations=frozenset(np.unique(kept[kept >= 0]).tolist()),
        by_ts={c: frozenset(t) for c, t in by_ts.items()}, what=_named(windows, first, last),
    )  # fmt: skip


def _also_dropped(correlation: np.ndarray, mask: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """``np.intersect1d(kept, correlation[~mask])`` (``kept``: sorted, distinct), a pass of
    rows at a time: no copy of the dropped rows' ids (nearly every row) nor their sort."""
    import numpy as np

    found = [kept[:0]]
    if len(kept):
        for lo in range(0, len(mask), _PASS):
            ids = correlation[lo : lo + _PASS][~mask[lo : lo + _PASS]]
            at = np.minimum(np.searchsorted(kept, ids), len(kept) - 1)
            found.append(ids[kept[at] == ids])
    shared: np.ndarray = np.unique(np.concatenate(found))
    return shared


_PASS = 1 << 16  # rows a pass


def _named(windows: dict[int, Window], first: int, last: int) -> str:
    """The steps kept, as the trace names them: ``ProfilerStep 5``, or a serving marker's
    own name (``step 0 (step[DECODE bs=32])``)."""
    label = windows[first].label if first in windows else ""
    if not label:
        return f"ProfilerStep {first}" if first == last else f"ProfilerSteps {first}-{last}"
    if first == last:
        return f"step {first} ({label})"
    return f"steps {first}-{last} ({label} …)"


def _gap_window(
    events: TraceEvents, options: TrimOptions, devices: frozenset[str] | None
) -> tuple[int, int, str]:
    """--around-gap K: the K-th largest device gap (as ``gaps`` numbers them, on these
    devices) with --margin on each side."""
    from traceview.analyses.gaps import GapOptions, analyse_gaps

    k = options.around_gap or 1
    chosen = None if devices is None else tuple(sorted(devices))
    report = analyse_gaps(events, GapOptions(devices=chosen, largest=k, context=False))
    if len(report.largest) < k:
        raise UsageError(
            f"--around-gap {k}: this trace has {len(report.largest)} device gaps"
            + ("" if devices is None else " on these devices")
        )
    gap = report.largest[k - 1]
    margin = parse_duration(options.margin, "--margin")
    what = f"device gap #{k} ({gap.gap_ns / 1e6:.3f} ms at ts {gap.ts_ns / 1000:.3f} µs)"
    return gap.ts_ns - margin, gap.ts_ns + gap.gap_ns + margin, what
