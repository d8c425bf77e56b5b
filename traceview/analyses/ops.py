"""The operator view: GPU and CPU time per launching operator (``traceview ops``).

Each kernel is attributed to one op (analyses.oplinks: the leaf op by default, the top op with
``--level top``) or to the ``(no op)`` row, so the rows' GPU time adds up to the kernel time.
Per op name: calls and CPU time (every ``cpu_op`` event of that name, whatever it launched),
kernels, GPU time (sum of durations), GPU busy (per device the union of its kernels, summed
over devices), kernels per call, median launch delay (kernel start − launch start), % of GPU
time. Definitions in docs/metrics.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from traceview.aggregate.intervals import unions
from traceview.aggregate.order import dense_ids
from traceview.aggregate.percentiles import nearest_rank
from traceview.analyses.devices import NO_LAUNCH, device_of_stream
from traceview.analyses.oplinks import NO_OP, OpLinks, link_ops
from traceview.analyses.summary import TraceSummary, summarize
from traceview.choices import OpLevel, check_choice
from traceview.cpu_rows import OP
from traceview.errors import UsageError
from traceview.events import KERNEL, TraceEvents

LEVELS = tuple(OpLevel)
NO_OP_ROW = "(no op)"
SCHEMA_VERSION = 2


@dataclass(frozen=True)
class OpOptions:
    """Which op a kernel is attributed to, and how many rows to show."""

    level: OpLevel = OpLevel.LEAF
    top: int = 20


@dataclass(frozen=True)
class OpRow:
    """One op name: its calls and CPU time, and the kernels attributed to it (ns)."""

    name: str
    calls: int
    cpu_time_ns: int
    kernels: int
    gpu_time_ns: int
    gpu_busy_ns: int
    launch_delay_ns: int | None
    pct_gpu_time: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "calls": self.calls,
            "kernels": self.kernels,
            "gpu_time_us": self.gpu_time_ns / 1000,
            "gpu_busy_us": self.gpu_busy_ns / 1000,
            "cpu_time_us": self.cpu_time_ns / 1000,
            "kernels_per_call": self.kernels / self.calls if self.calls else None,
            "launch_delay_us": None
            if self.launch_delay_ns is None
            else self.launch_delay_ns / 1000,
            "pct_gpu_time": self.pct_gpu_time,
            "flops": None,
            "bytes": None,
            "tflops_per_s": None,
            "bound": None,
        }


@dataclass(frozen=True)
class OpReport:
    """The result of ``traceview ops``."""

    trace: TraceSummary
    options: OpOptions
    kernels: int
    gpu_time_ns: int
    rows: list[OpRow]
    left_out: int = 0
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "trace": self.trace.as_dict(),
            "level": self.options.level,
            "totals": {"kernels": self.kernels, "gpu_time_us": self.gpu_time_ns / 1000},
            "ops": [r.as_dict() for r in self.rows],
            "left_out": self.left_out,
            "notes": list(self.notes),
        }


def check_options(options: OpOptions) -> None:
    """Usage errors, before any reading."""
    check_choice("--level", options.level, OpLevel)
    if options.top < 0:
        raise UsageError(f"--top {options.top}: must not be negative (0 shows all)")


def analyse_ops(events: TraceEvents, options: OpOptions, links: OpLinks | None = None) -> OpReport:
    """Attribute every kernel to an op; per op name its CPU and GPU figures, by GPU time.
    ``links`` is ``link_ops(events)`` when the caller has it already."""
    check_options(options)
    links = link_ops(events) if links is None else links
    gpu = events.gpu
    rows = np.flatnonzero(gpu.kind == KERNEL)
    op = (links.leaf if options.level == "leaf" else links.top)[rows]
    calls, cpu_ns = op_calls(events)
    used, group = dense_ids(np.where(op == NO_OP, len(events.names), op), len(events.names) + 1)
    n = len(used)
    dur, ts = gpu.dur[rows], gpu.ts[rows]
    kernels = np.bincount(group, minlength=n)
    gpu_ns = np.zeros(n, dtype=np.int64)
    np.add.at(gpu_ns, group, dur)
    busy = _busy(events, rows, group, n)
    delay = _launch_delay(links.launch[rows], ts, group, n)
    total = int(gpu_ns.sum())
    out = []
    for g, name_id in enumerate(used.tolist()):
        named = name_id < len(events.names)
        out.append(
            OpRow(
                name=events.names[name_id] if named else NO_OP_ROW,
                calls=int(calls[name_id]) if named else 0,
                cpu_time_ns=int(cpu_ns[name_id]) if named else 0,
                kernels=int(kernels[g]),
                gpu_time_ns=int(gpu_ns[g]),
                gpu_busy_ns=int(busy[g]),
                launch_delay_ns=delay[g],
                pct_gpu_time=100.0 * int(gpu_ns[g]) / total if total else 0.0,
            )
        )
    out.sort(key=lambda r: (-r.gpu_time_ns, r.name))
    kept = out if options.top == 0 else out[: options.top]
    notes = []
    if len(events.cpu) == 0 and len(rows):
        notes.append("no CPU ops in this trace: every kernel is in the (no op) row")
    return OpReport(
        trace=summarize(events),
        options=options,
        kernels=len(rows),
        gpu_time_ns=total,
        rows=kept,
        left_out=len(out) - len(kept),
        notes=notes,
    )


def op_calls(events: TraceEvents) -> tuple[np.ndarray, np.ndarray]:
    """Per name id: how many cpu_op events have that name, and their summed duration (ns)."""
    calls = np.zeros(len(events.names), dtype=np.int64)
    cpu_ns = np.zeros(len(events.names), dtype=np.int64)
    for block in events.cpu.blocks():
        ops = block[block["correlation"] == OP]
        np.add.at(calls, ops["name"], 1)
        np.add.at(cpu_ns, ops["name"], ops["end"] - ops["ts"])
    return calls, cpu_ns


def _busy(events: TraceEvents, rows: np.ndarray, group: np.ndarray, n: int) -> np.ndarray:
    """Per group: the union of its kernels (dur > 0) on each device, summed over devices."""
    device, values = device_of_stream(events)
    width = max(len(values), 1)
    gpu = events.gpu
    keep = gpu.dur[rows] > 0
    ts = gpu.ts[rows][keep]
    u = unions(group[keep] * width + device[gpu.stream[rows][keep]], ts, ts + gpu.dur[rows][keep])
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, u.segment // width, u.busy)
    return out


def _launch_delay(
    launch: np.ndarray, ts: np.ndarray, group: np.ndarray, n: int
) -> list[int | None]:
    """Per group: the median (nearest rank) of kernel start − launch start, over its kernels
    that have a launch; None when none has."""
    has = launch != NO_LAUNCH
    counted = np.bincount(group[has], minlength=n)
    median = nearest_rank(group[has], ts[has] - launch[has], n, (50,))[50]
    return [int(m) if c else None for m, c in zip(median.tolist(), counted.tolist(), strict=True)]
