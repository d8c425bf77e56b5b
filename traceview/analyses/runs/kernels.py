"""``traceview kernels`` over several ranks: per kernel name over every instance of every rank.

Count, total, mean, sample std, min and max are exact (merged Moments); p50/p90/p99 come from
the merged sketch (within sketch.ALPHA of the exact nearest-rank value; exact per rank in
the per-rank tables); ``ranks`` = how many ranks ran the name; the spread of the per-rank
totals: the smallest and largest (with their ranks) exactly, the median within sketch.ALPHA
(over the ranks that ran it). Shares are of the roll-up's totals. Definitions in
docs/metrics.md ("Several ranks").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traceview.aggregate import sketch, sums
from traceview.analyses.core.names import display_names
from traceview.analyses.kernels import KernelOptions, KernelReport, KernelRow, sort_key
from traceview.analyses.runs.rank_summary import RankSummary
from traceview.analyses.runs.rollup import Rollup
from traceview.errors import UsageError

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class RollupRow(KernelRow):
    """One kernel name over the whole run (ns): the one-file row's figures (percentiles from
    the sketch, rounded to the ns; ``variants`` 1), then how the ranks share it."""

    ranks: int
    rank_min_total_ns: int
    rank_min: int
    rank_median_total_ns: int
    rank_max_total_ns: int
    rank_max: int


@dataclass(frozen=True)
class RankTotals:
    """One rank's line of the roll-up: its selected kernels, and its own table if asked."""

    rank: int
    path: str
    size_bytes: int
    count: int
    total_ns: int
    distinct: int
    report: KernelReport | None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rank": self.rank,
            "path": self.path,
            "bytes": self.size_bytes,
            "totals": {
                "count": self.count,
                "total_us": self.total_ns / 1000,
                "distinct": self.distinct,
            },
        }
        if self.report is not None:
            out["kernels"] = [r.as_dict() for r in self.report.rows]
        return out


@dataclass(frozen=True)
class RollupReport:
    """The result of ``traceview kernels`` over several ranks."""

    options: KernelOptions
    ranks: list[RankTotals]
    size_bytes: int
    count: int
    total_ns: int
    distinct: int
    rows: list[RollupRow]
    left_out_rows: int

    def as_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "ranks": [r.as_dict() for r in self.ranks],
            "rollup": {
                "files": len(self.ranks),
                "bytes": self.size_bytes,
                "totals": {
                    "count": self.count,
                    "total_us": self.total_ns / 1000,
                    "distinct": self.distinct,
                },
                "kernels": [r.as_dict() for r in self.rows],
                "left_out": {"kernels": self.left_out_rows},
                "sketch_relative_error": sketch.ALPHA,
            },
        }


def check_options(options: KernelOptions) -> None:
    """What the roll-up does not do (before any reading)."""
    if options.group_by != "name":
        raise UsageError("--group-by: several ranks are grouped by kernel name only")
    sort_key(options.sort)  # a bad --sort is a usage error here too


def rollup_report(
    summaries: list[RankSummary], rollup: Rollup, options: KernelOptions
) -> RollupReport:
    """The roll-up table: every name's row, sorted like the one-file table, cut at --top."""
    rows = _rows(rollup)
    rows.sort(key=sort_key(options.sort))
    kept = rows[: options.top] if options.top else rows
    return RollupReport(
        options=options,
        ranks=[_rank_totals(s) for s in summaries],
        size_bytes=rollup.size_bytes,
        count=int(rollup.stats.moments.count.sum()),
        total_ns=sums.total(rollup.stats.moments.total),
        distinct=rollup.distinct,
        rows=kept,
        left_out_rows=len(rows) - len(kept),
    )


def _rank_totals(s: RankSummary) -> RankTotals:
    m = s.stats.moments
    return RankTotals(
        s.rank, s.path, s.size_bytes, int(m.count.sum()), sums.total(m.total),
        len(s.stats.names), s.report,
    )  # fmt: skip


def _rows(rollup: Rollup) -> list[RollupRow]:
    """Every name's row."""
    stats = rollup.stats
    m, n = stats.moments, len(stats.names)
    pcts = sketch.quantiles(stats.sketch, n, (50, 90, 99))
    median = sketch.quantiles(rollup.totals, n, (50,))[50]
    std = m.std()
    count_all, total_all = int(m.count.sum()), sums.total(m.total)
    shown = display_names(stats.names)
    rows = []
    for g, name in enumerate(stats.names):
        count, total = int(m.count[g]), int(m.total[g])
        rows.append(
            RollupRow(
                name=name,
                short_name=shown[name],
                variants=1,
                count=count,
                total_ns=total,
                mean_ns=total / count,
                std_ns=float(std[g]),
                min_ns=int(m.minimum[g]),
                max_ns=int(m.maximum[g]),
                p50_ns=round(float(pcts[50][g])),
                p90_ns=round(float(pcts[90][g])),
                p99_ns=round(float(pcts[99][g])),
                pct_launches=100.0 * count / count_all,
                pct_time=100.0 * total / total_all if total_all else 0.0,
                ranks=int(rollup.rank_count[g]),
                rank_min_total_ns=int(rollup.low_total[g]),
                rank_min=int(rollup.low_rank[g]),
                rank_median_total_ns=round(float(median[g])),
                rank_max_total_ns=int(rollup.high_total[g]),
                rank_max=int(rollup.high_rank[g]),
            )
        )
    return rows
