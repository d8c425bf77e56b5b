"""``traceview gaps`` over several ranks: the device gaps of every rank (all GPU activity
busy, the one-file command's default), per rank and over the run. Count, total, mean, sample
std, min and max exact (merged Moments); p50/p90/p99 of the gap lengths from the merged
sketch (within sketch.ALPHA). Definitions in docs/metrics.md ("Several ranks")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traceview.aggregate import sketch
from traceview.analyses.core.in_us import us_fields
from traceview.analyses.runs.rank_summary import GapFigures, RankSummary
from traceview.analyses.runs.rollup import NO_GAPS, Rollup

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class GapStats:
    """Statistics of a set of device gaps (ns; the sketch's percentiles rounded to the ns)."""

    gaps: int
    gap_total_ns: int
    mean_gap_ns: float
    std_gap_ns: float
    min_gap_ns: int
    max_gap_ns: int
    p50_gap_ns: int
    p90_gap_ns: int
    p99_gap_ns: int
    host_wait_ns: int

    def as_dict(self) -> dict[str, Any]:
        return us_fields(self)


def gap_stats(figures: GapFigures) -> GapStats:
    """The statistics of ``figures`` (zeros without gaps)."""
    m = figures.lengths
    count = int(m.count[0])
    if count == 0:
        return GapStats(0, 0, 0.0, 0.0, 0, 0, 0, 0, 0, figures.host_wait_ns)
    pcts = sketch.quantiles(figures.sketch, 1, (50, 90, 99))
    total = int(m.total[0])
    return GapStats(
        gaps=count,
        gap_total_ns=total,
        mean_gap_ns=total / count,
        std_gap_ns=float(m.std()[0]),
        min_gap_ns=int(m.minimum[0]),
        max_gap_ns=int(m.maximum[0]),
        p50_gap_ns=round(float(pcts[50][0])),
        p90_gap_ns=round(float(pcts[90][0])),
        p99_gap_ns=round(float(pcts[99][0])),
        host_wait_ns=figures.host_wait_ns,
    )


@dataclass(frozen=True)
class GapRollup:
    """The result of ``traceview gaps`` over several ranks."""

    ranks: list[tuple[RankSummary, GapStats]]
    size_bytes: int
    rollup: GapStats

    def as_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "ranks": [
                {"rank": s.rank, "path": s.path, "idle_us": s.idle_ns / 1000, **g.as_dict()}
                for s, g in self.ranks
            ],
            "rollup": {
                "files": len(self.ranks),
                "bytes": self.size_bytes,
                **self.rollup.as_dict(),
                "sketch_relative_error": sketch.ALPHA,
            },
        }


def gap_rollup(summaries: list[RankSummary], rollup: Rollup) -> GapRollup:
    """Per rank and over the run."""
    return GapRollup(
        ranks=[(s, gap_stats(s.gaps or NO_GAPS)) for s in summaries],
        size_bytes=rollup.size_bytes,
        rollup=gap_stats(rollup.gaps),
    )
