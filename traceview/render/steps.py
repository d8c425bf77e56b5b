"""Renderings of the steps table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from traceview.analyses.steps import StepRow
from traceview.analyses.summary import TraceSummary
from traceview.render import units
from traceview.render.escape import markdown_list, print_line, text_lines
from traceview.render.header import trace_lines
from traceview.render.tables import Table, to_csv, to_markdown, to_rich, to_text

if TYPE_CHECKING:
    from rich.console import Console

_HEADERS = ("Step", "Start (µs)", "Duration (µs)", "Kernels", "Kernel time (µs)",
            "GPU end (µs)", "GPU busy %", "Window")  # fmt: skip


def table(rows: list[StepRow]) -> Table:
    """One line per ProfilerStep."""
    cells = [
        (
            f"ProfilerStep#{r.step}",
            units.us(r.start_us),
            units.us(r.duration_us),
            units.count(r.kernels),
            units.us(r.kernel_time_us),
            units.us(r.gpu_end_us),
            units.pct(r.gpu_busy_pct),
            "gpu annotation" if r.gpu_only else "cpu",
        )
        for r in rows
    ]
    return Table(_HEADERS, (False, True, True, True, True, True, True, False), cells)


def csv(rows: list[StepRow]) -> str:
    fields = tuple(StepRow.__dataclass_fields__)
    return to_csv(fields, [tuple(getattr(r, f) for f in fields) for r in rows])


def as_json(trace: TraceSummary, rows: list[StepRow]) -> dict[str, Any]:
    return {"schema_version": 1, "trace": trace.as_dict(), "steps": [r.as_dict() for r in rows]}


def summary_lines(trace: TraceSummary, rows: list[StepRow]) -> list[str]:
    """Header: the trace, and a line when it has no steps."""
    lines = trace_lines(trace)
    if not rows:
        lines.append("steps    no ProfilerStep#N annotations in this trace")
    return lines


def print_rich(trace: TraceSummary, rows: list[StepRow], console: Console) -> None:
    for line in summary_lines(trace, rows):
        print_line(console, line)
    to_rich(table(rows), console)


def text(trace: TraceSummary, rows: list[StepRow]) -> str:
    return text_lines(summary_lines(trace, rows)) + "\n\n" + to_text(table(rows))


def markdown(trace: TraceSummary, rows: list[StepRow]) -> str:
    head = markdown_list(summary_lines(trace, rows))
    return head + "\n\n" + to_markdown(table(rows))
