"""``traceview steps`` over several ranks: per step number, how its CPU duration spreads
across the ranks that have it (min and max with their ranks, the nearest-rank median).
Definitions in docs/metrics.md ("Several ranks")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traceview.analyses.runs.rank_summary import RankSummary
from traceview.analyses.runs.rollup import Rollup

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class StepSpread:
    """One step number across ranks (ns)."""

    step: int
    ranks: int
    min_ns: int
    min_rank: int
    median_ns: int
    max_ns: int
    max_rank: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "ranks": self.ranks,
            "min_us": self.min_ns / 1000,
            "min_rank": self.min_rank,
            "median_us": self.median_ns / 1000,
            "max_us": self.max_ns / 1000,
            "max_rank": self.max_rank,
            "spread_us": (self.max_ns - self.min_ns) / 1000,
        }


@dataclass(frozen=True)
class StepRollup:
    """The result of ``traceview steps`` over several ranks."""

    summaries: list[RankSummary]
    size_bytes: int
    rows: list[StepSpread]

    def as_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "ranks": [_rank(s) for s in self.summaries],
            "rollup": {
                "files": len(self.summaries),
                "bytes": self.size_bytes,
                "steps": [r.as_dict() for r in self.rows],
            },
        }


def _rank(s: RankSummary) -> dict[str, Any]:
    out: dict[str, Any] = {
        "rank": s.rank,
        "path": s.path,
        "median_step_us": None if s.median_step_ns is None else s.median_step_ns / 1000,
    }
    if s.step_report is not None:
        out["steps"] = [r.as_dict() for r in s.step_report[1]]
    return out


def step_rollup(summaries: list[RankSummary], rollup: Rollup) -> StepRollup:
    """Per step number (ascending): its spread over the ranks."""
    rows = []
    for step, by_rank in sorted(rollup.steps.items()):
        ordered = sorted(by_rank, key=lambda rd: (rd[1], rd[0]))
        low = ordered[0]
        high = min(ordered, key=lambda rd: (-rd[1], rd[0]))
        median = ordered[(len(ordered) + 1) // 2 - 1][1]
        rows.append(StepSpread(step, len(ordered), low[1], low[0], median, high[1], high[0]))
    return StepRollup(summaries, rollup.size_bytes, rows)
