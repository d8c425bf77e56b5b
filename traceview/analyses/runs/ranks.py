"""``traceview ranks``: one row per rank, the collectives and the stragglers of a run.

Built from the per-rank summaries, the merged roll-up (its pass-1 collective table) and the
pass-2 waits of each rank. The slowest rank is the one the others wait for: the rank that
started collectives last most often (ties: the least wait, then the smallest rank); without
collectives, the longest median step (without steps: the most kernel time). Definitions in
docs/metrics.md ("Several ranks").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from traceview.analyses.runs.bandwidth import KindBandwidth, by_kind
from traceview.analyses.runs.collectives import (
    CLOCK_SPREAD_WARN_NS,
    Collective,
    Waits,
    clock_spread_ns,
    complete,
)
from traceview.analyses.runs.rank_summary import RankSummary
from traceview.analyses.runs.rollup import Rollup

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class RankRow:
    """One rank: its summary and its waits."""

    summary: RankSummary
    waits: Waits

    def as_dict(self, slowest: int | None) -> dict[str, Any]:
        s = self.summary
        return {
            "rank": s.rank,
            "path": s.path,
            "kernels": s.kernels,
            "kernel_time_us": s.kernel_time_ns / 1000,
            "busy_pct": s.busy_pct,
            "idle_us": s.idle_ns / 1000,
            "devices": [
                {**d.as_dict(), "idle_us": d.idle_ns / 1000, "idle_pct": d.idle_pct}
                for d in s.devices
            ],
            "comm_us": s.comm_ns / 1000,
            "exposed_comm_us": s.exposed_comm_ns / 1000,
            "median_step_us": None if s.median_step_ns is None else s.median_step_ns / 1000,
            "times_last": self.waits.times_last,
            "wait_us": self.waits.wait_ns / 1000,
            "slowest": s.rank == slowest,
        }


@dataclass(frozen=True)
class RanksReport:
    """The result of ``traceview ranks``."""

    ranks: int
    size_bytes: int
    rows: list[RankRow]
    collectives: list[Collective]
    slowest: int | None
    clock_spread_ns: int | None
    warnings: list[str]
    bandwidth: list[KindBandwidth]  # per collective kind, where the trace gives sizes

    def as_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "run": {"ranks": self.ranks, "files": self.ranks, "bytes": self.size_bytes},
            "ranks": [r.as_dict(self.slowest) for r in self.rows],
            "collectives": [c.as_dict() for c in self.collectives],
            "bandwidth": [b.as_dict() for b in self.bandwidth],
            "slowest": self.slowest,
            "clock_spread_us": None
            if self.clock_spread_ns is None
            else self.clock_spread_ns / 1000,
            "warnings": self.warnings,
        }


def ranks_report(
    summaries: Sequence[RankSummary], rollup: Rollup, waits: Sequence[Waits]
) -> RanksReport:
    """The report of a run from its summaries (rank order), roll-up and waits (same order)."""
    collectives = complete(rollup.collectives, rollup.ranks)
    spread = clock_spread_ns(collectives)
    warnings = [w for s in summaries for w in s.warnings]  # what reading each rank met
    if spread is not None and spread > CLOCK_SPREAD_WARN_NS:
        warnings.append(
            f"collectives end {spread / 1000:,.0f} µs apart across ranks (median): the ranks' "
            "clocks may not be aligned, so skew and waits may be wrong"
        )
    return RanksReport(
        ranks=rollup.ranks,
        size_bytes=rollup.size_bytes,
        rows=[RankRow(s, w) for s, w in zip(summaries, waits, strict=True)],
        collectives=collectives,
        slowest=slowest_rank(summaries, waits if collectives else None),
        clock_spread_ns=spread,
        warnings=warnings,
        bandwidth=by_kind((c.kind, c.ranks, c.bytes, c.latency_ns) for c in collectives),
    )


def slowest_rank(
    summaries: Sequence[RankSummary], waits: Sequence[Waits] | None = None
) -> int | None:
    """The rank the others wait for (most often last, then the least wait); without
    collectives, the longest median step (or the most kernel time without steps)."""
    if not summaries:
        return None
    if waits:
        return min(waits, key=lambda w: (-w.times_last, w.wait_ns, w.rank)).rank
    with_steps = [s for s in summaries if s.median_step_ns is not None]
    if with_steps:
        return min(with_steps, key=lambda s: (-(s.median_step_ns or 0), s.rank)).rank
    return min(summaries, key=lambda s: (-s.kernel_time_ns, s.rank)).rank
