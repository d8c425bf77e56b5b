"""Per-kernel statistics: count, total, mean, std, min, max, p50/p90/p99, shares.

Definitions: docs/metrics.md. Times are µs in the result, computed from exact ns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from traceview.aggregate import moments
from traceview.aggregate.order import dense_ids
from traceview.aggregate.percentiles import nearest_rank
from traceview.analyses.categories import CATEGORIES, categorize
from traceview.analyses.devices import usage
from traceview.analyses.names import short_name
from traceview.analyses.oplinks import link_ops
from traceview.analyses.steps import in_steps, step_windows
from traceview.analyses.summary import TraceSummary, summarize
from traceview.errors import UsageError
from traceview.events import GPU_KINDS, KERNEL, TraceEvents

GROUP_BY = ("name", "short", "category")
SORT_KEYS = (
    "count",
    "duration",
    "percentage",
    "duration-percentage",
    "total",
    "max",
    "p99",
    "name",
)
_SORT_FIELD = {
    "count": "count",
    "duration": "mean_us",
    "percentage": "pct_launches",
    "duration-percentage": "pct_time",
    "total": "total_us",
    "max": "max_us",
    "p99": "p99_us",
}


@dataclass(frozen=True)
class KernelOptions:
    """What to select and how to order it."""

    sort: str = "duration-percentage"
    top: int = 10
    group_by: str = "name"
    include: tuple[str, ...] = ("kernel",)
    name_regex: str | None = None
    steps: tuple[int, ...] = ()


@dataclass(frozen=True)
class KernelRow:
    """Statistics of one kernel name (or one short name with --group-by short)."""

    name: str
    short_name: str
    count: int
    total_us: float
    mean_us: float
    std_us: float
    min_us: float
    max_us: float
    p50_us: float
    p90_us: float
    p99_us: float
    pct_launches: float
    pct_time: float

    def as_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


@dataclass(frozen=True)
class KernelReport:
    """The result of ``traceview kernels``: every rendering reads this one object."""

    trace: TraceSummary
    options: KernelOptions
    count: int
    total_us: float
    distinct: int
    rows: list[KernelRow]
    left_out_rows: int = 0
    left_out_count: int = 0
    left_out_us: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def gpu_busy_us(self) -> float:
        """The devices' busy time, summed (``trace.devices`` has it per device)."""
        return sum(d.busy_ns for d in self.trace.devices) / 1000

    @property
    def gpu_busy_pct(self) -> float:
        """Summed busy time / summed device windows × 100: per device when there is one."""
        window = sum(d.window_ns for d in self.trace.devices)
        return 100.0 * sum(d.busy_ns for d in self.trace.devices) / window if window else 0.0


def analyse_kernels(events: TraceEvents, options: KernelOptions) -> KernelReport:
    """Select GPU rows by kind, steps and name; compute per-name statistics; sort; cut.

    The header's device figures are over all GPU activity (kernel, memcpy, memset) of the
    selected steps, or of the whole trace: the one device definition every command uses.
    """
    mask, notes = _selection(events, options)
    steps = _step_rows(events, options)
    # before our row-sized temporaries, so the peaks do not stack
    trace = summarize(events, None if steps is None else usage(events, steps))
    del steps
    gpu = events.gpu
    dur = gpu.dur[mask]
    if options.group_by == "category":
        labels, group = category_groups(events, mask)
    else:
        labels, group = _groups(events.names, gpu.name[mask], options.group_by)
    rows = _rows(labels, group, dur, options.group_by)
    rows.sort(key=_sort_key(options.sort))
    kept = rows if options.top == 0 else rows[: options.top]
    cut = rows[len(kept) :]
    return KernelReport(
        trace=trace,
        options=options,
        count=len(dur),
        total_us=int(dur.sum()) / 1000,
        distinct=len(rows),
        rows=kept,
        left_out_rows=len(cut),
        left_out_count=sum(r.count for r in cut),
        left_out_us=sum(r.total_us for r in cut),
        notes=notes,
    )


def _selection(events: TraceEvents, options: KernelOptions) -> tuple[np.ndarray, list[str]]:
    """Mask over GPU rows for the requested kinds, steps and name regex."""
    unknown = set(options.include) - set(GPU_KINDS)
    if unknown:
        raise UsageError(
            f"--include: unknown kind {sorted(unknown)[0]!r} (known: {', '.join(GPU_KINDS)})"
        )
    kinds = [GPU_KINDS.index(k) for k in options.include]
    mask = np.isin(events.gpu.kind, kinds)
    notes: list[str] = []
    if options.steps:
        windows = step_windows(events)
        mask &= in_steps(events, list(options.steps), windows)
        gpu_only = [n for n in options.steps if windows[n].gpu_only]
        if gpu_only:
            notes.append(
                "steps " + ", ".join(map(str, gpu_only)) + " have no CPU ProfilerStep: "
                "used the gpu_user_annotation window and each kernel's own start time"
            )
    if options.name_regex is not None:
        mask &= _name_mask(events, options.name_regex)
    return mask, notes


def _step_rows(events: TraceEvents, options: KernelOptions) -> np.ndarray | None:
    """The GPU rows (every kind) of the --pstep steps; None without --pstep."""
    if not options.steps:
        return None
    return np.flatnonzero(in_steps(events, list(options.steps), step_windows(events)))


def _name_mask(events: TraceEvents, pattern: str) -> np.ndarray:
    try:
        regex = re.compile(pattern)
    except re.error as e:
        raise UsageError(f"--name {pattern!r}: not a valid regular expression ({e})") from None
    matching = np.array([regex.search(n) is not None for n in events.names], dtype=bool)
    return matching[events.gpu.name] if len(matching) else np.zeros(0, dtype=bool)


def _groups(names: list[str], name_ids: np.ndarray, group_by: str) -> tuple[list[str], np.ndarray]:
    """Group labels and the group id of every selected row."""
    if group_by not in GROUP_BY:
        raise UsageError(f"--group-by {group_by!r}: expected one of {', '.join(GROUP_BY)}")
    used, group = dense_ids(name_ids, len(names))
    labels = [names[i] for i in used]
    if group_by == "name":
        return labels, group
    shorts = [short_name(n) for n in labels]
    short_labels, to_short = np.unique(np.array(shorts, dtype=object), return_inverse=True)
    return [str(s) for s in short_labels], to_short[group].astype(np.int64)


def category_groups(events: TraceEvents, mask: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Category labels and the group id of every selected row (ops linked when the trace's
    CPU rows are read, so a kernel launched by aten::mm is a GEMM)."""
    links = link_ops(events) if len(events.cpu) else None
    category = categorize(events, None if links is None else links.leaf)[mask]
    used, group = dense_ids(category, len(CATEGORIES))
    return [CATEGORIES[i] for i in used.tolist()], group


def _rows(labels: list[str], group: np.ndarray, dur: np.ndarray, group_by: str) -> list[KernelRow]:
    """Per-group statistics (ns → µs)."""
    n = len(labels)
    stats = moments.accumulate(group, dur, n)
    pcts = nearest_rank(group, dur, n, (50, 90, 99))
    total_count = int(stats.count.sum())
    total_ns = int(stats.total.sum())
    std = stats.std()
    rows = []
    for g, label in enumerate(labels):
        count, total = int(stats.count[g]), int(stats.total[g])
        rows.append(
            KernelRow(
                name=label,
                short_name=label if group_by == "short" else short_name(label),
                count=count,
                total_us=total / 1000,
                mean_us=total / count / 1000,
                std_us=float(std[g]) / 1000,
                min_us=int(stats.minimum[g]) / 1000,
                max_us=int(stats.maximum[g]) / 1000,
                p50_us=int(pcts[50][g]) / 1000,
                p90_us=int(pcts[90][g]) / 1000,
                p99_us=int(pcts[99][g]) / 1000,
                pct_launches=100.0 * count / total_count,
                pct_time=100.0 * total / total_ns if total_ns else 0.0,
            )
        )
    return rows


def _sort_key(sort: str) -> Any:
    """Key for list.sort: largest first, ties by name; ``name`` sorts alphabetically."""
    if sort == "name":
        return lambda r: (r.name,)
    field_name = _SORT_FIELD.get(sort)
    if field_name is None:
        raise UsageError(f"--sort {sort!r}: expected one of {', '.join(SORT_KEYS)}")
    return lambda r: (-getattr(r, field_name), r.name)


__all__ = ["KERNEL", "SORT_KEYS", "KernelOptions", "KernelReport", "KernelRow", "analyse_kernels"]
