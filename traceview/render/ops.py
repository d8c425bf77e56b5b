"""Renderings of the operator view."""

from __future__ import annotations

from typing import TYPE_CHECKING

from traceview.analyses.ops import OpReport, OpRow
from traceview.render import units
from traceview.render.escape import markdown_list, print_line, text_lines
from traceview.render.header import device_busy_lines, trace_lines
from traceview.render.tables import Table, to_csv, to_markdown, to_rich, to_text

if TYPE_CHECKING:
    from rich.console import Console

_HEADERS = ("#", "Op", "Calls", "Kernels", "GPU time", "% GPU", "GPU busy", "CPU time",
            "Kernels/call", "Launch delay")  # fmt: skip
_NARROW_DROP = ("Kernels/call", "CPU time", "GPU busy", "Launch delay")
_CSV_FIELDS = ("name", "calls", "kernels", "gpu_time_us", "pct_gpu_time", "gpu_busy_us",
               "cpu_time_us", "kernels_per_call", "launch_delay_us")  # fmt: skip


def summary_lines(report: OpReport) -> list[str]:
    lines = trace_lines(report.trace)
    lines.append(
        f"ops      {report.options.level} op of each kernel: "
        f"{units.counted(report.kernels, 'kernel')}, "
        f"GPU time {units.duration(report.gpu_time_ns / 1000)}"
    )
    lines += device_busy_lines(report.trace)
    lines += [f"note     {n}" for n in report.notes]
    return lines


def table(report: OpReport) -> Table:
    rows = [(str(i), r.name, *_cells(r)) for i, r in enumerate(report.rows, 1)]
    return Table(_HEADERS, (True, False, *(True,) * 8), rows)


def _cells(r: OpRow) -> tuple[str, ...]:
    return (
        units.count(r.calls),
        units.count(r.kernels),
        units.duration(r.gpu_time_ns / 1000),
        units.pct(r.pct_gpu_time),
        units.duration(r.gpu_busy_ns / 1000),
        units.duration(r.cpu_time_ns / 1000),
        f"{r.kernels / r.calls:.2f}" if r.calls else "-",
        "-" if r.launch_delay_ns is None else units.duration(r.launch_delay_ns / 1000),
    )


def footer(report: OpReport) -> str:
    if report.left_out == 0:
        n = len(report.rows)
        return f"{units.counted(n, 'op')} shown" if n == 1 else f"all {n} ops shown"
    return f"{units.counted(report.left_out, 'more op')} not shown; use --top 0 for all"


def print_rich(report: OpReport, console: Console) -> None:
    for line in summary_lines(report):
        print_line(console, line)
    to_rich(table(report), console, drop_order=_NARROW_DROP)
    print_line(console, footer(report))


def text(report: OpReport) -> str:
    head = text_lines(summary_lines(report))
    return head + "\n\n" + to_text(table(report)) + footer(report) + "\n"


def markdown(report: OpReport) -> str:
    head = markdown_list(summary_lines(report))
    return head + "\n\n" + to_markdown(table(report)) + "\n" + footer(report) + "\n"


def csv(report: OpReport) -> str:
    rows = [tuple(r.as_dict()[f] for f in _CSV_FIELDS) for r in report.rows]
    return to_csv(_CSV_FIELDS, rows)
