"""Renderings of the steps roll-up of a run, then (``--per-rank``) each rank's steps table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from traceview.analyses.runs.steps import StepRollup
from traceview.render import first_rows as capped
from traceview.render import steps as one_file
from traceview.render import units
from traceview.render.document import Document, Section
from traceview.render.header import run_line
from traceview.render.tables import Table, to_csv

if TYPE_CHECKING:
    pass

_HEADERS = ("Step", "Ranks", "Min", "Min rank", "Median", "Max", "Max rank", "Spread")


def header_lines(report: StepRollup) -> list[str]:
    n = len(report.summaries)
    return [
        run_line(n, report.size_bytes),
        "steps    CPU step duration across the ranks that have the step",
    ]


def table(report: StepRollup, top: int) -> Table:
    """The first ``top`` steps (0: all)."""
    t = units.time
    rows = [
        (f"ProfilerStep#{r.step}", str(r.ranks), t(r.min_ns / 1000), str(r.min_rank),
         t(r.median_ns / 1000), t(r.max_ns / 1000), str(r.max_rank),
         t((r.max_ns - r.min_ns) / 1000))
        for r in capped.head(report.rows, top)
    ]  # fmt: skip
    return Table(_HEADERS, (False, *(True,) * 7), rows)


def document(report: StepRollup, top: int) -> Document:
    """``traceview steps`` over a run in every format: the roll-up, then (``--per-rank``)
    each rank's own steps document; tables show the first ``top`` steps (0: all), the JSON
    every step, the CSV every row of the roll-up."""
    more = capped.more_line(len(report.rows), top, "step", "--top")
    return Document(
        head=header_lines(report),
        sections=[Section(table(report, top), note=more)],
        parts=[
            (f"rank {s.rank}  {s.path}", one_file.document(*s.step_report, top))
            for s in report.summaries
            if s.step_report is not None
        ],
        data=report.as_json,
        csv=lambda: csv(report),
    )


def csv(report: StepRollup) -> str:
    rows = [r.as_dict() for r in report.rows]
    fields = tuple(rows[0]) if rows else ("step",)
    return to_csv(fields, [tuple(r[f] for f in fields) for r in rows])
