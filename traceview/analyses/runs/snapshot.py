"""The snapshot of a run: the roll-up and every rank's own snapshot, for ``traceview diff``.

Each rank's snapshot is the one-file snapshot of its trace (built in its worker, exact). The
roll-up is a snapshot of the whole run without steps (so ``diff`` compares it in ``total``
mode): per kernel name the roll-up's figures (exact count, total, mean, std, min, max;
percentiles from the sketch), totals summed over ranks (busy and idle as the ranks' devices
report them). traceview.app.run_snapshot_file writes and reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from traceview import __version__
from traceview.analyses.kernels import KernelOptions
from traceview.analyses.runs.kernels import rollup_report
from traceview.analyses.runs.rank_summary import RankSummary
from traceview.analyses.runs.rollup import Rollup
from traceview.analyses.snapshot import KIND as SNAPSHOT_KIND
from traceview.analyses.snapshot import SCHEMA_VERSION as SNAPSHOT_SCHEMA
from traceview.analyses.snapshot import (
    OtherKernels,
    Snapshot,
    SnapshotTrace,
    Totals,
    kernel_stat,
)
from traceview.choices import KernelSort

KIND = "traceview-run-snapshot"
_NO_STEPS = np.zeros(0, dtype=np.int64)  # the roll-up snapshot has no steps
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class RankSnapshot:
    """One rank of a run snapshot."""

    rank: int
    path: str
    snapshot: Snapshot


@dataclass(frozen=True)
class RunInfo:
    ranks: int
    files: int
    bytes: int


@dataclass(frozen=True)
class RunSnapshot:
    """The run snapshot document (``schema_version`` 1)."""

    kind: str
    schema_version: int
    traceview_version: str
    run: RunInfo
    rollup: Snapshot
    ranks: tuple[RankSnapshot, ...]


def build_run_snapshot(summaries: Sequence[RankSummary], rollup: Rollup) -> RunSnapshot:
    """The run snapshot from the ranks' summaries (built with their snapshots) and roll-up."""
    ranks = tuple(
        RankSnapshot(s.rank, s.path, s.snapshot) for s in summaries if s.snapshot is not None
    )
    return RunSnapshot(
        kind=KIND,
        schema_version=SCHEMA_VERSION,
        traceview_version=__version__,
        run=RunInfo(rollup.ranks, rollup.ranks, rollup.size_bytes),
        rollup=rollup_snapshot(summaries, rollup),
        ranks=ranks,
    )


def rollup_snapshot(summaries: Sequence[RankSummary], rollup: Rollup) -> Snapshot:
    """The whole run as one snapshot without steps."""
    report = rollup_report(list(summaries), rollup, KernelOptions(sort=KernelSort.TOTAL, top=0))
    busy = sum(s.busy_ns for s in summaries)
    window = busy + sum(s.idle_ns for s in summaries)
    return Snapshot(
        kind=SNAPSHOT_KIND,
        schema_version=SNAPSHOT_SCHEMA,
        traceview_version=__version__,
        trace=SnapshotTrace(
            path=f"run of {rollup.ranks} ranks ({summaries[0].path} …)",
            size_bytes=rollup.size_bytes,
            device_count=sum(len(s.devices) for s in summaries),
        ),
        totals=Totals(
            count=report.count,
            total_us=report.total_ns / 1000,
            distinct=report.distinct,
            gpu_busy_us=busy / 1000,
            gpu_busy_pct=round(100.0 * busy / window, 3) if window else 0.0,
            idle_us=(window - busy) / 1000,
        ),
        devices=(),
        steps=(),
        steps_left_out=0,
        kernels=tuple(kernel_stat(row, _NO_STEPS, _NO_STEPS) for row in report.rows),
        other=OtherKernels(0, 0, 0.0, (), (), ()),
    )
