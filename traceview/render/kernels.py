"""Renderings of a KernelReport: table, plain text, Markdown, CSV, JSON, detailed report."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from traceview.analyses.core.in_us import us_names
from traceview.analyses.core.steps import Steps
from traceview.analyses.core.streamed import json_list
from traceview.analyses.kernels import KernelReport, KernelRow
from traceview.render import units
from traceview.render.document import Document, Section
from traceview.render.escape import text_lines
from traceview.render.header import device_busy_lines, trace_lines
from traceview.render.tables import Table, csv_chunks, each_row, text_chunks

SCHEMA_VERSION = 2
_STAT_HEADERS = ("Count", "Total", "Mean", "Std", "Min", "Max", "P50", "P90", "P99",
                 "% launches", "% time")  # fmt: skip


# Columns left out, in this order, when the terminal is too narrow for all of them.
_NARROW_DROP = ("Std", "Min", "P50", "P90", "% launches", "Max", "Mean", "P99")


def summary_lines(report: KernelReport) -> list[str]:
    """Header: trace, GPUs, selection totals, notes."""
    kinds = "+".join(report.options.include)
    lines = trace_lines(report.trace)
    lines.append(
        f"{kinds:<8} {units.counted(report.count, 'launch', 'launches')}, "
        f"{units.count(report.distinct)} distinct, total {units.duration_ns(report.total_ns)}"
    )
    if report.options.steps:
        lines.append(f"steps    {_steps(report.options.steps)}")
    lines += device_busy_lines(report.trace)
    lines += [f"note     {n}" for n in report.notes]
    return lines


def table(report: KernelReport, verbose: bool) -> Table:
    """The kernel table as formatted cells (made as they are written, for a report whose
    rows are)."""
    rows = each_row(
        report.rows, lambda rank, row: (str(rank), *_stat_cells(row), _name_cell(row, verbose))
    )
    label = {"category": "Category", "fused-op": "Op", "op": "Op"}.get(
        report.options.group_by, "Kernel"
    )
    return Table(("#", *_STAT_HEADERS, label), (True,) * 12 + (False,), rows)


def _name_cell(row: KernelRow, verbose: bool) -> str:
    """The name shown, and with --group-by short how many distinct names the row merged."""
    name = row.name if verbose else row.short_name
    if row.fused_ops:
        name += f" [fused: {', '.join(row.fused_ops)}]"
    return f"{name} ({row.variants} variants)" if row.variants > 1 else name


def footer(report: KernelReport) -> str:
    """How much --top left out."""
    if report.left_out_rows == 0:
        return _all_shown(report.distinct, "kernel")
    launches = units.counted(report.left_out_count, "launch", "launches")
    return (
        f"{units.counted(report.left_out_rows, 'more kernel')} not shown ({launches}, "
        f"{units.duration_ns(report.left_out_ns)}); use --top 0 for all"
    )


def _all_shown(n: int, noun: str) -> str:
    """``all 12 kernels shown``, ``1 kernel shown``."""
    return f"{units.counted(n, noun)} shown" if n == 1 else f"all {units.counted(n, noun)} shown"


def document(report: KernelReport, verbose: bool, every: KernelReport | None = None) -> Document:
    """``traceview kernels`` in every format; ``every``: the same analysis without --top, for
    the CSV (files hold every row)."""
    return Document(
        head=summary_lines(report),
        sections=[Section(table(report, verbose), drop_order=_NARROW_DROP)],
        foot=[footer(report)],
        data=lambda: as_json(report),
        csv=lambda: csv(every or report),
    )


def csv(report: KernelReport) -> Iterator[str]:
    """One CSV row per kernel with raw numbers and the full name, a chunk of rows at a time."""
    rows = ((i, *map(csv_value, r.as_dict().values())) for i, r in enumerate(report.rows, 1))
    return csv_chunks(("rank", *us_names(KernelRow), "fused_ops"), rows)


def csv_value(value: object) -> object:
    """A list (``fused_ops``) as its items one space apart."""
    return " ".join(map(str, value)) if isinstance(value, list) else value


def as_json(report: KernelReport) -> dict[str, Any]:
    """The documented JSON shape (schema_version 2)."""
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
            "total_us": report.total_ns / 1000,
            "distinct": report.distinct,
            "gpu_busy_us": report.gpu_busy_ns / 1000,
            "gpu_busy_pct": report.gpu_busy_pct,
        },
        "kernels": json_list(report.rows, KernelRow.as_dict),
        "left_out": {
            "kernels": report.left_out_rows,
            "count": report.left_out_count,
            "total_us": report.left_out_ns / 1000,
        },
        "notes": report.notes,
    }


def detailed_report(report: KernelReport) -> Iterator[str]:
    """The -o text report: header, a one-line-per-kernel table (full names, grep-friendly),
    then every kernel with its full name and all statistics; a chunk of kernels at a time."""
    yield text_lines([*summary_lines(report), ""]) + "\n"
    yield from text_chunks(table(report, True))
    yield "\n"
    for rank, row in enumerate(report.rows, 1):
        lines = [f"#{rank}  {row.short_name}", f"    name          {row.name}"]
        for label, value in zip(_STAT_HEADERS, _stat_cells(row), strict=True):
            lines.append(f"    {label:<13} {value}")
        yield text_lines([*lines, ""]) + "\n"
    yield text_lines([footer(report)]) + "\n"


def _stat_cells(row: KernelRow) -> tuple[str, ...]:
    return (
        units.count(row.count), units.time_ns(row.total_ns), units.time_ns(row.mean_ns),
        units.time_ns(row.std_ns), units.time_ns(row.min_ns), units.time_ns(row.max_ns),
        units.time_ns(row.p50_ns), units.time_ns(row.p90_ns), units.time_ns(row.p99_ns),
        units.pct(row.pct_launches), units.pct(row.pct_time),
    )  # fmt: skip


def _steps(steps: Steps) -> str:
    """The steps chosen (the report's options hold step numbers, not ranges)."""
    return ", ".join(f"ProfilerStep#{n}" for n in steps)
