"""Renderings of a RunDiffReport: the roll-up's diff as the one-file diff renders it, then each
rank's under a ``rank N`` heading; one JSON document holding them all."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from traceview.analyses.runs.diff import RunDiffReport
from traceview.render import diff
from traceview.render.document import Document

if TYPE_CHECKING:
    pass

SCHEMA_VERSION = 1


def as_json(report: RunDiffReport) -> dict[str, Any]:
    """``{schema_version, rollup: <diff>, ranks: [{rank, ...<diff>}], ranks_only_in_base,
    ranks_only_in_new, passed}``; each diff in the one-file diff's documented shape."""
    return {
        "schema_version": SCHEMA_VERSION,
        "rollup": diff.as_json(report.rollup),
        "ranks": [{"rank": r.rank, **diff.as_json(r.report)} for r in report.ranks],
        "ranks_only_in_base": list(report.only_base),
        "ranks_only_in_new": list(report.only_new),
        "passed": report.passed,
    }


def document(report: RunDiffReport, verbose: bool) -> Document:
    """``traceview diff`` of two runs in every format: which ranks were not compared, then
    the roll-up's diff and each rank's, each as the one-file diff shows it."""
    return Document(
        head=_one_side_lines(report),
        sections=[],
        parts=[
            ("Roll-up of the run", diff.document(report.rollup, verbose)),
            *((f"Rank {r.rank}", diff.document(r.report, verbose)) for r in report.ranks),
        ],
        data=lambda: as_json(report),
        csv=None,
    )


def failure_message(report: RunDiffReport, verbose: bool) -> str:
    """The one stderr line of a failed gate: the roll-up's and each failed rank's reasons
    (``|`` between them)."""
    failed = [("roll-up", report.rollup)] if not report.rollup.gate.passed else []
    failed += [(f"rank {r.rank}", r.report) for r in report.ranks if not r.report.gate.passed]
    return "regression gate failed: " + " | ".join(
        f"{where}: " + diff.failure_message(one, verbose).removeprefix("regression gate failed: ")
        for where, one in failed
    )


def _one_side_lines(report: RunDiffReport) -> list[str]:
    lines = []
    if report.per_rank and report.only_base:
        lines.append("ranks only in BASE (not compared): " + _ranks(report.only_base))
    if report.per_rank and report.only_new:
        lines.append("ranks only in NEW (not compared): " + _ranks(report.only_new))
    return lines


def _ranks(ranks: tuple[int, ...]) -> str:
    return ", ".join(str(r) for r in ranks)


__all__ = ["as_json", "document", "failure_message"]
