"""Renderings of the steps roll-up of a run, then (``--per-rank``) each rank's steps table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from traceview.analyses.step_rollup import StepRollup
from traceview.analyses.steps import StepRow
from traceview.analyses.summary import TraceSummary
from traceview.render import steps as one_file
from traceview.render import units
from traceview.render.escape import markdown_list, print_line, text_lines
from traceview.render.header import run_line
from traceview.render.tables import Table, to_csv, to_markdown, to_rich, to_text

if TYPE_CHECKING:
    from rich.console import Console

_HEADERS = ("Step", "Ranks", "Min", "Min rank", "Median", "Max", "Max rank", "Spread")


def header_lines(report: StepRollup) -> list[str]:
    n = len(report.summaries)
    return [
        run_line(n, report.size_bytes),
        "steps    CPU step duration across the ranks that have the step",
    ]


def table(report: StepRollup) -> Table:
    t = units.time
    rows = [
        (f"ProfilerStep#{r.step}", str(r.ranks), t(r.min_ns / 1000), str(r.min_rank),
         t(r.median_ns / 1000), t(r.max_ns / 1000), str(r.max_rank),
         t((r.max_ns - r.min_ns) / 1000))
        for r in report.rows
    ]  # fmt: skip
    return Table(_HEADERS, (False, *(True,) * 7), rows)


def _per_rank(report: StepRollup) -> list[tuple[str, TraceSummary, list[StepRow]]]:
    return [
        (f"rank {s.rank}  {s.path}", *s.step_report)
        for s in report.summaries
        if s.step_report is not None
    ]


def print_rich(report: StepRollup, console: Console) -> None:
    for line in header_lines(report):
        print_line(console, line)
    to_rich(table(report), console)
    for title, trace, rows in _per_rank(report):
        print_line(console, "")
        print_line(console, title, style="bold")
        one_file.print_rich(trace, rows, console)


def text(report: StepRollup) -> str:
    out = text_lines(header_lines(report)) + "\n\n" + to_text(table(report))
    for title, trace, rows in _per_rank(report):
        out += "\n" + text_lines([title]) + "\n" + one_file.text(trace, rows)
    return out


def markdown(report: StepRollup) -> str:
    out = markdown_list(header_lines(report)) + "\n\n" + to_markdown(table(report))
    for title, trace, rows in _per_rank(report):
        out += "\n" + markdown_list([title]) + "\n\n" + one_file.markdown(trace, rows)
    return out


def csv(report: StepRollup) -> str:
    rows = [r.as_dict() for r in report.rows]
    fields = tuple(rows[0]) if rows else ("step",)
    return to_csv(fields, [tuple(r[f] for f in fields) for r in rows])
