"""Per-phase step figures, the steady-state window and the degenerate steps of ``summary``.

Definitions: docs/metrics.md, "Serving steps and phases". Integer ns inside.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from traceview.aggregate import sums
from traceview.analyses.core.devices import GapSet
from traceview.analyses.core.graphs import graph_launch_ids, replayed
from traceview.analyses.core.step_markers import PHASES, UNKNOWN, WARMUP_PHASES
from traceview.analyses.core.steps import Launches, StepRow, StepRows, Window, step_windows
from traceview.columns.model import TraceEvents
from traceview.columns.schema import KERNEL

STEADY_TOLERANCE = 0.2  # a steady step's time is within 20% of its phase's median step time
TOP_KERNELS = 3


@dataclass(frozen=True)
class PhaseKernel:
    name: str
    gpu_time_ns: int
    pct: float

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "gpu_time_us": self.gpu_time_ns / 1000, "pct": self.pct}


@dataclass(frozen=True)
class PhaseFigures:
    """One phase over its counted steps: medians of per-step figures, its kernels' time,
    the share of it run by CUDA-graph replays, and its top kernels."""

    phase: str
    steps: int
    median_step_ns: int
    median_busy_pct: float | None
    median_host_wait_ns: int
    kernel_time_ns: int
    graph_kernel_pct: float
    top_kernels: tuple[PhaseKernel, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "steps": self.steps,
            "median_step_us": self.median_step_ns / 1000,
            "median_busy_pct": self.median_busy_pct,
            "median_host_wait_us": self.median_host_wait_ns / 1000,
            "kernel_time_us": self.kernel_time_ns / 1000,
            "graph_kernel_pct": self.graph_kernel_pct,
            "top_kernels": [k.as_dict() for k in self.top_kernels],
        }


@dataclass(frozen=True)
class SteadyState:
    """The longest run of consecutive steps of one phase, each within STEADY_TOLERANCE of
    that phase's median step time; its throughput."""

    phase: str
    first_step: int
    last_step: int
    steps: int
    duration_ns: int  # first step's start to last step's end
    steps_per_s: float
    tokens_per_s: float | None  # when every step of it says its tokens

    def as_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "steps": self.steps,
            "duration_us": self.duration_ns / 1000,
            "tolerance_pct": 100 * STEADY_TOLERANCE,
            "steps_per_s": self.steps_per_s,
            "tokens_per_s": self.tokens_per_s,
        }


@dataclass(frozen=True)
class PhaseReport:
    """What ``summary`` says of steps beyond their medians: the per-phase figures (phases
    known), the steps left out of medians (warm-up/capture unless asked, degenerate), the
    steady state."""

    phases: tuple[PhaseFigures, ...]
    warmup_left_out: tuple[int, ...]
    degenerate: tuple[tuple[int, str, str], ...]  # step, name, why
    steady: SteadyState | None


def counted(rows: Sequence[StepRow], include_warmup: bool) -> list[StepRow]:
    """The steps medians are taken over: not degenerate, and not warm-up or capture unless
    ``include_warmup``."""
    return [
        r for r in rows if r.degenerate is None and (include_warmup or r.phase not in WARMUP_PHASES)
    ]


def phase_report(
    events: TraceEvents,
    rows: Sequence[StepRow],
    gaps: GapSet,
    include_warmup: bool,
    launch: Launches | None = None,
    graphs: np.ndarray | None = None,
) -> PhaseReport:
    """The PhaseReport of ``rows`` (the step table of ``events``); ``gaps``: device gaps;
    ``launch``, ``graphs``: ``launch_times(events)`` and ``graph_launch_ids(events)``, when
    the caller has them."""
    kept = counted(rows, include_warmup)
    known = [p for p in PHASES if p != UNKNOWN and any(r.phase == p for r in kept)]
    figures: tuple[PhaseFigures, ...] = ()
    if known:  # the GPU rows sorted by launch once, for every phase
        n = len(events.gpu.ts)
        rows_of = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)
        by_step = StepRows(events, rows_of, launch)
        del launch, rows_of
        graphs = graph_launch_ids(events) if graphs is None else graphs
        windows = step_windows(events)
        figures = tuple(
            _figures(events, [r for r in kept if r.phase == p], windows, gaps, by_step, graphs)
            for p in known
        )
    warmup = tuple(r.step for r in rows if r.phase in WARMUP_PHASES and r.degenerate is None)
    return PhaseReport(
        phases=figures,
        warmup_left_out=() if include_warmup else warmup,
        degenerate=tuple((r.step, r.name, r.degenerate) for r in rows if r.degenerate),
        steady=steady_state(rows, include_warmup),
    )


def median(values: Sequence[int] | Sequence[float]) -> Any:
    """Nearest-rank median (the ceil(n/2)-th smallest)."""
    return sorted(values)[(len(values) + 1) // 2 - 1]


def _figures(
    events: TraceEvents,
    rows: list[StepRow],
    windows: dict[int, Window],
    gaps: GapSet,
    by_step: StepRows,
    graphs: np.ndarray,
) -> PhaseFigures:
    """The figures of a phase's steps ``rows``: its kernels summed a pass of GPU rows at a
    time (no row-sized array of them: 7·10^6 CUDA-graph kernels held 0.3 GB of them)."""
    busy = [_busy_pct(r) for r in rows]
    known_busy = [b for b in busy if b is not None]
    host = _host_waits(gaps, rows)
    # the rows in any of the steps, in row order: a mask, not np.unique's sort or hash of
    # every membership (5.8 s of a summary of 7·10^6 CUDA-graph kernels)
    inside = by_step.inside([windows[r.step] for r in rows])
    gpu = events.gpu
    total = graph_ns = 0
    by_name = sums.GroupSums(len(events.names))
    for lo in range(0, len(inside), _PASS):
        kernels = np.flatnonzero(inside[lo : lo + _PASS] & (gpu.kind[lo : lo + _PASS] == KERNEL))
        kernels += lo
        dur = gpu.dur[kernels]
        total += int(dur.sum())
        graph_ns += int(dur[replayed(events, kernels, graphs)].sum())
        by_name.add(gpu.name[kernels], dur)
    return PhaseFigures(
        phase=rows[0].phase,
        steps=len(rows),
        median_step_ns=int(median([r.step_ns for r in rows])),
        median_busy_pct=float(median(known_busy)) if known_busy else None,
        median_host_wait_ns=int(median(host)),
        kernel_time_ns=total,
        graph_kernel_pct=100.0 * graph_ns / total if total else 0.0,
        top_kernels=_top(events, by_name.out, total),
    )


_PASS = 1 << 16  # GPU rows, or device gaps, at a time


def _host_waits(gaps: GapSet, rows: list[StepRow]) -> list[int]:
    """Per step: the host wait of the device gaps that start in its CPU window [start, end),
    summed a pass of gaps at a time (each pass's starts sorted: no gap-sized array)."""
    cpu_start = np.array([r.cpu_start_ns for r in rows], dtype=np.int64)
    cpu_end = np.array([r.cpu_end_ns for r in rows], dtype=np.int64)
    host = np.zeros(len(rows), dtype=np.int64)
    for lo in range(0, len(gaps), _PASS):
        part = gaps.take(slice(lo, lo + _PASS))  # the starts a pass at a time: 16 B a gap
        start = part.start
        order = np.argsort(start, kind="stable")
        start = start[order]
        cumulative = np.r_[0, np.cumsum(part.host_wait[order], dtype=np.int64)]
        host += cumulative[np.searchsorted(start, cpu_end, side="left")]
        host -= cumulative[np.searchsorted(start, cpu_start, side="left")]
    return host.tolist()


def _busy_pct(r: StepRow) -> float | None:
    """A step's GPU busy %: its busy time over its GPU windows, summed over devices."""
    window = sum(d.window_ns for d in r.devices)
    return 100.0 * sum(d.busy_ns for d in r.devices) / window if window else None


def _top(events: TraceEvents, ints: np.ndarray, total: int) -> tuple[PhaseKernel, ...]:
    """The TOP_KERNELS names by their kernels' time (``ints``: exact ns per name id)."""
    best = sorted(np.flatnonzero(ints).tolist(), key=lambda i: (-int(ints[i]), events.names[i]))
    return tuple(
        PhaseKernel(events.names[i], int(ints[i]), 100.0 * int(ints[i]) / total)
        for i in best[:TOP_KERNELS]
    )


def steady_state(rows: Sequence[StepRow], include_warmup: bool) -> SteadyState | None:
    """The longest run (at least 2 steps; the earliest of equal runs) of consecutive steps
    of one known phase whose times lie within STEADY_TOLERANCE of the median step time of
    that phase's counted steps; a degenerate or other step ends a run."""
    kept = counted(rows, include_warmup)
    medians = {
        p: median([r.step_ns for r in kept if r.phase == p])
        for p in {r.phase for r in kept}
        if p not in ("", UNKNOWN)
    }
    counted_steps = {r.step for r in kept}
    best: list[StepRow] = []
    run: list[StepRow] = []
    for r in rows:
        m = medians.get(r.phase)
        steady = (
            m is not None and r.step in counted_steps and abs(r.step_ns - m) <= STEADY_TOLERANCE * m
        )
        if steady and run and run[-1].phase == r.phase:
            run.append(r)
        else:
            run = [r] if steady else []
        if len(run) > len(best):
            best = list(run)
    if len(best) < 2:
        return None
    duration = best[-1].cpu_end_ns - best[0].cpu_start_ns
    if any(r.gpu_paced for r in best):  # the GPU set the pace: its periods, not the CPU's
        duration = sum(r.step_ns for r in best)
    tokens = [r.tokens for r in best]
    per_s = 1e9 / duration if duration > 0 else 0.0
    return SteadyState(
        phase=best[0].phase,
        first_step=best[0].step,
        last_step=best[-1].step,
        steps=len(best),
        duration_ns=duration,
        steps_per_s=len(best) * per_s,
        tokens_per_s=None if None in tokens else sum(t or 0 for t in tokens) * per_s,
    )
