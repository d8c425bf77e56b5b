"""Renderings of the gaps roll-up of a run: the run's line, then one row per rank."""

from __future__ import annotations

from typing import TYPE_CHECKING

from traceview.aggregate import sketch
from traceview.analyses.core.in_us import us_names
from traceview.analyses.runs.gaps import GapRollup, GapStats
from traceview.render import units
from traceview.render.document import Document, Section
from traceview.render.header import run_line
from traceview.render.tables import Table, to_csv

if TYPE_CHECKING:
    pass

_HEADERS = ("Rank", "Gaps", "Total", "Mean", "Std", "Min", "Max", "P50~", "P90~", "P99~",
            "Host wait")  # fmt: skip
_NARROW_DROP = ("Std", "Min", "P50~", "P90~", "Mean")


def header_lines(report: GapRollup) -> list[str]:
    n = len(report.ranks)
    return [
        run_line(n, report.size_bytes),
        "busy     kernel+memcpy+memset: device gaps (the GPU idle), every device of every rank",
        f"note     ~: within {100 * sketch.ALPHA:g}% (a mergeable sketch)",
    ]


def _cells(label: str, g: GapStats) -> tuple[str, ...]:
    t = units.time_ns
    return (
        label, units.count(g.gaps), t(g.gap_total_ns), t(g.mean_gap_ns), t(g.std_gap_ns),
        t(g.min_gap_ns), t(g.max_gap_ns), t(g.p50_gap_ns), t(g.p90_gap_ns), t(g.p99_gap_ns),
        t(g.host_wait_ns),
    )  # fmt: skip


def table(report: GapRollup) -> Table:
    rows = [_cells(str(s.rank), g) for s, g in report.ranks]
    rows.append(_cells("all", report.rollup))
    return Table(_HEADERS, (True,) * len(_HEADERS), rows)


def document(report: GapRollup) -> Document:
    """``traceview gaps`` over a run in every format (the CSV: a row per rank and the run)."""
    return Document(
        head=header_lines(report),
        sections=[Section(table(report), drop_order=_NARROW_DROP)],
        data=report.as_json,
        csv=lambda: csv(report),
    )


def csv(report: GapRollup) -> str:
    fields = ("rank", *us_names(GapStats))
    rows = [(s.rank, *g.as_dict().values()) for s, g in report.ranks]
    rows.append(("all", *report.rollup.as_dict().values()))
    return to_csv(fields, rows)
