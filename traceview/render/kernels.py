"""Renderings of a KernelReport: table, plain text, Markdown, CSV, JSON, detailed report."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from traceview.analyses.kernels import KernelReport, KernelRow
from traceview.analyses.steps import Steps
from traceview.render import units
from traceview.render.header import trace_lines
from traceview.render.tables import Table, to_csv, to_markdown, to_rich, to_text

if TYPE_CHECKING:
    from rich.console import Console

SCHEMA_VERSION = 1
_STAT_HEADERS = ("Count", "Total (µs)", "Mean (µs)", "Std (µs)", "Min (µs)", "Max (µs)",
                 "P50 (µs)", "P90 (µs)", "P99 (µs)", "% launches", "% time")  # fmt: skip


# Columns left out, in this order, when the terminal is too narrow for all of them.
_NARROW_DROP = ("Std (µs)", "Min (µs)", "P50 (µs)", "P90 (µs)", "% launches", "Max (µs)",
                "Mean (µs)", "P99 (µs)")  # fmt: skip


def summary_lines(report: KernelReport) -> list[str]:
    """Header: trace, GPUs, selection totals, notes."""
    kinds = "+".join(report.options.include)
    lines = trace_lines(report.trace)
    lines.append(
        f"{kinds:<8} {units.count(report.count)} launches, {units.count(report.distinct)} "
        f"distinct, total {units.duration(report.total_us)}, GPU busy "
        f"{units.pct(report.gpu_busy_pct)}% of span"
    )
    if report.options.steps:
        lines.append(f"steps    {_steps(report.options.steps)}")
    lines += [f"note     {n}" for n in report.notes]
    return lines


def table(report: KernelReport, verbose: bool) -> Table:
    """The kernel table as formatted cells."""
    rows = [
        (str(rank), row.name if verbose else row.short_name, *_stat_cells(row))
        for rank, row in enumerate(report.rows, 1)
    ]
    return Table(("#", "Kernel", *_STAT_HEADERS), (True, False) + (True,) * 11, rows)


def footer(report: KernelReport) -> str:
    """How much --top left out."""
    if report.left_out_rows == 0:
        return f"all {report.distinct} kernels shown"
    return (
        f"{report.left_out_rows} more kernels not shown ({units.count(report.left_out_count)} "
        f"launches, {units.duration(report.left_out_us)}); use --top 0 for all"
    )


def print_table(report: KernelReport, console: Console, verbose: bool) -> None:
    """Header lines, the rich table, the footer."""
    for line in summary_lines(report):
        console.print(line, markup=False, highlight=False)
    to_rich(table(report, verbose), console, drop_order=_NARROW_DROP)
    console.print(footer(report), markup=False, highlight=False)


def text(report: KernelReport, verbose: bool) -> str:
    """Plain text (the same content as the rich table), for pipes."""
    return (
        "\n".join(summary_lines(report))
        + "\n\n"
        + to_text(table(report, verbose))
        + ("\n" + footer(report) + "\n")
    )


def markdown(report: KernelReport, verbose: bool) -> str:
    """Markdown: header as a list, then the table."""
    head = "\n".join(f"- {line}" for line in summary_lines(report))
    return head + "\n\n" + to_markdown(table(report, verbose)) + "\n" + footer(report) + "\n"


def csv(report: KernelReport) -> str:
    """One CSV row per kernel with raw numbers and the full name."""
    fields = list(KernelRow.__dataclass_fields__)
    return to_csv(
        ("rank", *fields),
        [(i, *(getattr(r, f) for f in fields)) for i, r in enumerate(report.rows, 1)],
    )


def as_json(report: KernelReport) -> dict[str, Any]:
    """The documented JSON shape (schema_version 1)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "trace": report.trace.as_dict(),
        "selection": {
            "include": list(report.options.include),
            "steps": list(report.options.steps),
            "name_regex": report.options.name_regex,
            "group_by": report.options.group_by,
            "sort": report.options.sort,
            "top": report.options.top,
        },
        "totals": {
            "count": report.count,
            "total_us": report.total_us,
            "distinct": report.distinct,
            "gpu_busy_us": report.gpu_busy_us,
            "gpu_busy_pct": report.gpu_busy_pct,
        },
        "kernels": [row.as_dict() for row in report.rows],
        "left_out": {
            "kernels": report.left_out_rows,
            "count": report.left_out_count,
            "total_us": report.left_out_us,
        },
        "notes": report.notes,
    }


def detailed_report(report: KernelReport) -> str:
    """The -o text report: header, then every kernel with full name and all statistics."""
    lines = [*summary_lines(report), ""]
    for rank, row in enumerate(report.rows, 1):
        lines.append(f"#{rank}  {row.short_name}")
        lines.append(f"    name          {row.name}")
        for label, value in zip(_STAT_HEADERS, _stat_cells(row), strict=True):
            lines.append(f"    {label:<13} {value}")
        lines.append("")
    lines.append(footer(report))
    return "\n".join(lines) + "\n"


def _stat_cells(row: KernelRow) -> tuple[str, ...]:
    return (
        units.count(row.count), units.us(row.total_us), units.us(row.mean_us),
        units.us(row.std_us), units.us(row.min_us), units.us(row.max_us),
        units.us(row.p50_us), units.us(row.p90_us), units.us(row.p99_us),
        units.pct(row.pct_launches), units.pct(row.pct_time),
    )  # fmt: skip


def _steps(steps: Steps) -> str:
    """The steps chosen (the report's options hold step numbers, not ranges)."""
    return ", ".join(f"ProfilerStep#{n}" for n in steps)
