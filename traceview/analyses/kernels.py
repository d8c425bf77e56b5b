"""Per-kernel statistics: count, total, mean, std, min, max, p50/p90/p99, shares.

Definitions: docs/metrics.md. Times are integer ns in the result (means and deviations float
ns); µs appear only where a row is serialised (``KernelRow.as_dict``) or rendered.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from traceview.aggregate import moments, sums
from traceview.aggregate.order import dense_ids, positions_where
from traceview.aggregate.percentiles import nearest_rank
from traceview.analyses.core.categories import CATEGORIES, categorize
from traceview.analyses.core.devices import usage
from traceview.analyses.core.fused import fused_op_shares, fused_ops, fusion_leaf, op_groups
from traceview.analyses.core.in_us import us_fields
from traceview.analyses.core.names import display_names, display_names_in_order, short_names
from traceview.analyses.core.oplinks import link_ops
from traceview.analyses.core.selection import Selection, name_regex, select
from traceview.analyses.core.steps import Steps, in_steps, step_windows
from traceview.analyses.core.streamed import rows_of
from traceview.analyses.core.trace import TraceSummary, summarize
from traceview.choices import KernelGroupBy, KernelSort, check_choice
from traceview.columns.model import TraceEvents
from traceview.columns.packed_names import subset
from traceview.columns.schema import GPU_KINDS, KERNEL
from traceview.errors import UsageError

if TYPE_CHECKING:
    from traceview.analyses.core.common import Shared

GROUP_BY = tuple(KernelGroupBy)
SORT_KEYS = tuple(KernelSort)
_Ids = Sequence[int] | np.ndarray  # group ids
_FLOAT_EXACT = 1 << 53  # ns values below this convert to float64 exactly
_SORT_FIELD = {
    "count": "count",
    "duration": "mean_ns",
    "percentage": "pct_launches",
    "duration-percentage": "pct_time",
    "total": "total_ns",
    "max": "max_ns",
    "p99": "p99_ns",
}


@dataclass(frozen=True)
class KernelOptions:
    """What to select and how to order it."""

    sort: KernelSort = KernelSort.DURATION_PERCENTAGE
    top: int = 10
    group_by: KernelGroupBy = KernelGroupBy.NAME
    include: tuple[str, ...] = ("kernel",)
    name_regex: str | None = None
    steps: Steps = ()  # step numbers and (first, last) ranges; the report's: the steps chosen


@dataclass(frozen=True)
class KernelRow:
    """Statistics of one kernel name (or one short name with --group-by short), in ns."""

    name: str
    short_name: str  # as displayed: told apart from the other names (docs/metrics.md)
    variants: int  # distinct names merged (--group-by short), else 1
    count: int
    total_ns: int
    mean_ns: float
    std_ns: float
    min_ns: int
    max_ns: int
    p50_ns: int
    p90_ns: int
    p99_ns: int
    pct_launches: float
    pct_time: float

    @property
    def fused_ops(self) -> tuple[str, ...] | None:
        """The ops a Triton kernel's name says it fused (None for other names)."""
        return fused_ops(self.name)

    def as_dict(self) -> dict[str, Any]:
        """The row as JSON and CSV give it: every duration in µs (``total_ns`` → ``total_us``),
        then ``fused_ops`` (a list, or None)."""
        out = us_fields(self)
        ops = self.fused_ops
        out["fused_ops"] = None if ops is None else list(ops)
        return out


@dataclass(frozen=True)
class KernelReport:
    """The result of ``traceview kernels``: every rendering reads this one object."""

    trace: TraceSummary
    options: KernelOptions
    count: int
    total_ns: int
    distinct: int
    rows: Sequence[KernelRow]  # a list, or made as they are read (``streamed``)
    left_out_rows: int = 0
    left_out_count: int = 0
    left_out_ns: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def gpu_busy_ns(self) -> int:
        """The devices' busy time, summed (``trace.devices`` has it per device)."""
        return sum(d.busy_ns for d in self.trace.devices)

    @property
    def gpu_busy_pct(self) -> float:
        """Summed busy time / summed device windows × 100: per device when there is one."""
        window = sum(d.window_ns for d in self.trace.devices)
        return 100.0 * sum(d.busy_ns for d in self.trace.devices) / window if window else 0.0


def analyse_kernels(
    events: TraceEvents,
    options: KernelOptions,
    shared: Shared | None = None,
    shown_names: bool = True,
    streamed: bool = False,
) -> KernelReport:
    """Select GPU rows by kind, steps and name; compute per-name statistics; sort; cut.

    The header's device figures are over all GPU activity (kernel, memcpy, memset) of the
    selected steps, or of the whole trace: the one device definition every command uses
    (``shared``: the whole trace's summary, when the caller has it already).
    ``shown_names=False``: a row's ``short_name`` is its full name, for a caller that shows
    none (the snapshot): the display names take a pass over every distinct name.
    ``streamed``: the rows are made as they are read, a chunk at a time (an output of every
    row: 10^6 KernelRow objects would hold ~1 GB); the report keeps the row-sized arrays.
    """
    check_options(options)
    mask, notes, options = _selection(events, options)
    steps = _step_rows(events, options)
    # before our row-sized temporaries, so the peaks do not stack
    if steps is None and shared is not None:
        trace = shared.trace
    else:
        trace = summarize(events, None if steps is None else usage(events, steps))
    del steps
    gpu = events.gpu
    every = bool(mask.all())  # the column itself, not a copy (kernels only, no --pstep)
    selected = None  # group and dur: the selected rows (else the columns, rows outside too)
    if options.group_by == "fused-op":
        ops, group, dur = fused_op_groups(events, mask)
        groups = _Labels(ops, ops, [1] * len(ops))
    elif options.group_by in ("category", "op"):
        grouped = category_groups if options.group_by == "category" else launching_op_groups
        labels_of, group = grouped(events, mask)
        groups = _Labels(labels_of, labels_of, [1] * len(labels_of))
        dur = gpu.dur if every else gpu.dur[mask]
    else:
        # the columns themselves, the rows left out in a group of their own: no copy of
        # the selected durations and names (12 B a row) held through the analysis
        dur, selected = gpu.dur, None if every else mask
        shown = "every" if streamed else "asked" if shown_names else "none"
        groups, group = _groups(events.names, gpu.name, options.group_by, shown, selected)
    labels = groups.names
    stats = _Stats.of(group, dur, len(labels), selected)
    count = int(np.count_nonzero(mask))  # rows, not the fused ops' (row, op) pairs
    kept = _ranked(stats, groups, options.sort, options.top)
    details = stats.detailed(kept)
    if streamed:  # rows made later need no row-sized column (2.5 M rows: 20-40 MB)
        stats = replace(stats, group=stats.group[:0], dur=stats.dur[:0], selected=None)
    make = partial(_rows, stats, details, groups)
    rows = rows_of(make, np.asarray(kept, dtype=np.int64), streamed)
    return KernelReport(
        trace=trace,
        options=options,
        count=count,
        total_ns=stats.total_ns,
        distinct=len(labels),
        rows=rows,
        left_out_rows=len(labels) - len(rows),
        left_out_count=stats.total_count - int(stats.count[kept].sum()),
        left_out_ns=stats.total_ns - sums.total(stats.total[kept]),
        notes=notes,
    )


def check_options(options: KernelOptions) -> None:
    """Usage errors, before any reading: every option value that does not need the trace."""
    check_choice("--sort", options.sort, KernelSort)
    check_choice("--group-by", options.group_by, KernelGroupBy)
    unknown = set(options.include) - set(GPU_KINDS)
    if unknown:
        raise UsageError(
            f"--include: unknown kind {sorted(unknown)[0]!r} (known: {', '.join(GPU_KINDS)})"
        )
    if options.top < 0:
        raise UsageError(f"--top {options.top}: must not be negative (0 shows all)")
    if options.name_regex is not None:
        name_regex(options.name_regex)


def _selection(
    events: TraceEvents, options: KernelOptions
) -> tuple[np.ndarray, list[str], KernelOptions]:
    """Mask over GPU rows for the requested kinds, steps and name regex; the options with
    the steps chosen, one by one (step ranges are intersected with the steps that exist)."""
    chosen = select(
        events, Selection(options.include, options.steps, name_regex=options.name_regex)
    )
    if options.steps:
        options = replace(options, steps=chosen.steps)
    return chosen.mask, chosen.notes, options


def _step_rows(events: TraceEvents, options: KernelOptions) -> np.ndarray | None:
    """The GPU rows (every kind) of the --pstep steps; None without --pstep."""
    if not options.steps:
        return None
    return np.flatnonzero(in_steps(events, list(options.steps), step_windows(events)))


@dataclass(frozen=True)
class _Labels:
    """Per group id: its name, the name shown, how many distinct names it merged."""

    names: Sequence[str]
    shown: Sequence[str]
    variants: list[int]


@dataclass(frozen=True)
class _Shown(Sequence[str]):
    """The displayed name of each group, found when asked for (the rows shown, or every
    group for ``--sort name``): colliding names are told apart lazily."""

    names: Sequence[str]
    display: Mapping[str, str]

    def __getitem__(self, g: int) -> str:  # type: ignore[override]
        return self.display[self.names[g]]

    def __len__(self) -> int:
        return len(self.names)


def _groups(
    names: Sequence[str],
    name_ids: np.ndarray,
    group_by: str,
    shown_names: str = "asked",
    selected: np.ndarray | None = None,
) -> tuple[_Labels, np.ndarray]:
    """Group labels (decided over every selected name) and the group id of every row.
    ``shown_names``: the display names of the groups, each worked out when ``asked`` for
    (a table shows a few), of ``every`` group at once and packed (every row is shown), or
    ``none`` (the full names). ``selected``: a mask of the rows grouped; each row outside
    it is in group ``len(labels)``."""
    if selected is None:
        used, group = dense_ids(name_ids, len(names), narrow=True)  # held to the end
    else:
        keys = np.where(selected, name_ids, len(names))  # outside: the id after every name
        used, group = dense_ids(keys, len(names) + 1, narrow=True)
        del keys
        used = used[used < len(names)]
    labels = subset(names, used)  # the names themselves when every one is used
    if group_by == "name":
        shown: Sequence[str] = labels
        if shown_names == "asked":
            shown = _Shown(labels, display_names(labels))
        elif shown_names == "every":
            shown = display_names_in_order(labels)
        return _Labels(labels, shown, [1] * len(labels)), group
    ids: dict[str, int] = {}  # short name → group id, in order of first appearance
    short = [ids.setdefault(s, len(ids)) for s in short_names(labels)]
    merged = np.bincount(np.array(short, dtype=np.int64), minlength=len(ids)).tolist()
    to_short = np.array([*short, len(ids)], group.dtype)  # the rows outside stay outside
    return _Labels(list(ids), list(ids), merged), to_short[group]


def fused_op_groups(
    events: TraceEvents, mask: np.ndarray
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Op labels, and per (selected row, op) pair its group and share of the row's duration
    (analyses.core.fused: a fused Triton kernel shared equally among its ops, any other
    kernel wholly its leaf op's)."""
    rows = positions_where(mask)
    links = link_ops(events, with_top=False) if len(events.cpu) else None
    leaf = (
        np.full(len(rows), -1, dtype=np.int64)
        if links is None
        else fusion_leaf(events, links, rows)
    )
    del links  # the launches' links: for the leaf ops alone
    shares = fused_op_shares(events, rows, leaf)
    used, group = dense_ids(shares.label, len(shares.labels), narrow=True)
    return [shares.labels[i] for i in used.tolist()], group, shares.share


def launching_op_groups(events: TraceEvents, mask: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Op labels and the group of every selected row: its leaf op, the ops torch.compile
    records as one (analyses.core.fused.launching_op)."""
    rows = np.flatnonzero(mask)
    if len(events.cpu):
        leaf = link_ops(events, with_top=False).leaf[rows]  # the launches' links go here
    else:
        leaf = np.full(len(rows), -1, dtype=np.int64)
    labels, group = op_groups(events, rows, leaf)
    del leaf
    used, dense = dense_ids(group, len(labels), narrow=True)
    return [labels[i] for i in used.tolist()], dense


def category_groups(events: TraceEvents, mask: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Category labels and the group id of every selected row (ops linked when the trace's
    CPU rows are read, so a kernel launched by aten::mm is a GEMM)."""
    links = link_ops(events, with_top=False) if len(events.cpu) else None
    category = categorize(events, links, dtype=np.int8)[mask]
    used, group = dense_ids(category, len(CATEGORIES))
    return [CATEGORIES[i] for i in used.tolist()], group


@dataclass(frozen=True)
class _Stats:
    """Count, total, min and max of every group as arrays by group id (ns), and the totals;
    the other figures (std, percentiles) only of the groups whose rows are built
    (``detailed``): with 10^6 names a table shows ten of them."""

    group: np.ndarray  # per row
    dur: np.ndarray
    count: np.ndarray
    total: np.ndarray
    minimum: np.ndarray
    maximum: np.ndarray
    total_count: int
    total_ns: int
    # the mask of the rows counted when ``group`` and ``dur`` are whole columns (each row
    # outside it in group ``len(count)``); None when they are the rows counted
    selected: np.ndarray | None = None

    @classmethod
    def of(
        cls, group: np.ndarray, dur: np.ndarray, groups: int, selected: np.ndarray | None = None
    ) -> _Stats:
        span = groups + (selected is not None)
        count, total, minimum, maximum = (
            a[:groups] for a in moments.extremes(group, dur, span)
        )  # fmt: skip
        return cls(
            group, dur, count, total, minimum, maximum, int(count.sum()), sums.total(total),
            selected,
        )  # fmt: skip

    @property
    def span(self) -> int:
        """The group ids in ``group``: the groups, and the rows outside them if any."""
        return len(self.count) + (self.selected is not None)

    def positions(self, rows: np.ndarray) -> np.ndarray:
        """Where ``rows`` (ascending, counted) are among the rows counted, for
        moments.accumulate: its batches are cut there, so each figure is the same to the
        last bit whether the rows outside are in ``group`` or not. A block of rows at a
        time: no row-sized running count."""
        if self.selected is None:
            return rows
        selected, block = self.selected, _BLOCK
        out = np.empty(len(rows), dtype=np.int64)
        cuts = np.searchsorted(rows, np.arange(0, len(selected) + block, block)).tolist()
        before = 0  # rows counted before the block
        for i, lo in enumerate(range(0, len(selected), block)):
            part = selected[lo : lo + block]
            a, b = cuts[i], cuts[i + 1]
            if b > a:
                out[a:b] = np.cumsum(part, dtype=np.int32)[rows[a:b] - lo]
                out[a:b] += before - 1
            before += int(np.count_nonzero(part))
        return out

    def field(self, name: str) -> np.ndarray | None:
        """The values of a KernelRow field for every group, as the row computes them, or None
        when numpy floats could differ from the row's (ns sums beyond 2^53: exact ints only)."""
        if name == "count":
            return self.count
        if self.total_ns >= _FLOAT_EXACT:  # every other ns figure is at most the total
            return None
        total = self.total.astype(np.float64)
        if name == "mean_ns":
            mean: np.ndarray = total / self.count
            return mean
        if name == "pct_launches":
            return 100.0 * self.count.astype(np.float64) / self.total_count
        if name == "pct_time":
            return 100.0 * total / self.total_ns if self.total_ns else np.zeros(len(total))
        if name == "total_ns":
            return total
        if name == "max_ns":
            return self.maximum.astype(np.float64)
        p99 = nearest_rank(self.group, self.dur, self.span, (99,))[99][: len(self.count)]
        return p99.astype(np.float64)

    def detailed(self, kept: _Ids) -> _Details:
        """Std and percentiles of the ``kept`` groups, from their rows only (the same figures,
        to the last bit, as from every row)."""
        groups = len(self.count)
        # all of them (--top 0, the CSV), or groups holding most rows: no subset to make
        # (its rows, positions and durations would be 24 B a row at once)
        ids = np.asarray(kept, dtype=np.int64)
        if len(ids) == groups or 2 * int(self.count[ids].sum()) > self.total_count:
            return _Details.of(
                np.arange(groups), self.group, self.dur, self.span, counted=self.selected
            )  # fmt: skip
        position: np.ndarray = np.full(
            self.span, -1, dtype=np.int32 if groups < 2**31 else np.int64
        )  # fmt: skip
        position[ids] = np.arange(len(ids))
        rows = np.flatnonzero((position >= 0)[self.group])  # a byte a row at once
        at = position[self.group[rows]]
        return _Details.of(position, at, self.dur[rows], len(ids), self.positions(rows))


_BLOCK = 1 << 18  # rows a pass of _Stats.positions (its temporaries a few MB)


@dataclass(frozen=True)
class _Details:
    """Std and p50/p90/p99 of some groups (ns): group ``g``'s at ``position[g]``."""

    position: np.ndarray
    std: np.ndarray
    pcts: dict[int, np.ndarray]

    @classmethod
    def of(
        cls,
        position: np.ndarray,
        group: np.ndarray,
        dur: np.ndarray,
        groups: int,
        rows: np.ndarray | None = None,
        counted: np.ndarray | None = None,
    ) -> _Details:
        """``group``: each row's position among the groups; ``rows``: where the rows are in
        the whole selection (None: they are all of it); ``counted``: the mask of the rows
        selected when the rows are whole columns (the others in groups of their own)."""
        std = moments.accumulate(group, dur, groups, positions=rows, counted=counted).std()
        return cls(position, std, nearest_rank(group, dur, groups, (50, 90, 99)))


def _ranked(stats: _Stats, groups: _Labels, sort: str, top: int) -> _Ids:
    """The group ids of the rows to show, in order: the ``top`` first (all for 0) by
    ``_sort_key(sort)`` (``name``: the name shown), without a row per group (all of them:
    one sort of the values; a few: a partition, then the candidates sorted)."""
    key = _sort_key(sort)  # checks ``sort``
    labels = groups.names
    n = len(labels)
    if sort == "name":
        by_shown = lambda g: (groups.shown[g], labels[g])  # noqa: E731 (ties: hostile names)
        everyone = range(n)
        return heapq.nsmallest(top, everyone, key=by_shown) if top else sorted(
            everyone, key=by_shown
        )  # fmt: skip
    values = stats.field(_SORT_FIELD[sort])
    if values is None:  # beyond exact floats: compare the rows themselves
        rows = sorted(_rows(stats, stats.detailed(range(n)), groups, range(n)), key=key)
        index = {label: g for g, label in enumerate(labels)}
        return [index[r.name] for r in rows[: top or None]]
    if not 0 < top < n:  # every row
        return _by_value(values, labels)
    # only rows at least as large as the top-th can be among the top
    candidates = np.flatnonzero(values >= np.partition(values, n - top)[n - top])
    # the values of the candidates only: a list of every group's would be 32 bytes a group
    listed = dict(zip(candidates.tolist(), values[candidates].tolist(), strict=True))
    order = lambda g: (-listed[g], labels[g])  # noqa: E731 (the row key, on group ids)
    return heapq.nsmallest(top, listed, key=order)


def _by_value(values: np.ndarray, labels: Sequence[str]) -> np.ndarray:
    """Every group id, largest value first, ties by label (the order ``_ranked`` gives)
    with one sort of the values: only the groups of a run of equal values are compared by
    their labels."""
    order = np.argsort(-values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1], True])
    for lo, hi in itertools.pairwise(starts.tolist()):
        if hi - lo > 1:
            order[lo:hi] = sorted(order[lo:hi].tolist(), key=labels.__getitem__)
    return order


def _rows(stats: _Stats, details: _Details, groups: _Labels, kept: _Ids) -> list[KernelRow]:
    """The statistics of the groups ``kept``, in that order."""
    ids = np.asarray(kept, dtype=np.int64)
    at = details.position[ids]
    columns = zip(
        ids.tolist(), stats.count[ids].tolist(), stats.total[ids].tolist(),
        details.std[at].tolist(), stats.minimum[ids].tolist(), stats.maximum[ids].tolist(),
        details.pcts[50][at].tolist(), details.pcts[90][at].tolist(),
        details.pcts[99][at].tolist(), strict=True,
    )  # fmt: skip
    total_count, total_ns = stats.total_count, stats.total_ns
    return [
        KernelRow(
            name=groups.names[g],
            short_name=groups.shown[g],
            variants=groups.variants[g],
            count=count,
            total_ns=total,
            mean_ns=total / count,
            std_ns=std,
            min_ns=minimum,
            max_ns=maximum,
            p50_ns=p50,
            p90_ns=p90,
            p99_ns=p99,
            pct_launches=100.0 * count / total_count,
            pct_time=100.0 * total / total_ns if total_ns else 0.0,
        )
        for g, count, total, std, minimum, maximum, p50, p90, p99 in columns
    ]


def _sort_key(sort: str) -> Any:
    """Key for list.sort: largest first, ties by name; ``name`` sorts alphabetically."""
    if sort == "name":
        return lambda r: (r.short_name, r.name)
    field_name = _SORT_FIELD[sort]
    return lambda r: (-getattr(r, field_name), r.name)


def selection(events: TraceEvents, options: KernelOptions) -> tuple[np.ndarray, KernelOptions]:
    """The mask over GPU rows that ``analyse_kernels`` selects, and the options with the
    steps chosen (the per-rank summaries of a run select like the one-file table)."""
    mask, _, options = _selection(events, options)
    return mask, options


def sort_key(sort: str) -> Any:
    """The table's row order for ``--sort`` (a usage error for an unknown key): largest
    first, ties by name; ``name`` alphabetically. The roll-up of several ranks sorts so."""
    return _sort_key(sort)


__all__ = [
    "KERNEL",
    "SORT_KEYS",
    "KernelOptions",
    "KernelReport",
    "KernelRow",
    "analyse_kernels",
    "check_options",
    "selection",
    "sort_key",
]
