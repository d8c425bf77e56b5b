"""Which GPU rows an analysis looks at: kinds, devices, streams, steps and a name pattern.

One selection for every command, so that ``--pstep 3``, ``--device 1`` or ``--name gemm`` pick
the same activities wherever they are given. A filter that matches nothing in the trace (a
device or stream it does not have) is a usage error listing what it has, never an empty answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from traceview.analyses.core.steps import Steps, in_steps, select_steps, step_windows
from traceview.columns.model import TraceEvents
from traceview.columns.schema import GPU_KINDS
from traceview.errors import UsageError


@dataclass(frozen=True)
class Selection:
    """The filters, as the user gave them (``None``: no filter of that kind)."""

    kinds: Sequence[str] = ("kernel",)
    steps: Steps = ()
    devices: Sequence[Any] | None = None
    streams: Sequence[Any] | None = None
    name_regex: str | None = None


@dataclass(frozen=True)
class Selected:
    """A mask over the GPU rows; the steps chosen one by one (ranges intersected with the steps
    the trace has; empty without a step filter); notes for the reader."""

    mask: np.ndarray
    steps: tuple[int, ...] = ()
    notes: list[str] = field(default_factory=list)


def select(events: TraceEvents, selection: Selection) -> Selected:
    """The GPU rows that pass every filter of ``selection``."""
    gpu = events.gpu
    mask = np.zeros(len(gpu.kind), dtype=bool)
    for kind in {GPU_KINDS.index(k) for k in selection.kinds}:  # no row-sized int temporary
        mask |= gpu.kind == kind
    keep = _stream_mask(events, selection)
    if keep is not None and len(keep):
        mask &= keep[gpu.stream]
    chosen: list[int] = []
    notes: list[str] = []
    if selection.steps:
        windows = step_windows(events)
        chosen = select_steps(selection.steps, windows)
        mask &= in_steps(events, chosen, windows)
        gpu_only = [n for n in chosen if windows[n].gpu_only]
        if gpu_only:
            notes.append(
                "steps " + ", ".join(map(str, gpu_only)) + " have no CPU ProfilerStep: "
                "used the gpu_user_annotation window and each activity's own start time"
            )
    if selection.name_regex is not None:
        mask &= _name_mask(events, selection.name_regex)
    return Selected(mask, tuple(chosen), notes)


def _stream_mask(events: TraceEvents, selection: Selection) -> np.ndarray | None:
    """Per stream id, whether its device and stream are wanted; None without such filters."""
    if selection.streams is None and selection.devices is None:
        return None
    wanted = np.ones(len(events.streams), dtype=bool)
    for flag, values, part in (
        ("--stream", selection.streams, "stream"),
        ("--device", selection.devices, "device"),
    ):
        if values is not None:
            have = [getattr(key, part) for key in events.streams]
            keep = _present(flag, values, have)
            wanted &= np.array([str(v) in keep for v in have], dtype=bool)
    return wanted


def _present(flag: str, wanted: Sequence[Any], values: list[Any]) -> set[str]:
    """The wanted values (as text); a usage error listing the trace's own when one is not in
    it (a filter that matches nothing is never a silent success)."""
    have = {str(v) for v in values}
    missing = [str(v) for v in wanted if str(v) not in have]
    if missing:
        found = ", ".join(sorted(have, key=lambda v: (len(v), v))[:20]) or "none"
        more = f" and {len(have) - 20} more" if len(have) > 20 else ""
        raise UsageError(f"{flag} {', '.join(missing)}: not in this trace (found: {found}{more})")
    return {str(v) for v in wanted}


def name_regex(pattern: str) -> re.Pattern[str]:
    """``--name``'s pattern compiled, or a usage error naming it."""
    try:
        return re.compile(pattern)
    except re.error as e:
        raise UsageError(f"--name {pattern!r}: not a valid regular expression ({e})") from None


def _name_mask(events: TraceEvents, pattern: str) -> np.ndarray:
    regex = name_regex(pattern)
    matching = np.array([regex.search(n) is not None for n in events.names], dtype=bool)
    return matching[events.gpu.name] if len(matching) else np.zeros(0, dtype=bool)
