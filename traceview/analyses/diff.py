"""Compare two snapshots (a trace side is snapshotted in memory first) and evaluate the CI gate.

Three ways to compare, chosen from the ProfilerSteps available (definitions: docs/metrics.md):
``median`` when both sides have at least two (selected) steps — every figure is the median of
its per-step values, which is robust to a slow step and to different step counts; ``steps``
when ``--pstep`` selects fewer — sums over the selected steps; ``total`` otherwise — the
whole-trace figures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from traceview import __version__
from traceview.analyses.core.categories import by_name
from traceview.analyses.core.names import display_names, short_names
from traceview.analyses.core.steps import Steps, describe_ranges, pick_steps, step_ranges
from traceview.analyses.explain import OTHER_KERNELS, Explain, explain
from traceview.analyses.snapshot import (
    KernelStat,
    OtherKernels,
    Snapshot,
    SnapshotTrace,
    StepStat,
    digest,
)
from traceview.choices import DiffGroupBy, check_choice
from traceview.errors import UsageError

MIN_STEPS_FOR_MEDIAN = 2
CPU_BOUND_BUSY_PCT = 80.0  # a side whose GPUs are busy less of its median step is CPU-bound
GROUP_BY = tuple(DiffGroupBy)


@dataclass(frozen=True)
class DiffOptions:
    """Selection (``steps``), gate limits and how many kernel rows to show."""

    steps: Steps = ()  # step numbers and (first, last) ranges; the report's: the steps compared
    max_regression_pct: float | None = None
    max_idle_regression_pct: float | None = None
    min_share_pct: float = 1.0
    min_time_ns: int = 10_000
    top: int = 20
    allow_empty_baseline: bool = False
    group_by: DiffGroupBy = DiffGroupBy.NAME  # by name, short name, category or launching op
    explain: bool = False  # the change in median step time as a waterfall of exact parts
    new_steps: Steps = ()  # NEW's steps when they differ from BASE's (two ranges of one trace)


@dataclass(frozen=True)
class Side:
    """One input of a diff: its path, ``trace`` or ``snapshot``, and its snapshot."""

    path: str
    source: str
    snapshot: Snapshot


@dataclass(frozen=True)
class SideView:
    """What the report says about one side: ``steps`` compared (none in ``total`` mode), the
    number of steps it has, and the median of its steps' GPU busy time / step duration (None
    without steps or device figures): below CPU_BOUND_BUSY_PCT its step time is CPU-bound."""

    path: str
    source: str
    traceview_version: str
    trace: SnapshotTrace
    steps: tuple[int, ...]
    available_steps: int
    step_busy_pct: float | None = None

    @property
    def cpu_bound(self) -> bool:
        return self.step_busy_pct is not None and self.step_busy_pct < CPU_BOUND_BUSY_PCT


@dataclass(frozen=True)
class Change:
    """One figure before and after; ``pct`` is None when there is no baseline to divide by."""

    key: str
    label: str
    before: float | None
    after: float | None

    @property
    def delta(self) -> float | None:
        return None if self.before is None or self.after is None else self.after - self.before

    @property
    def pct(self) -> float | None:
        return percent_change(self.before, self.after)


@dataclass(frozen=True)
class KernelChange:
    """One kernel before and after; ``status`` is ``changed``, ``new`` or ``vanished``.

    ``gated``: subject to ``--max-regression`` (on both sides, at least ``--min-share`` of the
    baseline kernel time, above ``--min-time`` on one side); ``regressed``: it failed it.
    """

    name: str
    status: str
    count_before: float
    count_after: float
    time_before_us: float
    time_after_us: float
    mean_before_us: float | None
    mean_after_us: float | None
    share_before_pct: float
    gated: bool
    regressed: bool
    short_name: str  # as displayed: told apart from every kernel name of both sides

    @property
    def delta_us(self) -> float:
        return self.time_after_us - self.time_before_us

    @property
    def pct(self) -> float | None:
        return percent_change(self.time_before_us, self.time_after_us)

    @property
    def mean_delta_us(self) -> float | None:
        if self.mean_before_us is None or self.mean_after_us is None:
            return None
        return self.mean_after_us - self.mean_before_us


@dataclass(frozen=True)
class Failure:
    """One gate check that failed: ``what`` is ``kernel_time``, ``idle`` or ``kernel``;
    ``pct`` is None for a growth from zero (a baseline without any: no percentage)."""

    what: str
    name: str
    before: float
    after: float
    pct: float | None
    limit_pct: float
    short_name: str = ""  # a kernel's name as displayed


@dataclass(frozen=True)
class Gate:
    """The limits in force and the checks that failed."""

    max_regression_pct: float | None
    max_idle_regression_pct: float | None
    min_share_pct: float
    min_time_us: float
    failures: tuple[Failure, ...]

    @property
    def active(self) -> bool:
        return self.max_regression_pct is not None or self.max_idle_regression_pct is not None

    @property
    def passed(self) -> bool:
        return not self.failures


HEADLINE_MOVES = 3  # the largest moves the headline names


@dataclass(frozen=True)
class Headline:
    """What a reader needs first: the change of kernel time and of step time (%), and the
    groups (kernels, ops, …, as compared) whose time moved most, new and vanished included,
    by |Δ time|."""

    kernel_time_pct: float | None
    step_time_pct: float | None
    moves: tuple[KernelChange, ...]


@dataclass(frozen=True)
class DiffReport:
    """The result of ``traceview diff``: every rendering reads this one object."""

    base: SideView
    new: SideView
    mode: str
    figures: tuple[Change, ...]
    kernels: tuple[KernelChange, ...]
    new_kernels: tuple[KernelChange, ...]
    vanished: tuple[KernelChange, ...]
    left_out: dict[str, int]
    gate: Gate
    options: DiffOptions
    notes: tuple[str, ...]
    headline: Headline | None = None
    explain: Explain | None = None


@dataclass(frozen=True)
class _Figures:
    """One side's figures in the chosen mode; kernels: name → (count, time µs, mean µs)."""

    kernel_time_us: float
    kernel_count: float
    idle_us: float
    step_time_us: float | None
    gpu_busy_us: float | None
    kernels: dict[str, tuple[float, float, float]]
    members: dict[str, list[str]]  # each kernel key's full names (one unless by short name)


def percent_change(before: float | None, after: float | None) -> float | None:
    """(after − before) / before × 100; 0 when both are 0; None without a baseline."""
    if before is None or after is None or (before == 0 and after != 0):
        return None
    return 0.0 if before == 0 else (after - before) / before * 100


def check_options(options: DiffOptions) -> None:
    """Reject option values that make no sense, before any file is read."""
    if options.new_steps and not options.steps:
        raise UsageError("--new-pstep: give BASE's steps with --pstep too")
    if options.min_share_pct > 100:
        raise UsageError(f"--min-share {options.min_share_pct:g}%: must be at most 100%")
    if options.min_time_ns < 0:
        raise UsageError("--min-time: must not be negative")
    if options.top < 0:
        raise UsageError(f"--top {options.top}: must not be negative (0 shows all)")
    check_choice("--group-by", options.group_by, DiffGroupBy)


def compare(base: Side, new: Side, options: DiffOptions) -> DiffReport:
    """Figures, per-kernel changes (by |Δ time|), new and vanished kernels, and the gate."""
    check_options(options)
    if options.group_by in ("op", "fused-op"):
        _check_ops(base, "BASE", options.group_by)
        _check_ops(new, "NEW", options.group_by)
    b_idx = _select(base, "BASE", options.steps)
    n_idx = _select(new, "NEW", options.new_steps or options.steps)
    if min(len(b_idx), len(n_idx)) >= MIN_STEPS_FOR_MEDIAN:
        mode = "median"
    else:
        mode = "steps" if options.steps or options.new_steps else "total"
    if options.steps:  # every step asked for is on both sides: the base's are the ones compared
        options = replace(options, steps=tuple(base.snapshot.steps[i].step for i in b_idx))
    b = _figures(base.snapshot, b_idx, mode, options.group_by)
    a = _figures(new.snapshot, n_idx, mode, options.group_by)
    changed, added, gone, hidden = _kernel_changes(base, new, b, a, options)
    figures = (
        Change("kernel_time_us", "kernel time (µs)", b.kernel_time_us, a.kernel_time_us),
        Change("gpu_busy_us", "GPU busy (µs)", b.gpu_busy_us, a.gpu_busy_us),
        Change("kernel_count", "kernel launches", b.kernel_count, a.kernel_count),
        Change("idle_us", "GPU idle (µs)", b.idle_us, a.idle_us),
        Change("step_time_us", "step time (µs)", b.step_time_us, a.step_time_us),
    )
    waterfall = None
    if options.explain:
        _check_parts(base, "BASE")
        _check_parts(new, "NEW")
        by = options.group_by
        waterfall = explain(
            base.snapshot, new.snapshot, b_idx, n_idx, lambda snap: _explain_groups(snap, by)
        )
    top = options.top or None
    base_view = _view(base, b_idx if mode != "total" else [], b_idx)
    new_view = _view(new, n_idx if mode != "total" else [], n_idx)
    return DiffReport(
        base=base_view,
        new=new_view,
        mode=mode,
        figures=figures,
        kernels=tuple(changed[:top]),
        new_kernels=tuple(added[:top]),
        vanished=tuple(gone[:top]),
        left_out={
            "kernels": len(changed) - len(changed[:top]),
            "new": len(added) - len(added[:top]),
            "vanished": len(gone) - len(gone[:top]),
        },
        gate=_gate(options, figures, changed, waterfall),
        options=options,
        notes=tuple(_notes(base, new, hidden) + _cpu_bound_notes(base_view, new_view)),
        headline=_headline(figures, [*changed, *added, *gone]),
        explain=waterfall,
    )


def _check_parts(side: Side, which: str) -> None:
    """``--explain`` needs each step's time in parts, which only a trace gives."""
    if not side.snapshot.step_parts:
        raise UsageError(
            f"--explain: {which} {side.path} is a {side.source} without step parts (snapshot "
            "files keep none; a trace with 1+ steps has them): diff the traces themselves"
        )


def _explain_groups(snap: Snapshot, group_by: str) -> dict[str, list[KernelStat | OtherKernels]]:
    """Each group's kernel rows, as the diff groups them; the kernels below the snapshot's
    cut as one group (every kernel is in one group)."""
    by_name = {k.name: k for k in (_by_op(snap, group_by) if _ops(group_by) else snap.kernels)}
    out: dict[str, list[KernelStat | OtherKernels]] = {
        key: [by_name[n] for n in names] for key, names in _members(snap, group_by).items()
    }
    if not _ops(group_by) and snap.other.count:
        out[OTHER_KERNELS] = [snap.other]
    return out


def _headline(figures: tuple[Change, ...], rows: list[KernelChange]) -> Headline:
    by_key = {f.key: f for f in figures}
    moved = sorted((r for r in rows if r.delta_us), key=lambda r: (-abs(r.delta_us), r.name))
    return Headline(
        by_key["kernel_time_us"].pct, by_key["step_time_us"].pct, tuple(moved[:HEADLINE_MOVES])
    )


def _check_ops(side: Side, which: str, group_by: str) -> None:
    """``--group-by op`` / ``fused-op`` need the kernels by launching / fused op, which only a
    trace read with its CPU ops gives (a snapshot file has none)."""
    if not _by_op(side.snapshot, group_by) and side.snapshot.totals.count:
        raise UsageError(
            f"--group-by {group_by}: {which} {side.path} is a {side.source} without launching ops "
            "(only a single trace, read with its CPU ops, has them); diff the traces themselves"
        )


def _cpu_bound_notes(base: SideView, new: SideView) -> list[str]:
    """A note per side whose step time is CPU-bound: under the profiler its step time holds
    the profiler's own CPU overhead, so GPU busy and kernel time compare the work better."""
    return [
        f"{which}: step time is CPU-bound under the profiler (GPUs busy "
        f"{side.step_busy_pct:.1f}% of the median step): compare kernel time and GPU busy first"
        for which, side in (("base", base), ("new", new))
        if side.cpu_bound
    ]


def describe_steps(steps: Sequence[int]) -> str:
    """``5-10, 12`` style list of step numbers, or ``none``."""
    return describe_ranges(step_ranges(steps)) if steps else "none"


def _select(side: Side, which: str, steps: Steps) -> list[int]:
    """Positions in ``snapshot.steps`` of the steps to compare: the ``--pstep`` ones, or all."""
    numbers = [s.step for s in side.snapshot.steps]
    if not steps:
        return list(range(len(numbers)))
    position = {n: i for i, n in enumerate(numbers)}
    chosen, missing = pick_steps(steps, sorted(numbers))
    if missing:
        kept = side.snapshot.steps_left_out
        hint = f"; the snapshot keeps only the last {len(numbers)} steps" if kept else ""
        raise UsageError(
            f"--pstep: no ProfilerStep {describe_ranges(missing)} in {which} {side.path} "
            f"(steps found: {describe_steps(numbers)}{hint})"
        )
    return [position[n] for n in chosen]


def _figures(snap: Snapshot, idx: list[int], mode: str, group_by: str) -> _Figures:
    """One side's figures: whole-trace totals, sums over steps, or per-step medians; kernels
    by exact name, or summed per short name or category (per step, before any median)."""
    durations = [_step_time(snap.steps[i]) for i in idx]
    step_time = float(np.median(durations)) if durations else None
    members = _members(snap, group_by)
    by_name = {k.name: k for k in (_by_op(snap, group_by) if _ops(group_by) else snap.kernels)}
    if mode == "total":
        t = snap.totals
        kernels = {}
        for key, names in members.items():
            count = sum(by_name[n].count for n in names)
            total = sum(by_name[n].total_us for n in names)
            if count:
                kernels[key] = (float(count), total, total / count)
        return _Figures(
            t.total_us, float(t.count), t.idle_us, step_time, t.gpu_busy_us, kernels, members
        )
    reduce: Callable[[Any], Any] = np.median if mode == "median" else np.sum
    steps = [snap.steps[i] for i in idx]
    out: dict[str, tuple[float, float, float]] = {}
    for key, names in members.items():
        counts = np.sum([np.array(by_name[n].step_counts)[idx] for n in names], axis=0)
        times = np.sum([np.array(by_name[n].step_totals_us)[idx] for n in names], axis=0)
        if counts.sum() > 0:
            mean = float(times.sum()) / int(counts.sum())
            out[key] = (float(reduce(counts)), float(reduce(times)), mean)
    return _Figures(
        kernel_time_us=float(reduce([s.kernel_time_us for s in steps])),
        kernel_count=float(reduce([s.kernels for s in steps])),
        idle_us=float(reduce([s.idle_us for s in steps])),
        step_time_us=step_time,
        gpu_busy_us=float(reduce([_busy(s) for s in steps])) if _has_busy(steps) else None,
        kernels=out,
        members=members,
    )


def _by_op(snap: Snapshot, group_by: str) -> tuple[KernelStat, ...]:
    """The snapshot's rows by launching op or by fused op."""
    return snap.fused_ops if group_by == "fused-op" else snap.ops


def _ops(group_by: str) -> bool:
    return group_by in ("op", "fused-op")


def _members(snap: Snapshot, group_by: str) -> dict[str, list[str]]:
    """Kernel key → the full names it stands for. Categories come from the kernel name rules
    alone: a snapshot has no CPU ops to link; launching ops are the snapshot's ``ops``."""
    names = [k.name for k in (_by_op(snap, group_by) if _ops(group_by) else snap.kernels)]
    if group_by in ("name", "op", "fused-op"):
        return {n: [n] for n in names}
    keys = short_names(names) if group_by == "short" else [by_name(n) for n in names]
    members: dict[str, list[str]] = {}
    for name, key in zip(names, keys, strict=True):
        members.setdefault(key, []).append(name)
    return members


def _kernel_changes(
    base: Side, new: Side, b: _Figures, a: _Figures, options: DiffOptions
) -> tuple[list[KernelChange], list[KernelChange], list[KernelChange], int]:
    """Kernels on both sides (by |Δ time|), new ones, vanished ones, and how many were hidden
    below the other side's storage cut."""
    hidden_before = set(base.snapshot.other.digests)
    hidden_after = set(new.snapshot.other.digests)
    changed: list[KernelChange] = []
    added: list[KernelChange] = []
    gone: list[KernelChange] = []
    hidden = 0
    names = sorted(b.kernels.keys() | a.kernels.keys())
    merged = options.group_by in ("short", "category", "op", "fused-op")
    shown = {n: n for n in names} if merged else display_names(names)
    for name in names:
        before, after = b.kernels.get(name), a.kernels.get(name)
        if (before is None and _hidden(a.members[name], hidden_before)) or (
            after is None and _hidden(b.members[name], hidden_after)
        ):
            hidden += 1
            continue
        row = _kernel_change(name, shown[name], (before, after), b.kernel_time_us, options)
        {"changed": changed, "new": added, "vanished": gone}[row.status].append(row)
    changed.sort(key=lambda k: (-abs(k.delta_us), k.name))
    added.sort(key=lambda k: (-k.time_after_us, k.name))
    gone.sort(key=lambda k: (-k.time_before_us, k.name))
    return changed, added, gone, hidden


def _hidden(names: list[str], digests: set[str]) -> bool:
    """Whether the other side left any of these names out of its snapshot (below its cut)."""
    return any(digest(n) in digests for n in names)


_Figure = tuple[float, float, float] | None


def _kernel_change(
    name: str,
    shown: str,
    sides: tuple[_Figure, _Figure],
    base_kernel_time_us: float,
    options: DiffOptions,
) -> KernelChange:
    before, after = sides
    status = "new" if before is None else "vanished" if after is None else "changed"
    count_b, time_b, mean_b = before or (0.0, 0.0, None)
    count_a, time_a, mean_a = after or (0.0, 0.0, None)
    share = 100 * time_b / base_kernel_time_us if base_kernel_time_us > 0 else 0.0
    gated = (
        status == "changed"
        and share >= options.min_share_pct
        and max(time_b, time_a) * 1000 >= options.min_time_ns
    )
    pct = percent_change(time_b, time_a)
    limit = options.max_regression_pct
    return KernelChange(
        name=name,
        status=status,
        count_before=count_b,
        count_after=count_a,
        time_before_us=time_b,
        time_after_us=time_a,
        mean_before_us=mean_b,
        mean_after_us=mean_a,
        share_before_pct=share,
        gated=gated,
        regressed=gated and limit is not None and pct is not None and pct > limit,
        short_name=shown,
    )


def _gate(
    options: DiffOptions,
    figures: tuple[Change, ...],
    changed: list[KernelChange],
    waterfall: Explain | None = None,
) -> Gate:
    """Every failed check: total kernel time, each gated kernel, device idle time, and with
    ``--explain`` each part of the step time's change (its Δ as a % of the base step time)."""
    by_key = {f.key: f for f in figures}
    failures: list[Failure] = []
    limit = options.max_regression_pct
    empty_ok = options.allow_empty_baseline
    if limit is not None:
        failures += _exceeds(by_key["kernel_time_us"], "kernel_time", limit, empty_ok)
        failures += [_kernel_failure(k, limit) for k in changed if k.regressed]
        if waterfall is not None and waterfall.base_ns > 0:
            base_us = waterfall.base_ns / 1000
            for p in waterfall.parts:
                pct = 100 * p.delta_ns / waterfall.base_ns
                if pct > limit:
                    after = base_us + p.delta_ns / 1000
                    name = f"{p.group} ({p.kind})"
                    failures.append(Failure("part", name, base_us, after, pct, limit, name))
    if options.max_idle_regression_pct is not None:
        failures += _exceeds(by_key["idle_us"], "idle", options.max_idle_regression_pct, empty_ok)
    return Gate(
        max_regression_pct=limit,
        max_idle_regression_pct=options.max_idle_regression_pct,
        min_share_pct=options.min_share_pct,
        min_time_us=options.min_time_ns / 1000,
        failures=tuple(failures),
    )


def _kernel_failure(k: KernelChange, limit: float) -> Failure:
    pct = k.pct or 0.0
    return Failure("kernel", k.name, k.time_before_us, k.time_after_us, pct, limit, k.short_name)


def _exceeds(change: Change, what: str, limit: float, empty_ok: bool) -> list[Failure]:
    """The failure of one figure; a growth from zero fails (no percentage can pass it)
    unless ``--allow-empty-baseline``."""
    before, after = change.before, change.after
    if before is None or after is None:
        return []
    if before == 0 and after > 0:
        return [] if empty_ok else [Failure(what, change.label, before, after, None, limit)]
    pct = change.pct
    if pct is None or pct <= limit:
        return []
    return [Failure(what, change.label, before, after, pct, limit)]


def _view(side: Side, idx: list[int], compared: list[int]) -> SideView:
    snap = side.snapshot
    steps = [snap.steps[i] for i in compared]
    busy = [100 * _busy(s) / s.duration_us for s in steps if s.duration_us > 0]
    return SideView(
        path=side.path,
        source=side.source,
        traceview_version=snap.traceview_version,
        trace=snap.trace,
        steps=tuple(snap.steps[i].step for i in idx),
        available_steps=len(snap.steps),
        step_busy_pct=float(np.median(busy)) if busy and _has_busy(steps) else None,
    )


def _step_time(step: StepStat) -> float:
    """A step's time (µs): GPU-paced where the GPU set the pace; a snapshot file made before
    snapshots kept it: the CPU step's duration."""
    return step.duration_us if step.step_time_us is None else step.step_time_us


def _busy(step: StepStat) -> float:
    """A step's GPU busy time (µs), its devices' summed."""
    return sum(d.busy_us for d in step.devices)


def _has_busy(steps: Sequence[StepStat]) -> bool:
    """Whether the steps carry device figures (schema 1 snapshots do not)."""
    return bool(steps) and all(s.devices or not s.kernels for s in steps)


def _notes(base: Side, new: Side, hidden: int) -> list[str]:
    """What the reader should know about the comparison itself."""
    notes = []
    for which, side in (("base", base), ("new", new)):
        snap = side.snapshot
        if side.source == "snapshot" and snap.traceview_version != __version__:
            notes.append(
                f"{which} snapshot was made by traceview {snap.traceview_version} "
                f"(this is {__version__})"
            )
        if snap.steps_left_out:
            total = len(snap.steps) + snap.steps_left_out
            notes.append(f"{which} keeps only the last {len(snap.steps)} of {total} steps")
    if hidden:
        notes.append(
            f"{hidden} kernels seen on one side only are below the other side's snapshot cut "
            "(the smallest 0.1% of its kernel time); not compared"
        )
    names = [tuple(s.snapshot.trace.device_names) for s in (base, new)]
    if all(names) and names[0] != names[1]:
        notes.append(f"different GPUs: base {', '.join(names[0])}; new {', '.join(names[1])}")
    return notes


__all__ = [
    "Change",
    "DiffOptions",
    "DiffReport",
    "Explain",
    "Failure",
    "Gate",
    "Headline",
    "KernelChange",
    "Side",
    "SideView",
    "check_options",
    "compare",
    "describe_steps",
    "percent_change",
]
