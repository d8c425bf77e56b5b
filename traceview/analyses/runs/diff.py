"""Compare two runs: their roll-ups (the run gate), and with ``per_rank`` each rank found on
both sides (a gate per rank). Each comparison is the one-file diff (traceview.analyses.diff)
of two snapshots: the roll-up snapshots have no steps, so they compare whole-run totals; a
rank's snapshot compares per-step medians like one trace does."""

from __future__ import annotations

from dataclasses import dataclass

from traceview.analyses.diff import DiffOptions, DiffReport, Side, compare
from traceview.analyses.runs.snapshot import RunSnapshot
from traceview.errors import UsageError


@dataclass(frozen=True)
class RunSide:
    """One input of a run diff: its path, ``run`` (read here) or ``run snapshot``, and the
    run's snapshot."""

    path: str
    source: str
    run: RunSnapshot


@dataclass(frozen=True)
class RankDiff:
    rank: int
    report: DiffReport


@dataclass(frozen=True)
class RunDiffReport:
    """The roll-up comparison, the per-rank ones (rank order; empty without ``per_rank``) and
    the ranks found on one side only."""

    rollup: DiffReport
    ranks: tuple[RankDiff, ...]
    only_base: tuple[int, ...]
    only_new: tuple[int, ...]
    per_rank: bool

    @property
    def passed(self) -> bool:
        """Whether every active gate passed (the roll-up's, and each rank's)."""
        return self.rollup.gate.passed and all(r.report.gate.passed for r in self.ranks)


def check_run_options(options: DiffOptions) -> None:
    """What a run diff does not do (before any reading)."""
    if options.steps or options.new_steps:
        raise UsageError("--pstep: runs are compared over the whole run (the roll-up has no steps)")
    if options.explain:
        raise UsageError("--explain: takes two traces, not runs (the roll-up has no steps)")
    if options.group_by == "fused-op":
        raise UsageError("--group-by fused-op: takes two traces, not runs")


def compare_runs(
    base: RunSide, new: RunSide, options: DiffOptions, per_rank: bool
) -> RunDiffReport:
    """The roll-ups compared; with ``per_rank`` every rank on both sides too."""
    check_run_options(options)
    rollup = compare(
        Side(base.path, base.source, base.run.rollup),
        Side(new.path, new.source, new.run.rollup),
        options,
    )
    b = {r.rank: r for r in base.run.ranks}
    n = {r.rank: r for r in new.run.ranks}
    ranks = []
    if per_rank:
        one = "snapshot" if base.source == "run snapshot" else "trace"
        other = "snapshot" if new.source == "run snapshot" else "trace"
        for rank in sorted(b.keys() & n.keys()):
            report = compare(
                Side(b[rank].path, one, b[rank].snapshot),
                Side(n[rank].path, other, n[rank].snapshot),
                options,
            )
            ranks.append(RankDiff(rank, report))
    return RunDiffReport(
        rollup=rollup,
        ranks=tuple(ranks),
        only_base=tuple(sorted(b.keys() - n.keys())),
        only_new=tuple(sorted(n.keys() - b.keys())),
        per_rank=per_rank,
    )


__all__ = ["RankDiff", "RunDiffReport", "RunSide", "check_run_options", "compare_runs"]
