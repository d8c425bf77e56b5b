"""Renderings of the gaps roll-up of a run: the run's line, then one row per rank."""

from __future__ import annotations

from typing import TYPE_CHECKING

from traceview.aggregate import sketch
from traceview.analyses.gap_rollup import GapRollup, GapStats
from traceview.render import units
from traceview.render.escape import markdown_list, print_line, text_lines
from traceview.render.header import run_line
from traceview.render.tables import Table, to_csv, to_markdown, to_rich, to_text

if TYPE_CHECKING:
    from rich.console import Console

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
    t = units.time
    return (
        label, units.count(g.gaps), t(g.gap_total_us), t(g.mean_gap_us), t(g.std_gap_us),
        t(g.min_gap_us), t(g.max_gap_us), t(g.p50_gap_us), t(g.p90_gap_us), t(g.p99_gap_us),
        t(g.host_wait_us),
    )  # fmt: skip


def table(report: GapRollup) -> Table:
    rows = [_cells(str(s.rank), g) for s, g in report.ranks]
    rows.append(_cells("all", report.rollup))
    return Table(_HEADERS, (True,) * len(_HEADERS), rows)


def print_rich(report: GapRollup, console: Console) -> None:
    for line in header_lines(report):
        print_line(console, line)
    to_rich(table(report), console, drop_order=_NARROW_DROP)


def text(report: GapRollup) -> str:
    return text_lines(header_lines(report)) + "\n\n" + to_text(table(report))


def markdown(report: GapRollup) -> str:
    return markdown_list(header_lines(report)) + "\n\n" + to_markdown(table(report))


def csv(report: GapRollup) -> str:
    fields = ("rank", *GapStats.__dataclass_fields__)
    rows = [(s.rank, *g.as_dict().values()) for s, g in report.ranks]
    rows.append(("all", *report.rollup.as_dict().values()))
    return to_csv(fields, rows)
