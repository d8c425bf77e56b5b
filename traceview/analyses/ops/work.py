"""FLOPs, bytes and the bound of each row of the operator view (definitions: docs/metrics.md,
"Operator roofline").

A row's FLOPs (bytes) are the sum over its calls of each call's FLOPs (bytes) from its shapes
(analyses.flops); known only when every call's are. Its dtype is the common dtype of its calls
(none when they differ). Its bound: ``communication`` when all its kernels are communication
kernels; else ``launch`` when its GPU busy time is shorter than the runtime calls that launched
its kernels; else, with FLOPs, bytes and peaks for its dtype, ``compute`` when its arithmetic
intensity is at least the ridge point (peak FLOP/s / peak bandwidth), else ``memory``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traceview.analyses.core.opcalls import OpCalls
from traceview.analyses.ops.flops import PEAK_DTYPE, Work, op_work
from traceview.analyses.ops.nesting import Counted
from traceview.analyses.ops.peaks import Peaks
from traceview.columns.model import TraceEvents

BOUNDS = ("communication", "launch", "compute", "memory")


@dataclass(frozen=True)
class GroupWork:
    """Per group: FLOPs and bytes of all its calls (None when not all are known) and the
    dtype of its calls as kineto names it (None when unknown or mixed)."""

    flops: list[int | None]
    bytes: list[int | None]
    dtype: list[str | None]


def pair_work(events: TraceEvents, calls: OpCalls) -> list[Work | None]:
    """The Work of one call of each (name, shape) pair of ``calls`` (None when unknown)."""
    out: list[Work | None] = []
    for name, shape in zip(calls.name.tolist(), calls.shape.tolist(), strict=True):
        out.append(op_work(events.names[name], *events.shapes[shape]) if shape >= 0 else None)
    return out


def group_work(
    calls: OpCalls,
    works: list[Work | None],
    group: np.ndarray,
    n: int,
    counted: Counted | None = None,
) -> GroupWork:
    """Sum the pairs' work into ``n`` groups (``group``: each pair's group, −1 for none).
    ``counted``: per pair, the calls whose work counts (analyses.opnesting; default all); a
    group whose every call's work is counted at a nested op has none (None)."""
    flops: list[int | None] = [0] * n
    moved: list[int | None] = [0] * n
    dtype: list[str | bool | None] = [True] * n  # True: no call seen yet
    count = calls.calls if counted is None else counted.calls
    kinds = [None if w is None else w.dtype for w in works] if counted is None else counted.dtype
    for g, c, work, kind in zip(group.tolist(), count.tolist(), works, kinds, strict=True):
        if g < 0 or (work is not None and c == 0):
            continue
        if work is None:
            flops[g] = moved[g] = None
            dtype[g] = None
            continue
        f, b = flops[g], moved[g]
        flops[g] = None if f is None else f + c * work.flops
        moved[g] = None if b is None else b + c * work.bytes
        dtype[g] = kind if kind is not None and dtype[g] in (True, kind) else None
    for g in range(n):
        if dtype[g] is True and counted is not None:
            flops[g] = moved[g] = None  # no call left whose work counts here
    return GroupWork(flops, moved, [None if d is True else d for d in dtype])  # type: ignore[misc]


def peak_flops(peaks: Peaks | None, dtype: str | None) -> float | None:
    """The peak TFLOP/s for computations in this (kineto) dtype, if the peaks have it."""
    if peaks is None or dtype is None:
        return None
    key = PEAK_DTYPE.get(dtype)
    return None if key is None else peaks.tflops.get(key)


def bound(
    communication: bool,
    busy_ns: int,
    launch_ns: int,
    flops: int | None,
    moved: int | None,
    peak_tflops: float | None,
    peak_tb: float | None,
) -> str | None:
    """The bound of one row (see the module docstring); None when it cannot be told."""
    if communication:
        return "communication"
    if busy_ns < launch_ns:
        return "launch"
    if flops is None or not moved or peak_tflops is None or peak_tb is None:
        return None
    return "compute" if flops / moved >= peak_tflops / peak_tb else "memory"
